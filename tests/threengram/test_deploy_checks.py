"""`manage.py check --deploy` is clean with DEBUG off and the documented production variables,
and refuses to start without a SECRET_KEY."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DEBUG", "SECRET_KEY", "SECURE_SSL_REDIRECT", "DJANGO_SETTINGS_MODULE")
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


def test_check_deploy_is_clean_with_production_variables():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_an_http_issuer_fails_the_deploy_check():
    result = manage(
        "check", "--deploy", **{**PRODUCTION, "PUBLIC_BASE_URL": "http://memory.example.com"}
    )
    assert result.returncode != 0
    assert "https" in result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key():
    result = manage("check", **{**PRODUCTION, "SECRET_KEY": ""})
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr
