"""A revocation or an erasure racing a code exchange or a refresh, on real connections: the
exchange holds its code's grant (a refresh, its refresh token) locked while the tokens it issues
are saved, and commits them after the revocation has started. The tokens must not outlive the
revocation, and the erasure must not deadlock. So must two erasures that each name the other's
account."""

import asyncio
import contextlib
import threading
import time

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from accounts import erasure
from accounts.connected_apps import revoke_app_access
from accounts.erasure import erase_account
from accounts.models import ErasureRecord
from infra import dbfaults
from mcp_gateway import auth
from tests.accounts.oauth_helpers import a_code_to_exchange, exchange, token_request
from tests.factories import UserFactory

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
pytestmark = pytest.mark.django_db(transaction=True)


def _a_statement_waits_for_a_lock(timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return True
        time.sleep(0.05)
    return False


def by_code(application, code, verifier):
    """The agent's token request: it exchanges its code."""
    return lambda: exchange(Client(), application, code, verifier)


def by_refresh(application, code, verifier):
    """The agent's token request: it exchanged its code earlier, and now refreshes."""
    refresh_token = exchange(Client(), application, code, verifier).json()["refresh_token"]
    return lambda: token_request(
        Client(),
        application,
        grant_type="refresh_token",
        refresh_token=refresh_token,
        resource=settings.MCP_RESOURCE_URL,
    )


def _race(tenant, monkeypatch, revoke, asks=by_code):
    """The agent asks for tokens (`asks`: by code or by refresh); once they are saved but not
    committed, start `revoke` in another thread, wait until it waits for a lock, then let the
    agent's request commit. Returns the application, the answers and the errors raised."""
    application, code, verifier = a_code_to_exchange(tenant)
    ask = asks(application, code, verifier)
    saved, go_on = threading.Event(), threading.Event()
    save = OAuth2Validator._save_bearer_token

    def save_then_wait(self, *args, **kwargs):
        result = save(self, *args, **kwargs)  # the tokens inserted, the code's grant locked
        saved.set()
        assert go_on.wait(10)
        return result

    monkeypatch.setattr(OAuth2Validator, "_save_bearer_token", save_then_wait)
    answers, errors = [], []

    def in_a_thread(work, name):
        def run():
            try:
                answers.append((name, work()))
            except Exception as error:  # collected and asserted on
                errors.append((name, repr(error)))
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    agent = in_a_thread(ask, "agent")
    assert saved.wait(10)
    person = in_a_thread(lambda: revoke(application), "revocation")
    assert _a_statement_waits_for_a_lock()
    go_on.set()
    agent.join(30)
    person.join(30)
    return application, answers, errors


def test_an_app_disconnected_while_its_code_is_exchanged_keeps_no_live_token(tenant, monkeypatch):
    application, answers, errors = _race(
        tenant, monkeypatch, lambda app: revoke_app_access(user=tenant, application=app)
    )
    assert errors == []
    answer = dict(answers)["agent"]
    assert answer.status_code == 200
    # The person was told its tokens no longer work.
    assert asyncio.run(auth.authenticate(answer.json()["access_token"])) is None
    assert not AccessToken.objects.filter(user=tenant, application=application).exists()
    live = RefreshToken.objects.filter(user=tenant, application=application, revoked=None)
    assert not live.exists()


def test_an_account_erased_while_a_code_is_exchanged_is_erased(tenant, monkeypatch):
    _, answers, errors = _race(tenant, monkeypatch, lambda app: erase_account(user=tenant))
    assert errors == []  # was a deadlock: the erasure held the user row, waiting for the code
    assert dict(answers)["agent"].status_code == 200
    tenant.refresh_from_db()
    assert tenant.erased_at is not None
    assert not AccessToken.objects.filter(user=tenant).exists()
    assert not RefreshToken.objects.filter(user=tenant, revoked=None).exists()


def test_an_account_erased_while_a_refresh_saves_its_tokens_is_erased(tenant, monkeypatch):
    _, answers, errors = _race(
        tenant, monkeypatch, lambda app: erase_account(user=tenant), asks=by_refresh
    )
    # Was a deadlock, the erasure aborted: it held the user row, waiting for the refresh token,
    # and the refresh, holding it, took a key-share lock on the user row for its new tokens.
    assert errors == []
    assert dict(answers)["agent"].status_code == 200
    tenant.refresh_from_db()
    assert tenant.erased_at is not None
    assert not AccessToken.objects.filter(user=tenant).exists()
    assert not RefreshToken.objects.filter(user=tenant, revoked=None).exists()


def test_two_staff_members_erasing_each_other_at_once_never_deadlock(monkeypatch):
    """Each erasure holds its account's row while it erases; the record then names the staff
    member, whose row the other erasure holds. One may wait for the other, and past the lock
    timeout be told to retry (the database was busy), but PostgreSQL never has to end one of
    them as a deadlock, and a retry erases."""
    first, second = UserFactory(is_staff=True), UserFactory(is_staff=True)
    both_erasing = threading.Barrier(2)

    def wait_for_the_other(user, now):
        # When the other erasure waits on this one, the barrier breaks and this one goes on.
        with contextlib.suppress(threading.BrokenBarrierError):
            both_erasing.wait(1)
        return {}

    monkeypatch.setattr(erasure, "ERASURE_STEPS", [*erasure.ERASURE_STEPS, wait_for_the_other])
    failed: list[tuple[object, object, Exception]] = []

    def erase(account, staff):
        try:
            erase_account(user=account, requested_by_staff=staff)
        except Exception as error:  # collected and asserted on
            failed.append((account, staff, error))
        finally:
            connection.close()

    threads = [
        threading.Thread(target=erase, args=(second, first)),
        threading.Thread(target=erase, args=(first, second)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [error for *_, error in failed if "deadlock" in str(error)] == []
    assert all(dbfaults.is_unavailable(error) for *_, error in failed), failed
    for account, staff, _ in failed:  # busy: the client's retry
        erase_account(user=account, requested_by_staff=staff)
    records = ErasureRecord.objects.values_list("account_id", "staff_member_id")
    assert sorted(records) == sorted([(second.pk, first.pk), (first.pk, second.pk)])
