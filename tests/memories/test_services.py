"""The lifecycle rules of the append-only Memory: record_memory, revise_memory, archive_memory,
resolve_commitment, and the tenant boundary on every one of them."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories import models
from memories.bounds import EARLIEST_INSTANT, LATEST_INSTANT
from memories.errors import Conflict, DuplicateMemory, InvalidInput, InvalidTransition, NotFound
from memories.models import Memory
from memories.services import (
    archive_memory,
    record_memory,
    resolve_commitment,
    revise_memory,
)
from tests.factories import MemoryFactory, insert_commitment_due_at
from tests.memories.conftest import as_never_analyzed

SUBSTANCE = (
    "content",
    "content_length",
    "memory_type",
    "topic",
    "scope",
    "project",
    "tags",
    "recorded_at",
)


def commitment_to_ship(owner):
    """A commitment with every optional field set (project, tags, a due date in 3 days)."""
    return record_memory(
        owner=owner,
        memory_type="commitment",
        topic="ship",
        content="Ship v2.",
        project="atlas",
        tags=["release"],
        due_at=timezone.now() + timedelta(days=3),
    )


def substance(memory):
    memory.refresh_from_db()
    return {name: getattr(memory, name) for name in SUBSTANCE}


class TestRemember:
    def test_stores_a_memory_with_a_uuid7_id(self, tenant):
        memory = record_memory(
            owner=tenant, memory_type="decision", topic="db", content="Use PostgreSQL"
        )
        assert memory.id.version == 7
        assert memory.owner == tenant and memory.status == "active" and memory.valid_to is None
        assert memory.commitment_status is None
        assert memory.resource_uri == f"threengram://memory/{memory.id}"

    def test_ids_are_unique_and_not_sequential(self, tenant):
        ids = [
            record_memory(owner=tenant, memory_type="note", topic="t", content=f"n{i}").id
            for i in range(20)
        ]
        assert len(set(ids)) == 20
        assert len({memory_id.int & ((1 << 62) - 1) for memory_id in ids}) == 20  # random tails

    def test_a_commitment_starts_open(self, tenant):
        memory = record_memory(
            owner=tenant, memory_type="commitment", topic="t", content="Send the report"
        )
        assert memory.commitment_status == "open"

    def test_same_live_content_is_a_duplicate(self, tenant):
        first = record_memory(owner=tenant, memory_type="note", topic="a", content="Same words")
        with pytest.raises(DuplicateMemory) as error:
            record_memory(owner=tenant, memory_type="fact", topic="b", content="  Same words ")
        assert error.value.existing_id == first.id
        assert str(error.value).startswith("duplicate_memory:")
        assert Memory.objects.count() == 1

    def test_a_duplicate_of_an_archived_memory_says_where_it_went(self, tenant):
        first = record_memory(owner=tenant, memory_type="note", topic="a", content="Same words")
        archive_memory(owner=tenant, memory_id=first.id)
        with pytest.raises(DuplicateMemory) as error:
            record_memory(owner=tenant, memory_type="note", topic="b", content="Same words")
        assert str(error.value) == (
            f"duplicate_memory: the same content is already stored as memory {first.id} "
            "(archived: search with status 'archived' finds it; revise it to use it again)"
        )

    def test_duplicates_are_per_tenant(self, tenant, other_tenant):
        record_memory(owner=tenant, memory_type="note", topic="a", content="Same words")
        record_memory(owner=other_tenant, memory_type="note", topic="a", content="Same words")
        assert Memory.objects.count() == 2

    def test_superseded_content_may_be_stored_again(self, tenant):
        first = record_memory(owner=tenant, memory_type="note", topic="a", content="v1")
        revise_memory(owner=tenant, predecessor_id=first.id, content="v2")
        assert (
            record_memory(owner=tenant, memory_type="note", topic="a", content="v1").id != first.id
        )

    def test_an_inactive_account_cannot_write(self, tenant):
        tenant.is_active = False
        tenant.save()
        with pytest.raises(Exception, match="account_inactive"):
            record_memory(owner=tenant, memory_type="note", topic="a", content="x")
        assert not Memory.objects.exists()


class TestRevise:
    def test_closes_the_predecessor_and_inserts_a_successor(self, tenant):
        old = record_memory(
            owner=tenant, memory_type="decision", topic="db", content="Use MySQL", tags=["infra"]
        )
        before = substance(old)
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="Use PostgreSQL")
        old.refresh_from_db()
        assert new.id != old.id
        assert new.predecessor_id == old.id and list(old.successors.all()) == [new]
        assert old.valid_to == new.recorded_at
        assert substance(old) == before  # the predecessor's substance is untouched
        assert (new.topic, new.memory_type, new.tags, new.content) == (
            "db",
            "decision",
            ["infra"],
            "Use PostgreSQL",
        )

    def test_given_fields_replace_inherited_ones(self, tenant):
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="x", project="p1")
        new = revise_memory(
            owner=tenant, predecessor_id=old.id, content="y", topic="b", project=None, tags=["t"]
        )
        assert (new.topic, new.project, new.tags) == ("b", None, ["t"])

    def test_none_empties_a_due_date_project_or_tags_and_is_refused_for_the_rest(self, tenant):
        """A dropped deadline, a memory of no project after all, tags that no longer apply: None
        empties each. A type, a topic and a scope every memory has: None for one was read as a
        default (scope) or refused as a wrong value; now it is refused by name, nothing written."""
        old = commitment_to_ship(tenant)
        new = revise_memory(
            owner=tenant, predecessor_id=old.id, content="Ship v2.", due_at=None, project=None
        )
        assert (new.due_at, new.project, new.tags) == (None, None, ["release"])
        untagged = revise_memory(owner=tenant, predecessor_id=new.id, content="v3", tags=None)
        assert untagged.tags == [] and untagged.commitment_status == "open"
        for keyword, field in (
            ("memory_type", "memoryType"),
            ("topic", "topic"),
            ("scope", "scope"),
        ):
            with pytest.raises(InvalidInput) as refused:
                revise_memory(
                    owner=tenant, predecessor_id=untagged.id, content="v4", **{keyword: None}
                )
            assert str(refused.value) == (
                f"invalid_input: {field}: cannot be cleared: every memory has one; leave it out "
                "to keep it as it is"
            )
        assert Memory.objects.filter(owner=tenant, valid_to=None).get() == untagged

    def test_revising_a_superseded_memory_is_a_conflict_naming_the_newest_revision(self, tenant):
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="v1")
        middle = revise_memory(owner=tenant, predecessor_id=old.id, content="v2")
        newest = revise_memory(owner=tenant, predecessor_id=middle.id, content="v3")
        with pytest.raises(Conflict) as raised:
            revise_memory(owner=tenant, predecessor_id=old.id, content="v4")
        assert str(raised.value) == (
            f"conflict: memory {old.id} is already superseded by {newest.id}; revise {newest.id}"
        )
        assert Memory.objects.count() == 3

    @pytest.mark.parametrize("action", ["archive", "resolve"])
    def test_a_lifecycle_move_of_a_superseded_memory_names_the_one_to_move(self, tenant, action):
        old = record_memory(owner=tenant, memory_type="commitment", topic="a", content="v1")
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="v2")
        with pytest.raises(Conflict) as raised:
            if action == "archive":
                archive_memory(owner=tenant, memory_id=old.id)
            else:
                resolve_commitment(owner=tenant, memory_id=old.id, status="resolved")
        assert str(raised.value) == (
            f"conflict: memory {old.id} is already superseded by {new.id}; {action} {new.id}"
        )

    def test_resolving_a_note_revised_into_a_commitment_names_the_commitment(self, tenant):
        """What the old version was matters less than what its newest revision is: the agent
        holding a note's id is sent to the commitment it became, not told to archive or revise
        a version that no longer can be."""
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="v1")
        new = revise_memory(
            owner=tenant, predecessor_id=old.id, content="v2", memory_type="commitment"
        )
        with pytest.raises(Conflict) as raised:
            resolve_commitment(owner=tenant, memory_id=old.id, status="resolved")
        assert str(raised.value) == (
            f"conflict: memory {old.id} is already superseded by {new.id}; resolve {new.id}"
        )

    def test_resolving_a_commitment_revised_into_another_type_sends_nowhere(self, tenant):
        """Its newest revision is no commitment: "resolve {newest}" would only earn the agent an
        invalid_input, so the conflict says there is nothing left to resolve."""
        old = record_memory(owner=tenant, memory_type="commitment", topic="a", content="v1")
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="v2", memory_type="fact")
        with pytest.raises(Conflict) as raised:
            resolve_commitment(owner=tenant, memory_id=old.id, status="resolved")
        assert str(raised.value) == (
            f"conflict: memory {old.id} is already superseded by {new.id}, a fact, not a "
            "commitment: there is no commitment left to resolve"
        )
        old.refresh_from_db()
        assert old.commitment_status == "open"

    def test_may_restate_the_predecessors_exact_content(self, tenant):
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="same")
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="same", topic="renamed")
        assert new.content == "same"

    def test_a_duplicate_of_another_live_memory_changes_nothing(self, tenant):
        record_memory(owner=tenant, memory_type="note", topic="a", content="taken")
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="mine")
        with pytest.raises(DuplicateMemory):
            revise_memory(owner=tenant, predecessor_id=old.id, content="taken")
        old.refresh_from_db()
        assert old.valid_to is None  # the predecessor was not closed: nothing half-applied
        assert Memory.objects.count() == 2

    def test_invalid_input_changes_nothing(self, tenant):
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="mine")
        with pytest.raises(InvalidInput):
            revise_memory(owner=tenant, predecessor_id=old.id, content="x" * 2001)
        old.refresh_from_db()
        assert old.valid_to is None

    def test_commitment_state_is_carried_to_the_successor(self, tenant):
        old = record_memory(owner=tenant, memory_type="commitment", topic="a", content="do it")
        resolve_commitment(owner=tenant, memory_id=old.id, status="waiting")
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="do it by Friday")
        assert new.commitment_status == "waiting"

    def test_revising_into_a_commitment_opens_it_and_out_of_one_clears_it(self, tenant):
        note = record_memory(owner=tenant, memory_type="note", topic="a", content="maybe")
        commitment = revise_memory(
            owner=tenant, predecessor_id=note.id, content="will", memory_type="commitment"
        )
        assert commitment.commitment_status == "open"
        fact = revise_memory(
            owner=tenant, predecessor_id=commitment.id, content="did", memory_type="fact"
        )
        assert fact.commitment_status is None


class TestArchive:
    def test_moves_status_only(self, tenant):
        memory = record_memory(owner=tenant, memory_type="note", topic="a", content="x")
        before = substance(memory)
        archive_memory(owner=tenant, memory_id=memory.id)
        memory.refresh_from_db()
        assert memory.status == "archived" and memory.valid_to is None
        assert substance(memory) == before
        archive_memory(owner=tenant, memory_id=memory.id)  # idempotent

    def test_a_superseded_memory_cannot_be_archived(self, tenant):
        old = record_memory(owner=tenant, memory_type="note", topic="a", content="v1")
        revise_memory(owner=tenant, predecessor_id=old.id, content="v2")
        with pytest.raises(Conflict, match=r"is already superseded by .*; archive"):
            archive_memory(owner=tenant, memory_id=old.id)


class TestResolve:
    @pytest.mark.parametrize(
        ("path", "final"),
        [
            (["waiting", "resolved"], "resolved"),
            (["expired", "open"], "open"),
            # Lapsed, then done after all: no detour through open.
            (["expired", "resolved"], "resolved"),
            (["resolved", "open", "waiting", "expired"], "expired"),
            (["open"], "open"),  # the same state is a no-op
        ],
    )
    def test_allowed_transitions(self, tenant, path, final):
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        for status in path:
            resolve_commitment(owner=tenant, memory_id=memory.id, status=status)
        memory.refresh_from_db()
        assert memory.commitment_status == final

    @pytest.mark.parametrize(
        ("start", "target", "moves"),
        [
            ("resolved", "waiting", "'open'"),
            ("resolved", "expired", "'open'"),
            ("expired", "waiting", "'open' or 'resolved'"),
        ],
    )
    def test_illegal_transition_names_both_states_and_the_way_on(
        self, tenant, start, target, moves
    ):
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        resolve_commitment(owner=tenant, memory_id=memory.id, status=start)
        with pytest.raises(InvalidTransition) as error:
            resolve_commitment(owner=tenant, memory_id=memory.id, status=target)
        assert str(error.value) == (
            f"invalid_transition: a commitment cannot move from '{start}' to '{target}'; "
            f"from '{start}' it can move to {moves}"
        )
        memory.refresh_from_db()
        assert memory.commitment_status == start

    def test_resolving_notes_when_and_any_other_move_forgets_it(self, tenant):
        """When it was resolved is what tells a recently finished commitment from an old one
        (the handoff lists those of the last days); reopened, it is no longer resolved."""
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        before = timezone.now()
        resolve_commitment(owner=tenant, memory_id=memory.id, status="resolved")
        memory.refresh_from_db()
        assert before <= memory.resolved_at <= timezone.now()
        resolved_at = memory.resolved_at
        resolve_commitment(owner=tenant, memory_id=memory.id, status="resolved")  # no-op
        memory.refresh_from_db()
        assert memory.resolved_at == resolved_at
        for status in ("open", "expired"):
            resolve_commitment(owner=tenant, memory_id=memory.id, status=status)
            memory.refresh_from_db()
            assert (memory.commitment_status, memory.resolved_at) == (status, None)

    def test_a_lapsed_commitment_done_after_all_is_resolved_now(self, tenant):
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        resolve_commitment(owner=tenant, memory_id=memory.id, status="expired")
        before = timezone.now()
        resolve_commitment(owner=tenant, memory_id=memory.id, status="resolved")
        memory.refresh_from_db()
        assert memory.commitment_status == "resolved"
        assert before <= memory.resolved_at <= timezone.now()

    def test_a_revision_of_a_resolved_commitment_keeps_when_it_was_resolved(self, tenant):
        old = record_memory(owner=tenant, memory_type="commitment", topic="a", content="do it")
        resolve_commitment(owner=tenant, memory_id=old.id, status="resolved")
        old.refresh_from_db()
        new = revise_memory(owner=tenant, predecessor_id=old.id, content="did it, on Friday")
        assert (new.commitment_status, new.resolved_at) == ("resolved", old.resolved_at)
        note = revise_memory(owner=tenant, predecessor_id=new.id, memory_type="note")
        assert (note.commitment_status, note.resolved_at) == (None, None)

    def test_the_database_refuses_a_resolution_time_on_an_unresolved_commitment(self, tenant):
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        with pytest.raises(IntegrityError, match="memory_resolved_at_only_on_resolved"):
            Memory.objects.filter(pk=memory.pk).update(resolved_at=timezone.now())

    def test_unknown_status_and_non_commitments_are_invalid_input(self, tenant):
        note = record_memory(owner=tenant, memory_type="note", topic="a", content="x")
        with pytest.raises(InvalidInput, match="status: must be one of"):
            resolve_commitment(owner=tenant, memory_id=note.id, status="done")
        with pytest.raises(InvalidInput, match="is a note, not a commitment"):
            resolve_commitment(owner=tenant, memory_id=note.id, status="resolved")

    @pytest.mark.parametrize("status", ["resolved", "waiting"])
    def test_an_archived_commitment_is_refused_and_revising_it_is_the_way_back(
        self, tenant, status
    ):
        """Archived, a commitment is in no briefing or handoff: a move of its state would be
        answered as done and change nothing an agent sees. Its own state ('waiting') is refused
        alike. The refusal names the revision that brings it back, in the state it had."""
        memory = record_memory(owner=tenant, memory_type="commitment", topic="a", content="x")
        resolve_commitment(owner=tenant, memory_id=memory.id, status="waiting")
        archive_memory(owner=tenant, memory_id=memory.id)
        with pytest.raises(InvalidInput) as refused:
            resolve_commitment(owner=tenant, memory_id=memory.id, status=status)
        assert str(refused.value) == (
            f"invalid_input: memoryId: memory {memory.id} is archived: an archived commitment "
            "keeps the state it had ('waiting'), which resolve cannot change, not even to that "
            f"same state; revise it (predecessorId {memory.id}, no other field needed) to bring "
            "it back as an active commitment in that state, then resolve the new id"
        )
        memory.refresh_from_db()
        assert (memory.status, memory.commitment_status, memory.resolved_at) == (
            "archived",
            "waiting",
            None,
        )

        back = revise_memory(owner=tenant, predecessor_id=memory.id)
        assert (back.status, back.commitment_status) == ("active", "waiting")
        done = resolve_commitment(owner=tenant, memory_id=back.id, status=status)
        assert done.commitment_status == status

    def test_resolving_a_blocker_says_to_archive_or_revise_it(self, tenant):
        blocker = record_memory(owner=tenant, memory_type="blocker", topic="a", content="x")
        with pytest.raises(InvalidInput) as refused:
            resolve_commitment(owner=tenant, memory_id=blocker.id, status="resolved")
        assert "is a blocker, not a commitment" in str(refused.value)
        assert "archive this one if it no longer holds" in str(refused.value)
        assert "revise it" in str(refused.value)
        blocker.refresh_from_db()
        assert blocker.status == "active"
        # Archived already, it is not sent to archive it.
        archive_memory(owner=tenant, memory_id=blocker.id)
        with pytest.raises(InvalidInput) as refused:
            resolve_commitment(owner=tenant, memory_id=blocker.id, status="resolved")
        assert str(refused.value).endswith(
            "only a commitment has a state to resolve; it is archived already; revise it if it "
            "changed (which brings it back)"
        )


class TestTenantBoundary:
    """Another tenant's id behaves exactly like a missing or malformed one, on every path."""

    @pytest.fixture
    def foreign(self, other_tenant):
        return MemoryFactory(owner=other_tenant, memory_type="commitment")

    @pytest.mark.parametrize("kind", ["foreign", "missing", "malformed"])
    @pytest.mark.parametrize(
        "operation",
        [
            lambda owner, memory_id: revise_memory(
                owner=owner, predecessor_id=memory_id, content="x"
            ),
            lambda owner, memory_id: archive_memory(owner=owner, memory_id=memory_id),
            lambda owner, memory_id: resolve_commitment(
                owner=owner, memory_id=memory_id, status="resolved"
            ),
        ],
        ids=["revise", "archive", "resolve"],
    )
    def test_identical_not_found(self, tenant, foreign, kind, operation):
        memory_id = {
            "foreign": str(foreign.id),
            "missing": str(uuid.uuid4()),
            "malformed": "not-a-uuid",
        }[kind]
        with pytest.raises(NotFound) as error:
            operation(tenant, memory_id)
        assert str(error.value) == f"not_found: memory {memory_id}"
        foreign.refresh_from_db()
        assert (foreign.valid_to, foreign.status, foreign.commitment_status) == (
            None,
            "active",
            "open",
        )

    def test_queryset_reads_only_the_owners_rows(self, tenant, other_tenant):
        mine = MemoryFactory(owner=tenant)
        MemoryFactory(owner=other_tenant)
        assert list(Memory.objects.owned_by(tenant)) == [mine]


@pytest.mark.parametrize(
    ("stored", "carried"),
    [("10000-01-01 00:00:00+00", LATEST_INSTANT), ("0044-03-15 12:00:00+00 BC", EARLIEST_INSTANT)],
)
def test_a_due_date_stored_out_of_range_is_carried_within_it(tenant, stored, carried):
    # An old row may hold what the bounds now refuse; revising it is no error.
    memory_id = insert_commitment_due_at(tenant, stored)
    successor = revise_memory(owner=tenant, predecessor_id=memory_id, content="new text")
    assert successor.due_at == carried
    assert Memory.objects.get(pk=memory_id).valid_to == successor.recorded_at


def test_a_memory_recorded_by_a_clock_ahead_of_ours_is_revised(tenant):
    ahead = MemoryFactory(owner=tenant, recorded_at=timezone.now() + timedelta(seconds=2))
    successor = revise_memory(owner=tenant, predecessor_id=ahead.id, content="v2")
    ahead.refresh_from_db()
    assert ahead.valid_to == ahead.recorded_at == successor.recorded_at


def test_revising_an_archived_memory_makes_its_successor_active(tenant):
    memory = record_memory(owner=tenant, memory_type="note", topic="x", content="v1")
    archive_memory(owner=tenant, memory_id=memory.id)
    assert revise_memory(owner=tenant, predecessor_id=memory.id, content="v2").status == "active"
    # The same substance is the way back from an archive too.
    archived = record_memory(owner=tenant, memory_type="note", topic="y", content="kept")
    archive_memory(owner=tenant, memory_id=archived.id)
    back = revise_memory(owner=tenant, predecessor_id=archived.id, content="kept")
    assert (back.status, back.content) == ("active", "kept")


def test_a_revision_that_changes_nothing_is_refused_and_writes_nothing(tenant):
    """A successor identical to its memory would only bury it under a new id (and a retried
    revision of its own successor would make a third copy)."""
    memory = commitment_to_ship(tenant)
    with pytest.raises(InvalidInput) as refused:
        revise_memory(owner=tenant, predecessor_id=memory.id, content=" Ship v2. ", topic="ship")
    assert str(refused.value) == (
        f"invalid_input: content: is memory {memory.id}'s as it stands, and so is every other "
        "field; nothing to revise"
    )
    assert list(Memory.objects.filter(owner=tenant).values_list("id", "valid_to")) == [
        (memory.id, None)
    ]
    retitled = revise_memory(owner=tenant, predecessor_id=memory.id, content="Ship v2.", topic="go")
    assert (retitled.predecessor_id, retitled.topic) == (memory.id, "go")
    # With no field at all, the refusal says what to send rather than what was "given".
    with pytest.raises(InvalidInput) as refused:
        revise_memory(owner=tenant, predecessor_id=retitled.id)
    assert str(refused.value) == (
        "invalid_input: predecessorId: no field to change was given: send the fields that "
        "change with it (content, memoryType, topic, scope, project, tags, dueAt), or name in "
        "clear those to empty; omitted ones carry over"
    )


class TestProjectSpelling:
    """Briefing, handoff and search match a project exactly: a write naming the account's
    project in another case joins it rather than starting a second one."""

    def test_remember_takes_the_spelling_the_account_already_uses(self, tenant, other_tenant):
        record_memory(
            owner=other_tenant, memory_type="fact", topic="t", content="x", project="ATLAS"
        )
        record_memory(owner=tenant, memory_type="fact", topic="t", content="a", project="atlas")
        later = record_memory(
            owner=tenant, memory_type="decision", topic="api", content="b", project="Atlas"
        )
        assert Memory.objects.get(id=later.id).project == "atlas"
        assert set(Memory.objects.filter(owner=tenant).values_list("project", flat=True)) == {
            "atlas"
        }

    def test_revise_takes_it_too_and_a_new_project_keeps_its_own(self, tenant):
        record_memory(owner=tenant, memory_type="fact", topic="t", content="a", project="atlas")
        memory = record_memory(owner=tenant, memory_type="note", topic="n", content="b")
        revised = revise_memory(owner=tenant, predecessor_id=memory.id, project="ATLAS")
        assert Memory.objects.get(id=revised.id).project == "atlas"
        fresh = record_memory(
            owner=tenant, memory_type="note", topic="n", content="c", project="Beacon"
        )
        assert Memory.objects.get(id=fresh.id).project == "Beacon"

    def test_a_revision_changes_a_spelling_only_its_predecessor_had(self, tenant):
        """'Atlas' held by the memory being revised alone is no spelling of the account's once
        the revision closes it: the revision to 'atlas' stores 'atlas' (rather than being
        refused as changing nothing)."""
        memory = record_memory(
            owner=tenant, memory_type="fact", topic="t", content="a", project="Atlas"
        )
        revised = revise_memory(owner=tenant, predecessor_id=memory.id, project="atlas")
        assert Memory.objects.get(id=revised.id).project == "atlas"

    def test_a_spelling_in_use_stays(self, tenant):
        record_memory(owner=tenant, memory_type="fact", topic="t", content="a", project="atlas")
        MemoryFactory(owner=tenant, project="Atlas")  # written past the services, both spellings
        again = record_memory(
            owner=tenant, memory_type="fact", topic="t", content="c", project="Atlas"
        )
        assert Memory.objects.get(id=again.id).project == "Atlas"

    def test_only_a_project_new_to_the_account_takes_a_lock(self, tenant):
        """A project the account has (the common write) costs one lookup, as a write without a
        project costs none; a new one takes the account's lock on it and looks again
        (tests/memories/test_concurrent_project_spelling.py)."""
        record_memory(owner=tenant, memory_type="fact", topic="t", content="a", project="atlas")

        def statements(content: str, project: str | None) -> list[str]:
            with CaptureQueriesContext(connection) as queries:
                record_memory(
                    owner=tenant, memory_type="fact", topic="t", content=content, project=project
                )
            return [query["sql"] for query in queries.captured_queries]

        without = statements("b", None)
        known = statements("c", "Atlas")
        new = statements("d", "Beacon")
        assert len(known) == len(without) + 1
        assert not any("pg_advisory" in sql for sql in known)
        assert len(new) == len(known) + 2
        assert sum("pg_advisory_xact_lock" in sql for sql in new) == 1

    def test_the_spelling_is_found_in_the_index_however_old_and_without_statistics(self, tenant):
        """Looked up on every write that names a project: two probes of the account's project
        index, never a read of its memories, even before the table was ever analyzed."""
        MemoryFactory(owner=tenant, project="atlas")
        MemoryFactory.create_batch(30, owner=tenant, project="beacon")
        with connection.cursor() as cursor:
            as_never_analyzed(cursor, "memories_memory")
            cursor.execute(
                f"EXPLAIN (FORMAT JSON) {models._PROJECT_SPELLING_SQL}",
                {"owner": tenant.pk, "project": "ATLAS"},
            )
            plan = cursor.fetchone()[0][0]["Plan"]
        assert memory_scans(plan) == [("memory_owner_project_key",)] * 2
        assert Memory.objects.project_spelling(tenant.pk, "ATLAS") == "atlas"


def memory_scans(plan: dict) -> list[tuple[str | None]]:
    """The index each scan of the memories table in an EXPLAIN (FORMAT JSON) plan reads (None
    for a scan of the table itself)."""
    found = []
    if plan.get("Relation Name") == "memories_memory":
        found.append((plan.get("Index Name"),))
    for child in plan.get("Plans", []):
        found.extend(memory_scans(child))
    return found
