"""Hostile input to the OAuth endpoints and the pages: property-based fuzzing with hypothesis.

Random form fields, query parameters and JSON bodies, with NUL, lone surrogates, huge and odd
values, sent through Django's full middleware stack to the token, revocation, registration
(POST and PUT) and authorization endpoints, the log-in forms (site and admin), sign-up, the
memory list and the password re-checks, logged in and not. The property: never a 5xx, never a
stack trace; the OAuth endpoints that clients call answer JSON errors.
`FUZZ_PAGE_EXAMPLES` (environment) sets the number of cases; 400 by default.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlencode

import pytest
from django.test import Client, override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import MemoryFactory, UserFactory

EXAMPLES = int(os.environ.get("FUZZ_PAGE_EXAMPLES", "400"))
TRACE_MARKERS = ("Traceback", 'File "/', "site-packages", "psycopg", "django.db", "DATABASE_URL")
JSON_ENDPOINTS = ("/oauth/token/", "/oauth/revoke/", "/oauth/register/")

hostile_text = st.text(
    alphabet=st.characters(codec=None, categories=None), max_size=30
) | st.sampled_from(
    ["", "\x00", "a\x00b", "\ud800", "x\udfffy", "%00", "' OR 1=1 --", "💥" * 5, "x" * 5000]
)
FIELDS = {
    "/oauth/token/": [
        "grant_type",
        "code",
        "client_id",
        "client_secret",
        "redirect_uri",
        "code_verifier",
        "refresh_token",
        "resource",
        "scope",
    ],
    "/oauth/revoke/": ["token", "token_type_hint", "client_id", "client_secret"],
    "/oauth/authorize/": [
        "response_type",
        "client_id",
        "redirect_uri",
        "state",
        "scope",
        "code_challenge",
        "code_challenge_method",
        "resource",
    ],
    "/login/": ["username", "password", "next"],
    "/admin/login/": ["username", "password", "next"],
    "/signup/": ["username", "email", "password1", "password2", "next"],
    "/memories/": ["q", "show", "page"],
    "/account/password/": ["old_password", "new_password1", "new_password2"],
    "/account/delete/": ["password"],
}
GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials", "password"]
metadata_keys = st.sampled_from(
    [
        "client_name",
        "redirect_uris",
        "grant_types",
        "response_types",
        "token_endpoint_auth_method",
        "scope",
        "client_uri",
    ]
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | hostile_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(hostile_text, children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def form_requests(draw: st.DrawFn) -> tuple[str, str, dict, bool]:
    path = draw(st.sampled_from(sorted(FIELDS)))
    names = st.sampled_from(FIELDS[path]) | hostile_text
    data = draw(st.dictionaries(names, hostile_text | st.sampled_from(GRANT_TYPES), max_size=6))
    method = "get" if path in ("/oauth/authorize/", "/memories/") else "post"
    if path == "/oauth/authorize/" and draw(st.booleans()):
        method = "post"  # the consent form's submission
    return method, path, data, draw(st.booleans())


@st.composite
def registration_requests(draw: st.DrawFn) -> tuple[str, str, object, bool]:
    metadata = draw(st.dictionaries(metadata_keys | hostile_text, json_values, max_size=6))
    if draw(st.booleans()):
        metadata.setdefault("redirect_uris", ["https://client.example/cb"])
    body = metadata if draw(st.integers(0, 9)) else draw(json_values)
    return draw(st.sampled_from(["post", "put"])), "/oauth/register/", body, False


def _encoded(data: dict) -> str:
    """Form encoding as a hostile client does it: UTF-8 bytes, lone surrogates included (the
    server decodes them as U+FFFD; NUL arrives as it is)."""
    return urlencode(
        {
            k.encode(errors="surrogatepass"): v.encode(errors="surrogatepass")
            for k, v in data.items()
        }
    )


def _check(response, case: object) -> None:
    text = response.content.decode("utf-8", "replace")
    assert response.status_code < 500, (response.status_code, text[:300], case)
    for marker in TRACE_MARKERS:
        assert marker not in text, (marker, text[:300], case)
    if case[1].startswith(JSON_ENDPOINTS) and response.status_code >= 400:
        assert "error" in response.json(), (text[:300], case)


@pytest.mark.django_db
@override_settings(
    OAUTH_REGISTRATION_RATE=10**6,
    OAUTH_TOKEN_RATE=10**6,
    SIGNUP_RATE=10**6,
    SIGNUP_FAILURES_PER_IP=10**6,
)
def test_hostile_forms_queries_and_registrations_never_get_a_500():
    tenant = UserFactory()
    MemoryFactory(owner=tenant, content="fuzz target")
    anonymous = Client(raise_request_exception=False)
    signed_in = Client(raise_request_exception=False)
    signed_in.force_login(tenant)
    registration = anonymous.post(
        "/oauth/register/",
        {"redirect_uris": ["https://client.example/cb"], "token_endpoint_auth_method": "none"},
        content_type="application/json",
    ).json()
    statuses: dict[int, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=form_requests() | registration_requests())
    def fuzz(case: tuple[str, str, object, bool]) -> None:
        method, path, data, logged_in = case
        client = signed_in if logged_in else anonymous
        if path == "/oauth/register/":
            body = json.dumps(data)
            if method == "put":
                response = client.put(
                    f"/oauth/register/{registration['client_id']}/",
                    body,
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {registration['registration_access_token']}",
                )
                if response.status_code == 200:  # the registration token rotates on updates
                    registration.update(response.json())
            else:
                response = client.post(path, body, content_type="application/json")
        elif method == "get":
            response = client.get(f"{path}?{_encoded(data)}")
        else:
            response = client.generic(
                "POST", path, _encoded(data), content_type="application/x-www-form-urlencoded"
            )
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        _check(response, case)

    fuzz()
    # The cases were answered, not only refused: some got past the checks to the views.
    assert statuses.get(400, 0) >= EXAMPLES // 20, statuses
    assert sum(n for status, n in statuses.items() if status < 400) >= EXAMPLES // 20, statuses
