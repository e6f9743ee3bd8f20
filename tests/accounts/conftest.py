import pytest
from django.core.cache import cache


@pytest.fixture(autouse=True)
def _fresh_throttle():
    """The log-in throttle lives in the (process-local) cache: start every test with none."""
    cache.clear()
    yield
    cache.clear()
