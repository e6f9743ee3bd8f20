"""OAuth requests racing what ends their grant, on separate connections (real threads): a
second exchange of the same code, the account's erasure. The loser gets invalid_grant (RFC 6749
§4.1.2, §5.2), never a 500, and nothing of it is left working."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_application_model

from accounts.erasure import erase_account
from accounts.oauth_validators import McpOAuth2Validator
from tests.accounts.oauth_helpers import a_code_to_exchange, exchange

pytestmark = pytest.mark.django_db(transaction=True)


def _exchange_with(tenant, monkeypatch, meanwhile: Callable) -> object:
    """The client exchanges its code; right after the code is validated, `meanwhile(application,
    code, verifier)` runs and commits on another connection; then the exchange goes on. Its
    answer, as the client gets it."""
    application, code, verifier = a_code_to_exchange(tenant)
    validated, go_on = threading.Event(), threading.Event()
    validate_code = McpOAuth2Validator.validate_code

    def validate_then_wait(self, *args, **kwargs):
        valid = validate_code(self, *args, **kwargs)
        validated.set()
        assert go_on.wait(10)
        return valid

    monkeypatch.setattr(McpOAuth2Validator, "validate_code", validate_then_wait)
    answers: list = []

    def run() -> None:
        try:
            answers.append(
                exchange(Client(raise_request_exception=False), application, code, verifier)
            )
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    assert validated.wait(10)
    monkeypatch.undo()  # `meanwhile` validates without waiting
    meanwhile(application, code, verifier)
    go_on.set()
    worker.join(30)
    [answer] = answers
    return answer


def test_a_second_exchange_of_a_code_at_once_gets_invalid_grant_and_no_tokens(tenant, monkeypatch):
    first = []
    answer = _exchange_with(
        tenant,
        monkeypatch,
        lambda application, code, verifier: first.append(
            exchange(Client(), application, code, verifier)
        ),
    )
    assert first[0].status_code == 200
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    assert answer["Content-Type"] == "application/json" and answer["Cache-Control"] == "no-store"
    assert get_access_token_model().objects.filter(user=tenant).count() == 1  # the first's


def test_a_code_exchange_racing_the_erasure_gets_invalid_grant(tenant, monkeypatch):
    answer = _exchange_with(tenant, monkeypatch, lambda *_: erase_account(user=tenant))
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"
    assert not get_access_token_model().objects.filter(user=tenant).exists()


def test_a_client_registered_from_a_signed_in_browser_belongs_to_no_account(tenant):
    """MCP clients register anonymously; one a page makes the browser register would otherwise
    belong to the signed-in person, its registration token with it (and outlive an erasure
    racing it)."""
    browser = Client()
    browser.force_login(tenant)
    response = browser.post(
        "/oauth/register/",
        {"client_name": "Claude", "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
         "token_endpoint_auth_method": "none"},
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == 201
    application = get_application_model().objects.get(client_id=response.json()["client_id"])
    assert application.user is None
    assert not get_access_token_model().objects.filter(user=tenant).exists()
