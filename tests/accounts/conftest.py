import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.cache import cache
from django.db import connection, transaction

from memories import tenancy
from memories.models import Memory


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


@contextmanager
def a_memory_held_elsewhere(owner) -> Iterator[None]:
    """One of `owner`'s memories locked by another connection during the block, as a long
    backfill batch, a write in flight or another erasure of the account holds it."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic(), tenancy.acting_for(owner.pk):
                Memory.objects.select_for_update().filter(owner=owner).first()
                held.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        holder.join(30)


@pytest.fixture
def sign_ups_checked_together(monkeypatch) -> None:
    """Two sign-ups at once, each past the form's check of its name before either goes on: as
    two people pressing the button in the same instant would be."""
    from accounts.forms import SignUpForm

    both_checked = threading.Barrier(2)
    clean_username = SignUpForm.clean_username

    def clean_username_then_wait(form):
        value = clean_username(form)
        both_checked.wait(timeout=10)
        return value

    monkeypatch.setattr(SignUpForm, "clean_username", clean_username_then_wait)
