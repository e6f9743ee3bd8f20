"""Validate the retrieval eval data set (dataset.json next to this file).

Run: python3 tests/memories/retrieval_eval/check_dataset.py [path/to/dataset.json]
     python3 tests/memories/retrieval_eval/check_dataset.py --held-out

`--held-out` checks heldout.json (see README.md): the minimum counts are information there, and
its absent questions may be near misses (they are listed, not errors).

Checks the shape, key uniqueness, references, minimum counts and the product's field bounds,
then prints two audits: how many content words each question shares with its expected memory
(information; questions should use their own words) and any absent question sharing a rare word
with the memories (an error: an absent question must not point at a stored memory).
Standard library only; exits 1 on any error.
"""

import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

MEMORY_TYPES = {
    "decision",
    "commitment",
    "blocker",
    "fact",
    "preference",
    "pattern",
    "note",
    "event",
}
CONTENT_MAX = 2000
TOPIC_MAX = 256
PROJECT_MAX = 256
TAGS_MAX = 32
TAG_MAX = 64

MIN_MEMORIES = 160
MIN_PROJECTS = 6
MIN_QUESTIONS = 110
MIN_CHAINS = 18
MIN_SUPERSESSION = 18
MIN_ABSENT = 20

RARE_MAX_DOCS = 2  # a word in at most this many memories (chains) is "rare"
HIGH_OVERLAP = 0.6  # a question sharing this share of its words with the memory copies it

MEMORY_FIELDS = {"key", "memory_type", "topic", "content", "project", "tags"}
SECTION_FIELDS = {
    "revisions": {"key", "revises", "topic", "content"},
    "questions": {"id", "question", "expected"},
    "supersession": {"id", "question", "current", "superseded"},
    "absent": {"id", "question"},
}

_STOP_TEXT = """
about above after again against also among another anyone anything around because been before
being below between both cant could did didnt does doing done dont down during each either else
even ever every from further gets getting going hasnt have havent having here hers herself
himself into isnt itself just like made make many more most much must myself near need needs
never none once only other ought ours ourselves over really same shall should since some someone
something still such than that their theirs them themselves then there these they thing things
this those through thus under until upon very want wants wasnt were werent what whats when where
whether which while whom whose will with within without wont would your yours yourself
yourselves arent
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> set[str]:
    """Lowercase words longer than three characters, minus stop words."""
    return {w for w in WORD.findall(text.lower()) if len(w) > 3 and w not in STOP_WORDS}


class Checker:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def error(self, message: str) -> None:
        self.errors.append(message)

    def text(self, where: str, value: object, maximum: int, minimum: int = 1) -> None:
        if not isinstance(value, str):
            self.error(f"{where}: must be a string")
            return
        if "\x00" in value:
            self.error(f"{where}: contains NUL")
        length = len(value.strip())
        if not minimum <= length <= maximum:
            self.error(f"{where}: length {length} outside {minimum}..{maximum}")

    def fields(self, where: str, item: object, required: set[str], optional: set[str]) -> bool:
        if not isinstance(item, dict):
            self.error(f"{where}: must be an object")
            return False
        missing = required - item.keys()
        extra = item.keys() - required - optional
        if missing:
            self.error(f"{where}: missing {sorted(missing)}")
        if extra:
            self.error(f"{where}: unexpected {sorted(extra)}")
        return not missing


def check_memories(c: Checker, memories: list) -> bool:
    """Field bounds of every memory; False when one lacks a field (the rest can't be checked)."""
    complete = True
    for i, m in enumerate(memories):
        where = f"memories[{i}]"
        if not c.fields(where, m, MEMORY_FIELDS, {"due_at"}):
            complete = False
            continue
        where = f"memory {m['key']}"
        if m["memory_type"] not in MEMORY_TYPES:
            c.error(f"{where}: memory_type {m['memory_type']!r}")
        c.text(f"{where}.topic", m["topic"], TOPIC_MAX)
        c.text(f"{where}.content", m["content"], CONTENT_MAX)
        if m["project"] is not None:
            c.text(f"{where}.project", m["project"], PROJECT_MAX)
        tags = m["tags"]
        if not isinstance(tags, list) or len(tags) > TAGS_MAX:
            c.error(f"{where}.tags: must be a list of at most {TAGS_MAX}")
        else:
            for t, tag in enumerate(tags):
                c.text(f"{where}.tags[{t}]", tag, TAG_MAX)
        if "due_at" in m:
            if m["memory_type"] != "commitment":
                c.error(f"{where}: due_at only on commitments")
            due = m["due_at"]
            if not (isinstance(due, str) and due.endswith("Z")):
                c.error(f"{where}.due_at: ISO 8601 ending in Z expected")
            else:
                try:
                    datetime.fromisoformat(due)
                except ValueError:
                    c.error(f"{where}.due_at: not ISO 8601: {due!r}")
    return complete


def check_dataset(data: dict, *, held_out: bool = False) -> tuple[Checker, dict]:
    c = Checker()
    sections = ("memories", *SECTION_FIELDS)
    if not isinstance(data, dict) or set(data) != set(sections):
        c.error(f"top level must have exactly the keys {list(sections)}")
        return c, {}
    for name in sections:
        if not isinstance(data[name], list):
            c.error(f"{name}: must be a list")
            return c, {}

    memories = data["memories"]
    complete = check_memories(c, memories)
    for name, required in SECTION_FIELDS.items():
        for i, item in enumerate(data[name]):
            complete = c.fields(f"{name}[{i}]", item, required, set()) and complete
    if not complete:
        return c, {}

    # Keys: memories and revisions share one namespace; ids are unique per file.
    keys = [m["key"] for m in memories] + [r["key"] for r in data["revisions"]]
    ids = [item["id"] for name in ("questions", "supersession", "absent") for item in data[name]]
    for label, values in (("key", keys), ("id", ids)):
        for value, count in Counter(values).items():
            if count > 1:
                c.error(f"duplicate {label} {value!r}")

    # Revisions, in order: each revises the current head of an existing chain.
    docs = {m["key"]: m for m in memories}
    head = {m["key"]: m["key"] for m in memories}  # any version -> chain root
    chains: dict[str, list[str]] = {m["key"]: [m["key"]] for m in memories}
    for r in data["revisions"]:
        where = f"revision {r['key']}"
        c.text(f"{where}.topic", r["topic"], TOPIC_MAX)
        c.text(f"{where}.content", r["content"], CONTENT_MAX)
        root = head.get(r["revises"])
        if root is None:
            c.error(f"{where}: revises unknown key {r['revises']!r}")
            continue
        if chains[root][-1] != r["revises"]:
            c.error(
                f"{where}: revises {r['revises']}, but the current version is {chains[root][-1]}"
            )
            continue
        chains[root].append(r["key"])
        head[r["key"]] = root
        docs[r["key"]] = r
    current = {chain[-1] for chain in chains.values()}
    revised = {root: chain for root, chain in chains.items() if len(chain) > 1}

    for q in data["questions"]:
        c.text(f"question {q['id']}", q["question"], 500)
        if not isinstance(q["expected"], list) or not q["expected"]:
            c.error(f"question {q['id']}: expected must be a non-empty list")
            continue
        for key in q["expected"]:
            if key not in docs:
                c.error(f"question {q['id']}: unknown key {key!r}")
            elif key not in current:
                c.error(f"question {q['id']}: expects {key}, which a later revision supersedes")
    for s in data["supersession"]:
        c.text(f"supersession {s['id']}", s["question"], 500)
        root = head.get(s["current"])
        if root is None:
            c.error(f"supersession {s['id']}: unknown current {s['current']!r}")
            continue
        chain = chains[root]
        if s["current"] != chain[-1] or len(chain) < 2:
            c.error(f"supersession {s['id']}: {s['current']} is not the head of a revised chain")
        elif s["superseded"] != chain[:-1]:
            c.error(f"supersession {s['id']}: superseded must be {chain[:-1]}")
    for a in data["absent"]:
        c.text(f"absent {a['id']}", a["question"], 500)

    projects = {m["project"] for m in memories if m["project"] is not None}
    types = Counter(m["memory_type"] for m in memories)
    minimums = (
        ("memories", len(memories), MIN_MEMORIES),
        ("projects", len(projects), MIN_PROJECTS),
        ("memory types", len(types), len(MEMORY_TYPES)),
        ("questions", len(data["questions"]), MIN_QUESTIONS),
        ("revise chains", len(revised), MIN_CHAINS),
        ("supersession questions", len(data["supersession"]), MIN_SUPERSESSION),
        ("absent questions", len(data["absent"]), MIN_ABSENT),
    )
    for label, count, minimum in minimums:
        if count < minimum and not held_out:
            c.error(f"{label}: {count} < {minimum}")
    stats = {
        "docs": docs,
        "roots": head,
        "projects": projects,
        "types": types,
        "revised": revised,
        "minimums": minimums,
    }
    return c, stats


def doc_words(doc: dict) -> set[str]:
    parts = [doc["topic"], doc["content"], doc.get("project") or "", *doc.get("tags", [])]
    return content_words(" ".join(parts))


def audit(c: Checker, data: dict, docs: dict, roots: dict, *, held_out: bool = False) -> None:
    words = {key: doc_words(doc) for key, doc in docs.items()}

    overlaps = []
    copying = []
    for q in data["questions"]:
        qw = content_words(q["question"])
        mw = set().union(*(words.get(k, set()) for k in q["expected"]))
        share = len(qw & mw) / len(qw) if qw else 0.0
        overlaps.append(share)
        if share >= HIGH_OVERLAP and len(qw) >= 3:
            copying.append((q["id"], share, q["question"]))
    average = sum(overlaps) / len(overlaps)
    print(
        f"question/memory word overlap: average {average:.2f} (share of a question's content "
        f"words found in its expected memory); {len(copying)} of {len(overlaps)} questions "
        f">= {HIGH_OVERLAP:.0%}"
    )
    for qid, share, question in copying:
        print(f"  high overlap {qid} {share:.0%}: {question}")

    # A memory and its revisions count once: the words of a chain are the union of its versions.
    chain_words: dict[str, set[str]] = {}
    for key, ws in words.items():
        chain_words.setdefault(roots.get(key, key), set()).update(ws)
    doc_freq = Counter(w for ws in chain_words.values() for w in ws)
    for a in data["absent"]:
        rare = sorted(w for w in content_words(a["question"]) if 0 < doc_freq[w] <= RARE_MAX_DOCS)
        if rare and held_out:
            print(f"  near miss {a['id']} shares rare memory words {rare}: {a['question']}")
        elif rare:
            c.error(f"absent {a['id']} shares rare memory words {rare}: {a['question']}")


def main() -> int:
    arguments = sys.argv[1:]
    held_out = "--held-out" in arguments
    arguments = [a for a in arguments if a != "--held-out"]
    default = Path(__file__).with_name("heldout.json" if held_out else "dataset.json")
    path = Path(arguments[0]) if arguments else default
    data = json.loads(path.read_text(encoding="utf-8"))
    c, stats = check_dataset(data, held_out=held_out)
    if stats:
        print(f"{path}")
        for label, count, minimum in stats["minimums"]:
            print(f"  {label}: {count} (minimum {minimum})")
        print(f"  revisions: {len(data['revisions'])}")
        longest = max((len(chain) - 1 for chain in stats["revised"].values()), default=0)
        print(f"  longest chain: {longest} revisions")
        print(f"  projects: {', '.join(sorted(stats['projects']))} (+ no project)")
        print("  types: " + ", ".join(f"{t} {n}" for t, n in stats["types"].most_common()))
        audit(c, data, stats["docs"], stats["roots"], held_out=held_out)
    for message in c.errors:
        print(f"ERROR {message}")
    print("FAILED" if c.errors else "OK")
    return 1 if c.errors else 0


if __name__ == "__main__":
    sys.exit(main())
