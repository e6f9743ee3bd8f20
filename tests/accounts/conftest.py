import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The log-in throttle, the OAuth rate counters and DOT's back-off from client_id URLs whose
    fetch failed live in the (process-local) cache: every test starts with none and leaves none."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def signed_in(client, tenant):
    client.force_login(tenant)
    return client
