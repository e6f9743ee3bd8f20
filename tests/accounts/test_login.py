"""The log-in page of the OAuth flow: CSRF-protected, failures throttled per IP and username."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client

from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters(settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    settings.LOGIN_FAILURES_PER_IP = 5
    cache.clear()
    yield
    cache.clear()


def _log_in(client, username, password, ip="203.0.113.1", next_url="/oauth/authorize/?x=1"):
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password, "next": next_url},
        REMOTE_ADDR=ip,
    )


def test_correct_password_logs_in_and_returns_to_the_authorization_request(client, tenant):
    response = _log_in(client, tenant.username, PASSWORD)
    assert response.status_code == 302
    assert response["Location"] == "/oauth/authorize/?x=1"
    assert client.session["_auth_user_id"] == str(tenant.pk)


def test_next_to_another_site_is_ignored(client, tenant):
    response = _log_in(client, tenant.username, PASSWORD, next_url="https://evil.example.com/")
    assert response.status_code == 302
    assert "evil.example.com" not in response["Location"]


def test_login_form_requires_csrf(tenant):
    client = Client(enforce_csrf_checks=True)
    assert _log_in(client, tenant.username, PASSWORD).status_code == 403
    assert "_auth_user_id" not in client.session


def test_inactive_user_cannot_log_in(client, tenant):
    tenant.is_active = False
    tenant.save()
    response = _log_in(client, tenant.username, PASSWORD)
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_failures_per_username_lock_out_even_the_right_password(client, tenant):
    for _ in range(3):
        assert _log_in(client, tenant.username, "wrong").status_code == 200
    # From a different address too: the count is per username.
    response = _log_in(client, tenant.username, PASSWORD, ip="203.0.113.99")
    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session
    # Another account is not affected.
    other = UserFactory()
    assert _log_in(client, other.username, PASSWORD, ip="203.0.113.99").status_code == 302


def test_failures_per_ip_lock_out_that_address(client):
    users = UserFactory.create_batch(5)
    for user in users:
        assert _log_in(client, user.username, "wrong").status_code == 200
    fresh = UserFactory()
    assert _log_in(client, fresh.username, PASSWORD).status_code == 429
    assert _log_in(client, fresh.username, PASSWORD, ip="198.51.100.4").status_code == 302


def test_success_clears_the_username_count(client, tenant):
    for _ in range(2):
        _log_in(client, tenant.username, "wrong")
    assert _log_in(client, tenant.username, PASSWORD).status_code == 302
    client.logout()
    for _ in range(2):
        assert _log_in(client, tenant.username, "wrong").status_code == 200
    assert _log_in(client, tenant.username, PASSWORD).status_code == 302
