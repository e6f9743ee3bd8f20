"""`manage.py check --deploy` is clean with DEBUG off and the documented production variables,
refuses to start without a SECRET_KEY or a DATABASE_URL, and production connections act as the
row-level-security role unless told otherwise."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_gateway.conftest import subprocess_database_url
from threengram.checks import (
    check_app_role_is_the_migrated_one,
    check_cors_does_not_allow_every_origin,
    check_database_is_configured,
    check_public_host_is_allowed,
    check_row_level_security_is_on,
    variables_naming_the_embedded_database,
)
from threengram.embedded_db import PGDATA

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "DEBUG",
            "SECRET_KEY",
            "SECURE_SSL_REDIRECT",
            "DJANGO_SETTINGS_MODULE",
            "DATABASE_APP_ROLE",
        )
    }
    environment.update(THREENGRAM_ENV_FILE="", DJANGO_SETTINGS_MODULE="threengram.settings", **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "SECRET_KEY": secrets.token_urlsafe(50),
    "PUBLIC_BASE_URL": "https://memory.example.com",
    "ALLOWED_HOSTS": "memory.example.com",
}


# A production database: `check` connects to none, so it need not exist. (The suite's own
# DATABASE_URL, which the subprocesses would inherit, is the embedded server's.)
PRODUCTION_DATABASE_URL = "postgresql://threengram@db.example.com:5432/threengram"
# What `scripts/dev.py serve` passes its server: the embedded PostgreSQL's socket, DEBUG off.
EMBEDDED_DATABASE_URL = f"postgresql://postgres:@/threengram?host={PGDATA}"


def test_check_deploy_is_clean_with_production_variables():
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DATABASE_URL=PRODUCTION_DATABASE_URL,
        **PRODUCTION,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_an_http_issuer_fails_the_deploy_check():
    result = manage(
        "check", "--deploy", **{**PRODUCTION, "PUBLIC_BASE_URL": "http://memory.example.com"}
    )
    assert result.returncode != 0
    assert "https" in result.stdout + result.stderr


@pytest.mark.parametrize("secret_key", ["", "   ", "\t"])
def test_production_refuses_to_start_without_a_secret_key(secret_key):
    result = manage("check", **{**PRODUCTION, "SECRET_KEY": secret_key})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_production_refuses_to_start_an_embedded_database_without_a_database_url():
    for command in (["check", "--deploy"], ["migrate", "--no-input"]):
        result = manage(*command, **{**PRODUCTION, "DATABASE_URL": ""})
        assert result.returncode != 0
        assert "DATABASE_URL must be set when DEBUG is off" in result.stderr
        assert "embedded PostgreSQL is for development only" in result.stderr


def test_the_deploy_check_names_the_embedded_database(settings):
    settings.EMBEDDED_DATABASE = True  # DEBUG on without DATABASE_URL: the development fallback
    [error] = check_database_is_configured()
    assert error.id == "threengram.E001"
    assert "DATABASE_URL is unset" in error.msg and "embedded" in error.msg
    settings.EMBEDDED_DATABASE = False
    assert not any("is unset" in error.msg for error in check_database_is_configured())


def test_the_deploy_check_fails_a_production_server_on_the_embedded_databases_socket():
    """`scripts/dev.py serve` runs its server with DEBUG off and DATABASE_URL naming the
    embedded PostgreSQL's socket: made public, it would pass every other check."""
    result = manage("check", "--deploy", DATABASE_URL=EMBEDDED_DATABASE_URL, **PRODUCTION)
    assert result.returncode != 0
    assert "threengram.E001" in result.stderr
    assert "DATABASE_URL names the embedded development PostgreSQL" in result.stderr
    assert "Set DATABASE_URL to the production database" in result.stderr
    # The server itself starts as before (the quick start): only the deploy check names it.
    assert manage("check", DATABASE_URL=EMBEDDED_DATABASE_URL, **PRODUCTION).returncode == 0


def test_the_embedded_database_is_told_by_its_socket_folder():
    assert variables_naming_the_embedded_database(
        {
            "default": {"HOST": f"{PGDATA}/"},
            "replica": {"HOST": f"db.example.com,{PGDATA.parent}/./.pgdata"},
        }
    ) == ["DATABASE_URL", "DATABASE_REPLICA_URL"]
    for host in ("", "db.example.com", "/var/run/postgresql", f"{PGDATA}-other"):
        assert variables_naming_the_embedded_database({"default": {"HOST": host}}) == []


def test_the_deploy_check_is_registered_for_deploys_only():
    from django.core.checks.registry import registry

    assert check_database_is_configured in registry.get_checks(include_deployment_checks=True)
    assert check_database_is_configured not in registry.get_checks()


def test_the_deploy_check_refuses_cors_for_every_origin(settings):
    from django.core.checks import ERROR, run_checks
    from django.core.checks.registry import registry

    assert check_cors_does_not_allow_every_origin() == []
    settings.CORS_ALLOW_ALL_ORIGINS = True
    [error] = [
        message
        for message in run_checks(include_deployment_checks=True)
        if message.id == "threengram.E002"
    ]
    assert error.level == ERROR  # `check --deploy` fails on it
    assert "CORS_ALLOW_ALL_ORIGINS" in error.msg
    assert "CORS_ALLOWED_ORIGINS" in error.hint
    assert check_cors_does_not_allow_every_origin not in registry.get_checks()  # deploys only


@pytest.mark.parametrize("pattern", [".*", r"^https?://.*$", r"^https://[^/]+$"])
def test_the_deploy_check_refuses_an_origin_pattern_that_matches_every_origin(pattern):
    # The environment's only way to CORS for every origin: CORS_ALLOW_ALL_ORIGINS is no variable.
    result = manage(
        "check",
        "--deploy",
        **PRODUCTION,
        CORS_ALLOWED_ORIGIN_REGEXES=rf"^http://localhost$ {pattern}",
    )
    assert result.returncode != 0
    assert "threengram.E002" in result.stderr
    assert f"CORS_ALLOWED_ORIGIN_REGEXES {pattern!r} lets in origins nobody named" in result.stderr


@pytest.mark.parametrize(
    "pattern", [r"^https://agents\.example\.com", r"^https://a\.example\.com$|^https://b\.example"]
)
def test_the_deploy_check_refuses_an_origin_pattern_open_at_its_end(settings, pattern):
    """Matched at the start only, it would let in https://agents.example.com.evil.example."""
    settings.CORS_ALLOWED_ORIGIN_REGEXES = [r"^https://ok\.example\.com$", pattern]
    [error] = check_cors_does_not_allow_every_origin()
    assert error.id == "threengram.E002"
    assert error.msg.startswith(f"CORS_ALLOWED_ORIGIN_REGEXES {pattern!r} does not end with $")


def test_the_deploy_check_accepts_origin_patterns_naming_their_hosts(settings):
    settings.CORS_ALLOWED_ORIGIN_REGEXES = [
        r"^https://agents\.example\.com$",
        r"^https://[a-z0-9-]+\.agents\.example\.com(:\d{1,5})?$",
        r"^https?://(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?$",
    ]
    assert check_cors_does_not_allow_every_origin() == []


CURRENT_USER = (
    "from django.db import connection\n"
    "with connection.cursor() as cursor:\n"
    "    cursor.execute('SELECT current_user')\n"
    "    print('acting as', cursor.fetchone()[0])"
)


@pytest.mark.django_db(transaction=True)
def test_production_connections_act_as_the_row_level_security_role_by_default():
    url = subprocess_database_url()
    result = manage("shell", "-c", CURRENT_USER, DATABASE_URL=url, **PRODUCTION)
    assert "acting as threengram_app" in result.stdout, result.stdout + result.stderr
    opted_out = manage(
        "shell", "-c", CURRENT_USER, DATABASE_URL=url, DATABASE_APP_ROLE="", **PRODUCTION
    )
    assert "acting as threengram_app" not in opted_out.stdout


def test_the_deploy_check_warns_when_row_level_security_is_off(settings):
    settings.DATABASE_APP_ROLE = "threengram_app"
    assert check_row_level_security_is_on() == []
    settings.DATABASE_APP_ROLE = ""
    [warning] = check_row_level_security_is_on()
    assert warning.id == "threengram.W001"
    assert "DATABASE_APP_ROLE is empty" in warning.msg


def test_a_blank_database_app_role_fails_check_deploy_at_the_warning_level():
    """A compose file's `DATABASE_APP_ROLE=` turns the second wall off; a deploy check at the
    level the docs run it says so."""
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DATABASE_URL=PRODUCTION_DATABASE_URL,
        DATABASE_APP_ROLE="",
        **PRODUCTION,
    )
    assert result.returncode == 1
    assert "threengram.W001" in result.stderr + result.stdout


@pytest.mark.parametrize("role", ["threengram_app", ""])
def test_the_application_role_may_be_the_migrated_one_or_empty(settings, role):
    settings.DATABASE_APP_ROLE = role
    assert check_app_role_is_the_migrated_one() == []


def test_another_application_role_is_refused_naming_the_setting_and_what_it_may_be(settings):
    """The migrations grant threengram_app alone: another role would have no grants, or, one
    that bypasses row-level security, turn the tenant wall off while the setting reads "on"."""
    settings.DATABASE_APP_ROLE = "my_app"
    [error] = check_app_role_is_the_migrated_one()
    assert error.id == "threengram.E004"
    assert error.msg.startswith("DATABASE_APP_ROLE is 'my_app': it may only be 'threengram_app'")
    assert "or empty" in error.msg
    assert "unset DATABASE_APP_ROLE" in error.hint


def test_a_long_refused_application_role_is_quoted_cut(settings):
    settings.DATABASE_APP_ROLE = "r" * 500
    [error] = check_app_role_is_the_migrated_one()
    assert f"DATABASE_APP_ROLE is '{'r' * 40}…'" in error.msg
    assert "r" * 41 not in error.msg


def test_another_application_role_stops_check_without_deploy():
    """Every start-up that runs the checks (`check`, `migrate`, `runserver`) stops on it, not
    only a deploy check."""
    from django.core.checks.registry import registry

    assert check_app_role_is_the_migrated_one in registry.get_checks()
    result = manage(
        "check", DATABASE_URL=PRODUCTION_DATABASE_URL, DATABASE_APP_ROLE="my_app", **PRODUCTION
    )
    assert result.returncode != 0
    assert "threengram.E004" in result.stderr
    assert "DATABASE_APP_ROLE is 'my_app'" in result.stderr


def test_the_deploy_check_refuses_a_public_host_allowed_hosts_does_not_name(settings):
    settings.PUBLIC_BASE_URL = "https://memory.example.com"
    settings.ALLOWED_HOSTS = ["memory.example.com"]
    assert check_public_host_is_allowed() == []
    settings.ALLOWED_HOSTS = [".example.com"]  # a domain and its subdomains, as Django reads it
    assert check_public_host_is_allowed() == []
    settings.ALLOWED_HOSTS = ["other.example.org"]
    [error] = check_public_host_is_allowed()
    assert error.id == "threengram.E003"
    assert "'memory.example.com' is not in ALLOWED_HOSTS" in error.msg


@pytest.mark.parametrize(
    ("public_base_url", "allowed_hosts"),
    [
        # An IPv6 literal is named in brackets in ALLOWED_HOSTS, as Django reads the Host header.
        ("http://[::1]:8000", ["[::1]"]),
        ("https://[2001:db8::7]", ["[2001:db8::7]"]),
        # A fully qualified name's trailing dot: Django drops it from the Host header.
        ("https://memory.example.com.", ["memory.example.com"]),
    ],
)
def test_the_deploy_check_reads_the_public_host_as_a_request_to_it_is_read(
    settings, public_base_url, allowed_hosts
):
    settings.PUBLIC_BASE_URL = public_base_url
    settings.ALLOWED_HOSTS = allowed_hosts
    assert check_public_host_is_allowed() == []
