"""How a client identifies itself at the token and revocation endpoints: a public client by its
client_id, in the body or in HTTP Basic with an empty password (RFC 6749 §2.3.1; some client
libraries always send Basic); a confidential client by its secret, either way."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import quote_plus

import pytest
from django.conf import settings
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from tests.accounts.oauth_helpers import REDIRECT_URI, get_code, pkce_pair
from tests.factories import ApplicationFactory

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()

pytestmark = pytest.mark.django_db

SECRET = "the-confidential-secret-" + "s" * 20


@pytest.fixture
def public_client(db):
    return ApplicationFactory(redirect_uris=REDIRECT_URI)


@pytest.fixture
def confidential_client(db):
    return ApplicationFactory(
        client_type="confidential", client_secret=SECRET, redirect_uris=REDIRECT_URI
    )


def basic(client_id: str, password: str = "") -> str:
    """An Authorization header as RFC 6749 §2.3.1 writes it: both parts form-encoded."""
    pair = f"{quote_plus(client_id)}:{quote_plus(password)}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def _post(client, path: str, authorization: str | None, **data):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    body = {key: value for key, value in data.items() if value is not None}
    return client.post(path, body, **headers)


def _exchange(signed_in, application, authorization: str | None, **body):
    verifier, challenge = pkce_pair()
    code = get_code(signed_in, application, challenge)
    return _post(
        signed_in,
        "/oauth/token/",
        authorization,
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT_URI,
        code_verifier=verifier,
        resource=settings.MCP_RESOURCE_URL,
        **body,
    )


def _refresh(signed_in, refresh_token: str, authorization: str | None, **body):
    return _post(
        signed_in,
        "/oauth/token/",
        authorization,
        grant_type="refresh_token",
        refresh_token=refresh_token,
        **body,
    )


def _issued(response) -> AccessToken:
    assert response.status_code == 200, response.content
    checksum = hashlib.sha256(response.json()["access_token"].encode()).hexdigest()
    return AccessToken.objects.get(token_checksum=checksum)


def _refused_as_invalid_client(response) -> None:
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "invalid_client"
    assert "access_token" not in response.json()


# --- a public client in HTTP Basic with an empty password ------------------------------------


@pytest.mark.parametrize("body_id", [None, "", "its own"], ids=["basic-only", "empty", "both"])
def test_a_public_client_in_basic_with_an_empty_password_exchanges_its_code_and_refreshes(
    signed_in, public_client, body_id
):
    body_id = public_client.client_id if body_id == "its own" else body_id
    first = _exchange(signed_in, public_client, basic(public_client.client_id), client_id=body_id)
    assert _issued(first).application == public_client
    second = _refresh(
        signed_in, first.json()["refresh_token"], basic(public_client.client_id), client_id=body_id
    )
    assert _issued(second).application == public_client


def test_a_public_client_in_basic_revokes_its_token(signed_in, public_client):
    tokens = _exchange(signed_in, public_client, basic(public_client.client_id)).json()
    response = _post(
        signed_in, "/oauth/revoke/", basic(public_client.client_id), token=tokens["access_token"]
    )
    assert response.status_code == 200
    checksum = hashlib.sha256(tokens["access_token"].encode()).hexdigest()
    assert not AccessToken.objects.filter(token_checksum=checksum).exists()


def test_a_public_client_claiming_a_secret_in_basic_is_invalid_client(signed_in, public_client):
    """It has no secret: whatever it sends as one proves nothing, and is refused."""
    _refused_as_invalid_client(
        _exchange(signed_in, public_client, basic(public_client.client_id, "a-secret"))
    )
    assert AccessToken.objects.count() == 0


def test_a_public_client_in_basic_with_a_secret_in_the_body_is_invalid_client(
    signed_in, public_client
):
    _refused_as_invalid_client(
        _exchange(signed_in, public_client, basic(public_client.client_id), client_secret="x")
    )


def test_basic_naming_one_client_and_the_body_another_is_invalid_client(signed_in, public_client):
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    _refused_as_invalid_client(
        _exchange(
            signed_in, public_client, basic(other.client_id), client_id=public_client.client_id
        )
    )
    _refused_as_invalid_client(
        _exchange(
            signed_in, public_client, basic(public_client.client_id), client_id=other.client_id
        )
    )
    assert AccessToken.objects.count() == 0


def test_a_refresh_in_basic_by_another_public_client_is_refused_as_in_the_body(
    signed_in, public_client
):
    """The other client is identified, and the refresh token is not its own: invalid_grant, as
    when it names itself in the body."""
    tokens = _exchange(signed_in, public_client, None, client_id=public_client.client_id).json()
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    response = _refresh(signed_in, tokens["refresh_token"], basic(other.client_id))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"


def test_a_refresh_in_basic_replayed_within_the_grace_period_gets_the_same_tokens(
    signed_in, public_client
):
    first = _exchange(signed_in, public_client, basic(public_client.client_id)).json()
    second = _refresh(signed_in, first["refresh_token"], basic(public_client.client_id))
    again = _refresh(signed_in, first["refresh_token"], basic(public_client.client_id))
    assert second.status_code == again.status_code == 200, again.content
    assert again.json() == second.json()
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1


def test_a_refresh_in_basic_replayed_by_another_public_client_revokes_the_family(
    signed_in, public_client
):
    """The grace period is the first client's: another one naming itself in Basic with the same
    refresh token is a stolen token used, as in the body, and every token of the family dies."""
    first = _exchange(signed_in, public_client, basic(public_client.client_id)).json()
    second = _refresh(signed_in, first["refresh_token"], basic(public_client.client_id)).json()
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    response = _refresh(signed_in, first["refresh_token"], basic(other.client_id))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    again = _refresh(signed_in, second["refresh_token"], basic(public_client.client_id))
    assert again.status_code == 400, again.content


@pytest.mark.parametrize("named_in", ["basic", "body"])
def test_a_grace_period_refresh_naming_two_public_clients_is_invalid_client_and_no_replay(
    signed_in, public_client, named_in
):
    """Basic naming one public client and the body another: which client asks is unclear, so
    neither gets the first refresh's tokens, and nothing is revoked."""
    first = _exchange(signed_in, public_client, basic(public_client.client_id)).json()
    second = _refresh(signed_in, first["refresh_token"], basic(public_client.client_id)).json()
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    in_basic, in_body = (other, public_client) if named_in == "basic" else (public_client, other)
    _refused_as_invalid_client(
        _refresh(
            signed_in,
            first["refresh_token"],
            basic(in_basic.client_id),
            client_id=in_body.client_id,
        )
    )
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1
    onward = _refresh(signed_in, second["refresh_token"], basic(public_client.client_id))
    assert _issued(onward).application == public_client


def test_a_revocation_in_basic_by_another_public_client_revokes_nothing(signed_in, public_client):
    """RFC 7009 §2.1: a token of another client is not revoked, and the answer is still 200."""
    tokens = _exchange(signed_in, public_client, basic(public_client.client_id)).json()
    other = ApplicationFactory(redirect_uris=REDIRECT_URI)
    for token in (tokens["access_token"], tokens["refresh_token"]):
        response = _post(signed_in, "/oauth/revoke/", basic(other.client_id), token=token)
        assert response.status_code == 200, response.content
    checksum = hashlib.sha256(tokens["access_token"].encode()).hexdigest()
    assert AccessToken.objects.filter(token_checksum=checksum).exists()
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1
    onward = _refresh(signed_in, tokens["refresh_token"], basic(public_client.client_id))
    assert _issued(onward).application == public_client


@pytest.mark.parametrize(
    "authorization",
    [
        basic("client\x00id"),
        "Basic not base64!",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:").decode(),
    ],
    ids=["nul", "not-base64", "no-colon", "not-utf-8"],
)
def test_basic_credentials_that_name_no_client_are_invalid_client(signed_in, authorization):
    response = _post(
        signed_in,
        "/oauth/token/",
        authorization,
        grant_type="refresh_token",
        refresh_token="a-refresh-token",
    )
    _refused_as_invalid_client(response)


# --- a confidential client still proves its secret ---------------------------------------------


@pytest.mark.parametrize("password", ["", "not-the-secret"], ids=["empty", "wrong"])
def test_a_confidential_client_in_basic_without_its_secret_is_invalid_client(
    signed_in, confidential_client, password
):
    _refused_as_invalid_client(
        _exchange(signed_in, confidential_client, basic(confidential_client.client_id, password))
    )
    assert AccessToken.objects.count() == 0


def test_a_confidential_client_in_basic_with_its_secret_gets_tokens(signed_in, confidential_client):
    response = _exchange(
        signed_in, confidential_client, basic(confidential_client.client_id, SECRET)
    )
    assert _issued(response).application == confidential_client


def test_a_confidential_client_in_basic_with_another_client_in_the_body_is_invalid_client(
    signed_in, confidential_client, public_client
):
    """Which client asks is unclear: the secret proves the one in Basic, not the one named."""
    for application in (confidential_client, public_client):
        _refused_as_invalid_client(
            _exchange(
                signed_in,
                application,
                basic(confidential_client.client_id, SECRET),
                client_id=public_client.client_id,
            )
        )
    assert AccessToken.objects.count() == 0


def test_a_confidential_clients_refresh_replayed_in_basic_with_an_empty_password_gets_no_tokens(
    signed_in, confidential_client
):
    """The grace period authenticates no client, and an empty password proves no secret: a
    thief with a confidential client's refresh token, naming it in Basic as a public client
    names itself, gets DOT's invalid_client, not the first refresh's tokens."""
    first = _exchange(
        signed_in, confidential_client, basic(confidential_client.client_id, SECRET)
    ).json()
    second = _refresh(
        signed_in, first["refresh_token"], basic(confidential_client.client_id, SECRET)
    )
    assert second.status_code == 200, second.content
    before = (AccessToken.objects.count(), RefreshToken.objects.count())
    _refused_as_invalid_client(
        _refresh(signed_in, first["refresh_token"], basic(confidential_client.client_id))
    )
    assert (AccessToken.objects.count(), RefreshToken.objects.count()) == before
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 1
