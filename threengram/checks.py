"""System checks of the deployment configuration (`manage.py check --deploy`)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register


@register(Tags.security, deploy=True)
def check_database_is_configured(app_configs=None, **kwargs) -> list[Error]:
    """The embedded PostgreSQL (DATABASE_URL unset, DEBUG on) keeps its data in the checkout's
    .pgdata/ and stops with the last process using it: no deployment may run on it."""
    if getattr(settings, "EMBEDDED_DATABASE", False):
        return [
            Error(
                "DATABASE_URL is unset: this process runs on the embedded development "
                "PostgreSQL (.pgdata/ of the checkout).",
                hint="Set DATABASE_URL to the production database (see .env.example).",
                id="threengram.E001",
            )
        ]
    return []
