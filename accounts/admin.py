from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin

from accounts.models import ErasureRecord, User


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ("username", "email", "is_active", "is_staff", "date_joined", "erased_at")
    list_filter = ("is_active", "is_staff", "erased_at")
    readonly_fields = ("erased_at",)


@admin.register(ErasureRecord)
class ErasureRecordAdmin(admin.ModelAdmin):
    """Read-only audit trail: staff can list and filter, never add, edit or delete."""

    list_display = ("account_id", "erased_at", "requested_by", "staff_member", "counts")
    list_filter = (("erased_at", admin.DateFieldListFilter), "requested_by", "staff_member")
    date_hierarchy = "erased_at"
    list_select_related = ("staff_member",)
    readonly_fields = ("account", "erased_at", "requested_by", "staff_member", "counts")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
