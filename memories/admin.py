from django.contrib import admin

from infra.admin import ReadOnlyAdminMixin
from memories.models import Memory, Thread

# Staff see that rows exist and in what state, never what a tenant wrote: no content, topic,
# tags, scope, project or thread name on any admin page (the sign-up page promises that only the
# tenant and the apps they connect can read their memories). Lengths and counts are left out
# too. Erasure, the one staff action on tenant data, works from the account (accounts/admin.py).
MEMORY_FIELDS = (
    "id",
    "owner",
    "memory_type",
    "status",
    "commitment_status",
    "recorded_at",
    "due_at",
    "valid_to",
    "predecessor_id",
)


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only metadata: memories are append-only, and their text is the tenant's alone."""

    list_display = ("id", "owner", "memory_type", "status", "recorded_at", "valid_to")
    list_filter = ("memory_type", "status", ("valid_to", admin.EmptyFieldListFilter))
    list_select_related = ("owner",)
    show_full_result_count = False  # no COUNT(*) over millions of rows per page view
    fields = readonly_fields = MEMORY_FIELDS


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only metadata, like memories: a thread's name is tenant text."""

    list_display = ("id", "owner", "pinned", "created_at")
    list_filter = ("pinned",)
    list_select_related = ("owner",)
    fields = readonly_fields = ("id", "owner", "pinned", "created_at")
