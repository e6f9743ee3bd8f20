"""A nearest-neighbour (HNSW) and a words (GIN) index per large account
(memories/account_indexes.py): `manage.py index_accounts` builds them once the account has grown
large, the account's searches use them, and they are dropped once the account is no longer large;
until they are built, the account's searches read its rows directly (its vectors exactly, its
most recent memories for words)."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.utils import timezone

from accounts.erasure import erase_account
from memories import account_indexes, backfill, search
from memories.models import Memory
from memories.search import candidates, clean_filters, search_memories
from memories.search import page as search_page
from memories.search.filters import filter_clauses
from memories.services import archive_memory, record_memory
from memories.threads import add_thread_members, create_thread
from tests.factories import MemoryFactory, UserFactory
from tests.memories.conftest import (
    bury_under_recent_notes,
    explain_as_sent,
    mark_invalid,
    patch_search,
)

NOTES = [
    ("Primary database", "Chose PostgreSQL 16 over MongoDB for the ledger's transactions."),
    ("Frontend framework", "The dashboard is written in SvelteKit with TypeScript."),
    ("Deploys", "Production deploys go through Argo CD from the main branch."),
    ("On-call", "The on-call rotation changes every Monday at 09:00."),
    ("Backups", "Nightly snapshots of the database are kept for 14 days."),
]


@pytest.fixture
def large_at_three(account_indexes_dropped, monkeypatch):
    """An account of three current memories counts as large."""
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 3)


def remember(owner, topic: str, content: str):
    return record_memory(owner=owner, memory_type="fact", topic=topic, content=content)


def index_accounts() -> str:
    out = io.StringIO()
    call_command("index_accounts", stdout=out)
    return out.getvalue()


def definition(kind: account_indexes.Kind, owner) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_indexdef(to_regclass(%s))", [kind.index_name(owner.pk)])
        return cursor.fetchone()[0]


def test_an_account_that_has_grown_large_gets_indexes_of_its_own(large_at_three):
    large, small = UserFactory(), UserFactory()
    for topic, content in NOTES[:3]:
        remember(large, topic, content)
    remember(small, *NOTES[3])
    out = index_accounts()
    assert "built the nearest-neighbour index of 1 account in" in out
    assert "built the words index of 1 account in" in out
    assert account_indexes.NEAREST.indexes() == {large.pk: True}
    assert account_indexes.WORDS.indexes() == {large.pk: True}
    # Only the account's current memories: ordered by the distance search uses, in a graph
    # sparser than pgvector's default (cheaper to write into); and by their words.
    nearest = definition(account_indexes.NEAREST, large)
    assert "USING hnsw (embedding vector_cosine_ops) WITH (m='8', ef_construction='32')" in nearest
    words = definition(account_indexes.WORDS, large)
    assert "USING gin (search_vector)" in words
    assert f"WHERE ((owner_id = {large.pk}) AND (valid_to IS NULL))" in nearest
    assert f"WHERE (((owner_id + 0) = {large.pk}) AND (valid_to IS NULL))" in words
    assert index_accounts() == ""  # nothing left to do


def test_an_account_no_longer_large_loses_its_index(large_at_three, monkeypatch):
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    index_accounts()
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 5)
    assert index_accounts() == ""  # 3 is still at least half of 5: kept
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 8)
    assert index_accounts() == (
        "dropped the nearest-neighbour index of 1 account no longer large\n"
        "dropped the words index of 1 account no longer large\n"
    )
    assert account_indexes.NEAREST.indexes() == {}
    assert account_indexes.WORDS.indexes() == {}


def meaning_plans(owner, question: str, **filters) -> tuple[list[str], list[dict]]:
    """The hits of a search, and the plans of its nearest-by-meaning statement (each with the
    HNSW candidate list size it ran with, as "ef_search")."""
    plans = []

    def explain(execute, sql, params, many, context):
        if "ORDER BY m.embedding <=>" in sql:
            plans.append(explain_as_sent(execute, sql, params, many, context))
            execute("SELECT current_setting('hnsw.ef_search')", None, False, context)
            plans[-1]["ef_search"] = int(context["cursor"].fetchone()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        page = search_memories(owner_id=owner.pk, query=question, filters=clean_filters(**filters))
    return [hit.id for hit in page.hits], plans


def test_a_large_account_finds_the_same_memories_before_and_after_its_index(large_at_three):
    owner = UserFactory()
    for topic, content in NOTES:
        remember(owner, topic, content)
    question = "which database holds the ledger, and how long are its snapshots kept?"
    before, plans = meaning_plans(owner, question)
    assert before and account_indexes.NEAREST.index_name(owner.pk) not in json.dumps(plans)
    index_accounts()
    after, plans = meaning_plans(owner, question)
    assert after == before
    assert account_indexes.NEAREST.index_name(owner.pk) in json.dumps(plans)
    assert '"Sort"' not in json.dumps(plans)
    # The sparser graph is walked with a longer candidate list than the 50 nearest it returns.
    assert [plan["ef_search"] for plan in plans] == [account_indexes.SEARCH_LIST_SIZE]


def test_a_search_as_of_an_instant_scans_exactly(large_at_three):
    """The index holds current memories only; a search of what was current at another instant
    reads the account's superseded memories too, by an exact scan planned as one."""
    owner = UserFactory()
    for topic, content in NOTES:
        remember(owner, topic, content)
    index_accounts()
    hits, plans = meaning_plans(
        owner, "which database holds the ledger?", as_of="2100-01-01T00:00:00Z"
    )
    assert hits and account_indexes.NEAREST.index_name(owner.pk) not in json.dumps(plans)
    assert '"Disabled": true' not in json.dumps(plans)


def test_a_phrase_is_found_by_its_words_and_ranked_by_meaning_without_a_nearest_scan(
    large_at_three,
):
    """Only memories holding a phrase answer it, and each is a word match: a scan of the
    account's HNSW index filtered on the phrase would read the graph far for the few it passes,
    and find no memory the words did not."""
    owner = UserFactory()
    memories = {topic: remember(owner, topic, content) for topic, content in NOTES}
    index_accounts()
    hits, plans = meaning_plans(owner, 'which "nightly snapshots" do we keep?')
    assert hits == [memories["Backups"].id]
    assert plans == []
    page = search_memories(
        owner_id=owner.pk, query='"nightly snapshots" of the database', filters=clean_filters()
    )
    assert page.hits[0].matched_by == ("words", "meaning")
    # An exclusion leaves most memories to answer: the nearest are still looked for.
    hits, plans = meaning_plans(owner, "which database holds the ledger? -mongodb")
    assert memories["Primary database"].id not in hits and len(plans) == 1


def test_a_phrase_held_only_by_memories_older_than_the_walk_is_found(large_at_three, monkeypatch):
    """Only memories holding a phrase answer it; when none of the walk's does, the phrase's older
    holders are found however many other terms the question asks before it: by the exact scan of
    an account without its own indexes (one whose index is being built, or an asOf search), and
    through the words index of one with. Before, a question whose other terms filled the rare
    terms' lookups got no answer."""
    owner = UserFactory()
    lease = remember(owner, "Hangar", "Signed with Zephyr Yards.")
    for n in range(5):
        remember(owner, f"Note {n}", f"Unrelated {n}.")
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)  # of the account's six memories
    patch_search(monkeypatch, "SHORT_WALK_MAX", 3)
    question = (
        "what rent, deposit, notice period, insurance, parking and access hours were agreed"
        ' with "Zephyr Yards"?'
    )

    def hits(query: str = question, **filters) -> list:
        page = search_memories(owner_id=owner.pk, query=query, filters=clean_filters(**filters))
        return [hit.id for hit in page.hits]

    assert hits() == [lease.id]
    index_accounts()
    assert hits() == [lease.id]
    assert hits(memory_types=["fact"]) == [lease.id]
    assert hits(question + " -signed") == []
    assert hits(as_of=timezone.now().isoformat()) == [lease.id]


def tenant_size(owner, counted_max: int) -> tuple[int, int]:
    """The account's size as a search takes it, counted up to `counted_max`, and how many scans
    of the memories table that took (PostgreSQL's counters of the transaction). As for a later
    page: a first page also reads the instant of the account's newest memory (one index probe)."""
    scans = (
        "SELECT coalesce(sum(seq_scan + idx_scan), 0) FROM pg_stat_xact_user_tables "
        "WHERE relname = 'memories_memory'"
    )
    params = {
        "owner": owner.pk,
        "snapshot": timezone.now(),
        "first_page": False,
        "tenant_size_max": counted_max,
    }
    with transaction.atomic(), connection.cursor() as db:
        db.execute(scans)
        [(before,)] = db.fetchall()
        search_page._count_tenant(
            db, params, filter_clauses(search.SearchFilters(), owner.pk, params)
        )
        db.execute(scans)
        [(after,)] = db.fetchall()
    return params["tenant_size"], after - before


def test_an_account_whose_index_held_the_counted_most_is_not_counted_again(large_at_three):
    """An account's current memories never become fewer (a revision closes one and adds its
    successor): once its own nearest-neighbour index held as many as a search counts, by
    PostgreSQL's count of the index's entries, the search takes it as that large without
    reading its memories to count them; under that, it counts them."""
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    index_accounts()  # the build counts the index's 3 entries
    assert tenant_size(owner, counted_max=3) == (3, 0)
    remember(owner, *NOTES[3])
    assert tenant_size(owner, counted_max=3) == (3, 0)
    assert tenant_size(owner, counted_max=10) == (4, 1)
    other = UserFactory()
    for topic, content in NOTES[:3]:
        remember(other, topic, content)
    assert tenant_size(other, counted_max=3) == (3, 1)  # no index of its own


def test_an_erased_account_loses_its_index(large_at_three):
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    index_accounts()
    erase_account(user=owner)  # its memories stay, without their vectors or words
    assert index_accounts() == (
        "dropped the nearest-neighbour index of 1 account no longer large\n"
        "dropped the words index of 1 account no longer large\n"
    )
    assert account_indexes.NEAREST.indexes() == {}
    assert account_indexes.WORDS.indexes() == {}


def test_an_index_left_invalid_is_not_used_and_is_built_again(large_at_three):
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    index_accounts()
    mark_invalid(account_indexes.NEAREST, [owner.pk])
    assert account_indexes.NEAREST.indexes() == {owner.pk: False}
    hits, plans = meaning_plans(owner, "which database did we choose?")
    assert hits and account_indexes.NEAREST.index_name(owner.pk) not in json.dumps(plans)
    # An exact scan planned as one, not the index's plan settings forced on a plan without it.
    assert '"Disabled": true' not in json.dumps(plans)
    assert "rebuilt the nearest-neighbour index of 1 account (left invalid" in index_accounts()
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}


def with_pgvector_default_graph(owner) -> None:
    """The account's nearest-neighbour index as an earlier release built it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX {account_indexes.NEAREST.index_name(owner.pk)} ON memories_memory "
            "USING hnsw (embedding vector_cosine_ops) "
            f"WHERE owner_id = {owner.pk} AND valid_to IS NULL"
        )


def test_an_index_built_with_other_graph_parameters_serves_until_it_is_rebuilt(
    large_at_three, monkeypatch
):
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    with_pgvector_default_graph(owner)
    assert account_indexes.NEAREST.indexes() == {owner.pk: False}
    hits, plans = meaning_plans(owner, "which database did we choose?")
    assert hits and account_indexes.NEAREST.index_name(owner.pk) in json.dumps(plans)

    # The new index is built beside the old one, which serves searches until the two swap.
    as_its_replacement_is_built = []
    create = account_indexes.Kind._create

    def search_then_create(kind, owner_id, name):
        if name.endswith("_replacement"):
            as_its_replacement_is_built.append(meaning_plans(owner, "which database?"))
        create(kind, owner_id, name)

    # Once they have swapped names, the new one serves searches as the old one is dropped.
    as_the_old_is_dropped = []
    drop = account_indexes._drop_index

    def search_then_drop(name):
        if name.endswith("_replaced"):
            as_the_old_is_dropped.append(meaning_plans(owner, "which database?"))
        drop(name)

    monkeypatch.setattr(account_indexes.Kind, "_create", search_then_create)
    monkeypatch.setattr(account_indexes, "_drop_index", search_then_drop)
    out = index_accounts()
    assert "rebuilt the nearest-neighbour index of 1 account (left invalid or built with " in out
    [(hits_then, plans_then)] = as_its_replacement_is_built
    assert hits_then
    assert f'"{account_indexes.NEAREST.index_name(owner.pk)}"' in json.dumps(plans_then)
    [(hits_then, plans_then)] = as_the_old_is_dropped
    assert hits_then
    assert f'"{account_indexes.NEAREST.index_name(owner.pk)}"' in json.dumps(plans_then)
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}
    assert "m='8'" in definition(account_indexes.NEAREST, owner)
    assert index_accounts() == ""


def test_an_account_between_half_the_bound_and_the_bound_keeps_a_rebuilt_index(
    large_at_three, monkeypatch
):
    """Its index is kept (an account hovering at the bound does not lose and regain it in
    turn), so one built with other options is rebuilt, not dropped."""
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    with_pgvector_default_graph(owner)
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 5)
    assert "rebuilt the nearest-neighbour index of 1 account" in index_accounts()
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}
    assert account_indexes.WORDS.indexes() == {}  # 3 of 5: not large enough to get one


@pytest.mark.parametrize("suffix", ["_replacement", "_replaced"])
def test_a_rebuild_that_did_not_finish_leaves_nothing_behind(large_at_three, suffix):
    """A rebuild stopped before the swap leaves its replacement; one stopped after it, the index
    it replaced. The next sync drops either (and builds an index where none is left)."""
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    index_accounts()
    leftover = account_indexes.NEAREST.index_name(owner.pk) + suffix
    with connection.cursor() as cursor:
        cursor.execute(
            f"ALTER INDEX {account_indexes.NEAREST.index_name(owner.pk)} RENAME TO {leftover}"
        )
    assert account_indexes.NEAREST.indexes() == {}
    assert "built the nearest-neighbour index of 1 account in" in index_accounts()
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [leftover])
        assert cursor.fetchone()[0] is None


@pytest.fixture
def buried_lease(large_at_three, monkeypatch, settings):
    """An account whose only memory naming its landlord is older than the few most recent
    memories a search walks (two, here), and no model: it can be found by its words only (not
    by its topic's spelling either)."""
    settings.SEARCH_EMBEDDER = "none"
    patch_search(monkeypatch, "WALK_RECENT_MAX", 2)
    owner = UserFactory()
    old = bury_under_recent_notes(
        owner,
        memory_type="fact",
        content="The zeppelin hangar lease with Hindenburg Estates renews in March.",
    )
    return owner, old


def words_search(owner, query: str, limit: int = 5, **filters) -> tuple[list, bool]:
    """The hits of a search, and whether its words went through the account's words index."""
    through_index = []

    def spy(execute, sql, params, many, context):
        if "search_vector @@" in sql or "memory_recent_word_matches" in sql:
            through_index.append("memory_recent_word_matches" in sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        page = search_memories(
            owner_id=owner.pk, query=query, filters=clean_filters(**filters), limit=limit
        )
    return [hit.id for hit in page.hits], any(through_index)


def test_a_few_words_reach_past_the_walk_through_the_words_index(buried_lease):
    owner, old = buried_lease
    assert words_search(owner, "hindenburg") == ([], False)  # the walk reads the 2 most recent
    assert "built the words index of 1 account in" in index_accounts()
    assert account_indexes.WORDS.indexes() == {owner.pk: True}
    assert words_search(owner, "hindenburg") == ([old.id], True)
    assert words_search(owner, "hindenburg estates") == ([old.id], True)
    # The filters narrow what the index found.
    assert words_search(owner, "hindenburg", memory_types=["decision"]) == ([], True)
    assert words_search(owner, "hindenburg", memory_types=["fact"]) == ([old.id], True)
    before = (old.recorded_at + timedelta(seconds=1)).isoformat()
    assert words_search(owner, "hindenburg", recorded_before=before) == ([old.id], True)
    earlier = (old.recorded_at - timedelta(seconds=1)).isoformat()
    assert words_search(owner, "hindenburg", recorded_before=earlier) == ([], True)
    # The index holds current memories only: a search as of an instant walks.
    now = timezone.now().isoformat()
    assert words_search(owner, "hindenburg", as_of=now) == ([], False)


def test_the_words_index_applies_every_filter(buried_lease):
    """Each filter the words function applies itself, each to its own column."""
    owner, old = buried_lease
    mast = MemoryFactory(
        owner=owner,
        topic="Airship mooring mast",
        content="The mooring mast is inspected every spring.",
        scope="work",
        project="hangar",
        recorded_at=old.recorded_at,
    )
    # A project of the owner's without the word (one no memory has is NotFound: environment).
    MemoryFactory(owner=owner, topic="Doors", content="Painted blue.", project="work")
    index_accounts()
    assert words_search(owner, "airship", scope="work") == ([mast.id], True)
    assert words_search(owner, "airship", scope="personal") == ([], True)
    assert words_search(owner, "airship", project="hangar") == ([mast.id], True)
    assert words_search(owner, "airship", project="work") == ([], True)
    after = (mast.recorded_at - timedelta(seconds=1)).isoformat()
    assert words_search(owner, "airship", recorded_after=after) == ([mast.id], True)
    later = (mast.recorded_at + timedelta(seconds=1)).isoformat()
    assert words_search(owner, "airship", recorded_after=later) == ([], True)
    archive_memory(owner=owner, memory_id=str(mast.id))
    assert words_search(owner, "airship") == ([], True)
    assert words_search(owner, "airship", status="archived") == ([mast.id], True)


def walked(owner, query: str, **filters) -> tuple[list, list[int]]:
    """The hits of a search, and how many memories each of its walks might read."""
    walks = []

    def spy(execute, sql, params, many, context):
        if "LIMIT %(walk_max)s" in sql:
            walks.append(params["walk_max"])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        page = search_memories(owner_id=owner.pk, query=query, filters=clean_filters(**filters))
    return [hit.id for hit in page.hits], walks


def test_filters_walk_no_further_when_the_index_gave_every_match(buried_lease):
    """Under WORD_MATCHES_MAX matches, the index gave all there are: a walk could find no other,
    however few of them pass the filters."""
    owner, old = buried_lease
    index_accounts()
    # The probe of the most recent memories only.
    assert walked(owner, "hindenburg", memory_types=["fact"]) == (
        [old.id],
        [candidates.WORDS_PROBE_MAX],
    )


def test_a_few_words_common_among_the_most_recent_memories_are_walked_for(
    buried_lease, monkeypatch
):
    """The index reads every memory holding a term to find the most recent ones: for a term
    that many recent memories hold, walking those is cheaper, and finds the same."""
    owner, old = buried_lease
    called = MemoryFactory(owner=owner, memory_type="note", content="Hindenburg Estates called.")
    index_accounts()
    patch_search(monkeypatch, "WORDS_PROBE_MAX", 4)
    patch_search(monkeypatch, "WALK_RECENT_MAX", 10)
    # All four most recent memories hold "note": the most recent matches, without the index.
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 3)
    hits, through_index = words_search(owner, "note")
    assert not through_index and len(hits) == 3
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 300)
    # One of the four holds "hindenburg": one in WORDS_DENSE_SHARE at least, so the walk.
    patch_search(monkeypatch, "WORDS_DENSE_SHARE", 4)
    assert words_search(owner, "hindenburg") == ([called.id, old.id], False)
    # Fewer than that: rare enough for the index.
    patch_search(monkeypatch, "WORDS_DENSE_SHARE", 3)
    assert words_search(owner, "hindenburg") == ([called.id, old.id], True)


@pytest.fixture
def dense_among_the_most_recent(buried_lease, monkeypatch):
    """The buried lease's account, indexed, in which one of the four most recent memories names
    the landlord: a term that dense among the WORDS_PROBE_MAX (here four) most recent memories
    (one in WORDS_DENSE_SHARE, here four) is walked for."""
    owner, old = buried_lease
    called = MemoryFactory(owner=owner, memory_type="note", content="Hindenburg Estates called.")
    index_accounts()
    patch_search(monkeypatch, "WORDS_PROBE_MAX", 4)
    patch_search(monkeypatch, "WORDS_DENSE_SHARE", 4)
    patch_search(monkeypatch, "WALK_RECENT_MAX", 10)
    return owner, old, called


def test_a_few_words_dense_among_the_most_recent_memories_but_not_before_use_the_index(
    dense_among_the_most_recent, monkeypatch
):
    """A walk for terms that the most recent memories often hold stops at a bound: when older
    memories hold them seldom, the walk would read far to find its matches, and the index finds
    them instead."""
    owner, old, called = dense_among_the_most_recent
    # A walk of every memory finds both.
    patch_search(monkeypatch, "WORDS_DENSE_WALK_MAX", 10)
    assert words_search(owner, "hindenburg") == ([called.id, old.id], False)
    # A walk of the four most recent finds one, and the account holds more: the index.
    patch_search(monkeypatch, "WORDS_DENSE_WALK_MAX", 4)
    assert words_search(owner, "hindenburg") == ([called.id, old.id], True)


def test_a_dense_walk_that_finds_enough_matches_gives_them_without_the_index(
    dense_among_the_most_recent, monkeypatch
):
    """The walk's matches are the most recent ones: once it has enough, older ones are not
    looked for, however many memories it left unread."""
    owner, old, called = dense_among_the_most_recent
    wrote = MemoryFactory(
        owner=owner,
        content="Hindenburg Estates wrote about the rent.",
        recorded_at=old.recorded_at + timedelta(days=1),
    )
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 2)
    # The six most recent hold two: enough.
    patch_search(monkeypatch, "WORDS_DENSE_WALK_MAX", 6)
    assert words_search(owner, "hindenburg") == ([called.id, wrote.id], False)


def test_a_dense_walk_that_read_every_memory_of_the_types_and_dates_asked_for_is_enough(
    dense_among_the_most_recent, monkeypatch
):
    """When the walk read all the memories a filter leaves, the index has nothing more to find,
    however large the account."""
    owner, old, called = dense_among_the_most_recent
    # The five notes fit the walk; the account's six memories do not.
    patch_search(monkeypatch, "WORDS_DENSE_WALK_MAX", 5)
    assert words_search(owner, "hindenburg", memory_types=["note"]) == ([called.id], False)
    after = (old.recorded_at + timedelta(seconds=1)).isoformat()
    assert words_search(owner, "hindenburg", recorded_after=after) == ([called.id], False)
    # Without a filter, the walk left the oldest memory unread: the index finds it.
    assert words_search(owner, "hindenburg") == ([called.id, old.id], True)


def test_a_questions_rare_terms_reach_past_the_walk_through_the_words_index(buried_lease):
    """A question walks the most recent memories; what is distinctive in it (its terms that
    few of those hold) is looked up again through the index, however old."""
    owner, old = buried_lease
    question = "when does the zeppelin lease renew, who signs it, and what did the landlord say?"
    assert words_search(owner, question) == ([], False)  # the walk reads the 2 most recent
    index_accounts()
    assert words_search(owner, question) == ([old.id], True)


def test_a_questions_terms_common_among_the_recent_memories_are_not_looked_up_again(
    buried_lease, monkeypatch
):
    """The walk holds the most recent matches of the common terms; older ones are not read."""
    owner, old = buried_lease
    index_accounts()
    patch_search(monkeypatch, "RARE_TERM_HELD_MAX", 1)
    # Both memories the walk reads hold "recent", "unrelated" and "note"; none holds "zeppelin".
    hits, through_index = words_search(owner, "recent unrelated note zeppelin")
    assert through_index
    assert old.id in hits
    assert sorted(topic_of(hit) for hit in hits) == [
        "Recent note 2",
        "Recent note 3",
        "Zeppelin hangar lease",
    ]


def test_each_rare_term_is_looked_up_on_its_own(buried_lease, monkeypatch):
    """A term with many recent matches beyond the walk does not crowd out another's older one."""
    owner, old = buried_lease
    for n in range(12):
        MemoryFactory(
            owner=owner,
            topic=f"Mooring {n}",
            content=f"Mooring fee paid for bay {n}.",
            recorded_at=old.recorded_at + timedelta(days=1, minutes=n),
        )
    index_accounts()
    patch_search(monkeypatch, "RARE_TERM_CANDIDATES", 5)
    hits, through_index = words_search(owner, "hindenburg estates mooring fees?", limit=25)
    assert through_index
    assert old.id in hits
    # The sample bound is set for those lookups alone.
    with connection.cursor() as cursor:
        cursor.execute("SHOW gin_fuzzy_search_limit")
        assert cursor.fetchone()[0] == "0"
    # With a thread filter (of a thread larger than a walk reads whole): those in the thread
    # among each term's most recent matches.
    patch_search(monkeypatch, "THREAD_READ_BY_MEMBER_MAX", 0)
    create_thread(owner=owner, name="lease")
    add_thread_members(owner=owner, name="lease", memory_ids=[str(old.id)])
    hits, through_index = words_search(owner, "hindenburg estates mooring fees?", thread="lease")
    assert (hits, through_index) == ([old.id], True)


def test_without_a_words_index_a_questions_rare_terms_are_walked_for_again(
    buried_lease, monkeypatch
):
    """In an account without a words index, when the walk stopped at LEXICAL_CANDIDATES
    matches, a walk for the rare terms alone reads further back."""
    owner, old = buried_lease
    patch_search(monkeypatch, "WALK_RECENT_MAX", 10)
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 2)
    patch_search(monkeypatch, "RARE_TERM_HELD_MAX", 1)
    hits, through_index = words_search(owner, "recent unrelated note zeppelin")
    assert not through_index
    assert old.id in hits
    assert sorted(topic_of(hit) for hit in hits) == [
        "Recent note 2",
        "Recent note 3",
        "Zeppelin hangar lease",
    ]


def test_a_question_in_an_account_larger_than_the_walk_walks_fewer_memories(
    large_at_three, monkeypatch
):
    """In an account larger than the longest walk, a question about something the recent
    memories seldom name (or never stored) reads at most SHORT_WALK_MAX of them: the words index
    finds its rare terms' older matches. A filter that may leave a small share of what the walk
    read keeps the longer walk, and so does an account the longer walk reads whole."""
    owner = UserFactory()
    old = remember(owner, "Hangar lease", "The lease with Hindenburg Estates renews in March.")
    for n in range(4):
        record_memory(owner=owner, memory_type="note", topic=f"Note {n}", content=f"Unrelated {n}.")
    record_memory(
        owner=owner, memory_type="note", topic="Doors", content="Painted blue.", project="hangar"
    )
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)  # of the account's six memories
    patch_search(monkeypatch, "SHORT_WALK_MAX", 3)
    question = "when does the lease with hindenburg estates renew?"
    assert walked(owner, question)[1] == [5]  # no indexes yet
    index_accounts()
    # The three most recent memories hold none of its terms; the lease is found.
    assert walked(owner, question) == ([old.id], [3])
    assert walked(owner, question, status="any") == ([old.id], [3])
    assert walked(owner, question, status="archived") == ([], [5])
    # Dates, and the filter that chooses which memories a walk reads (types, a project, a
    # scope), cost it nothing; a filter applied to what it read keeps the longer walk: a scope
    # beside a type, a project as of an instant.
    assert walked(owner, question, memory_types=["fact"]) == ([old.id], [3])
    before = timezone.now().isoformat()
    assert walked(owner, question, recorded_before=before) == ([old.id], [3])
    assert walked(owner, question, project="hangar") == ([], [3])
    assert walked(owner, question, scope="personal") == ([old.id], [3])
    assert walked(owner, question, scope="personal", memory_types=["fact"]) == ([old.id], [5])
    assert walked(owner, question, project="hangar", memory_types=["note"]) == ([], [5])
    assert walked(owner, question, project="hangar", as_of=before) == ([], [5])
    # Resolved commitments are walked newest recorded first, not newest resolved.
    assert walked(owner, question, resolved_after=before) == ([], [5])
    patch_search(monkeypatch, "WALK_RECENT_MAX", 6)
    assert walked(owner, question) == ([old.id], [6])


def test_a_questions_later_page_walks_as_many_memories_as_its_first(large_at_three, monkeypatch):
    """Which walk a question gets follows the count of the account's nearest-neighbour index,
    which ANALYZE and VACUUM move (and an account that grows past the bound crosses it): a later
    page walked as far as the count then said, and skipped the hits of the memories the first
    page's walk had read and its own did not."""
    owner = UserFactory()
    for n in range(5):
        record_memory(
            owner=owner, memory_type="note", topic=f"Drill {n}", content=f"Fire drill {n} at noon."
        )
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    patch_search(monkeypatch, "SHORT_WALK_MAX", 3)
    index_accounts()
    # A phrase: no memory is a candidate by meaning alone, only what the walk reads.
    question = '"fire drill" at noon today'
    every = search_memories(owner_id=owner.pk, query=question, filters=clean_filters(), limit=10)
    assert len(every.hits) == 5
    first = search_memories(owner_id=owner.pk, query=question, filters=clean_filters(), limit=1)
    for n in range(3):
        record_memory(owner=owner, memory_type="note", topic=f"Other {n}", content=f"Note {n}.")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")  # the index counts 8 now: more than the walk
    rest = search_memories(
        owner_id=owner.pk,
        query=question,
        filters=clean_filters(),
        limit=10,
        cursor=first.next_cursor,
    )
    assert [hit.id for hit in first.hits + rest.hits] == [hit.id for hit in every.hits]


def topic_of(memory_id) -> str:
    return Memory.objects.get(pk=memory_id).topic


def test_index_accounts_waits_for_a_running_embed_memories(large_at_three):
    owner = UserFactory()
    for topic, content in NOTES[:3]:
        remember(owner, topic, content)
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [backfill._RUN_LOCK])
        with pytest.raises(CommandError, match="embed_memories or index_accounts is running"):
            index_accounts()
    assert account_indexes.NEAREST.indexes() == {}
    index_accounts()
    assert account_indexes.NEAREST.indexes() == {owner.pk: True}


def test_index_accounts_configured_for_a_transaction_pooler_is_refused(large_at_three, settings):
    """CREATE INDEX CONCURRENTLY and the lock it holds need a session of their own."""
    large = UserFactory()
    for topic, content in NOTES[:3]:
        remember(large, topic, content)
    settings.DATABASE_TRANSACTION_POOLER = True
    with pytest.raises(CommandError, match="DATABASE_TRANSACTION_POOLER=0, not through PgBouncer"):
        index_accounts()
    assert account_indexes.NEAREST.indexes() == {}


def test_filters_reach_past_the_words_index_s_most_recent_matches(buried_lease, monkeypatch):
    """The index applies the filters, phrases and exclusions to all its matches, before it keeps
    the most recent; a thread (which it does not know) narrows those it kept, and when too few
    are left the walk looks among older ones too, as without the index."""
    owner, old = buried_lease
    newer = MemoryFactory(owner=owner, memory_type="note", content="Hindenburg Estates called.")
    thread = create_thread(owner=owner, name="hangar")
    add_thread_members(owner=owner, name=thread.name, memory_ids=[old.id])
    index_accounts()
    patch_search(monkeypatch, "WORD_MATCHES_MAX", 1)
    patch_search(monkeypatch, "WALK_RECENT_MAX", 10)
    assert words_search(owner, "hindenburg") == ([newer.id, old.id], True)
    assert words_search(owner, "hindenburg", memory_types=["fact"]) == ([old.id], True)
    assert words_search(owner, "hindenburg -called") == ([old.id], True)
    before = (newer.recorded_at - timedelta(microseconds=1)).isoformat()
    assert words_search(owner, "hindenburg", recorded_before=before) == ([old.id], True)
    # With a thread (larger than a walk reads whole), the index keeps its WORD_MATCHES_MAX most
    # recent matches (here the newer one, not in it), and the walk finds the older one that is.
    patch_search(monkeypatch, "THREAD_READ_BY_MEMBER_MAX", 0)
    assert words_search(owner, "hindenburg", thread="hangar") == ([old.id], True)
