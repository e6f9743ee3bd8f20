"""CORS for RFC 7592 registration management (/oauth/register/<client_id>/): a browser-based
client's preflight for updating (PUT) or deleting (DELETE) its registration allows that method,
or the browser never sends the request."""

import json

import pytest

BROWSER_ORIGIN = "http://localhost:6274"  # the default policy's loopback origin (MCP Inspector)


def _register(client) -> dict:
    response = client.post(
        "/oauth/register/",
        json.dumps(
            {
                "client_name": "Browser client",
                "redirect_uris": ["http://127.0.0.1:3000/cb"],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
        ),
        content_type="application/json",
        HTTP_ORIGIN=BROWSER_ORIGIN,
    )
    assert response.status_code == 201, response.content
    assert response["access-control-allow-origin"] == BROWSER_ORIGIN
    return response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_browser_client_may_update_and_delete_its_registration(client, method):
    registration = _register(client)
    uri = registration.get("registration_client_uri") or (
        f"/oauth/register/{registration['client_id']}/"
    )
    path = "/" + uri.split("/", 3)[3] if uri.startswith("http") else uri
    preflight = client.options(
        path,
        HTTP_ORIGIN=BROWSER_ORIGIN,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD=method,
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type",
    )
    assert preflight.status_code == 204
    assert preflight["access-control-allow-origin"] == BROWSER_ORIGIN
    allowed = {m.strip().upper() for m in preflight["access-control-allow-methods"].split(",")}
    # The Fetch standard's CORS check: the preflight must list a non-simple method, or the
    # browser refuses to send the RFC 7592 request at all.
    assert method in allowed, f"{method} missing from Access-Control-Allow-Methods: {allowed}"
