"""The sign-up limit per client address (accounts/throttle.py), through the real sign-up page."""

import re
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory

PASSPHRASE = "a much better passphrase 2026"
HOME = "198.51.100.20"
ELSEWHERE = "203.0.113.40"

pytestmark = pytest.mark.django_db


def _sign_up(client, username: str, ip: str = HOME, password2: str = PASSPHRASE, **extra):
    response = client.post(
        reverse("accounts:signup"),
        {"username": username, "password1": PASSPHRASE, "password2": password2},
        REMOTE_ADDR=ip,
        **extra,
    )
    if response.status_code == 302:
        # The new account is logged in: log out, as the next person at that address would be.
        client.logout()
    return response


def _accounts() -> list[str]:
    return sorted(get_user_model().objects.values_list("username", flat=True))


def _without_csrf_token(page: str) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page)


def _later(monkeypatch, seconds: float) -> None:
    """The clock `seconds` ahead, for the limiter and the cache its counters expire in."""
    now = time.time

    monkeypatch.setattr(time, "time", lambda: now() + seconds)


def _refused(response, settings) -> None:
    """Refused as the log-in throttle refuses: 429, Retry-After up to the window's end, the
    sign-up page with a message saying how long to wait, and nobody logged in."""
    window = settings.SIGNUP_RATE_WINDOW
    assert response.status_code == 429
    wait = int(response["Retry-After"])
    assert abs(wait - (window - time.time() % window)) <= 2
    assert "Create your account" in response.text  # the site's page, with its form
    assert (
        '<div role="alert"><ul class="errorlist nonfield"><li>Too many sign-up attempts from your '
        f"network. Wait {-(-wait // 60)} minute(s), then try again.</li></ul></div>"
    ) in response.text
    assert "_auth_user_id" not in response.client.session


def test_a_handful_of_accounts_per_address_then_429_and_nothing_created(client, settings):
    names = [f"person{n}" for n in range(settings.SIGNUP_RATE)]
    for name in names:
        assert _sign_up(client, name).status_code == 302
    response = _sign_up(client, "one-too-many")
    _refused(response, settings)
    assert _accounts() == names
    # The name typed is kept in the form; the passwords are never sent back.
    assert 'value="one-too-many"' in response.text and PASSPHRASE not in response.text
    # Another address is not affected.
    assert _sign_up(client, "neighbour", ip=ELSEWHERE).status_code == 302
    assert "neighbour" in _accounts()


def test_the_default_is_five_accounts_an_hour(settings):
    assert (settings.SIGNUP_RATE, settings.SIGNUP_RATE_WINDOW) == (5, 3600)


def test_the_windows_end_lets_the_address_sign_up_again(client, settings, monkeypatch):
    settings.SIGNUP_RATE = 2
    assert _sign_up(client, "first").status_code == 302
    assert _sign_up(client, "second").status_code == 302
    _refused(_sign_up(client, "third"), settings)
    _later(monkeypatch, settings.SIGNUP_RATE_WINDOW)
    assert _sign_up(client, "third").status_code == 302
    assert _accounts() == ["first", "second", "third"]


def test_a_refused_sign_up_says_nothing_of_whether_the_name_is_taken(client, settings):
    UserFactory(username="grace")
    settings.SIGNUP_RATE = 1
    assert _sign_up(client, "ada").status_code == 302
    taken, free = _sign_up(client, "grace"), _sign_up(client, "nobody-has-this")
    _refused(taken, settings)
    _refused(free, settings)
    assert "already exists" not in taken.text
    assert _without_csrf_token(taken.text).replace("grace", "nobody-has-this") == (
        _without_csrf_token(free.text)
    )
    assert _accounts() == ["ada", "grace"]


def test_refused_forms_are_limited_too_so_names_cannot_be_probed_without_end(client, settings):
    UserFactory(username="grace")
    settings.SIGNUP_FAILURES_PER_IP = 3
    for probe in ("grace", "GRACE", "Grace"):
        response = _sign_up(client, probe)
        assert response.status_code == 200 and "already exists" in response.text
    _refused(_sign_up(client, "grace"), settings)
    # A valid form from there too, until the window ends.
    _refused(_sign_up(client, "ada"), settings)
    assert _sign_up(client, "ada", ip=ELSEWHERE).status_code == 302
    assert _accounts() == ["ada", "grace"]


def test_a_person_correcting_typos_is_not_locked_out_and_keeps_every_account(client, settings):
    UserFactory(username="grace")
    # A taken name, passwords that differ, a password the rules refuse: then it works.
    assert _sign_up(client, "grace").status_code == 200
    assert _sign_up(client, "ada", password2=PASSPHRASE + "!").status_code == 200
    common = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": "password123", "password2": "password123"},
        REMOTE_ADDR=HOME,
    )
    assert common.status_code == 200 and "too common" in common.text
    assert _sign_up(client, "ada").status_code == 302
    # Refused forms do not spend the address's accounts.
    for n in range(1, settings.SIGNUP_RATE):
        assert _sign_up(client, f"ada{n}").status_code == 302


def test_the_address_is_the_peers_as_every_limit_counts_it(client, settings):
    """An IPv6 host by its /64, as the other limits count it; X-Forwarded-For, which any client
    can write, is not read."""
    settings.SIGNUP_RATE = 2
    assert _sign_up(client, "first", ip="2001:db8:5:6::1").status_code == 302
    assert _sign_up(client, "second", ip="2001:db8:5:6::2").status_code == 302
    _refused(_sign_up(client, "third", ip="2001:db8:5:6::3"), settings)
    assert _sign_up(client, "third", ip="2001:db8:5:7::1").status_code == 302
    forged = _sign_up(client, "fourth", ip="2001:db8:5:6::4", HTTP_X_FORWARDED_FOR=ELSEWHERE)
    _refused(forged, settings)
    assert _accounts() == ["first", "second", "third"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sign_ups_checked_together")
def test_sign_ups_sent_all_at_once_get_no_more_accounts_than_the_limit(settings):
    """Each passes the check before any is counted: the account is claimed before it is saved,
    so one over the limit is refused all the same."""
    settings.SIGNUP_RATE = 1
    statuses = []

    def sign_up(username: str) -> None:
        try:
            statuses.append(_sign_up(Client(raise_request_exception=False), username).status_code)
        finally:
            connection.close()

    workers = [threading.Thread(target=sign_up, args=(name,)) for name in ("ada", "grace")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert sorted(statuses) == [302, 429]
    assert len(_accounts()) == 1
