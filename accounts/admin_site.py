"""The admin site: Django's, with its log-in form behind the log-in throttle."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import NoReverseMatch, path, reverse


class StaffAdminSite(admin.AdminSite):
    """Django's admin site, with every password check behind the log-in throttle and no page
    that can fail on an object the site does not show."""

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

    def password_change(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        """The staff member's own password change re-checks the old password as the account
        page does: behind the log-in throttle, on the same budget (Django's form is not)."""
        from accounts.views import PasswordChangeView  # late, as above

        request.current_app = self.name
        return PasswordChangeView.as_view(
            success_url=reverse("admin:password_change_done", current_app=self.name),
            extra_context={**self.each_context(request), **(extra_context or {})},
        )(request)

    def get_urls(self):
        return [
            path(
                "r/<path:content_type_id>/<path:object_id>/",
                self.admin_view(_view_on_site),
                name="view_on_site",
            )
            if getattr(url, "name", None) == "view_on_site"
            else url
            for url in super().get_urls()
        ]


def _view_on_site(request: HttpRequest, content_type_id: str, object_id: str) -> HttpResponse:
    """Django's "view on site" redirect, a 404 for an object whose page this site does not
    serve (an OAuth application names one of django-oauth-toolkit's, not mounted here)."""
    from django.contrib.contenttypes.views import shortcut  # late: this module loads early

    try:
        return shortcut(request, content_type_id, object_id)
    except NoReverseMatch:
        raise Http404("This object has no page on this site.") from None


class StaffAdminConfig(AdminConfig):
    """Replaces "django.contrib.admin" in INSTALLED_APPS to make StaffAdminSite the default."""

    default_site = "accounts.admin_site.StaffAdminSite"
