"""System checks of the configuration: most under `manage.py check --deploy` only; the
application role's on every start-up that runs the checks (`check`, `migrate`, `runserver`)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.http.request import split_domain_port, validate_host


@register(Tags.security, deploy=True)
def check_database_is_configured(app_configs=None, **kwargs) -> list[Error]:
    """The embedded PostgreSQL keeps its data in the checkout's .pgdata/ and stops with the last
    process using it: no deployment may run on it, whether DATABASE_URL is unset (DEBUG on) or
    names its socket (what `scripts/dev.py serve` passes its server, with DEBUG off)."""
    if getattr(settings, "EMBEDDED_DATABASE", False):
        return [
            Error(
                "DATABASE_URL is unset: this process runs on the embedded development "
                "PostgreSQL (.pgdata/ of the checkout).",
                hint="Set DATABASE_URL to the production database (see .env.example).",
                id="threengram.E001",
            )
        ]
    return [
        Error(
            f"{variable} names the embedded development PostgreSQL (its socket in the "
            "checkout's .pgdata/): the data stays in the checkout, and the server stops with "
            "the last process using it.",
            hint=f"Set {variable} to the production database (see .env.example).",
            id="threengram.E001",
        )
        for variable in variables_naming_the_embedded_database(settings.DATABASES)
    ]


_URL_VARIABLES = {"default": "DATABASE_URL", "replica": "DATABASE_REPLICA_URL"}


def variables_naming_the_embedded_database(databases: dict[str, dict]) -> list[str]:
    """The variables (DATABASE_URL, DATABASE_REPLICA_URL) of `databases` whose host is a socket
    folder of the checkout's embedded PostgreSQL."""
    folders = _embedded_socket_folders()
    return [
        _URL_VARIABLES.get(alias, alias)
        for alias, database in databases.items()
        if any(
            host.strip().startswith("/") and Path(host.strip()).resolve() in folders
            for host in str(database.get("HOST") or "").split(",")
        )
    ]


def _embedded_socket_folders() -> set[Path]:
    """Where the checkout's embedded PostgreSQL has its socket: its data folder, or, while it
    runs, the folder its postmaster.pid names (the library picks another when the data folder's
    path is too long for a socket's)."""
    from threengram.embedded_db import PGDATA

    folders = {PGDATA.resolve()}
    try:
        lines = (PGDATA / "postmaster.pid").read_text().splitlines()
    except OSError:  # not running, or not ours to read
        return folders
    if len(lines) > 4 and lines[4].startswith("/"):  # PostgreSQL's line of the socket folder
        folders.add(Path(lines[4].strip()).resolve())
    return folders


# Origins no browser-based client can have (RFC 2606 reserves .invalid): a setting that lets
# one of them in lets in origins nobody named, which is what CORS_ALLOW_ALL_ORIGINS does.
UNNAMED_ORIGINS = (
    "https://threengram-deploy-check.invalid",
    "http://threengram-deploy-check.invalid",
)


@register(Tags.security, deploy=True)
def check_cors_does_not_allow_every_origin(app_configs=None, **kwargs) -> list[Error]:
    """CORS for every origin would let any web page read the answers of the OAuth endpoints a
    browser-based MCP client calls, and /mcp lifts its DNS-rebinding check for a listed origin;
    such clients' origins are to be named one by one. The environment cannot turn
    CORS_ALLOW_ALL_ORIGINS on, but a CORS_ALLOWED_ORIGIN_REGEXES pattern such as `.*` does the
    same."""
    if getattr(settings, "CORS_ALLOW_ALL_ORIGINS", False) or getattr(
        settings, "CORS_ORIGIN_ALLOW_ALL", False
    ):
        return [
            Error(
                "CORS_ALLOW_ALL_ORIGINS is on: every web page may call the OAuth endpoints "
                "and /mcp cross-origin.",
                hint="Turn it off and name the browser-based clients' origins in "
                "CORS_ALLOWED_ORIGINS or CORS_ALLOWED_ORIGIN_REGEXES (see .env.example).",
                id="threengram.E002",
            )
        ]
    broad = [
        pattern
        for pattern in getattr(settings, "CORS_ALLOWED_ORIGIN_REGEXES", ())
        if any(re.match(pattern, origin) for origin in UNNAMED_ORIGINS)
    ]
    if broad:
        return [
            Error(
                f"CORS_ALLOWED_ORIGIN_REGEXES {' '.join(map(repr, broad))} lets in origins "
                f"nobody named (such as {UNNAMED_ORIGINS[0]}): any web page may call the "
                "OAuth endpoints and /mcp cross-origin.",
                hint=_ANCHOR_HINT,
                id="threengram.E002",
            )
        ]
    # django-cors-headers matches a pattern at the start of the origin only (re.match):
    # ^https://agents\.example\.com also lets in https://agents.example.com.evil.example.
    open_ended = [
        pattern
        for pattern in getattr(settings, "CORS_ALLOWED_ORIGIN_REGEXES", ())
        if not pattern.endswith(("$", r"\Z"))
    ]
    if open_ended:
        return [
            Error(
                f"CORS_ALLOWED_ORIGIN_REGEXES {' '.join(map(repr, open_ended))} does not end "
                "with $: it lets in any origin that begins with what it names (a host of "
                "the same name under another domain).",
                hint=_ANCHOR_HINT,
                id="threengram.E002",
            )
        ]
    return []


_ANCHOR_HINT = (
    "Anchor each pattern to the hosts of the browser-based clients, at both ends, e.g. "
    r"^https://agents\.example\.com$ (see .env.example)."
)


@register(Tags.security, deploy=True)
def check_public_host_is_allowed(app_configs=None, **kwargs) -> list[Error]:
    """PUBLIC_BASE_URL is the address clients use; a host ALLOWED_HOSTS does not name gets 400
    on every page and 421 on /mcp, so nothing works, yet each setting looks right alone."""
    # As Django reads the Host header of a request to it: an IPv6 literal keeps its brackets
    # (ALLOWED_HOSTS names it so), a trailing dot goes.
    authority = urlsplit(settings.PUBLIC_BASE_URL).netloc.rpartition("@")[2]
    host, _port = split_domain_port(authority)
    if validate_host(host, settings.ALLOWED_HOSTS):
        return []
    return [
        Error(
            f"PUBLIC_BASE_URL's host {host!r} is not in ALLOWED_HOSTS: every request to it "
            "would be refused.",
            hint="Add it to ALLOWED_HOSTS (see .env.example).",
            id="threengram.E003",
        )
    ]


# How much of a refused DATABASE_APP_ROLE the error quotes: enough to recognise the line of the
# env file it came from.
_QUOTED_ROLE_LENGTH = 40


@register(Tags.security)
def check_app_role_is_the_migrated_one(app_configs=None, **kwargs) -> list[Error]:
    """DATABASE_APP_ROLE is an on/off switch that reads like a role name: the role every grant and
    policy of the migrations is made for is `tenancy.APP_ROLE`, whatever the setting says, while
    the connections `SET ROLE` to the setting's value. Any other name gets a role with no grants
    (every statement refused) or, one that bypasses row-level security, the tenant wall silently
    off; so it stops every start-up that runs the checks, not only a deploy check."""
    from memories.tenancy import APP_ROLE

    role = settings.DATABASE_APP_ROLE
    if role in ("", APP_ROLE):
        return []
    if len(role) > _QUOTED_ROLE_LENGTH:
        role = role[:_QUOTED_ROLE_LENGTH] + "…"
    return [
        Error(
            f"DATABASE_APP_ROLE is {role!r}: it may only be {APP_ROLE!r} (row-level security "
            "on, the default) or empty (act as the schema's owner).",
            hint=f"The migrations grant {APP_ROLE} alone and no other role can take its place: "
            f"unset DATABASE_APP_ROLE (or set it to {APP_ROLE}), or leave it empty for an "
            "operator's one-off script (docs/security.md).",
            id="threengram.E004",
        )
    ]


@register(Tags.security, deploy=True)
def check_row_level_security_is_on(app_configs=None, **kwargs) -> list[Warning]:
    """An empty DATABASE_APP_ROLE makes every connection act as the schema's owner, which the
    tenant policies do not bind (memories/tenancy.py): the application's own filters are then
    the only wall between tenants. It is a documented choice, for a database where the role
    cannot exist; a deployment should make it knowingly, not through a blank line."""
    if settings.DATABASE_APP_ROLE:
        return []
    return [
        Warning(
            "DATABASE_APP_ROLE is empty: connections act as the schema's owner, past the "
            "row-level security that keeps one tenant's rows from another's queries.",
            hint="Leave DATABASE_APP_ROLE unset (threengram_app) unless the database cannot "
            "have that role (docs/security.md).",
            id="threengram.W001",
        )
    ]
