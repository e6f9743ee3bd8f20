"""NUL and lone surrogates are refused where they enter the site (accounts/middleware.py):
a clear 400, `invalid_request` on the OAuth endpoints, never a 500 from PostgreSQL."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from django.test import Client

from tests.factories import PASSWORD, ApplicationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return Client(raise_request_exception=False)


@pytest.mark.parametrize(
    ("path", "form", "named"),
    [
        (
            "/oauth/token/",
            {"grant_type": "authorization_code", "client_id": "a\x00b"},
            "'client_id'",
        ),
        ("/oauth/token/", {"grant_type": "authorization_code", "code": "a\x00b"}, "'code'"),
        ("/oauth/token/", {"grant_type": "refresh_token", "refresh_token": "\x00"}, "refresh"),
        ("/oauth/revoke/", {"client_id": "a\x00b", "token": "t"}, "'client_id'"),
        ("/oauth/revoke/", {"client_id": "c", "token": "t\x00"}, "'token'"),
        ("/oauth/token/", {"grant_type\x00": "x"}, "grant_type"),
    ],
)
def test_oauth_parameters_with_nul_are_invalid_request(client, path, form, named):
    response = client.post(path, form)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request"
    assert named in body["error_description"] and "NUL" in body["error_description"]


def test_a_nul_in_http_basic_client_credentials_names_no_client(client):
    application = ApplicationFactory()
    credentials = base64.b64encode(f"{application.client_id}%00:secret".encode()).decode()
    response = client.post(
        "/oauth/token/",
        {"grant_type": "authorization_code", "code": "x"},
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_a_nul_sent_to_the_version_address_is_refused_in_json(client):
    """/version answers programs in JSON: its refusal is JSON too, not the site's page."""
    response = client.get("/version", {"client": "a\x00b"})
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "query parameter 'client': must not contain NUL characters",
    }


def test_a_nul_in_a_registrations_address_is_answered_as_an_unknown_client(client):
    """RFC 7592: the client id in the configuration endpoint's path is matched against the
    registration token's client; one with a NUL is a client id like any other it is not for."""
    registration = client.post(
        "/oauth/register/",
        {"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "none"},
        content_type="application/json",
    ).json()
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {registration['registration_access_token']}"}

    def answer(method: str, client_id: str, credentials: dict, slash: str = "/") -> tuple:
        response = client.generic(
            method,
            f"/oauth/register/{client_id}{slash}",
            '{"redirect_uris": ["https://a.example/cb"]}',
            content_type="application/json",
            **credentials,
        )
        return response.status_code, response.content, response.get("WWW-Authenticate")

    for method in ("GET", "PUT", "DELETE"):
        for credentials in ({}, bearer):
            unknown = answer(method, "unknown-client", credentials)
            assert unknown[0] == 401 and b"invalid_token" in unknown[1]
            for client_id in ("%00", "a%00b"):
                assert answer(method, client_id, credentials) == unknown
                # Without its trailing slash, redirected to it as any other address.
                assert answer(method, client_id, credentials, slash="")[0] == 301
    assert client.get(f"/oauth/register/{registration['client_id']}/", **bearer).status_code == 200


def test_authorization_request_with_nul_is_a_400_page(client, tenant):
    client.force_login(tenant)
    response = client.get("/oauth/authorize/", {"client_id": "a\x00b", "response_type": "code"})
    assert response.status_code == 400
    assert "client_id" in response.text and "NUL" in response.text


def test_registration_json_with_nul_or_a_lone_surrogate_is_refused(client):
    for name in ('"Cl\\u0000aude"', '"Cl\\ud800aude"'):
        body = '{"client_name": ' + name + ', "redirect_uris": ["https://a.example/cb"]}'
        response = client.post("/oauth/register/", body, content_type="application/json")
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_client_metadata"
        assert "client_name" in response.json()["error_description"]


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/memories/", {"page": "1\x00"}),
        ("/memories/?show=all&q%00=x", None),
        ("/memories/00000000-0000-0000-0000-000000000000/", {"q": "\x00"}),
        ("/apps/", {"q": "\x00"}),
        ("/admin/memories/memory/", {"q": "\x00"}),
    ],
)
def test_query_parameters_with_nul_are_a_400_page(client, tenant, path, data):
    tenant.is_staff = tenant.is_superuser = True
    tenant.save()
    client.force_login(tenant)
    response = client.get(path, data)
    assert response.status_code == 400
    assert "must not contain NUL characters" in response.text
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("path", "form"),
    [
        ("/login/", {"username": "a\x00b", "password": "x"}),
        ("/admin/login/", {"username": "admin", "password": "x\x00"}),
        ("/signup/", {"username": "ada\x00", "password1": "x", "password2": "x"}),
    ],
)
def test_form_fields_with_nul_are_a_400_page(client, path, form):
    response = client.post(path, form)
    assert response.status_code == 400
    assert "form field" in response.text


def test_logged_in_forms_with_nul_change_nothing(client, tenant):
    client.force_login(tenant)
    response = client.post("/account/delete/", {"password": "\x00"})
    assert response.status_code == 400
    tenant.refresh_from_db()
    assert tenant.erased_at is None


def test_a_session_cookie_with_nul_is_a_400_not_a_database_error(client):
    # http.cookies unquotes octal escapes: "\000" in a quoted cookie value becomes NUL.
    response = client.get("/login/", HTTP_COOKIE='sessionid="abcdefgh\\000ijkl"')
    assert response.status_code == 400
    assert "cookie" in response.text
    # A cookie this site does not read (another app on the same host) is left alone.
    assert client.get("/login/", HTTP_COOKIE='other="abcdefgh\\000ijkl"').status_code == 200


def test_a_path_with_nul_is_a_400(client):
    response = client.get("/memories/%00/")
    assert response.status_code == 400


def _fields(count: int) -> str:
    return "&".join(f"f{n}=1" for n in range(count))


@pytest.mark.parametrize(
    ("path", "body", "content_type", "error", "limit"),
    [
        ("/oauth/token/", lambda s: _fields(s.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1), "form",
         "invalid_request", "more than 1000 form fields"),
        ("/oauth/revoke/", lambda s: "token=" + "x" * s.DATA_UPLOAD_MAX_MEMORY_SIZE, "form",
         "invalid_request", "larger than 2621440 bytes"),
        ("/oauth/register/", lambda s: '{"client_name": "' + "x" * s.DATA_UPLOAD_MAX_MEMORY_SIZE
         + '"}', "application/json", "invalid_client_metadata", "larger than 2621440 bytes"),
    ],
)  # fmt: skip
def test_a_body_past_the_size_limits_gets_the_endpoints_json_error_naming_the_limit(
    client, settings, path, body, content_type, error, limit
):
    content_type = "application/x-www-form-urlencoded" if content_type == "form" else content_type
    response = client.generic("POST", path, body(settings), content_type=content_type)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert limit in response.json()["error_description"]


def test_a_page_form_past_the_field_limit_says_so(client, settings):
    response = client.post(
        "/accounts/login/",
        _fields(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1),
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assert b"more than 1000 form fields" in response.content


_NO_BOUNDARY = (
    "multipart/form-data needs a boundary parameter of 1 to 201 printable ASCII characters; got "
)


@pytest.mark.parametrize(
    ("path", "content_type", "reason"),
    [
        ("/oauth/token/", "application/x-www-form-urlencoded; charset=utf-16",
         "content type must be UTF-8 encoded"),
        ("/oauth/revoke/", "multipart/form-data", _NO_BOUNDARY + "none"),
        ("/oauth/token/", "multipart/form-data; boundary=", _NO_BOUNDARY + "an empty one"),
        ("/oauth/token/", "multipart/form-data; boundary=" + "b" * 300,
         _NO_BOUNDARY + "one of 300 characters"),
    ],
)  # fmt: skip
def test_an_oauth_body_that_cannot_be_read_as_a_form_gets_invalid_request_saying_why(
    client, path, content_type, reason
):
    """A client's answer is JSON with the reason, not the site's HTML page with none."""
    response = client.generic("POST", path, b"token=ab", content_type=content_type)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert "the body could not be read as a form: " in response.json()["error_description"]
    assert reason in response.json()["error_description"]


@pytest.mark.parametrize(
    ("path", "signed_in"),
    [
        ("/signup/", False),
        ("/login/", False),
        ("/account/password/", True),
        ("/account/delete/", True),
    ],
)
def test_a_page_form_sent_as_json_is_refused_naming_the_types_it_takes(
    client, tenant, path, signed_in
):
    """Django reads a JSON body as no fields at all: the page said "This field is required."
    of fields that were sent."""
    if signed_in:
        client.force_login(tenant)
    passwords = ("password", "old_password", "password1", "password2")
    fields = {"username": "ada", **dict.fromkeys(passwords, PASSWORD)}
    for content_type in ("application/json", ""):
        response = client.generic("POST", path, json.dumps(fields), content_type=content_type)
        assert response.status_code == 415
        sent = content_type or "a body without a Content-Type"
        assert (
            "the body must be a form (application/x-www-form-urlencoded or "
            f"multipart/form-data), not {sent}. Nothing was changed."
        ) in response.text
        assert "This field is required" not in response.text
    tenant.refresh_from_db()
    assert tenant.check_password(PASSWORD) and tenant.erased_at is None
    # Sent as a form, the fields are read (here a wrong password, which the page names).
    wrong = {"username": "ada", **dict.fromkeys((*passwords, "new_password1"), "wrong")}
    response = client.post(path, {**wrong, "new_password2": "other"})
    assert response.status_code == 200 and "This field is required" not in response.text


@pytest.mark.parametrize(
    ("path", "content_type", "reason"),
    [
        ("/login/", "application/x-www-form-urlencoded; charset=utf-16",
         "content type must be UTF-8 encoded"),
        ("/signup/", "multipart/form-data", _NO_BOUNDARY + "none"),
    ],
)  # fmt: skip
def test_a_page_form_that_cannot_be_read_says_why(client, path, content_type, reason):
    response = client.generic("POST", path, b"username=ab", content_type=content_type)
    assert response.status_code == 400
    assert "This request could not be used: the body could not be read as a form: " in (
        response.text
    )
    assert reason in response.text


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/oauth/token/", "invalid_request"),
        ("/oauth/revoke/", "invalid_request"),
        ("/oauth/register/", "invalid_client_metadata"),
    ],
)
@pytest.mark.parametrize("coding", ["gzip", "br", "deflate, gzip"])
def test_a_body_in_a_content_coding_is_refused_naming_it(client, path, error, coding):
    """Django decodes no content coding: a gzip body was read as a form whose one field was
    the compressed bytes, and the answer quoted them."""
    body = gzip.compress(b"grant_type=authorization_code&code=abc")
    response = client.generic(
        "POST", path, body, content_type="application/x-www-form-urlencoded",
        HTTP_CONTENT_ENCODING=coding,
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json() == {
        "error": error,
        "error_description": f"Content-Encoding {coding} is not supported; send the body as is",
    }


def test_a_page_form_in_a_content_coding_is_refused_naming_it(client):
    body = gzip.compress(b"username=ada&password=secret")
    response = client.generic(
        "POST", "/login/", body, content_type="application/x-www-form-urlencoded",
        HTTP_CONTENT_ENCODING="gzip",
    )  # fmt: skip
    assert response.status_code == 415
    assert "Content-Encoding gzip is not supported; send the body as is" in response.text


def test_a_body_marked_identity_is_read(client):
    response = client.generic(
        "POST", "/oauth/token/", "grant_type=password", HTTP_CONTENT_ENCODING="identity",
        content_type="application/x-www-form-urlencoded",
    )  # fmt: skip
    assert response.json()["error"] == "unsupported_grant_type"
