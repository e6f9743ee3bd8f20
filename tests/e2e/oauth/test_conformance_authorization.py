"""The official MCP conformance suite's `authorization` leg against a live server, through the
project script (RFC 8414 metadata + an authorization-code grant, both protocol revisions)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.oauth.conftest import ROOT, free_port
from tests.factories import PASSWORD, UserFactory

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_authorization_leg_passes_without_warnings(oauth_server):
    user = UserFactory()
    result = subprocess.run(
        [
            sys.executable,
            "scripts/conformance_authorization.py",
            "--url",
            oauth_server.url,
            "--username",
            user.username,
            "--password",
            PASSWORD,
            "--port",
            str(free_port()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2025-11-25: 3 of 3 checks passed" in result.stdout
    assert "2026-07-28: 3 of 3 checks passed" in result.stdout
