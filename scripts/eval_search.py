"""Retrieval quality of `search` on the eval set in tests/memories/retrieval_eval/.

    .venv/bin/python scripts/eval_search.py [--embedder wordllama|none|...] [--crowd N]
        [--filter-by project|type] [--dataset tests/memories/retrieval_eval/heldout.json]

Stores the set's memories for a new account on the embedded PostgreSQL (a scratch database,
`threengram_eval`, made afresh each run), applies its revisions, asks every question through
`mcp_gateway.tools.call_tool` (the real `search` tool: schema, service, JSON) and prints:
- recall@5: share of questions whose expected memory is among the first 5 hits;
- MRR@5: mean of 1/rank of the first expected memory within the first 5 (0 when absent);
- supersession: share of questions about a revised fact whose hits hold the current version
  and no superseded one ranks above it;
- abstention: share of questions about things never stored that get no hits;
- search latency p50 / p95 (ms), per call in-process.
tests/mcp_gateway/tools/test_search_quality.py holds floors on the same figures.
With `--crowd N`, N other memories are recorded after the set (and `index_accounts` run, which
builds the account's indexes when it is large enough): the set's answers become the older
memories of a large account, where a search's bounded work (the most recent matches by words,
the nearest by meaning) must still reach them. The crowd is real English on technical subjects
that no question asks about: the paragraphs of the docstrings of the packages installed beside
this project (pinned by requirements.lock), shuffled with a fixed seed. With `--filter-by project`,
each question is asked filtered to its answer's project, as an agent working in one repository
asks (the crowd has no project); with `--filter-by type`, to its answer's type (`memoryTypes`).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import statistics
import sys
import sysconfig
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "tests" / "memories" / "retrieval_eval" / "dataset.json"
EVAL_DATABASE = "threengram_eval"
# A paragraph of the crowd is about as long as a memory.
CROWD_PARAGRAPH_MIN = 60
CROWD_PARAGRAPH_MAX = 600
K = 5


def load_dataset(path: Path = DATASET) -> dict:
    return json.loads(path.read_text())


def store_dataset(owner, dataset: dict) -> dict[str, str]:
    """Remember every memory and apply the revisions in order; the id of each key."""
    from memories.services import record_memory, revise_memory

    ids: dict[str, str] = {}
    for item in dataset["memories"]:
        memory = record_memory(
            owner=owner,
            memory_type=item["memory_type"],
            topic=item["topic"],
            content=item["content"],
            project=item.get("project"),
            tags=item.get("tags") or None,
            due_at=item.get("due_at"),
        )
        ids[item["key"]] = str(memory.id)
    for item in dataset["revisions"]:
        successor = revise_memory(
            owner=owner,
            predecessor_id=ids[item["revises"]],
            content=item["content"],
            topic=item["topic"],
        )
        ids[item["key"]] = str(successor.id)
    return ids


def crowd_paragraphs(seed: int = 15) -> list[tuple[str, str]]:
    """(topic, content) of every docstring paragraph of CROWD_PARAGRAPH_MIN to
    CROWD_PARAGRAPH_MAX printable characters in the installed packages: the name documented and
    the paragraph, shuffled."""
    paragraphs: dict[str, str] = {}
    site_packages = Path(sysconfig.get_paths()["purelib"])
    for path in sorted(site_packages.glob("**/*.py")):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(path.read_text(errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for paragraph in (ast.get_docstring(node) or "").split("\n\n"):
                text = " ".join(paragraph.split())
                if (
                    CROWD_PARAGRAPH_MIN <= len(text) <= CROWD_PARAGRAPH_MAX
                    and text[0].isalpha()
                    and text.isprintable()
                ):
                    paragraphs.setdefault(text, node.name.replace("_", " ").strip() or "note")
    crowd = sorted((topic, text) for text, topic in paragraphs.items())
    random.Random(seed).shuffle(crowd)  # noqa: S311 (a fixed sample, not a secret)
    return crowd


def store_crowd(owner, dataset: dict, size: int) -> None:
    """Record `size` of crowd_paragraphs() (see the module docstring), then run
    index_accounts."""
    from django.core.management import call_command

    from memories.services import record_memory

    crowd = crowd_paragraphs()[:size]
    if len(crowd) < size:
        raise SystemExit(f"--crowd: only {len(crowd)} paragraphs are installed")
    memories = dataset["memories"]
    for n, (topic, content) in enumerate(crowd):
        record_memory(
            owner=owner,
            memory_type=memories[n % len(memories)]["memory_type"],
            topic=topic,
            content=content,
        )
    call_command("index_accounts", verbosity=0)


@dataclass
class Figures:
    recall: float
    mrr: float
    supersession: float
    abstention: float
    latency_p50_ms: float
    latency_p95_ms: float
    misses: list[str]

    def lines(self) -> list[str]:
        return [
            f"recall@{K}        {self.recall:.3f}",
            f"MRR@{K}           {self.mrr:.3f}",
            f"supersession     {self.supersession:.3f}",
            f"abstention       {self.abstention:.3f}",
            f"search p50/p95   {self.latency_p50_ms:.1f} / {self.latency_p95_ms:.1f} ms",
        ]


async def evaluate(
    principal, dataset: dict, ids: dict[str, str], filter_by: str | None = None
) -> Figures:
    """Ask every question through the `search` tool and score the answers. `filter_by`
    ("project" or "type"): each question filtered to its answer's project (when it has one) or
    type, each never-stored question to one of the set's in turn."""
    from mcp_gateway.tools import call_tool

    latencies: list[float] = []
    misses: list[str] = []
    field = {"project": "project", "type": "memory_type"}.get(filter_by or "")
    value_of = {item["key"]: item.get(field) if field else None for item in dataset["memories"]}
    for item in dataset["revisions"]:  # a revision keeps its predecessor's project and type
        value_of[item["key"]] = value_of[item["revises"]]
    values = sorted({value for value in value_of.values() if value}) or [None]

    async def ask(question: str, value: str | None = None) -> list[str]:
        arguments = {"query": question, "limit": K}
        if value and filter_by == "project":
            arguments["project"] = value
        elif value and filter_by == "type":
            arguments["memoryTypes"] = [value]
        started = time.perf_counter()
        result = await call_tool(principal, "search", arguments)
        latencies.append((time.perf_counter() - started) * 1000)
        if result.is_error:
            raise AssertionError(f"search failed for {question!r}: {result.content[0].text}")
        return [hit["id"] for hit in result.structured_content["hits"]]

    reciprocal_ranks = []
    for item in dataset["questions"]:
        hits = await ask(item["question"], value_of[item["expected"][0]])
        expected = {ids[key] for key in item["expected"]}
        rank = next((n for n, hit in enumerate(hits, 1) if hit in expected), None)
        reciprocal_ranks.append(1 / rank if rank else 0.0)
        if rank is None:
            misses.append(f"miss {item['id']}: {item['question']}")
    current_first = 0
    for item in dataset["supersession"]:
        hits = await ask(item["question"], value_of[item["current"]])
        current = ids[item["current"]]
        superseded = {ids[key] for key in item["superseded"]}
        if current in hits and not superseded & set(hits[: hits.index(current)]):
            current_first += 1
        else:
            misses.append(f"supersession {item['id']}: {item['question']}")
    abstained = 0
    for n, item in enumerate(dataset["absent"]):
        if not await ask(item["question"], values[n % len(values)]):
            abstained += 1
        else:
            misses.append(f"answered absent {item['id']}: {item['question']}")
    ordered = sorted(latencies)
    return Figures(
        recall=sum(1 for r in reciprocal_ranks if r) / len(reciprocal_ranks),
        mrr=sum(reciprocal_ranks) / len(reciprocal_ranks),
        supersession=current_first / len(dataset["supersession"]),
        abstention=abstained / len(dataset["absent"]),
        latency_p50_ms=statistics.median(ordered),
        latency_p95_ms=statistics.quantiles(ordered, n=100, method="inclusive")[94],
        misses=misses,
    )


def _setup(embedder: str) -> None:
    sys.path.insert(0, str(ROOT))
    from scripts.scratch_db import set_up_scratch_database

    set_up_scratch_database(
        EVAL_DATABASE,
        SECRET_KEY="eval-only",
        SEARCH_EMBEDDER=embedder,
        # The services are called directly, for no tenant: as the owner, past row-level security.
        DATABASE_APP_ROLE="",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="wordllama", help="a SEARCH_EMBEDDER value")
    parser.add_argument("--misses", action="store_true", help="list every miss")
    parser.add_argument(
        "--dataset",
        type=Path,
        default=DATASET,
        help="a set of the same shape (default: the eval set)",
    )
    parser.add_argument(
        "--crowd", type=int, default=0, help="other memories recorded after the set (see above)"
    )
    parser.add_argument(
        "--filter-by",
        choices=("project", "type"),
        help="ask each question filtered to its answer's project or type (never-stored ones "
        "to the set's in turn)",
    )
    args = parser.parse_args()
    _setup(args.embedder)
    import asyncio

    from accounts.models import User
    from mcp_gateway.principal import Principal

    dataset = load_dataset(args.dataset)
    owner = User.objects.create_user(username="eval", password=None)
    started = time.perf_counter()
    ids = store_dataset(owner, dataset)
    if args.crowd:
        store_crowd(owner, dataset, args.crowd)
    stored_in = time.perf_counter() - started
    principal = Principal(user_id=owner.pk, scopes=frozenset({"memory:read"}))
    figures = asyncio.run(evaluate(principal, dataset, ids, filter_by=args.filter_by))
    print(f"embedder         {args.embedder}")
    print(
        f"stored           {len(ids)} memories and revisions, {args.crowd} others after them, "
        f"in {stored_in:.1f} s"
    )
    for line in figures.lines():
        print(line)
    if args.misses:
        print("\n".join(figures.misses))


if __name__ == "__main__":
    main()
