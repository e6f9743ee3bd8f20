"""A large account's search plans (its own words and nearest-neighbour indexes, the words
function that applies the filters itself, the probe and dense walks, the rare terms looked up
again) find exactly what a small account's walk finds, below every bound: two accounts of the
same memories, the same lifecycle and the same thread, one of them with its indexes, answer every
query and filter with the same memories and scores, page after page, and never with a third
account's."""

from __future__ import annotations

import random
from contextlib import nullcontext
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories import account_indexes, tenancy
from memories.models import Memory
from memories.search import clean_filters, search_memories
from memories.services import archive_memory, record_memory, resolve_commitment, revise_memory
from memories.threads import add_thread_members, create_thread
from tests.factories import MemoryFactory, UserFactory
from tests.memories.conftest import patch_search

WORDS = [
    "zeppelin", "hangar", "lease", "invoice", "kafka", "postgres",
    "backup", "espresso", "rotation", "mooring", "ledger", "webhook",
]  # fmt: skip
FILLER = ["notes", "about", "the", "team", "said", "later", "maybe", "soon"]
MEMORIES = 30

QUERIES = [
    "zeppelin",
    "kafka",
    "hangar lease",
    "postgres backup",
    "invoice ledger webhook",
    "when does the zeppelin lease renew and who pays the invoice?",
    "what did the team say about kafka backups and postgres rotation",
    '"zeppelin hangar"',
    "kafka -backup",
    "lease invoice -zeppelin -kafka",
    "quasar",  # in no memory
    "hangr",  # a typo: the topic fallback
    "revised",
    "notes",
]


def _filters(base: datetime) -> list[dict]:
    at = lambda minutes: (base + timedelta(minutes=minutes)).isoformat()  # noqa: E731
    return [
        {},
        {"memory_types": ["fact"]},
        {"memory_types": ["note", "decision"], "project": "alpha"},
        {"scope": "work"},
        {"thread": "hangar work"},
        {"thread": "Hangar work", "memory_types": ["note"]},
        {"status": "archived"},
        {"status": "any", "thread": "Hangar work"},
        {"recorded_after": at(35), "recorded_before": at(90), "scope": "personal"},
        {"as_of": at(60)},
        {"commitment_status": ["open"]},
        {"commitment_status": ["waiting", "resolved"], "project": "alpha"},
        {"resolved_after": at(0)},
    ]


def _store(owner, base: datetime) -> list:
    """The same memories for every owner (a seeded generator): types, scopes, projects, tags,
    ties in time, a few stamped ahead of this clock; some archived, some revised, a thread with
    members before and after their revisions, commitments in every state. Returns the ids in the
    order written, the same order for every owner."""
    rng = random.Random(7)
    ids = []
    for n in range(MEMORIES):
        words = rng.sample(WORDS, rng.randint(1, 3))
        memory = MemoryFactory(
            owner=owner,
            memory_type=rng.choice(["note", "fact", "decision", "commitment", "blocker"]),
            topic=f"{rng.choice(WORDS)} {rng.choice(FILLER)}".capitalize(),
            content=" ".join(words + rng.sample(FILLER, 3)) + f" item{n}.",
            scope=rng.choice(["personal", "work", "side-gig"]),
            project=rng.choice([None, "alpha", "beta"]),
            tags=rng.sample(WORDS, rng.randint(0, 1)),
            recorded_at=(
                timezone.now() + timedelta(hours=n)
                if n % 13 == 5
                else base + timedelta(minutes=(n // 2) * 7)
            ),
        )
        ids.append(memory.id)
    for n in rng.sample(range(MEMORIES), 5):
        archive_memory(owner=owner, memory_id=ids[n])
    create_thread(owner=owner, name="Hangar work")
    members = [ids[n] for n in rng.sample(range(MEMORIES), 10)]
    add_thread_members(owner=owner, name="Hangar work", memory_ids=members)
    for n in rng.sample(range(MEMORIES), 5):
        content = " ".join(rng.sample(WORDS, 2)) + f" revised item{n}."
        ids.append(revise_memory(owner=owner, predecessor_id=ids[n], content=content).id)
    add_thread_members(owner=owner, name="Hangar work", memory_ids=ids[MEMORIES::2])
    for n in range(3):
        fresh = record_memory(
            owner=owner,
            memory_type="commitment",
            topic=f"Fresh {WORDS[n]}",
            content=f"{WORDS[n]} {WORDS[n + 5]} fresh entry {n}",
            project="alpha",
        )
        ids.append(fresh.id)
    resolve_commitment(owner=owner, memory_id=ids[-1], status="resolved")
    resolve_commitment(owner=owner, memory_id=ids[-2], status="waiting")
    commitments = Memory.objects.filter(
        owner=owner, memory_type="commitment", valid_to__isnull=True, commitment_status="open"
    ).order_by("recorded_at", "id")
    for memory, state in zip(commitments, ["resolved", "waiting", "expired"], strict=False):
        resolve_commitment(owner=owner, memory_id=memory.id, status=state)
    return ids


def _pages(owner, ids: list, query: str, filters: dict, limit: int) -> list[tuple[float, int]]:
    """Every page's hits as (score, the position its memory was written in)."""
    written = {memory_id: n for n, memory_id in enumerate(ids)}
    hits, cursor = [], None
    while True:
        page = search_memories(
            owner_id=owner.pk,
            query=query,
            filters=clean_filters(**filters),
            limit=limit,
            cursor=cursor,
        )
        hits += [(round(hit.score, 6), written[hit.id]) for hit in page.hits]  # KeyError: not its
        cursor = page.next_cursor
        if cursor is None:
            return hits


@pytest.fixture
def twin_accounts(account_indexes_dropped, settings):
    """A small account, a large one of the same memories with its own indexes, and a third like
    the large one (same memories, same thread name) whose memories neither may find."""
    settings.SEARCH_EMBEDDER = "none"  # scores of words alone: equal scores, not close ones
    base = timezone.now() - timedelta(days=10)
    small, large, third = UserFactory(), UserFactory(), UserFactory()
    accounts = {owner: _store(owner, base) for owner in (small, large, third)}
    for kind in account_indexes.KINDS:
        kind.build(large.pk)
        kind.build(third.pk)
    assert account_indexes.WORDS.indexes() == {large.pk: True, third.pk: True}
    assert _through_the_words_function(large) and not _through_the_words_function(small)
    return base, (small, accounts[small]), (large, accounts[large])


def _through_the_words_function(owner) -> bool:
    statements = []

    def note(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note):
        assert search_memories(owner_id=owner.pk, query="zeppelin", filters=clean_filters()).hits
    return any("memory_recent_word_matches" in sql for sql in statements)


def _disagreements(base, small, large, queries=QUERIES, acting: bool = False) -> list:
    found = []
    for query in queries:
        for filters in _filters(base):
            answers = {}
            for owner, ids in (small, large):
                with tenancy.acting_for(owner.pk) if acting else nullcontext():
                    whole = _pages(owner, ids, query, filters, limit=25)
                    paged = _pages(owner, ids, query, filters, limit=4)
                answers[owner.pk] = sorted(whole)
                if sorted(paged) != sorted(whole):
                    found.append((query, filters, "pages repeat or skip", paged, whole))
            if answers[small[0].pk] != answers[large[0].pk]:
                found.append((query, filters, *answers.values()))
    return found


# The bounds a plan switches on, lowered so that this small corpus takes each path too.
FEW_TERMS = [query for query in QUERIES if len(query.split()) <= 3]
PLANS = {
    "as configured": ({}, QUERIES),
    # A query of few terms walks densely, then the words index serves what the walk left.
    "dense walks": (
        {"WORDS_PROBE_MAX": 4, "WORDS_DENSE_SHARE": 4, "WORDS_DENSE_WALK_MAX": 10},
        FEW_TERMS,
    ),
    # Every term of a question is looked up again through the words index.
    "rare terms": (
        {"RARE_TERM_HELD_MAX": 100},
        [query for query in QUERIES if query not in FEW_TERMS],
    ),
}


def test_a_large_accounts_plans_find_what_a_small_accounts_walk_finds(twin_accounts, monkeypatch):
    base, small, large = twin_accounts
    for plan, (bounds, queries) in PLANS.items():
        with monkeypatch.context() as patched:
            for name, value in bounds.items():
                patch_search(patched, name, value)
            assert _disagreements(base, small, large, queries) == [], plan


def test_they_agree_as_the_application_role_under_row_level_security(
    twin_accounts, orm_as_app_role
):
    base, small, large = twin_accounts
    assert _disagreements(base, small, large, QUERIES[::2], acting=True) == []
