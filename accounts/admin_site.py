"""The admin site: Django's, with its log-in form behind the log-in throttle."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponse


class StaffAdminSite(admin.AdminSite):
    @property
    def login_form(self):
        # Imported late: this module loads with the app registry, before the forms' models.
        from accounts.forms import ThrottledAdminAuthenticationForm

        return ThrottledAdminAuthenticationForm

    def login(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        from accounts.views import throttled  # late, as above

        response = super().login(request, extra_context)
        form = (getattr(response, "context_data", None) or {}).get("form")
        return throttled(response, form) if form is not None else response


class StaffAdminConfig(AdminConfig):
    """Replaces "django.contrib.admin" in INSTALLED_APPS to make StaffAdminSite the default."""

    default_site = "accounts.admin_site.StaffAdminSite"
