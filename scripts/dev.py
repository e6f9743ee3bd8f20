#!/usr/bin/env python3
"""The two commands of the README quick start, on a machine with only Python 3.12+ and git.

    python3 scripts/dev.py serve   # install, embedded PostgreSQL, migrate, demo account, daphne
    python3 scripts/dev.py test    # install (with test extras) and run the whole test suite

The first stage runs under any Python 3: it finds a 3.12+ interpreter, creates `.venv`, installs
the pinned dependencies from pyproject.toml (constrained by requirements.lock), then re-executes
itself inside the venv for the second stage, which owns the embedded database for the lifetime of
the command and stops it cleanly at the end.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
MIN_PYTHON = (3, 12)


def _find_python() -> str:
    if sys.version_info >= MIN_PYTHON:
        return sys.executable
    # pyenv's shims pick the version the checkout's .python-version names (main changed to it),
    # unless PYENV_VERSION, which pyenv set for this older python3, pins them all to this one.
    os.environ.pop("PYENV_VERSION", None)
    for name in ("python3.14", "python3.13", "python3.12"):
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "1"], capture_output=True).returncode == 0:
            return found
    sys.exit("threengram needs Python 3.12 or newer; none was found on PATH.")


def _requirements(extras: list[str]) -> list[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return requirements


def _ensure_venv(extras: list[str]) -> None:
    """Create .venv and install the pinned requirements, skipping work when nothing changed."""
    requirements = _requirements(extras)
    lock = ROOT / "requirements.lock"
    stamp_text = "\n".join(requirements) + (lock.read_text() if lock.exists() else "")
    stamp = hashlib.sha256(stamp_text.encode()).hexdigest()
    marker = VENV / ".threengram-installed"
    if marker.exists() and stamp in marker.read_text().split():
        return
    if not VENV_PYTHON.exists():
        print("creating .venv", flush=True)
        subprocess.run([_find_python(), "-m", "venv", str(VENV)], check=True)
    print("installing dependencies into .venv", flush=True)
    command = [str(VENV_PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if lock.exists():
        command += ["-c", str(lock)]
    subprocess.run(command + requirements, check=True)
    previous = marker.read_text() if marker.exists() else ""
    marker.write_text(previous + stamp + "\n")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("serve", "test"):
        sys.exit(__doc__)
    command, rest = sys.argv[1], sys.argv[2:]
    # First: a version manager (pyenv's shims, reading .python-version) picks the interpreter
    # by the working directory; run from another one, it found no 3.12+.
    os.chdir(ROOT)
    if sys.version_info < MIN_PYTHON:
        # This stage reads pyproject.toml with tomllib (3.11+): go on under the 3.12+ one.
        python = _find_python()
        os.execv(python, [python, str(Path(__file__).resolve()), command, *rest])
    extras = ["test"] if command == "test" else []
    _ensure_venv(extras)
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), "-m", "scripts.devserver", command, *rest])


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C while installing: stopped, as asked (the next run resumes)
        sys.exit(130)
