"""What the search embedder costs a server process: resident memory and start-up time.

    .venv/bin/python scripts/bench_embedder.py [--rounds 3]

Starts `uvicorn threengram.asgi:application` with SEARCH_EMBEDDER=wordllama and =none in turn
(alternating, `--rounds` times each), against a migrated database `threengram_embedder_bench` on
the embedded server (or BENCH_DATABASE_URL). Times the start until /ready answers 200, reads
VmRSS from /proc/<pid>/status then and after 150 requests. Then, in a process of its own, the
RSS of Django set up, after the model is loaded, and after 2,000 query and 2,000 memory
embeddings. Targets: the embedder adds at most 150 MB of RSS and 3 s of start-up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATABASE = "threengram_embedder_bench"

IN_PROCESS = """
import os, random, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from scripts.bench_tools import word
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
before = rss()
from memories.embedding import embed_memories, embed_query, get_embedder
get_embedder()
loaded = rss()
rng = random.Random(1)
for _ in range(2000):
    embed_query(" ".join(word(rng.randrange(4000)) for _ in range(rng.randint(8, 25))))
    embed_memories([" ".join(word(rng.randrange(4000)) for _ in range(75))])
used = rss()
print(f"in-process: Django set up {before:.1f} MiB; model loaded {loaded:.1f} MiB "
      f"(+{loaded - before:.1f}); after 2,000 query and 2,000 memory embeddings {used:.1f} MiB "
      f"(+{used - before:.1f})")
"""


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def serve(env: dict[str, str], port: int) -> tuple[float, float, float]:
    """Seconds until /ready answers 200, RSS then and after 150 requests (MiB)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "threengram.asgi:application"),
            *("--port", str(port), "--no-access-log", "--log-level", "warning"),
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                if process.poll() is not None:
                    sys.exit(f"the server exited with {process.returncode}")
                time.sleep(0.02)
        ready = time.monotonic() - started
        after_start = rss_mib(process.pid)
        for _ in range(50):
            for path in ("/ready", "/version", "/"):
                with contextlib.suppress(OSError):
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
        return ready, after_start, rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    url = os.environ.get("BENCH_DATABASE_URL")
    if not url:
        from threengram.embedded_db import start

        url = make_conninfo(start(database=DATABASE))
    env = os.environ | {
        "DATABASE_URL": url,
        "SECRET_KEY": "bench-only",
        "DEBUG": "0",
        "DATABASE_APP_ROLE": "",
        "DJANGO_SETTINGS_MODULE": "threengram.settings",
    }
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    for round_ in range(options.rounds):
        for embedder in ("wordllama", "none"):
            port = 18600 + 2 * round_ + (embedder == "none")
            ready, after_start, after_requests = serve(env | {"SEARCH_EMBEDDER": embedder}, port)
            print(
                f"{embedder:10s} /ready after {ready:.2f} s; VmRSS after start-up "
                f"{after_start:.1f} MiB, after 150 requests {after_requests:.1f} MiB",
                flush=True,
            )
    subprocess.run(
        [sys.executable, "-c", IN_PROCESS],
        cwd=ROOT,
        env=env | {"SEARCH_EMBEDDER": "wordllama"},
        check=True,
    )


if __name__ == "__main__":
    main()
