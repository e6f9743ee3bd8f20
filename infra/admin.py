"""Admin plumbing the apps share: lists that take only the filters they offer, read-only
records."""

from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.exceptions import DisallowedModelAdminLookup, DisallowedModelAdminToField
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.loader import render_to_string

# A parameter's name, or a selection's value, is echoed in the message refusing it, cut to this
# many characters.
NAME_SHOWN_MAX = 100
# A selection's ids that no row has are named in the message refusing it, up to this many.
SELECTION_SHOWN_MAX = 10

# The ways a list filter, the date drill-down and a link to one account's rows put a field into
# the address bar (?status__exact=archived, ?recorded_at__year=2026, ?owner__id__exact=7).
_FILTER_LOOKUPS = frozenset(
    {"exact", "isnull", "isempty", "in", "gte", "lt", "year", "month", "day", "id__exact",
     "id__in", "pk__exact"}
)  # fmt: skip


class _FilterValueRefused(Exception):
    """A list filter's value that the filter cannot apply (a date that is no date, an id that
    is no number)."""


class ListedFiltersOnly:
    """A list takes from the address bar only the filters it offers (list_filter,
    date_hierarchy) and its rows' account: Django's default lets any lookup on any column
    through, so `?content__icontains=…` would answer yes or no to a guess at a tenant's text (or
    `?code__startswith=…` at a live authorization code), and a malformed one (`__regex=(`)
    would be a 500. Anything else is refused (400), and so is an offered filter's value it cannot
    apply, each with a page naming the parameter: Django drops the filters for such a value and
    shows the whole list, as if filtered. A bulk action takes only ids of the list's rows."""

    owner_fields = ("owner", "user", "account")

    def lookup_allowed(self, lookup, value, request) -> bool:
        # A refusal raises with its reason: Django's own, from a False, names only the lookup.
        filters = self.get_list_filter(request)
        # A SimpleListFilter names its own parameter, taken as it is and judged by the filter.
        if lookup in {entry.parameter_name for entry in filters if isinstance(entry, type)}:
            return super().lookup_allowed(lookup, value, request)
        field, _, rest = lookup.partition("__")
        offered = {
            entry[0] if isinstance(entry, tuple) else entry
            for entry in filters
            if not isinstance(entry, type)
        }
        offered |= {self.date_hierarchy, *self.owner_fields} - {None}
        shown = lookup[:NAME_SHOWN_MAX]
        if field not in offered or (rest and rest not in _FILTER_LOOKUPS):
            raise DisallowedModelAdminLookup(f"this list cannot be filtered by “{shown}”")
        if rest in _DATE_PARTS and not _within(value, *_DATE_PARTS[rest]):
            low, high = _DATE_PARTS[rest]
            raise DisallowedModelAdminLookup(
                f"“{shown}” must be a whole number from {low} to {high}"
            )
        return super().lookup_allowed(lookup, value, request)

    def get_changelist_instance(self, request: HttpRequest):
        try:
            return super().get_changelist_instance(request)
        except IncorrectLookupParameters as error:
            # Django would redirect to the unfiltered list (`?e=1`) without a word.
            raise _FilterValueRefused(_reason(error)) from error

    def changelist_view(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except (DisallowedModelAdminLookup, DisallowedModelAdminToField) as refused:
            return _refused_list(request, str(refused))
        except _FilterValueRefused as refused:
            return _refused_list(request, f"a filter's value cannot be applied: {refused}")

    def response_action(self, request: HttpRequest, queryset, *args, **kwargs):
        # A selection from a stale or hand-edited form: one that is no id of this list's rows
        # would fail the database lookup (a 500), and an id of no row (one deleted since the list
        # was shown, one typed in) Django leaves out without a word, acting on the others or on
        # none. Either way nothing of the selection is acted on, and staff are told why.
        selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
        ids = []
        for value in selected:
            try:
                ids.append(self.model._meta.pk.to_python(value))
            except ValidationError:
                return self._refuse_selection(request, [value])
        select_across = self.action_form.base_fields["select_across"]
        if ids and not select_across.to_python(request.POST.get("select_across")):
            found = set(queryset.filter(pk__in=ids).values_list("pk", flat=True))
            missing = [value for value, pk in zip(selected, ids, strict=True) if pk not in found]
            if missing:
                return self._refuse_selection(request, missing)
        return super().response_action(request, queryset, *args, **kwargs)

    def _refuse_selection(self, request: HttpRequest, values: list[str]) -> None:
        named = ", ".join(f"“{value[:NAME_SHOWN_MAX]}”" for value in values[:SELECTION_SHOWN_MAX])
        if len(values) > SELECTION_SHOWN_MAX:
            named += f" and {len(values) - SELECTION_SHOWN_MAX} more"
        what = "is not the id of a row" if len(values) == 1 else "are not ids of rows"
        self.message_user(
            request, f"{named} {what} in this list; nothing was done.", messages.ERROR
        )


def _reason(error: IncorrectLookupParameters) -> str:
    """What Django's filters said of the value, without the exception's list brackets."""
    cause = error.args[0] if error.args else None
    if isinstance(cause, ValidationError):
        return " ".join(cause.messages)
    return str(cause) if cause else "it is not one the filter takes"


def _refused_list(request: HttpRequest, problem: str) -> HttpResponse:
    return HttpResponseBadRequest(render_to_string("400.html", {"problem": problem}, request))


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
