"""Log in, with failed attempts throttled per client IP and per username.

The form is reusable by any LoginView (`authentication_form = ThrottledAuthenticationForm`).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from accounts.rate_limit import FixedWindow, client_ip


def _ip_window() -> FixedWindow:
    return FixedWindow(
        "login-ip", settings.LOGIN_FAILURES_PER_IP, settings.LOGIN_FAILURE_WINDOW_SECONDS
    )


def _username_window() -> FixedWindow:
    return FixedWindow(
        "login-username",
        settings.LOGIN_FAILURES_PER_USERNAME,
        settings.LOGIN_FAILURE_WINDOW_SECONDS,
    )


class ThrottledAuthenticationForm(AuthenticationForm):
    """Refuses to check any password once an IP or a username has too many recent failures, so a
    guesser gets nothing for further attempts; a success clears the username's count."""

    throttled = False

    def clean(self):
        ip = client_ip(self.request)
        username = (self.cleaned_data.get("username") or "").casefold()
        wait = _ip_window().retry_after(ip) or _username_window().retry_after(username)
        if wait:
            self.throttled = True
            minutes = -(-wait // 60)
            raise ValidationError(
                f"Too many failed log-in attempts. Try again in {minutes} minute(s).",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            _ip_window().hit(ip)
            _username_window().hit(username)
            raise
        _username_window().reset(username)
        return cleaned


class LoginView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    template_name = "accounts/oauth_login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response
