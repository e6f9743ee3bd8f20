"""Sign-up, log-in (throttled), log-out and password change, through the real views."""

import io
import re
import time
import typing
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import aauthenticate, get_user_model
from django.contrib.auth.management.commands import changepassword
from django.core.management import call_command
from django.forms import BaseForm
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from accounts.views import JUST_DELETED_SESSION_KEY, throttled
from tests.accounts.oauth_helpers import authorize_params, authorize_url, pkce_pair
from tests.factories import PASSWORD, ApplicationFactory, UserFactory

NEW_PASSWORD = "a much better passphrase 2026"


def autofocused(page: str) -> list[str]:
    """The names of the inputs a browser puts the cursor on when the page opens."""
    inputs = re.findall(r"<input\b[^>]*>", page)
    return [
        re.search(r'name="(\w+)"', tag)[1] for tag in inputs if re.search(r"\sautofocus\b", tag)
    ]


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
def test_sign_up_asks_for_no_e_mail_and_keeps_none(client):
    """Nothing sends e-mail here: sign-up neither asks for an address nor keeps one posted."""
    page = client.get(reverse("accounts:signup")).text
    assert 'name="email"' not in page and "mail" not in page.lower()
    client.post(
        reverse("accounts:signup"),
        {
            "username": "ada",
            "email": "ada@example.com",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
        },
    )
    assert get_user_model().objects.get(username="ada").email == ""


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
def test_a_password_the_rules_refuse_is_named_under_the_password_not_its_confirmation(client):
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": "password123", "password2": "password123"},
    )
    form = response.context["form"]
    assert "This password is too common." in form.errors["password1"]
    assert "password2" not in form.errors
    assert autofocused(response.text) == ["password1"]
    assert not get_user_model().objects.filter(username="ada").exists()


@pytest.mark.django_db
def test_a_refused_sign_up_puts_the_cursor_on_the_first_field_in_error(client):
    assert autofocused(client.get(reverse("accounts:signup")).text) == ["username"]
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD + "!"},
    )
    assert autofocused(response.text) == ["password2"]


@pytest.mark.django_db
def test_a_sign_up_post_without_any_field_names_what_is_required(client):
    response = client.post(reverse("accounts:signup"), {})
    assert response.status_code == 200 and "This field is required." in response.text
    assert not get_user_model().objects.exists()


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


# Where a client's authorization request sends a person who is not logged in.
AUTHORIZE = "/oauth/authorize/?response_type=code&client_id=abc&state=x%20y"
# `next` values that leave the site, or that a browser may read as leaving it.
OFF_SITE = [
    "https://evil.example/",
    "//evil.example/",
    "/\\evil.example/",
    "\\\\evil.example/",
    "https://testserver.evil.example/",
    "javascript:alert(1)",
    " //evil.example/",
]


def _sign_up(client, next_url: str | None, username: str = "ada"):
    data = {"username": username, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    if next_url is not None:
        data["next"] = next_url
    return client.post(reverse("accounts:signup"), data)


@pytest.mark.django_db
def test_sign_up_goes_on_to_the_page_it_was_asked_for(client):
    """As log-in does: a person sent to sign up from an OAuth authorization request lands back on
    it (its consent page) with the new account, not on /memories/."""
    response = _sign_up(client, AUTHORIZE)
    assert response.status_code == 302 and response["Location"] == AUTHORIZE
    assert client.session["_auth_user_id"] == str(get_user_model().objects.get().pk)


@pytest.mark.django_db
@pytest.mark.parametrize("next_url", OFF_SITE)
def test_sign_up_never_sends_anyone_off_site(client, next_url):
    """Validated as Django's log-in validates it: another host, a scheme-relative or backslashed
    address, or another scheme falls back to the default page, and is not put in the page."""
    page = client.get(reverse("accounts:signup"), {"next": next_url})
    assert "evil.example" not in page.text and "javascript:" not in page.text
    response = _sign_up(client, next_url)
    assert response.status_code == 302
    assert response["Location"] == reverse("accounts:memories")
    # The log-in page refuses the same addresses.
    client.logout()
    UserFactory(username="grace")
    logged_in = client.post(
        reverse("accounts:login"), {"username": "grace", "password": PASSWORD, "next": next_url}
    )
    assert logged_in.status_code == 302 and logged_in["Location"] == "/"


@pytest.mark.django_db
@pytest.mark.parametrize("next_url", ["memories", "http://testserver/apps/"])
def test_sign_up_takes_what_log_in_takes(client, next_url):
    """The same check as log-in's: this site's own absolute address, and a bare word (an address
    relative to the page, not the name of a URL: no 500)."""
    assert _sign_up(client, next_url)["Location"] == next_url
    client.logout()
    UserFactory(username="grace")
    logged_in = client.post(
        reverse("accounts:login"), {"username": "grace", "password": PASSWORD, "next": next_url}
    )
    assert logged_in["Location"] == next_url


@pytest.mark.django_db
def test_a_refused_sign_up_keeps_the_page_it_was_asked_for(client):
    response = client.post(
        reverse("accounts:signup"),
        {"username": "ada", "password1": "123", "password2": "123", "next": AUTHORIZE},
    )
    assert response.status_code == 200
    assert f'<input type="hidden" name="next" value="{escape(AUTHORIZE)}">' in response.text
    assert _sign_up(client, AUTHORIZE)["Location"] == AUTHORIZE


def test_a_signed_in_visit_to_sign_up_goes_on_to_the_page_it_was_asked_for(client, tenant):
    """Signed up or logged in in another tab meanwhile: the link still leads to the request."""
    client.force_login(tenant)
    response = client.get(reverse("accounts:signup"), {"next": AUTHORIZE})
    assert response.status_code == 302 and response["Location"] == AUTHORIZE
    response = client.get(reverse("accounts:signup"), {"next": "https://evil.example/"})
    assert response["Location"] == reverse("accounts:memories")


def _links(page: str, text: str) -> list[tuple[str, dict[str, list[str]]]]:
    """Each link reading `text` on the page: (its path, its query)."""
    hrefs = re.findall(rf'<a href="([^"]*)"[^>]*>{text}</a>', page)
    return [
        (urlsplit(unescape(href)).path, parse_qs(urlsplit(unescape(href)).query)) for href in hrefs
    ]


@pytest.mark.django_db
def test_log_in_and_sign_up_link_each_other_keeping_the_page_asked_for(client):
    """Both links on each page, the header's and the one under the form: whichever a person
    follows, the request they came from is kept."""
    kept = {"next": [AUTHORIZE]}
    log_in = client.get(reverse("accounts:login"), {"next": AUTHORIZE}).text
    assert _links(log_in, "Sign up") == [(reverse("accounts:signup"), kept)] * 2
    sign_up = client.get(reverse("accounts:signup"), {"next": AUTHORIZE}).text
    assert _links(sign_up, "Log in") == [(reverse("accounts:login"), kept)] * 2
    # Nothing asked for: plain links.
    assert _links(client.get(reverse("accounts:login")).text, "Sign up") == [("/signup/", {})] * 2
    assert _links(client.get(reverse("accounts:signup")).text, "Log in") == [("/login/", {})] * 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("usernames", [("Alice", "alice"), ("bob", "bob")])
@pytest.mark.usefixtures("sign_ups_checked_together")
def test_two_sign_ups_at_once_for_one_name_give_one_account(usernames):
    """Both pass the form's check before either inserts: the database's unique index on the
    lower-case name decides, and the other person sees the form again, naming the field."""
    import threading

    from django.db import connection
    from django.test import Client

    answers = []

    def sign_up(username: str) -> None:
        try:
            response = Client(raise_request_exception=False).post(
                reverse("accounts:signup"),
                {"username": username, "password1": NEW_PASSWORD, "password2": NEW_PASSWORD},
            )
            answers.append((response.status_code, response.text))
        finally:
            connection.close()

    workers = [threading.Thread(target=sign_up, args=(name,)) for name in usernames]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert sorted(status for status, _ in answers) == [200, 302]
    [refused] = [text for status, text in answers if status == 200]
    assert "A user with that username already exists." in refused
    assert get_user_model().objects.count() == 1


def test_a_signed_in_visit_to_the_log_in_page_sent_back_to_itself_goes_home(client, tenant):
    client.force_login(tenant)
    response = client.get(reverse("accounts:login"), {"next": reverse("accounts:login")})
    assert response.status_code == 302 and response["Location"] == "/"


PAGES = ["home", "memories", "account", "connected_apps", "signup", "account_deleted"]


@pytest.mark.parametrize("name", [*PAGES, "export_memories", "delete_account"])
def test_pages_answer_head_as_they_answer_get(client, tenant, name):
    """RFC 9110 §9.1: HEAD wherever GET (monitors and link checkers use it)."""
    client.force_login(tenant)
    url = reverse(f"accounts:{name}")
    assert client.head(url).status_code == client.get(url).status_code


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


@pytest.mark.django_db
def test_a_visitor_is_offered_sign_up_in_the_header_of_every_page(client, settings):
    signup_link = '<a href="/signup/"'
    for path in ("/login/", "/signup/", "/account/deleted/", "/no-such-page/"):
        if path == "/account/deleted/":  # shown right after an erasure alone
            session = client.session
            session[JUST_DELETED_SESSION_KEY] = True
            session.save()
        header = client.get(path).text.split("</header>")[0]
        assert signup_link in header, path
    header = client.get("/signup/").text.split("</header>")[0]
    assert '<a href="/signup/" aria-current="page">Sign up</a>' in header
    settings.SIGNUP_ENABLED = False
    assert signup_link not in client.get("/no-such-page/").text


def test_a_name_logs_in_in_any_case_as_it_is_unique_in_any_case(client, tenant):
    """Sign-up refuses "ADA" once "ada" exists; so "ADA" logs in to "ada" rather than being
    told the name or password is wrong."""
    response = _login(client, tenant.username.upper(), PASSWORD)
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(tenant.pk)
    # And so does Django's asynchronous authentication.
    found = async_to_sync(aauthenticate)(username=tenant.username.upper(), password=PASSWORD)
    assert found == tenant


def test_log_in_and_log_out(client, tenant):
    response = _login(client, tenant.username, PASSWORD)
    assert response.status_code == 302
    assert client.get(reverse("accounts:connected_apps")).status_code == 200
    # Log-out is POST only: a GET (a link or an <img> on another site) does nothing.
    assert client.get(reverse("accounts:logout")).status_code == 405
    assert client.get(reverse("accounts:connected_apps")).status_code == 200
    logged_out = client.post(reverse("accounts:logout"), follow=True)
    assert logged_out.redirect_chain == [(reverse("accounts:login"), 302)]
    assert "You are logged out." in logged_out.text
    response = client.get(reverse("accounts:connected_apps"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_wrong_password_says_so_without_naming_which_part_was_wrong(client, tenant):
    response = _login(client, tenant.username, "wrong")
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.text


def test_a_refused_log_in_puts_the_cursor_on_the_emptied_password(client, tenant):
    """The username comes back as typed, the password empty: the cursor was in the username,
    so a person retyping the password typed it there, or had to Tab first. The admin's too."""
    for path in (reverse("accounts:login"), "/admin/login/"):
        assert autofocused(client.get(path).text) == ["username"], path
        page = client.post(path, {"username": tenant.username, "password": "wrong"}).text
        assert autofocused(page) == ["password"], path
        assert f'value="{tenant.username}"' in page, path
        page = client.post(path, {"username": "", "password": "wrong"}).text
        assert autofocused(page) == ["username"], path


def test_a_refused_log_in_says_only_the_password_is_case_sensitive(client, tenant):
    """Names log in in any case, so "both fields may be case-sensitive" (Django's wording) would
    send a person retyping a right username in other cases; the admin's log-in alike."""
    for path in (reverse("accounts:login"), "/admin/login/"):
        page = client.post(path, {"username": tenant.username.upper(), "password": "wrong"}).text
        assert "may be case-sensitive" not in page, path
        assert "Note that the password is case-sensitive; the username is not." in page, path


def test_failed_log_ins_are_throttled_per_account_and_address(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 3
    for _ in range(3):
        _login(client, tenant.username, "wrong", ip="198.51.100.1")
    # Even the right password is refused from there, without being checked.
    response = _login(client, tenant.username.upper(), PASSWORD, ip="198.51.100.1")
    assert response.status_code == 429
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    assert abs(int(response["Retry-After"]) - (window - time.time() % window)) <= 2
    assert "Too many failed password attempts" in response.text
    assert "_auth_user_id" not in client.session
    # The owner, from their own address, is not locked out by a stranger's guesses.
    assert _login(client, tenant.username, PASSWORD, ip="203.0.113.7").status_code == 302


def test_the_throttled_answer_takes_any_form():
    """The log-in, sign-up, account deletion and admin log-in pages share it: a form of any kind,
    refused by a limit when it carries `retry_after`."""
    assert typing.get_type_hints(throttled) == {
        "response": HttpResponse,
        "form": BaseForm,
        "return": HttpResponse,
    }


@pytest.mark.django_db
def test_a_spelling_that_logs_in_to_an_account_shares_its_budget(client, settings):
    """The database lowers "İ" to "i" as it compares names, so "İRIS" logs in to "iris": it
    must not be a fresh budget of guesses at that account's password."""
    iris = UserFactory(username="iris")
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 3
    for _ in range(3):
        _login(client, iris.username, "wrong", ip="198.51.100.1")
    assert _login(client, "İRIS", PASSWORD, ip="198.51.100.1").status_code == 429
    assert _login(client, "İRIS", PASSWORD, ip="203.0.113.7").status_code == 302
    assert client.session["_auth_user_id"] == str(iris.pk)


def test_the_account_wide_ceiling_spares_addresses_the_owner_logged_in_from(
    client, tenant, settings
):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 4
    assert _login(client, tenant.username, PASSWORD, ip="203.0.113.7").status_code == 302
    client.post(reverse("accounts:logout"))
    for attempt in range(4):  # guesses spread over many addresses
        _login(client, tenant.username, "wrong", ip=f"198.51.100.{attempt}")
    assert _login(client, tenant.username, PASSWORD, ip="198.51.100.99").status_code == 429
    assert _login(client, tenant.username, PASSWORD, ip="203.0.113.7").status_code == 302
    # Another account is unaffected.
    other = UserFactory()
    assert _login(client, other.username, PASSWORD, ip="198.51.100.99").status_code == 302


def test_failed_log_ins_are_throttled_per_ip(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_IP = 4
    for attempt in range(4):
        _login(client, f"guess{attempt}", "wrong", ip="192.0.2.1")
    assert _login(client, tenant.username, PASSWORD, ip="192.0.2.1").status_code == 429
    assert _login(client, tenant.username, PASSWORD, ip="192.0.2.2").status_code == 302


def test_a_successful_log_in_clears_the_count_of_its_address(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 3
    _login(client, tenant.username, "wrong")
    _login(client, tenant.username, "wrong")
    assert _login(client, tenant.username, PASSWORD).status_code == 302
    client.post(reverse("accounts:logout"))
    _login(client, tenant.username, "wrong")
    _login(client, tenant.username, "wrong")
    assert _login(client, tenant.username, PASSWORD).status_code == 302


@pytest.mark.django_db
def test_the_admin_log_in_is_throttled_with_the_same_budget(client, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 5
    staff = UserFactory(is_staff=True, is_superuser=True)
    for _ in range(3):
        _login(client, staff.username, "wrong", ip="198.51.100.5")
    for _ in range(2):
        response = client.post(
            "/admin/login/",
            {"username": staff.username, "password": "wrong"},
            REMOTE_ADDR="198.51.100.5",
        )
        assert response.status_code == 200
    response = client.post(
        "/admin/login/",
        {"username": staff.username, "password": PASSWORD},
        REMOTE_ADDR="198.51.100.5",
    )
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed password attempts" in response.text
    assert "_auth_user_id" not in client.session
    # The admin still refuses non-staff, throttled or not.
    tenant = UserFactory()
    response = client.post("/admin/login/", {"username": tenant.username, "password": PASSWORD})
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def _change_password(client, old: str, ip: str = "203.0.113.7"):
    return client.post(
        reverse("accounts:password_change"),
        {"old_password": old, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        REMOTE_ADDR=ip,
    )


def test_the_password_change_re_check_is_throttled(client, tenant, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = 5
    client.force_login(tenant)
    for _ in range(5):
        assert _change_password(client, "wrong").status_code == 200
    response = _change_password(client, PASSWORD)
    assert response.status_code == 429
    assert "Too many failed password attempts" in response.text
    tenant.refresh_from_db()
    assert tenant.check_password(PASSWORD)
    # The count is the log-in's: the same account cannot log in from that address either.
    client.logout()
    assert _login(client, tenant.username, PASSWORD).status_code == 429


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


def test_a_refused_password_change_puts_the_cursor_on_the_first_field_in_error(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": "other"},
    )
    assert response.status_code == 200 and autofocused(response.text) == ["new_password2"]


def test_a_new_password_the_rules_refuse_is_named_under_it_not_its_confirmation(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": PASSWORD, "new_password1": "password123", "new_password2": "password123"},
    )
    form = response.context["form"]
    assert "This password is too common." in form.errors["new_password1"]
    assert "new_password2" not in form.errors
    assert autofocused(response.text) == ["new_password1"]
    tenant.refresh_from_db()
    assert tenant.check_password(PASSWORD)


def test_a_new_password_the_same_as_the_current_one_is_refused_under_it(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": PASSWORD, "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors["new_password1"] == ["The new password must differ from your current one."]
    assert autofocused(response.text) == ["new_password1"]


def test_a_wrong_old_password_tells_nothing_of_whether_the_new_one_is_it(client, tenant):
    client.force_login(tenant)
    response = client.post(
        reverse("accounts:password_change"),
        {"old_password": "nope", "new_password1": "nope", "new_password2": "nope"},
    )
    assert "must differ" not in response.text


@pytest.mark.django_db
def test_a_form_whose_csrf_check_fails_gets_the_sites_page(tenant):
    """A log-in form left open while the person logged in elsewhere: a page that says what to
    do, without naming settings or styling itself inline (the site's CSP allows neither)."""
    browser = Client(enforce_csrf_checks=True)
    response = browser.post(
        reverse("accounts:login"), {"username": tenant.username, "password": "whatever"}
    )
    assert response.status_code == 403
    assert "This form has expired" in response.text
    assert "reload the page and try again" in response.text
    assert "DEBUG" not in response.text and "<style" not in response.text


@pytest.mark.django_db
def test_a_stale_log_in_form_sent_once_logged_in_goes_on_where_it_was_going(tenant):
    """Left open in a second tab while logging in from the first: what it was for is done, so
    it is no dead end, and its `next` is followed as a log-in follows it."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(tenant)
    stale = {"username": tenant.username, "password": "whatever", "next": "/account/"}
    response = browser.post(reverse("accounts:login"), stale, follow=True)
    assert response.redirect_chain[-1] == ("/account/", 302)
    elsewhere = {**stale, "next": "https://evil.example.com/"}
    response = browser.post(reverse("accounts:login"), elsewhere, follow=True)
    assert response.redirect_chain[-1][0] == "/memories/"  # the default page, not that site


@pytest.mark.django_db
def test_a_method_an_address_does_not_take_is_explained(client, tenant):
    client.force_login(tenant)
    page = client.get(reverse("accounts:logout"))
    assert page.status_code == 405 and page["Allow"] == "POST, OPTIONS"
    assert "GET is not allowed here; this address takes POST, OPTIONS" in page.text
    token = client.get("/oauth/token/")
    assert token.status_code == 405
    assert token.json()["error"] == "invalid_request"
    assert token.json()["error_description"].startswith("GET is not allowed here")
    metadata = client.post("/.well-known/oauth-authorization-server")
    assert metadata.status_code == 405
    assert metadata.json()["error_description"] == (
        "POST is not allowed here; this address takes GET, HEAD, OPTIONS"
    )


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "PROPFIND"])
def test_the_authorization_server_metadata_refuses_other_methods_in_json(method):
    """A program's POST carries no CSRF token: it got the site's "form expired" page."""
    response = Client(enforce_csrf_checks=True).generic(
        method, "/.well-known/oauth-authorization-server"
    )
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD, OPTIONS"
    assert response.json() == {
        "error": "invalid_request",
        "error_description": f"{method} is not allowed here; this address takes GET, HEAD, OPTIONS",
    }


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["accounts:login", "accounts:password_change", "accounts:signup"])
def test_a_form_page_takes_its_form_by_post_only(client, tenant, page):
    """Django's form views took PUT as a POST without its fields: "This field is required." for
    fields that were sent."""
    if page == "accounts:password_change":
        client.force_login(tenant)
    response = client.put(reverse(page), "username=a&password=b")
    assert response.status_code == 405
    assert "PUT is not allowed here" in response.text


ASKING = "Log in to let"


def _log_in_page_after_authorize(client, application) -> str:
    """The log-in page an anonymous visitor lands on from `application`'s authorization request."""
    _, challenge = pkce_pair()
    response = client.get(authorize_url(authorize_params(application, challenge)), follow=True)
    assert response.redirect_chain[-1][0].startswith(reverse("accounts:login")), response
    return response.text


@pytest.mark.django_db
def test_the_log_in_page_names_the_app_whose_authorization_request_sent_you(client):
    application = ApplicationFactory(name="Claude <b>Code</b>")
    page = _log_in_page_after_authorize(client, application)
    assert (
        "Log in to let <q><bdi>Claude &lt;b&gt;Code&lt;/b&gt;</bdi></q> reach your memories."
        in page
    )
    # Still there when a wrong password sends the form back.
    next_url = re.search(r'name="next" value="([^"]*)"', page)[1].replace("&amp;", "&")
    refused = client.post(
        reverse("accounts:login"),
        {"username": "nobody", "password": "wrong", "next": next_url},
    )
    assert "Log in to let <q><bdi>Claude &lt;b&gt;Code&lt;/b&gt;</bdi></q>" in refused.text


@pytest.mark.django_db
def test_an_unnamed_app_is_called_so_on_the_log_in_page(client):
    page = _log_in_page_after_authorize(client, ApplicationFactory(name=""))
    assert "Log in to let an unnamed application reach your memories." in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    "next_url",
    [
        "/oauth/authorize/?client_id=no-such-client&client_name=Claude",
        "/oauth/authorize/?client_name=Claude",
        "/oauth/authorize/?client_id=%00",
        "/oauth/authorize/?client_id=" + "x" * 5000,
        "/oauth/authorize/?client_id={known}&client_id=no-such-client",
        "http://evil.example/oauth/authorize/?client_id={known}",
        "//evil.example/oauth/authorize/?client_id={known}",
        "http://[/oauth/authorize/?client_id={known}",
        "/memories/?client_id={known}",
    ],
)
def test_the_log_in_page_names_no_app_for_an_unknown_client_or_a_foreign_next(client, next_url):
    """Only a client_id registered here names an app, and only in a `next` this site would follow:
    anything else in the URL is anyone's to write."""
    known = ApplicationFactory(name="Claude")
    response = client.get(
        reverse("accounts:login"), {"next": next_url.format(known=known.client_id)}
    )
    assert response.status_code == 200
    assert ASKING not in response.text


@pytest.mark.django_db
def test_the_log_in_page_without_an_app_asking_says_nothing_of_one(client):
    assert ASKING not in client.get(reverse("accounts:login")).text


@pytest.mark.django_db
def test_the_log_in_page_says_what_to_do_about_a_forgotten_password(client):
    page = client.get(reverse("accounts:login")).text
    assert "Forgot your password?" in page
    assert "python manage.py changepassword <var>your-username</var>" in page


def test_the_reset_the_log_in_page_names_lets_the_person_in_again(client, tenant, monkeypatch):
    """What the page tells a person to ask for works here: the operator's changepassword sets the
    new password, ends the sessions the old one opened, and the person logs in with it."""
    elsewhere = Client()
    elsewhere.force_login(tenant)
    # Django's command reads the password from a terminal; the test types it.
    monkeypatch.setattr(changepassword.Command, "_get_pass", lambda self, prompt="": NEW_PASSWORD)
    call_command("changepassword", tenant.username, stdout=io.StringIO())
    assert _login(client, tenant.username, PASSWORD).status_code == 200  # the old one: refused
    assert _login(client, tenant.username, NEW_PASSWORD).status_code == 302
    assert elsewhere.get(reverse("accounts:account")).status_code == 302  # sent to log in
