"""How settings read list-valued environment variables."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRINT_REGEXES = (
    "import json; from threengram import settings; "
    "print(json.dumps(settings.CORS_ALLOWED_ORIGIN_REGEXES))"
)


def _origin_regexes(value: str | None) -> list[str]:
    environment = {
        key: item
        for key, item in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "CORS_ALLOWED_ORIGIN_REGEXES")
    }
    environment.update(
        THREENGRAM_ENV_FILE="",
        DEBUG="0",
        SECRET_KEY="not-a-secret-" + "x" * 40,
        # Never connected to: importing the settings opens no connection.
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/nothing",
    )
    if value is not None:
        environment["CORS_ALLOWED_ORIGIN_REGEXES"] = value
    result = subprocess.run(
        [sys.executable, "-c", PRINT_REGEXES],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_cors_origin_regexes_are_split_on_whitespace_so_their_commas_survive():
    first = r"^https://agents\.example\.com(:\d{1,5})?$"
    second = r"^https://[a-z]{2,8}\.example\.org$"
    regexes = _origin_regexes(f"{first}  {second}\n")
    assert regexes == [first, second]
    assert re.match(regexes[0], "https://agents.example.com:8443")


def test_the_default_cors_origin_regex_is_whole():
    [regex] = _origin_regexes(None)
    assert re.match(regex, "http://127.0.0.1:6274") and re.match(regex, "http://[::1]:80")
    assert not re.match(regex, "https://evil.example.com")
