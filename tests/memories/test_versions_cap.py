"""The cap on memory versions per account (MEMORY_VERSIONS_PER_ACCOUNT_MAX): every row an account
holds counts, current, superseded and archived, since none is ever deleted; the database counts
them (migration memories/0027) and refuses a write past the cap, exactly, under concurrency
too. One tenant cannot fill the disk the others write to."""

import threading

import pytest
from django.db import connection

from accounts.erasure import erase_account
from memories import services
from memories.errors import Conflict, DuplicateMemory
from memories.models import AccountUsage, Memory
from memories.services import archive_memory, record_memory, resolve_commitment, revise_memory
from tests.factories import MemoryFactory, UserFactory
from tests.memories.test_search import memories_schema_at

CAP = 3
REFUSAL = f"conflict: at most {CAP} memory versions per account"


@pytest.fixture
def cap(settings) -> int:
    settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX = CAP
    return CAP


def remember(owner, content: str, memory_type: str = "note") -> Memory:
    return record_memory(owner=owner, memory_type=memory_type, topic="Topic", content=content)


def versions(owner) -> int | None:
    """The account's count as the database keeps it; None when it has no row yet."""
    return AccountUsage.objects.filter(owner=owner).values_list("versions", flat=True).first()


def test_a_memory_past_the_cap_is_refused_naming_it_and_what_to_do(tenant, cap):
    for n in range(CAP):
        remember(tenant, f"memory {n}")
    with pytest.raises(Conflict) as refused:
        remember(tenant, "one too many")
    message = str(refused.value)
    assert message.startswith(REFUSAL)
    assert "nothing was stored" in message
    assert "export" in message.lower() and "MEMORY_VERSIONS_PER_ACCOUNT_MAX" in message
    assert Memory.objects.filter(owner=tenant).count() == CAP
    assert not Memory.objects.filter(owner=tenant, content="one too many").exists()
    assert versions(tenant) == CAP


def test_superseded_and_archived_versions_count_and_a_revision_at_the_cap_changes_nothing(
    tenant, cap
):
    first = remember(tenant, "the deploy runs on Fridays")
    second = revise_memory(owner=tenant, predecessor_id=first.id, content="deploys on Mondays")
    archive_memory(owner=tenant, memory_id=second.id)
    other = remember(tenant, "unrelated")  # 2 superseded or archived + 1: the cap
    assert versions(tenant) == CAP
    with pytest.raises(Conflict, match=REFUSAL):
        revise_memory(owner=tenant, predecessor_id=other.id, content="unrelated, revised")
    other.refresh_from_db()
    assert other.valid_to is None  # the predecessor's close was rolled back with the insert
    assert not Memory.objects.filter(owner=tenant, predecessor_id=other.id).exists()
    assert Memory.objects.filter(owner=tenant).count() == CAP


def test_the_cap_is_each_accounts_own(tenant, other_tenant, cap):
    for n in range(CAP):
        remember(tenant, f"memory {n}")
    remember(other_tenant, "still room here")
    assert versions(other_tenant) == 1


def test_writes_that_insert_nothing_pass_at_the_cap(tenant, cap):
    """Archiving and resolving move a row's lifecycle; no row is added."""
    commitment = remember(tenant, "ship the release", memory_type="commitment")
    for n in range(CAP - 1):
        remember(tenant, f"memory {n}")
    resolve_commitment(owner=tenant, memory_id=commitment.id, status="resolved")
    archive_memory(owner=tenant, memory_id=commitment.id)
    assert versions(tenant) == CAP


def test_the_count_matches_the_rows_after_a_mix_of_writes(tenant, other_tenant):
    first = remember(tenant, "first")
    revised = revise_memory(owner=tenant, predecessor_id=first.id, content="first, revised")
    archive_memory(owner=tenant, memory_id=revised.id)
    revise_memory(owner=tenant, predecessor_id=revised.id, topic="Back from the archive")
    with pytest.raises(DuplicateMemory):  # refused: rolled back, and its count with it
        remember(tenant, "first, revised")
    MemoryFactory.create_batch(3, owner=tenant)  # inserted past the services: counted too
    remember(other_tenant, "theirs")
    erase_account(user=tenant)  # overwrites the rows and keeps them: the count stays
    for owner in (tenant, other_tenant):
        assert versions(owner) == Memory.objects.filter(owner=owner).count()
    assert versions(tenant) == 6


def test_one_statement_inserting_many_rows_counts_each_account_once_per_row(tenant, other_tenant):
    Memory.objects.bulk_create(
        [MemoryFactory.build(owner=owner) for owner in (tenant, other_tenant, tenant)]
    )
    assert (versions(tenant), versions(other_tenant)) == (2, 1)


def test_an_insert_that_declares_no_cap_is_counted_and_not_refused(tenant, cap):
    """The owner's own SQL (a benchmark's seed) declares no cap: its rows count all the same."""
    MemoryFactory.create_batch(CAP + 1, owner=tenant)
    assert versions(tenant) == CAP + 1
    with pytest.raises(Conflict, match=REFUSAL):
        remember(tenant, "past the cap")


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_memories_at_one_below_the_cap_store_exactly_one(monkeypatch, settings):
    settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX = CAP
    tenant = UserFactory()
    for n in range(CAP - 1):
        remember(tenant, f"memory {n}")
    both_locked = threading.Barrier(2, timeout=10)
    lock_live_owner = services.lock_live_owner

    def lock_then_wait(owner):
        vectors_by = lock_live_owner(owner)  # shared: both writes hold it at once
        both_locked.wait()
        return vectors_by

    monkeypatch.setattr(services, "lock_live_owner", lock_then_wait)
    outcomes = []

    def write(content):
        try:
            outcomes.append(remember(tenant, content).content)
        except Conflict as error:
            outcomes.append(str(error))
        finally:
            connection.close()

    workers = [threading.Thread(target=write, args=(text,)) for text in ("left", "right")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert len(outcomes) == 2
    assert sorted(outcome.startswith(REFUSAL) for outcome in outcomes) == [False, True]
    assert Memory.objects.filter(owner=tenant).count() == CAP
    assert versions(tenant) == CAP


def test_the_migration_counts_the_rows_already_stored(transactional_db):
    tenant, other, without = UserFactory(), UserFactory(), UserFactory()
    with memories_schema_at("0026"):
        MemoryFactory.create_batch(3, owner=tenant)
        MemoryFactory.create_batch(2, owner=other)
    assert (versions(tenant), versions(other), versions(without)) == (3, 2, None)
    remember(other, "after the upgrade")
    assert versions(other) == 3
