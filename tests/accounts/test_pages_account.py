"""The account page: what the account holds about its person, and the e-mail address an account
gave when sign-up still asked for one, which its person can see and remove."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_an_address_given_at_sign_up_is_shown_with_a_way_to_remove_it(client):
    person = UserFactory(username="ana", email="ana@example.com")
    client.force_login(person)
    page = client.get(reverse("accounts:account")).text
    assert "<dt>E-mail</dt><dd>ana@example.com</dd>" in page
    assert f'action="{reverse("accounts:forget_email")}"' in page
    # Sign-up asks for no address: the page must not say this one came from it as it is now.
    assert "Sign-up asks for none; this one was given when it still did" in page
    assert "asked for at sign-up" not in page

    removed = client.post(reverse("accounts:forget_email"), follow=True)
    person.refresh_from_db()
    assert person.email == ""
    assert "Your e-mail address is removed." in removed.text
    assert "ana@example.com" not in removed.text
    assert reverse("accounts:forget_email") not in removed.text


def test_an_account_without_an_address_shows_none(client):
    client.force_login(UserFactory(email=""))
    page = client.get(reverse("accounts:account")).text
    assert "E-mail" not in page and reverse("accounts:forget_email") not in page


def test_removing_takes_a_post_from_the_signed_in_person_only(client):
    person = UserFactory(email="ana@example.com")
    other = UserFactory(email="bo@example.com")
    assert client.post(reverse("accounts:forget_email")).status_code == 302  # to log in
    client.force_login(person)
    assert client.get(reverse("accounts:forget_email")).status_code == 405
    client.post(reverse("accounts:forget_email"))
    person.refresh_from_db()
    other.refresh_from_db()
    assert (person.email, other.email) == ("", "bo@example.com")
