from datetime import UTC

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth.admin import GroupAdmin as DjangoGroupAdmin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.models import Group
from django.template.response import TemplateResponse

from accounts import erasure
from accounts.forms import StaffUserChangeForm, StaffUserCreationForm
from accounts.models import ErasureRecord, User
from infra.admin import ListedFiltersOnly, ReadOnlyAdminMixin


@admin.register(User)
class UserAdmin(ListedFiltersOnly, DjangoUserAdmin):
    form = StaffUserChangeForm
    add_form = StaffUserCreationForm
    # Erasure first after the name: what staff auditing erasures look for, never cut off the
    # right edge of a narrow window.
    list_display = ("username", "erased_at", "is_active", "is_staff", "date_joined", "email")
    list_filter = ("is_active", "is_staff", "erased_at")
    readonly_fields = ("erased_at",)
    actions = ("erase_accounts",)

    def has_change_permission(self, request, obj=None) -> bool:
        # An erased account stays erased: reactivated, renamed or given a password (Django's
        # password page asks this too), it would be a live account holding an erased one's
        # records. Its page shows it read only.
        if obj is not None and obj.erased_at is not None:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        # An account leaves through erasure alone: its memories overwritten, its tokens revoked
        # and an erasure record kept for the audit, in one transaction. Django's delete would
        # drop an account of no memories without a record, and refuse one with memories by a
        # permission the staff member is not missing.
        return False

    @admin.action(description="Erase the selected accounts…", permissions=("change",))
    def erase_accounts(self, request, queryset):
        """Like Django's delete action: a confirmation page first, then erase_accounts, recorded
        as requested by this staff member."""
        confirmed = request.POST.get("confirm") == "yes"
        if confirmed:
            batch = erasure.erase_accounts(users=queryset, requested_by=request.user)
        else:
            batch = erasure.erasure_selection(users=queryset, requested_by=request.user)
        if batch.skipped_self:
            self.message_user(
                request, "You cannot erase your own account from here.", messages.ERROR
            )
        if not batch.targets:
            if batch.already_erased:
                self.message_user(
                    request,
                    "Nothing to erase: the selected accounts are erased already.",
                    messages.WARNING,
                )
            return None
        if confirmed:
            self.message_user(
                request, f"Erased {batch.erased} account(s); see Erasure records.", messages.SUCCESS
            )
            if batch.busy:
                self.message_user(
                    request,
                    f"Not erased, their data was in use: {', '.join(batch.busy)}. Nothing of them "
                    "changed; select them and erase again.",
                    messages.WARNING,
                )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Erase accounts: are you sure?",
            "targets": batch.targets,
            "opts": self.model._meta,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action_name": "erase_accounts",
        }
        return TemplateResponse(request, "admin/accounts/user/erase_confirmation.html", context)


# Django's own registration, with the site's list rules (a bulk delete of a malformed selection).
admin.site.unregister(Group)


@admin.register(Group)
class GroupAdmin(ListedFiltersOnly, DjangoGroupAdmin):
    pass


@admin.register(ErasureRecord)
class ErasureRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only audit trail: staff can list and filter, never add, edit or delete."""

    list_display = ("account_id", "erased", "requester", "rows")
    # RelatedOnly: the filter lists the staff who requested erasures, not every account.
    list_filter = (
        ("erased_at", admin.DateFieldListFilter),
        "requested_by",
        ("staff_member", admin.RelatedOnlyFieldListFilter),
    )
    date_hierarchy = "erased_at"
    list_select_related = ("staff_member",)
    readonly_fields = ("erased_account", "erased", "requester", "rows")
    fields = readonly_fields

    # The name erasure gave the account, from the record alone: the account's live name is not
    # the audit's to show.
    @admin.display(description="account", ordering="account_id")
    def erased_account(self, record: ErasureRecord) -> str:
        return record.account_label

    # Staff compare these instants with logs and the record's own title, all in UTC: the
    # column says so rather than leaving it to the server's settings.
    @admin.display(description="erased at (UTC)", ordering="erased_at")
    def erased(self, record: ErasureRecord) -> str:
        return record.erased_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    # One answer to "who asked": a staff member's name, or the account holder (who has no staff
    # member, which a column of its own showed as a bare "-").
    @admin.display(description="requested by", ordering="requested_by")
    def requester(self, record: ErasureRecord) -> str:
        if record.staff_member is None:
            return ErasureRecord.Requester.USER.label
        return f"staff member {record.staff_member.get_username()}"

    @admin.display(description="rows rewritten or revoked")
    def rows(self, record: ErasureRecord) -> str:
        return ", ".join(f"{table} {count}" for table, count in sorted(record.counts.items()))
