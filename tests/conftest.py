import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.factories import UserFactory

# Pages are tested in Debian's Chromium (apt-get install chromium), never `playwright install`.
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (`pytest.mark.anyio`) run on asyncio alone: the gateway and its database
    access (psycopg's async pool) are asyncio code."""
    return "asyncio"


@pytest.fixture
def tenant(db):
    return UserFactory()


@pytest.fixture
def other_tenant(db):
    return UserFactory()


@pytest.fixture
def staff_member(db):
    return UserFactory(is_staff=True)


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    """Debian's Chromium, installed on first use when missing (CI runs as root on a fresh
    machine): a browser test fails rather than skips when it cannot get one."""
    if not Path(CHROMIUM).exists():
        if shutil.which("apt-get") is None:
            pytest.fail(f"{CHROMIUM} is missing and apt-get is not available to install it")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True, env=env)
    return CHROMIUM
