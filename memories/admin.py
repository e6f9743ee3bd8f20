from django.contrib import admin

from memories.models import Memory, Thread

# The ways a list filter, the date drill-down and a link to one account's rows put a field into
# the address bar (?status__exact=archived, ?recorded_at__year=2026, ?owner__id__exact=7).
_FILTER_LOOKUPS = frozenset(
    {"exact", "isnull", "isempty", "in", "gte", "lt", "year", "month", "day", "id__exact",
     "id__in", "pk__exact"}
)  # fmt: skip


class ListedFiltersOnly:
    """A list takes from the address bar only the filters it offers (list_filter,
    date_hierarchy) and its rows' account: Django's default lets any lookup on any column
    through, so `?content__icontains=…` would answer yes or no to a guess at a tenant's text (or
    `?code__startswith=…` at a live authorization code), and a malformed one (`__regex=(`)
    would be a 500. Anything else is refused (400)."""

    owner_fields = ("owner", "user", "account")

    def lookup_allowed(self, lookup, value, request) -> bool:
        field, _, rest = lookup.partition("__")
        offered = {
            entry[0] if isinstance(entry, tuple) else entry
            for entry in self.get_list_filter(request)
            if not isinstance(entry, type)  # a SimpleListFilter names its own parameter
        }
        offered |= {self.date_hierarchy, *self.owner_fields} - {None}
        if field not in offered or (rest and rest not in _FILTER_LOOKUPS):
            return False
        if rest in _DATE_PARTS and not _within(value, *_DATE_PARTS[rest]):
            return False
        return super().lookup_allowed(lookup, value, request)


# A date drill-down's parts (date_hierarchy, `__year`...) that a date can have: the database or
# Django's drill-down (which adds a year or a day to the one asked for) fails on others, a 500.
_DATE_PARTS = {"year": (1, 9998), "month": (1, 12), "day": (1, 31)}


def _within(value: object, low: int, high: int) -> bool:
    try:
        return low <= int(str(value)) <= high
    except ValueError:
        return False


class ReadOnlyAdminMixin(ListedFiltersOnly):
    """Staff may look, never add, change or delete: for append-only and audit records."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


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
