"""scripts/dev.py's first stage runs under any Python 3 and goes on under a 3.12+ one: on a
machine whose `python3` is older (Ubuntu 22.04: 3.10) beside a newer one."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_gateway.conftest import ROOT


def _python_without_tomllib() -> str:
    """A Python 3 older than 3.11 on this machine (pyenv's or the system's), or a skip."""
    patterns = (
        "/root/.pyenv/versions/3.10*/bin/python3",
        "/root/.pyenv/versions/3.[89].*/bin/python3",
        "/usr/bin/python3.10",
        "/usr/bin/python3.[89]",
    )
    for pattern in patterns:
        for candidate in sorted(glob.glob(pattern)):
            return candidate
    pytest.skip("no Python 3 older than 3.11 on this machine")


def _checkout_recording_its_python(checkout: Path) -> Path:
    """The files dev.py's first stage reads, copied into `checkout`, and a .venv whose python
    only records what it is asked (nothing installed, nothing served): the file it writes to."""
    (checkout / "scripts").mkdir(parents=True)
    for name in ("scripts/dev.py", "pyproject.toml", "requirements.lock", ".python-version"):
        shutil.copy(ROOT / name, checkout / name)
    calls = checkout / "calls.txt"
    stub = checkout / ".venv" / "bin" / "python"
    stub.parent.mkdir(parents=True)
    stub.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    stub.chmod(0o755)
    return calls


def test_the_first_stage_runs_under_a_python_older_than_3_11(tmp_path):
    old_python = _python_without_tomllib()
    calls = _checkout_recording_its_python(tmp_path)

    result = subprocess.run(
        [old_python, str(tmp_path / "scripts" / "dev.py"), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-800:]
    assert calls.read_text().splitlines()[-1] == "-m scripts.devserver serve"


def test_run_from_another_folder_it_finds_the_python_the_checkout_names(tmp_path):
    """pyenv's shims pick the interpreter by the working directory (the checkout's
    .python-version) unless PYENV_VERSION pins it: run as `python3 /path/to/scripts/dev.py
    serve` from elsewhere, with an older global python3, the first stage found no 3.12+."""
    old_python = _python_without_tomllib()
    checkout = tmp_path / "threengram"
    calls = _checkout_recording_its_python(checkout)
    # A shim as pyenv's: python3.12 only where PYENV_VERSION, or else a .python-version in the
    # working directory, names 3.12.
    shims = tmp_path / "shims"
    shims.mkdir()
    shim = shims / "python3.12"
    shim.write_text(
        '#!/bin/sh\nversion="${PYENV_VERSION:-$(cat .python-version 2>/dev/null)}"\n'
        '[ "$version" = 3.12 ] || { echo "pyenv: python3.12: command not found" >&2; exit 127; }\n'
        f'exec {sys.executable} "$@"\n'
    )
    shim.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = subprocess.run(
        [old_python, str(checkout / "scripts" / "dev.py"), "serve"],
        cwd=elsewhere,
        # As pyenv runs the global python3: pinned to its version for whatever it starts.
        env={"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path), "PYENV_VERSION": "3.10"},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr[-800:]
    assert calls.read_text().splitlines()[-1] == "-m scripts.devserver serve"


@pytest.mark.parametrize(
    "script",
    sorted(
        path.name
        for path in (ROOT / "scripts").glob("*.py")
        if path.name.startswith(("bench_", "eval_", "conformance", "scale_out"))
    ),
)
def test_every_script_the_docs_name_answers_help(script):
    result = subprocess.run(
        [sys.executable, f"scripts/{script}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.startswith("usage:"), result.stderr[-500:]
