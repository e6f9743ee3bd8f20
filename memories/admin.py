from django.contrib import admin

from memories.models import Memory, Thread


class ReadOnlyAdminMixin:
    """Staff may look, never add, change or delete: for append-only and audit records."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: memories are append-only, and staff have no business editing tenant text.
    Erased rows simply show the `[erased]` sentinel that is stored."""

    list_display = ("id", "owner", "memory_type", "topic", "status", "recorded_at", "valid_to")
    list_filter = ("memory_type", "status", ("valid_to", admin.EmptyFieldListFilter))
    list_select_related = ("owner",)
    show_full_result_count = False  # no COUNT(*) over millions of rows per page view
    # The columns (predecessor_id among them), not the two-column predecessor link.
    readonly_fields = [field.name for field in Memory._meta.concrete_fields]


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only, like memories: thread names are tenant text (erasure overwrites them)."""

    list_display = ("id", "owner", "name", "pinned", "created_at")
    list_filter = ("pinned",)
    list_select_related = ("owner",)
    readonly_fields = ("id", "owner", "name", "pinned", "created_at")
