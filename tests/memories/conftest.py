import pytest

from memories import account_indexes


@pytest.fixture
def account_indexes_dropped(transactional_db):
    """For a test that builds account indexes: they are built CONCURRENTLY, which no transaction
    may hold (no test transaction), and they outlive the test's rows, so every one is dropped
    after the test, however its set-up ended."""
    yield
    for kind in account_indexes.KINDS:
        for owner_id in kind.indexes():
            kind.drop(owner_id)
