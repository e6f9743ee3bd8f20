"""Pages during a database outage: 503 with Retry-After and a page that says to retry, never a
stack trace; other failures stay a plain 500 (infra/dbfaults.py `server_error`)."""

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import OperationalError

from tests.factories import UserFactory


@pytest.fixture
def logged_in_client(client, db):
    client.force_login(UserFactory())
    client.raise_request_exception = False  # answer as the server would, not re-raise
    return client


def test_a_page_that_cannot_reach_the_database_is_503_with_retry_after(
    logged_in_client, monkeypatch
):
    def unreachable(self):
        raise OperationalError("connection to server on socket failed: No such file or directory")

    monkeypatch.setattr(SessionStore, "load", unreachable)
    response = logged_in_client.get("/account/")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    page = response.content.decode()
    assert "Temporarily unavailable" in page and "try again" in page
    assert "socket" not in page and "Traceback" not in page


def test_any_other_failure_is_still_a_plain_500(logged_in_client, monkeypatch):
    def broken(self):
        raise RuntimeError("a bug")

    monkeypatch.setattr(SessionStore, "load", broken)
    response = logged_in_client.get("/account/")
    assert response.status_code == 500
    assert "Retry-After" not in response
    assert "a bug" not in response.content.decode()
