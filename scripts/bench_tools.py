"""Server time of the tools at 1,000,000 memories.

    .venv/bin/python scripts/bench_data.py      # once: builds threengram_bench_tools
    .venv/bin/python scripts/bench_tools.py [--calls 300] [--only search] [--no-analyze] [--rls]

Calls `mcp_gateway.tools.call_tool` in-process, exactly as the MCP server does after auth (schema
validation, scope check, service, JSON encoding), and times each call. Targets: search p95 <= 25
ms, get_memories of 20 ids p95 <= 10 ms, briefing p95 <= 25 ms, remember p95 <= 5 ms (it writes
a few hundred rows into the benchmark database). The baseline measured in the same run is
`SELECT 1` through the same path (thread-sensitive executor + Django connection): the fixed cost
every tool call pays before doing any work.

Search is timed with short keyword queries (1-2 words) and with questions as agents ask them:
8-25 words, vocabulary words among English stop words, and English words no memory holds (a
question about something never stored). Both search and remember include the
embedding of the query or memory (SEARCH_EMBEDDER, wordllama by default); the embedding of a
question alone is timed as its own row. `--no-analyze` measures the tables as
`scripts/bench_data.py --no-analyze` left them, without statistics (the VACUUM ANALYZE that
otherwise starts every run is skipped); `--only TEXT` times only the rows whose label holds it;
`--rls` times the calls under row-level security, as a server with the default settings runs
them (the corpus is prepared as the owner first).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.bench_data import BENCH_DATABASE, MEMORY_TYPES  # noqa: E402


def word(k: int) -> str:
    """Word k of the generator's pseudo vocabulary (scripts/bench_data.py, bench_word)."""
    letters = hashlib.md5(str(k).encode(), usedforsecurity=False).hexdigest()[: 5 + k % 4]
    return letters.translate(str.maketrans("0123456789", "ghijklmnop"))


# Words an agent's question wraps around the words that matter.
STOP_WORDS = (  # noqa: SIM905 (a word list)
    "what did we decide about the for and how why is was of to in with on our it that "
    "should do which when last"
).split()


# Words no memory of the corpus holds: each has a letter past "p", which the generator's words
# (hexadecimal digits spelled as the letters a-p) never have. A question of them asks about
# something never stored, which a search must still answer within its bounds.
UNSTORED_WORDS = (  # noqa: SIM905 (a word list)
    "lawyer contract renewal warehouse vendor quote invoice staging rollout outage postmortem "
    "sprint quarterly budget hiring interview laptop keyboard monitor router firewall "
    "certificate expiry password rotation backup restore latency throughput queue worker "
    "retry timeout webhook signature tenant migration schema index vacuum replica failover "
    "kubernetes terraform ansible docker registry mirror proxy tunnel vpn printer scanner"
).split()
assert all(set(w) - set("abcdefghijklmnop") for w in UNSTORED_WORDS)


# The largest tenant's threads of its oldest memories and of memories drawn from all of it.
OLD_THREAD = "bench thread of the oldest"
WIDE_THREAD = "bench thread across"
THREAD_SIZES = {OLD_THREAD: 100, WIDE_THREAD: 1_000}


def setup(analyze: bool = True) -> None:
    if "BENCH_DATABASE_URL" in os.environ:
        url = os.environ["BENCH_DATABASE_URL"]
    else:
        from threengram.embedded_db import start

        url = make_conninfo(start(database="postgres"), dbname=BENCH_DATABASE)
    os.environ.update(DATABASE_URL=url, SECRET_KEY="bench-only", DEBUG="0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")
    # The domain services are called directly, for no tenant: as the owner, past row-level security.
    os.environ.setdefault("DATABASE_APP_ROLE", "")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # a corpus built before a schema change catches up
    # An account that has grown large gets its indexes, as cron gives them.
    call_command("index_accounts", "--maintenance-work-mem=2GB")
    from django.db import connection

    # A run starts from vacuumed tables (but for --no-analyze): the writes of earlier runs leave
    # pages that are not all-visible, and briefing's index-only scans then visit the heap
    # (docs/performance.md, the briefing entry).
    with connection.cursor() as cursor:
        if analyze:
            cursor.execute("ALTER TABLE memories_memory RESET (autovacuum_enabled)")
            cursor.execute("VACUUM (ANALYZE) memories_memory, memories_threadmembership")


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return f"{len(ordered):5d} {q[49]:8.2f} {q[94]:8.2f} {q[98]:8.2f} {ordered[-1]:8.2f}"


async def timed(label: str, calls, results: dict) -> None:
    from mcp_gateway.tools import call_tool
    from memories import tenancy

    samples = []
    for principal, name, arguments in calls:
        started = time.perf_counter()
        # The tenant, as the /mcp router sets it (used only under row-level security).
        with tenancy.acting_for(principal.user_id):
            result = await call_tool(principal, name, arguments)
        samples.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.content[0].text
    results[label] = samples


async def main(calls: int, seed: int, only: str | None = None, rls: bool = False) -> None:
    from asgiref.sync import sync_to_async
    from django.db import connection

    from mcp_gateway.principal import Principal
    from memories.models import Memory

    rng = random.Random(seed)  # noqa: S311 - reproducible sampling, not security

    def tenants() -> tuple[int, list[int]]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT owner_id, count(*) FROM memories_memory GROUP BY 1 ORDER BY 2 DESC"
            )
            rows = cursor.fetchall()
        others = rows[1:]
        other_size = sum(row[1] for row in others) // max(len(others), 1)
        return rows[0][0], [row[0] for row in others], rows[0][1], other_size

    largest, others, largest_size, other_size = await sync_to_async(
        tenants, thread_sensitive=True
    )()

    def threads_for(owner_id: int) -> list[tuple[str, str]]:
        """20 threads of 100 recent members each (one project per thread) for the largest tenant,
        so remember's proposal check has real work, and the threads of THREAD_SIZES; returns
        (project, member topic) pairs of the 20."""
        with connection.cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO memories_thread (id, owner_id, name, pinned, created_at)
                SELECT gen_random_uuid(), %(owner)s, 'bench thread ' || n, n <= 3, now()
                FROM generate_series(1, 20) n
                ON CONFLICT DO NOTHING;
                """,
                {"owner": owner_id},
            )
            cursor.execute(
                """
                INSERT INTO memories_threadmembership
                    (id, owner_id, thread_id, memory_id, state, created_at, decided_at)
                SELECT gen_random_uuid(), %(owner)s, t.id, m.id, 'member', now(), now()
                FROM (SELECT id, substr(name, 14)::int AS n FROM memories_thread
                      WHERE owner_id = %(owner)s AND name ~ '^bench thread [0-9]+$') t
                JOIN LATERAL (SELECT id FROM memories_memory
                              WHERE owner_id = %(owner)s AND valid_to IS NULL
                                AND project = 'project-' || t.n
                              ORDER BY recorded_at DESC LIMIT 100) m ON true
                ON CONFLICT DO NOTHING
                """,
                {"owner": owner_id},
            )
            # And a thread of the account's 100 oldest memories and one of 1,000 drawn from all
            # of it, added long ago (so that remember's proposals, which compare the members
            # added most recently, leave them out).
            for name, members in ((OLD_THREAD, "recorded_at"), (WIDE_THREAD, "md5(id::text)")):
                cursor.execute(
                    f"""
                    WITH thread AS (
                        INSERT INTO memories_thread (id, owner_id, name, pinned, created_at)
                        VALUES (gen_random_uuid(), %(owner)s, %(name)s, false, now())
                        ON CONFLICT DO NOTHING RETURNING id)
                    INSERT INTO memories_threadmembership
                        (id, owner_id, thread_id, memory_id, state, created_at, decided_at)
                    SELECT gen_random_uuid(), %(owner)s, thread.id, m.id, 'member',
                           now() - interval '400 days', now() - interval '400 days'
                    FROM thread, (SELECT id FROM memories_memory
                                  WHERE owner_id = %(owner)s AND valid_to IS NULL
                                  ORDER BY {members} LIMIT %(size)s) m
                    """,  # noqa: S608 (constants)
                    {"owner": owner_id, "name": name, "size": THREAD_SIZES[name]},
                )
            cursor.execute(
                """
                SELECT m.project, m.topic FROM memories_threadmembership ms
                JOIN memories_memory m ON m.owner_id = ms.owner_id AND m.id = ms.memory_id
                JOIN memories_thread t ON t.owner_id = ms.owner_id AND t.id = ms.thread_id
                WHERE ms.owner_id = %(owner)s AND t.name ~ '^bench thread [0-9]+$'
                """,
                {"owner": owner_id},
            )
            return cursor.fetchall()

    member_topics = await sync_to_async(threads_for, thread_sensitive=True)(largest)
    sample_others = rng.sample(others, min(50, len(others)))

    def principal(user_id: int) -> Principal:
        return Principal(user_id, frozenset({"memory:read", "memory:write"}))

    def ids_of(owner_id: int) -> list[str]:
        rows = Memory.objects.filter(owner_id=owner_id).values_list("id", flat=True)
        return [str(i) for i in rows[:2000]]

    pools = {
        owner: await sync_to_async(ids_of, thread_sensitive=True)(owner)
        for owner in [largest, *sample_others]
    }

    def facets_of(owner_id: int, facet: str) -> list[str]:
        """The projects or the scopes of the owner's current memories, for the selectors."""
        current = Memory.objects.filter(owner_id=owner_id, valid_to__isnull=True)
        return sorted(current.exclude(**{facet: None}).values_list(facet, flat=True).distinct())

    facets = {
        (owner, facet): await sync_to_async(facets_of, thread_sensitive=True)(owner, facet)
        for owner in [largest, *sample_others]
        for facet in ("project", "scope")
    }

    def query() -> str:
        # Words drawn as the generator draws content words (so common words are queried more), one
        # word in two queries of three, two words in the third.
        words = [word(int(4000 * rng.random() ** 1.3)) for _ in range(rng.choice((1, 1, 2)))]
        return " ".join(words)

    def question() -> str:
        # 8-25 words, about a third of them stop words, the rest drawn as content words are.
        words = [
            rng.choice(STOP_WORDS) if rng.random() < 0.35 else word(int(4000 * rng.random() ** 1.3))
            for _ in range(rng.randint(8, 25))
        ]
        return " ".join(words) + "?"

    def unstored_question() -> str:
        # As question(), of words no memory holds.
        words = [
            rng.choice(STOP_WORDS) if rng.random() < 0.35 else rng.choice(UNSTORED_WORDS)
            for _ in range(rng.randint(8, 25))
        ]
        return " ".join(words) + "?"

    def remember_arguments() -> dict:
        # A near-copy of a thread member's topic in its project: the largest tenant's 20
        # threads get proposals; other tenants have no threads. The content and the type are
        # drawn as the generator draws them: the memories every run adds are the most recent
        # ones a search walks first, and the only ones with a vector of the model's (nearest to
        # every query), so they should look like the rest.
        project, topic = rng.choice(member_topics)
        words = [word(int(4000 * rng.random() ** 1.3)) for _ in range(rng.randint(15, 74))]
        return {
            "memoryType": rng.choice(MEMORY_TYPES),
            "topic": topic + " follow-up",
            "content": " ".join(words) + f" #{uuid.uuid4()}",
            "project": project,
        }

    def selected(owner_for, facet: str, tool: str = "briefing") -> tuple[Principal, str, dict]:
        # A tenant with memories of some project (some of the generator's have none), and one
        # of its projects or scopes.
        while not facets[owner := owner_for(), facet]:
            pass
        arguments = {"selector": facet, "value": rng.choice(facets[owner, facet])}
        return principal(owner), tool, arguments

    def plan(owner_for, threads: bool) -> dict[str, list]:
        return {
            "search": [
                (principal(owner_for()), "search", {"query": query()}) for _ in range(calls)
            ],
            "search, question of 8-25 words": [
                (principal(owner_for()), "search", {"query": question()}) for _ in range(calls)
            ],
            "search, question, type filter, limit 25": [
                (
                    principal(owner_for()),
                    "search",
                    {"query": question(), "memoryTypes": ["decision", "fact"], "limit": 25},
                )
                for _ in range(calls)
            ],
            "search, type filter, limit 25": [
                (
                    principal(owner_for()),
                    "search",
                    {"query": query(), "memoryTypes": ["decision", "fact"], "limit": 25},
                )
                for _ in range(calls)
            ],
            "get_memories, 20 ids": [
                (principal(o := owner_for()), "get_memories", {"ids": rng.sample(pools[o], 20)})
                for _ in range(calls)
            ],
            "briefing, brief": [(principal(owner_for()), "briefing", {}) for _ in range(calls)],
            "remember (+ thread proposals)": [
                (principal(owner_for()), "remember", remember_arguments()) for _ in range(calls)
            ],
            "briefing, full": [
                (principal(owner_for()), "briefing", {"mode": "full"}) for _ in range(calls)
            ],
            # Rows added later go last: the samples of each row depend on the draws of the rows
            # before it, so the earlier rows keep theirs.
            "search, question of words no memory holds": [
                (principal(owner_for()), "search", {"query": unstored_question()})
                for _ in range(calls)
            ],
            **{
                f"briefing, {facet} selector": [selected(owner_for, facet) for _ in range(calls)]
                for facet in ("project", "scope")
            },
            "handoff": [(principal(owner_for()), "handoff", {}) for _ in range(calls)],
            "handoff, project selector": [
                selected(owner_for, "project", "handoff") for _ in range(calls)
            ],
            "search, question, commitments resolved": [
                (
                    principal(owner_for()),
                    "search",
                    {"query": question(), "commitmentStatus": ["resolved"]},
                )
                for _ in range(calls)
            ],
            # A listing without a query of a state that few of the account's memories are in.
            "listing, waiting commitments of a project, limit 25": [
                (
                    (selection := selected(owner_for, "project", "search"))[0],
                    "search",
                    {
                        "project": selection[2]["value"],
                        "commitmentStatus": ["waiting"],
                        "limit": 25,
                    },
                )
                for _ in range(calls)
            ],
            # A question about one of the account's projects (the project looked up first).
            "search, question, project filter": [
                (
                    (selection := selected(owner_for, "project", "search"))[0],
                    "search",
                    {"query": question(), "project": selection[2]["value"]},
                )
                for _ in range(calls)
            ],
            # A question about one of the account's scopes (each about a quarter of it).
            "search, question, scope filter": [
                (
                    (selection := selected(owner_for, "scope", "search"))[0],
                    "search",
                    {"query": question(), "scope": selection[2]["value"]},
                )
                for _ in range(calls)
            ],
            # The largest tenant's thread of its oldest memories: listed, and asked about.
            **(
                {
                    "listing, a thread of the oldest 100, limit 25": [
                        (principal(owner_for()), "search", {"thread": OLD_THREAD, "limit": 25})
                        for _ in range(calls)
                    ],
                    "search, question, a thread of the oldest 100": [
                        (
                            principal(owner_for()),
                            "search",
                            {"query": question(), "thread": OLD_THREAD},
                        )
                        for _ in range(calls)
                    ],
                    "search, question, a thread of 1,000 across the account": [
                        (
                            principal(owner_for()),
                            "search",
                            {"query": question(), "thread": WIDE_THREAD},
                        )
                        for _ in range(calls)
                    ],
                    **{
                        f"{tool}, {label}": [
                            (principal(owner_for()), tool, {"selector": "thread", "value": name})
                            for _ in range(calls)
                        ]
                        for tool in ("briefing", "handoff")
                        for label, name in (
                            ("a thread of the oldest 100", OLD_THREAD),
                            ("a thread of 1,000 across the account", WIDE_THREAD),
                        )
                    },
                }
                if threads
                else {}
            ),
        }

    async def baseline(owner: int) -> list[float]:
        def select_one() -> None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")

        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            await sync_to_async(select_one, thread_sensitive=True)()
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    async def embedding_alone() -> list[float]:
        from memories.embedding import embed_query

        questions = [question() for _ in range(calls)]
        embed_query(questions[0])  # loads the model
        samples = []
        for text in questions:
            started = time.perf_counter()
            embed_query(text)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    def wanted(label: str) -> bool:
        return only is None or only in label

    total = await Memory.objects.acount()

    if rls:
        # From here on every ORM connection acts as the application role, as in a server
        # process with the default settings: row-level security filters each statement.
        def enter_app_role() -> None:
            from django.conf import settings

            from memories import tenancy

            settings.DATABASE_APP_ROLE = tenancy.APP_ROLE
            connection.close()

        await sync_to_async(enter_app_role, thread_sensitive=True)()

    results: dict[str, list[float]] = {}
    for who, owner_for, threads in [
        (f"largest tenant ({largest_size:,} memories)", lambda: largest, True),
        (
            f"{len(sample_others)} other tenants (~{other_size:,} memories each)",
            lambda: rng.choice(sample_others),
            False,
        ),
    ]:
        # Warm up caches and the connection with calls of their own, then measure.
        warm_up = plan(owner_for, threads)
        for label, batch in plan(owner_for, threads).items():
            if not wanted(f"{who} | {label}"):
                continue
            await timed("warm-up", warm_up[label][:20], {})
            # As a server process does after start-up (threengram/asgi.py): what exists before
            # the measured calls is out of the cyclic collector's view, so that a full collection
            # does not walk it in the middle of a call.
            gc.freeze()
            await timed(f"{who} | {label}", batch, results)
    if wanted("embedding of a question alone"):
        results["embedding of a question alone (embed_query)"] = await embedding_alone()
    results["baseline | SELECT 1 via the same executor"] = await baseline(largest)

    print(f"{total:,} memories; {calls} calls per row; times in ms (server time, in-process)")
    print(f"{'tenant | call':75s} {'n':>5s} {'p50':>8s} {'p95':>8s} {'p99':>8s} {'max':>8s}")
    for label, samples in results.items():
        print(f"{label:75s} {percentiles(samples)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--only", help="time only the rows whose label contains this text")
    parser.add_argument(
        "--analyze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-analyze: skip the VACUUM ANALYZE that starts a run",
    )
    parser.add_argument(
        "--rls",
        action="store_true",
        help="time the calls under row-level security (the application role, as the server's "
        "default settings run them); the corpus is still prepared as the owner",
    )
    options = parser.parse_args()
    setup(analyze=options.analyze)
    asyncio.run(main(options.calls, options.seed, options.only, options.rls))
