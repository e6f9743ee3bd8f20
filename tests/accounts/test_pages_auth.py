"""Sign-up, log-in (throttled), log-out and password change, through the real views."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.factories import PASSWORD, UserFactory

NEW_PASSWORD = "a much better passphrase 2026"


def _login(client, username, password, ip="203.0.113.7"):
    return client.post(
        reverse("accounts:login"),
        {"username": username, "password": password},
        REMOTE_ADDR=ip,
    )


@pytest.mark.django_db
def test_sign_up_creates_the_account_and_logs_in(client):
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "email": "", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:memories")
    assert get_user_model().objects.get(username="ada").check_password(NEW_PASSWORD)
    assert client.get(reverse("accounts:memories")).status_code == 200


@pytest.mark.django_db
def test_sign_up_rejects_weak_and_mismatched_passwords_naming_the_field(client):
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": "123", "password2": "1234"},
    )
    assert response.status_code == 200
    assert "The two password fields didn\u2019t match." in response.text
    assert not get_user_model().objects.filter(username="ada").exists()


@pytest.mark.django_db
def test_sign_up_refuses_names_that_look_like_erased_accounts_or_differ_only_in_case(client):
    UserFactory(username="grace")
    for username, message in (("erased-12", "may not start with"), ("GRACE", "already exists")):
        response = client.post(
            reverse("accounts:signup"),
            {"username": username, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
        )
        assert message in response.text
    assert get_user_model().objects.count() == 1


@pytest.mark.django_db
def test_sign_up_can_be_turned_off(client, settings):
    settings.SIGNUP_ENABLED = False
    assert client.get(reverse("accounts:signup")).status_code == 404
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
    )
    assert response.status_code == 404
    assert not get_user_model().objects.exists()
    assert "Sign up" not in client.get(reverse("accounts:login")).text


def test_log_in_and_log_out(client, tenant):
    response = _login(client, tenant.username, PASSWORD)
    assert response.status_code == 302
    assert client.get(reverse("accounts:connected_apps")).status_code == 200
    # Log-out is POST only: a GET (a link or an <img> on another site) does nothing.
    assert client.get(reverse("accounts:logout")).status_code == 405
    assert client.get(reverse("accounts:connected_apps")).status_code == 200
    client.post(reverse("accounts:logout"))
    response = client.get(reverse("accounts:connected_apps"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_wrong_password_says_so_without_naming_which_part_was_wrong(client, tenant):
    response = _login(client, tenant.username, "wrong")
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.text


def test_failed_log_ins_are_throttled_per_username(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    for attempt in range(3):
        _login(client, tenant.username, "wrong", ip=f"198.51.100.{attempt}")
    # Even the right password, from yet another address, is refused without being checked.
    response = _login(client, tenant.username.upper(), PASSWORD, ip="198.51.100.99")
    assert response.status_code == 429
    assert response["Retry-After"] == str(settings.LOGIN_FAILURE_WINDOW_SECONDS)
    assert "Too many failed log-in attempts" in response.text
    assert "_auth_user_id" not in client.session
    # Another account is unaffected.
    other = UserFactory()
    assert _login(client, other.username, PASSWORD, ip="198.51.100.99").status_code == 302


def test_failed_log_ins_are_throttled_per_ip(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_IP = 4
    for attempt in range(4):
        _login(client, f"guess{attempt}", "wrong", ip="192.0.2.1")
    assert _login(client, tenant.username, PASSWORD, ip="192.0.2.1").status_code == 429
    assert _login(client, tenant.username, PASSWORD, ip="192.0.2.2").status_code == 302


def test_a_successful_log_in_clears_the_username_count(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_USERNAME = 3
    _login(client, tenant.username, "wrong")
    _login(client, tenant.username, "wrong")
    assert _login(client, tenant.username, PASSWORD).status_code == 302
    client.post(reverse("accounts:logout"))
    _login(client, tenant.username, "wrong")
    _login(client, tenant.username, "wrong")
    assert _login(client, tenant.username, PASSWORD).status_code == 302


def test_password_change(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:password_change_done")
    tenant.refresh_from_db()
    assert tenant.check_password(NEW_PASSWORD)


def test_password_change_with_the_wrong_old_password_changes_nothing(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": "nope", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.text
    tenant.refresh_from_db()
    assert tenant.check_password(PASSWORD)
