"""The meaning of a memory: a unit vector written with the row by the services, filled in later
by `manage.py embed_memories` where a row has none, rewritten only by clearing it first, and
computed by the model SEARCH_EMBEDDER names (memories/embedding.py, memories/backfill.py)."""

from __future__ import annotations

import importlib
import io
import json
import time

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection

from accounts.erasure import erase_account
from memories import account_indexes, backfill
from memories.embedding import EMBEDDING_DIMENSIONS, _embedder_for, get_embedder
from memories.management.maintenance import check_memory_size
from memories.models import StoredVectors
from memories.search import clean_filters, search_memories
from memories.services import record_memory, revise_memory
from tests.factories import MemoryFactory, UserFactory, embed
from tests.memories.conftest import mark_invalid


def stored_vector(memory) -> np.ndarray | None:
    """The vector in the row, read with raw SQL (the ORM defers the column)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding::text FROM memories_memory WHERE owner_id = %s AND id = %s",
            [memory.owner_id, memory.id],
        )
        (text,) = cursor.fetchone()
    return None if text is None else np.array(json.loads(text))


def stands_for(vector: np.ndarray | None, memory) -> bool:
    """Whether `vector` is the one the model gives the memory's text (to float32 precision)."""
    return vector is not None and np.allclose(vector, embed(memory), atol=1e-6)


def run_backfill(*args: str) -> str:
    out = io.StringIO()
    call_command("embed_memories", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def index_oids() -> dict[int, int]:
    """Owner id -> the oid of that account's nearest-neighbour index."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT owner_id, to_regclass('memory_nearest_' || owner_id)::oid"
            " FROM (SELECT DISTINCT owner_id FROM memories_memory) o"
        )
        return {owner: oid for owner, oid in cursor.fetchall() if oid is not None}


@pytest.fixture
def search_embedder(settings):
    """Sets SEARCH_EMBEDDER for one test; the models loaded meanwhile are forgotten after it."""

    def use(value: str) -> None:
        settings.SEARCH_EMBEDDER = value

    yield use
    _embedder_for.cache_clear()


# --- written with the row ------------------------------------------------------------------


def test_remember_stores_a_unit_vector_of_the_memorys_text(tenant):
    memory = record_memory(
        owner=tenant,
        memory_type="preference",
        topic="Editor",
        content="Prefers Neovim with a dark theme.",
        tags=["tools"],
        project="threengram",
    )
    vector = stored_vector(memory)
    assert vector.shape == (EMBEDDING_DIMENSIONS,)
    assert np.linalg.norm(vector) == pytest.approx(1, abs=1e-5)
    assert stands_for(vector, memory)


def test_a_revision_gets_the_vector_of_its_own_text_and_the_old_one_keeps_its_own(tenant):
    first = record_memory(
        owner=tenant, memory_type="fact", topic="Lunch", content="Pizza on Fridays"
    )
    second = revise_memory(owner=tenant, predecessor_id=first.id, content="Sushi on Thursdays")
    assert stands_for(stored_vector(second), second)
    assert stands_for(stored_vector(first), first)
    assert not np.allclose(stored_vector(first), stored_vector(second))


def test_a_server_writes_no_vector_of_another_model_than_the_stored_ones(tenant):
    """A server process whose SEARCH_EMBEDDER is not the stored vectors' model (restarted with a
    new one before `embed_memories --reembed`, or one still running the old one during it)
    would add vectors no search can compare with the others, and which no fill replaces: its
    memories are stored without one, for the fill of the table's model to give them theirs."""
    StoredVectors.record("sentence-transformers:/models/retired")
    first = record_memory(
        owner=tenant, memory_type="fact", topic="Lunch", content="Pizza on Fridays"
    )
    second = revise_memory(owner=tenant, predecessor_id=first.id, content="Sushi on Thursdays")
    assert stored_vector(first) is None and stored_vector(second) is None
    assert backfill.count_missing() == 2
    StoredVectors.record("wordllama")
    third = record_memory(owner=tenant, memory_type="fact", topic="Tea", content="Green tea")
    assert stands_for(stored_vector(third), third)


# --- the backfill --------------------------------------------------------------------------


@pytest.fixture
def unembedded(account_indexes_dropped, monkeypatch):
    """Memories of two tenants stored without a vector, and an erased tenant's memory; an
    account of three memories counts as large, so the two get a nearest-neighbour index each."""
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 3)
    memories = [
        MemoryFactory(owner=owner, topic=f"topic {n}", content=f"{owner.username} note {n}")
        for owner in (UserFactory(), UserFactory())
        for n in range(3)
    ]
    erased = MemoryFactory(content="gone soon")
    erase_account(user=erased.owner)
    return memories, erased


def test_the_backfill_gives_every_memory_the_vector_remember_would_have(unembedded):
    memories, erased = unembedded
    out = run_backfill()
    assert "embedded 6 memories with wordllama" in out
    assert all(stands_for(stored_vector(memory), memory) for memory in memories)
    # An erased memory gets none: it would stand for the erased text, or for nothing.
    assert stored_vector(erased) is None
    assert account_indexes.NEAREST.indexes() == {memory.owner_id: True for memory in memories}
    assert "built the nearest-neighbour index of 2 accounts" in out


def test_a_second_run_changes_nothing_and_says_so(unembedded):
    memories, _ = unembedded
    run_backfill()
    before = [stored_vector(memory) for memory in memories]
    oids = index_oids()
    assert run_backfill() == "nothing to embed: every memory that is not erased has a vector\n"
    assert all(np.array_equal(stored_vector(m), v) for m, v in zip(memories, before, strict=True))
    assert index_oids() == oids


def test_a_run_that_dies_midway_keeps_its_batches_and_the_next_run_finishes(
    unembedded, monkeypatch
):
    memories, _ = unembedded
    model = get_embedder()

    class DiesOnSecondBatch:
        name = model.name
        calls = 0

        def embed(self, texts):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("killed")
            return model.embed(texts)

    command = "memories.management.commands.embed_memories"
    monkeypatch.setattr(f"{command}.get_embedder", DiesOnSecondBatch)
    with pytest.raises(RuntimeError, match="killed"):
        run_backfill("--batch-size=2")
    assert sum(stored_vector(memory) is not None for memory in memories) == 2

    monkeypatch.setattr(f"{command}.get_embedder", get_embedder)
    assert "embedded 4 memories" in run_backfill("--batch-size=2")
    assert all(stands_for(stored_vector(memory), memory) for memory in memories)
    # The indexes, which the run that died never reached, are built.
    assert account_indexes.NEAREST.indexes() == {memory.owner_id: True for memory in memories}


def test_a_vector_the_server_writes_meanwhile_is_kept(unembedded, monkeypatch):
    memories, _ = unembedded
    model = get_embedder()
    raced = memories[0]
    theirs = np.eye(EMBEDDING_DIMENSIONS)[0]

    class ServerWritesFirst:
        """Between the backfill's read and its write, a server process embeds one row."""

        name = model.name

        def embed(self, texts):
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE memories_memory SET embedding = %s::vector "
                    "WHERE owner_id = %s AND id = %s AND embedding IS NULL",
                    [str(theirs.tolist()), raced.owner_id, raced.id],
                )
            return model.embed(texts)

    monkeypatch.setattr(
        "memories.management.commands.embed_memories.get_embedder", ServerWritesFirst
    )
    out = run_backfill()
    assert "embedded 5 memories" in out and "kept 1 vector the server wrote meanwhile" in out
    assert np.allclose(stored_vector(raced), theirs)
    assert all(stands_for(stored_vector(memory), memory) for memory in memories[1:])


def test_an_account_erased_between_the_read_and_the_write_gets_no_vector(unembedded, monkeypatch):
    memories, _ = unembedded
    model = get_embedder()
    erased_owner = memories[0].owner

    class ErasureLandsFirst:
        """Between the backfill's read and its write, the first tenant's account is erased."""

        name = model.name

        def embed(self, texts):
            erase_account(user=erased_owner)
            return model.embed(texts)

    monkeypatch.setattr(
        "memories.management.commands.embed_memories.get_embedder", ErasureLandsFirst
    )
    out = run_backfill()
    # Said as it happened: no server wrote a vector, the erasure emptied the rows.
    assert "embedded 3 memories" in out and "skipped 3 memories erased meanwhile" in out
    assert "kept" not in out
    for memory in memories:
        erased = memory.owner_id == erased_owner.pk
        assert (stored_vector(memory) is None) is erased
    assert backfill.count_missing() == 0


def test_a_maintenance_memory_size_that_is_not_one_is_refused(db):
    with pytest.raises(CommandError, match="--maintenance-work-mem must be a PostgreSQL memory"):
        call_command("embed_memories", "--maintenance-work-mem=lots")


@pytest.mark.parametrize("size", ["1kB", "63", "4TB", "2147483648kB"])
@pytest.mark.parametrize("command", ["embed_memories", "index_accounts"])
def test_a_maintenance_memory_size_postgresql_refuses_is_refused_naming_its_range(
    db, command, size
):
    with pytest.raises(CommandError, match="--maintenance-work-mem must be from 64kB"):
        call_command(command, f"--maintenance-work-mem={size}")


def test_the_largest_maintenance_memory_size_is_accepted():
    check_memory_size("2147483647kB")
    check_memory_size("64kB")


def test_reembed_replaces_every_vector_of_another_model(transactional_db):
    # Vectors from another model: unrelated to the text, as far as this model is concerned.
    memories = [
        MemoryFactory(content=f"stored under another model {n}", embedding=np.eye(256)[n])
        for n in range(3)
    ]
    StoredVectors.record("sentence-transformers:/models/retired")
    out = run_backfill("--reembed")
    assert "cleared 3 vectors" in out and "embedded 3 memories" in out
    assert all(stands_for(stored_vector(memory), memory) for memory in memories)
    assert StoredVectors.embedder_in_use() == "wordllama"  # searches compare with them again


@pytest.mark.parametrize(("running", "recorded"), [("wordllama", "wordllama"), ("none", None)])
def test_an_installation_upgraded_records_the_model_it_runs_with(db, settings, running, recorded):
    """Migration 0019: the vectors an installation already holds are its running model's; one
    running without a model records none (not known, taken to be the next one's)."""
    from django.apps import apps

    migration = importlib.import_module("memories.migrations.0019_stored_vectors")
    StoredVectors.objects.all().delete()
    settings.SEARCH_EMBEDDER = running
    migration.record_the_running_model(apps, None)
    assert StoredVectors.embedder_in_use() == recorded


def test_a_fill_adds_no_vector_of_another_model_than_the_stored_ones(unembedded):
    """A run without --reembed after SEARCH_EMBEDDER changed would mix two models' vectors,
    which no search can compare: it is refused before anything changes, naming both."""
    StoredVectors.record("sentence-transformers:/models/retired")
    with pytest.raises(
        CommandError,
        match=r"made by sentence-transformers:/models/retired, and "
        r"SEARCH_EMBEDDER is wordllama.*--reembed",
    ):
        run_backfill()
    memories, _ = unembedded
    assert all(stored_vector(memory) is None for memory in memories)


def test_the_indexes_are_rebuilt_for_a_large_fill_and_kept_for_a_small_one(unembedded):
    memories, _ = unembedded
    run_backfill()
    built = index_oids()
    assert len(built) == 2
    MemoryFactory(owner=memories[0].owner, content="one more, stored without a vector")
    assert "embedded 1 memory" in run_backfill()
    assert index_oids() == built
    out = run_backfill("--reembed")  # every vector again: dropped first, built anew at the end
    assert "dropped the nearest-neighbour index of 2 accounts for the fill" in out
    rebuilt = index_oids()
    assert rebuilt.keys() == built.keys()
    assert all(rebuilt[owner] != built[owner] for owner in built)


def test_a_fill_rebuilds_only_the_indexes_it_would_at_least_double(unembedded):
    memories, _ = unembedded
    run_backfill()
    built = index_oids()
    grown, other = memories[0].owner, memories[3].owner
    for n in range(3):
        MemoryFactory(owner=grown, content=f"stored without a vector {n}")
    out = run_backfill()
    assert "embedded 3 memories" in out
    assert "dropped the nearest-neighbour index of 1 account for the fill" in out
    assert index_oids()[grown.pk] != built[grown.pk]
    assert index_oids()[other.pk] == built[other.pk]


def test_keep_index_drops_no_index_that_serves_searches(unembedded):
    memories, _ = unembedded
    run_backfill()
    oids = index_oids()
    out = run_backfill("--reembed", "--keep-index")
    assert "embedded 6 memories" in out and "index" not in out
    assert index_oids() == oids
    assert all(stands_for(stored_vector(memory), memory) for memory in memories)


def with_pgvector_default_graph(owner_id: int) -> None:
    """The account's nearest-neighbour index as an earlier release built it: with pgvector's
    default graph parameters."""
    account_indexes.NEAREST.drop(owner_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX {account_indexes.NEAREST.index_name(owner_id)} ON memories_memory "
            "USING hnsw (embedding vector_cosine_ops) "
            f"WHERE owner_id = {owner_id} AND valid_to IS NULL"
        )


def test_an_index_of_other_parameters_is_dropped_for_a_fill_into_it_and_else_rebuilt(
    unembedded,
):
    memories, _ = unembedded
    run_backfill()
    filled, untouched = memories[0].owner, memories[3].owner
    for owner in (filled, untouched):
        with_pgvector_default_graph(owner.pk)
    old = index_oids()
    MemoryFactory(owner=filled, content="one more, stored without a vector")
    out = run_backfill()
    # The one the fill writes into is rebuilt after the fill anyway: dropped before it. The
    # other is rebuilt beside itself, serving searches until then.
    assert "dropped the nearest-neighbour index of 1 account for the fill" in out
    assert "built the nearest-neighbour index of 1 account in" in out
    assert "rebuilt the nearest-neighbour index of 1 account (left invalid or built" in out
    assert account_indexes.NEAREST.indexes() == {filled.pk: True, untouched.pk: True}
    assert index_oids()[filled.pk] != old[filled.pk]
    assert index_oids()[untouched.pk] != old[untouched.pk]


def test_keep_index_keeps_an_index_of_other_parameters_until_it_is_rebuilt_beside_it(
    unembedded,
):
    memories, _ = unembedded
    run_backfill()
    owner = memories[0].owner
    with_pgvector_default_graph(owner.pk)
    MemoryFactory(owner=owner, content="one more, stored without a vector")
    out = run_backfill("--keep-index")
    assert "embedded 1 memory" in out and "dropped" not in out
    assert "rebuilt the nearest-neighbour index of 1 account (left invalid or built" in out
    assert account_indexes.NEAREST.indexes() == {owner.pk: True, memories[3].owner_id: True}


def test_keep_index_drops_an_invalid_index_the_fill_writes_into_and_no_other(unembedded):
    memories, _ = unembedded
    run_backfill()
    filled, untouched = memories[0].owner, memories[3].owner
    mark_invalid(account_indexes.NEAREST, [filled.pk, untouched.pk])
    old = index_oids()
    MemoryFactory(owner=filled, content="one more, stored without a vector")
    out = run_backfill("--keep-index")
    # It serves no search: writing into it row by row would only slow the fill.
    assert "dropped the nearest-neighbour index of 1 account for the fill" in out
    assert "built the nearest-neighbour index of 1 account in" in out
    assert "rebuilt the nearest-neighbour index of 1 account (left invalid or built" in out
    assert account_indexes.NEAREST.indexes() == {filled.pk: True, untouched.pk: True}
    assert index_oids()[filled.pk] != old[filled.pk]
    assert index_oids()[untouched.pk] != old[untouched.pk]


def test_the_fill_keeps_the_index_of_an_account_too_small_to_get_a_new_one(unembedded, monkeypatch):
    """An account keeps its index down to half the size at which it gets one: the fill does
    not drop the index of an account under that size, which nothing would build again."""
    memories, _ = unembedded
    run_backfill()
    oids = index_oids()
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 6)
    out = run_backfill("--reembed")
    assert "embedded 6 memories" in out and "dropped" not in out and "built" not in out
    assert account_indexes.NEAREST.indexes() == {m.owner_id: True for m in memories}
    assert index_oids() == oids


def test_the_fill_first_drops_an_index_that_the_end_would_drop(unembedded, monkeypatch):
    """An account under half the size at which it gets an index loses its index at the end of
    a run: the fill does not write into it first."""
    memories, _ = unembedded
    run_backfill()
    MemoryFactory(owner=memories[0].owner, content="one more, stored without a vector")
    monkeypatch.setattr("memories.account_indexes.LARGE_ACCOUNT_MIN", 10)
    out = run_backfill()
    assert "dropped the nearest-neighbour index of 1 account for the fill" in out
    assert account_indexes.NEAREST.indexes() == {}


def test_without_a_model_the_command_refuses_before_clearing_anything(tenant, search_embedder):
    kept = MemoryFactory(owner=tenant, embedded=True)
    vector = stored_vector(kept)
    search_embedder("none")
    with pytest.raises(CommandError, match="SEARCH_EMBEDDER is 'none'"):
        call_command("embed_memories", "--reembed")
    assert np.array_equal(stored_vector(kept), vector)


@pytest.mark.parametrize("size", [0, 2**63])
def test_a_batch_size_out_of_range_is_refused(account_indexes_dropped, size):
    MemoryFactory()  # a memory without a vector: the fill would run
    with pytest.raises(CommandError, match="--batch-size must be between 1 and 100000"):
        call_command("embed_memories", f"--batch-size={size}")


def test_a_second_run_while_one_is_going_is_refused(unembedded):
    import psycopg

    memories, _ = unembedded
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [backfill._RUN_LOCK])
        assert _advisory_lock_held(backfill._RUN_LOCK)
        with pytest.raises(CommandError, match="embed_memories or index_accounts is running"):
            run_backfill()
        assert all(stored_vector(memory) is None for memory in memories)
    # The other session ended: its lock goes with it, once its server process has exited (which
    # a loaded machine may take a moment to finish after the client closed).
    deadline = time.monotonic() + 10
    while _advisory_lock_held(backfill._RUN_LOCK) and time.monotonic() < deadline:
        time.sleep(0.05)
    run_backfill()
    assert all(stored_vector(memory) is not None for memory in memories)


def _advisory_lock_held(key: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
            " AND ((classid::bigint << 32) | objid::bigint) = %s)",
            [key],
        )
        return cursor.fetchone()[0]


def test_a_run_configured_for_a_transaction_pooler_is_refused(unembedded, settings):
    """Its lock and its settings belong to its session, which PgBouncer in transaction mode
    hands to other clients between transactions."""
    memories, _ = unembedded
    settings.DATABASE_TRANSACTION_POOLER = True
    with pytest.raises(CommandError, match="DATABASE_TRANSACTION_POOLER=0, not through PgBouncer"):
        run_backfill()
    assert all(stored_vector(memory) is None for memory in memories)


# --- the model: SEARCH_EMBEDDER ------------------------------------------------------------


def test_with_no_model_memories_are_stored_without_a_vector_and_found_by_words(
    tenant, search_embedder
):
    search_embedder("none")
    memory = record_memory(
        owner=tenant, memory_type="fact", topic="Coffee", content="The café serves espresso"
    )
    assert stored_vector(memory) is None
    page = search_memories(owner_id=tenant.pk, query="espresso", filters=clean_filters(), limit=5)
    assert [hit.id for hit in page.hits] == [memory.id]
    assert page.hits[0].matched_by == ("words",)


@pytest.mark.parametrize("spec", ["word2vec", "none:words", "wordllama:large"])
def test_an_unknown_model_is_a_configuration_error_naming_the_setting(search_embedder, spec):
    search_embedder(spec)
    with pytest.raises(ImproperlyConfigured, match=f"SEARCH_EMBEDDER='{spec}'"):
        get_embedder()


def test_a_sentence_transformers_model_from_a_local_folder(tenant, search_embedder, tmp_path):
    """A model an operator keeps on disk: here a tiny static one, made and saved offline. Its
    8-wide vectors are padded to the column's width and scaled to unit length."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "coffee", "espresso", "tea", "deploy", "tuesday"]
    tokenizer = Tokenizer(models.WordLevel({w: n for n, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    weights = np.random.default_rng(0).standard_normal((len(words), 8)).astype(np.float32)
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)])
    model.save(str(tmp_path))

    search_embedder(f"sentence-transformers:{tmp_path}")
    assert get_embedder().name == f"sentence-transformers:{tmp_path}"
    StoredVectors.record(get_embedder().name)  # the table's model, as after --reembed
    memory = record_memory(owner=tenant, memory_type="fact", topic="coffee", content="espresso")
    vector = stored_vector(memory)
    assert np.linalg.norm(vector) == pytest.approx(1, abs=1e-5)
    assert vector[:8].any() and not vector[8:].any()
