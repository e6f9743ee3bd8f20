"""What every page's layout needs from the accounts app."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def signup(request: HttpRequest) -> dict[str, bool]:
    """Whether the header offers "Sign up" to a visitor: on every page, not the log-in page
    alone (the sign-up page itself, a 404, a page after log-out)."""
    return {"signup_enabled": settings.SIGNUP_ENABLED}
