"""The official MCP conformance suite (npm @modelcontextprotocol/conformance) against a live
daphne, on both wires, through the project's own script. Needs the npm registry on first run
(the suite is cached in .cache/ after that); an install failure fails this test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.mcp_gateway.conftest import ROOT, make_token

pytestmark = pytest.mark.live


@pytest.fixture
def conformance_token(transactional_db) -> str:
    from tests.factories import MemoryFactory, UserFactory

    user = UserFactory()
    MemoryFactory(owner=user)
    return make_token(user)


def test_conformance_suite_passes_on_both_wires(live_daphne, conformance_token, tmp_path):
    completed = subprocess.run(
        [sys.executable, "scripts/conformance.py", live_daphne.mcp_url, "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "MCP_CONFORMANCE_BEARER": conformance_token},
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = completed.stdout + completed.stderr
    assert completed.returncode == 0, report
    assert "== 2026-07-28" in report and "server-caching: 7 ok" in report
    assert "server-sep-2164-resource-not-found: 4 ok, 0 not ok" in report
    # Runs once the server lists tools (its Mcp-Name cases are tools/call requests).
    assert "server-http-header-validation: 14 ok, 0 not ok" in report
