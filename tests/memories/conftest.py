import pytest

from memories import nearest


@pytest.fixture
def nearest_indexes(transactional_db):
    """For a test that builds nearest-neighbour indexes: they are built CONCURRENTLY, which no
    transaction may hold (no test transaction), and they outlive the test's rows, so every one
    is dropped after the test, however its set-up ended."""
    yield
    for owner_id in nearest.indexes():
        nearest.drop_index(owner_id)
