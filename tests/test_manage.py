"""manage.py run by an interpreter without the project's packages (the quick start installs into
.venv and activates nothing, so a plain `python manage.py` is another Python) says which to use."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_manage_without_django_names_the_virtualenv_instead_of_a_traceback():
    # -S: no site-packages, as a Python that never had Django installed.
    result = subprocess.run(
        [sys.executable, "-S", "manage.py", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "Django is not installed for" in result.stderr
    assert ".venv/bin/python manage.py" in result.stderr
