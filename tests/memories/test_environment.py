"""What describe_environment reports of an account (memories.environment): its counts, facets
and threads, read together."""

from memories import environment
from memories.models import Thread
from tests.factories import MemoryFactory, ThreadFactory
from tests.memories.conftest import commit_elsewhere


def test_describes_the_account_in_one_snapshot(transactional_db, tenant, monkeypatch):
    """A memory and a thread committed after the counts are read and before the threads are
    are in neither: the counts, the projects and the threads listed agree."""
    MemoryFactory(owner=tenant, project="early")
    ThreadFactory(owner=tenant, name="early")
    real_stats = environment.environment_stats

    def write_late() -> None:
        MemoryFactory(owner=tenant, project="late")
        ThreadFactory(owner=tenant, name="late")

    def count_then_let_a_write_commit(**kwargs):
        stats = real_stats(**kwargs)
        commit_elsewhere(tenant.pk, write_late)
        return stats

    monkeypatch.setattr(environment, "environment_stats", count_then_let_a_write_commit)
    account = environment.describe_account(owner=tenant)
    assert Thread.objects.filter(owner=tenant, name="late").exists()  # committed
    assert account.stats.projects == ["early"] and account.stats.versions == 1
    assert [thread.name for thread in account.threads] == ["early"]
