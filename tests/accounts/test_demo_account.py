"""`manage.py demo_account`, which `dev.py serve` runs at every start: the quick start's login,
with a few memories, whatever happened to the account before."""

import io

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.erasure import erase_account
from memories.models import ERASED, Memory


def demo_account() -> str:
    out = io.StringIO()
    call_command("demo_account", stdout=out)
    return out.getvalue()


def test_it_creates_the_printed_login_with_a_few_memories_once(db):
    assert "username 'demo', password 'demo-password-change-me'" in demo_account()
    demo_account()  # a second start resets the password and adds nothing
    demo = authenticate(username="demo", password="demo-password-change-me")
    assert demo is not None
    assert Memory.objects.filter(owner=demo).count() == 3


def test_an_erased_demo_account_comes_back_as_a_new_account(db):
    demo_account()
    erased = get_user_model().objects.get(username="demo")
    erase_account(user=erased)
    demo_account()
    again = get_user_model().objects.get(username="demo")
    assert again.pk != erased.pk and again.is_active
    assert Memory.objects.filter(owner=again).count() == 3
    # The erased account stays erased: its memories are not given back.
    assert set(Memory.objects.filter(owner=erased).values_list("content", flat=True)) == {ERASED}


def test_a_person_who_signed_up_as_demo_in_another_case_keeps_their_account(db):
    demo_account()
    erase_account(user=get_user_model().objects.get(username="demo"))
    # Sign-up refuses the name (the next test); an account made by another way in, or before
    # sign-up reserved it, can still hold it.
    get_user_model().objects.create_user(username="Demo", password="a-long-passphrase-9")
    assert demo_account() == (
        "no demo login: the name is taken by the account 'Demo', signed up on this server\n"
    )
    assert authenticate(username="Demo", password="a-long-passphrase-9") is not None
    assert not get_user_model().objects.filter(username="demo").exists()


def test_no_one_signs_up_as_demo_to_have_their_password_reset_to_the_published_one(db, client):
    """After the demo account was erased its name is free in the table, but not at sign-up: the
    next start would take the account named 'demo' for the demo's and give it the published
    password, and anyone could read what its holder stored."""
    demo_account()
    erase_account(user=get_user_model().objects.get(username="demo"))
    for name in ("demo", "DEMO"):
        signed_up = client.post(
            "/signup/",
            {
                "username": name,
                "password1": "a-long-passphrase-9",
                "password2": "a-long-passphrase-9",
            },
        )
        assert signed_up.status_code == 200
        assert "kept for the demo account" in signed_up.text
    demo_account()
    assert authenticate(username="demo", password="a-long-passphrase-9") is None


def test_a_demo_password_the_validators_refuse_is_named_and_changes_nothing(db, monkeypatch):
    """DEMO_PASSWORD is for a server others can reach: it is held to the password rules every
    account is, or anyone could guess their way into the demo account."""
    demo_account()
    for weak in ("a", "demo", "12345678"):
        monkeypatch.setenv("DEMO_PASSWORD", weak)
        with pytest.raises(
            CommandError, match=r"^DEMO_PASSWORD is refused: .*(short|common|similar|numeric)"
        ):
            demo_account()
        assert authenticate(username="demo", password=weak) is None
    assert authenticate(username="demo", password="demo-password-change-me") is not None


def test_a_weak_demo_password_makes_no_account(db, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a")
    with pytest.raises(CommandError, match="DEMO_PASSWORD"):
        demo_account()
    assert not get_user_model().objects.filter(username="demo").exists()


def test_a_strong_demo_password_is_the_login(db, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "quiet-lantern-orbit-47")
    assert "password 'quiet-lantern-orbit-47'" in demo_account()
    assert authenticate(username="demo", password="quiet-lantern-orbit-47") is not None


def test_an_empty_demo_password_is_the_default_one(db, monkeypatch):
    """`DEMO_PASSWORD=` (a compose file, an .env line left blank) means unset, as `dev.py serve`
    reads it: the published password, not an empty one no log-in form accepts."""
    monkeypatch.setenv("DEMO_PASSWORD", "")
    assert "password 'demo-password-change-me'" in demo_account()
    assert authenticate(username="demo", password="demo-password-change-me") is not None
