"""The MCP profile of OAuth 2.1 on top of django-oauth-toolkit and oauthlib.

DOT already verifies PKCE, redirect URIs, refresh rotation and stores RFC 8707 `resource` on
grants and tokens. What it leaves open, and this module closes:

- `plain` PKCE and a missing `code_challenge_method` (which oauthlib reads as `plain`) are refused
  while the authorization request is validated, i.e. before the consent page (RFC 9700 §2.1.1;
  MCP "Authorization Code Protection": clients MUST use S256).
- Every authorization and token request is bound to this server's MCP endpoint: `resource`
  must name settings.MCP_RESOURCE_URL, else `invalid_target` (RFC 8707 §2; MCP "Resource
  Parameter Implementation"). DOT accepts any syntactically valid resource, and treats a token
  without one as valid everywhere. An authorization request without `resource` (clients of
  older protocol revisions send none) is for this server's MCP endpoint, and a `resource` that
  names it differently (trailing slash, default port, case of scheme or host) is read as it
  (`normalised_parameters`): issued tokens always carry the exact MCP_RESOURCE_URL.
- OpenID Connect scopes that clients send by habit (`openid`, `offline_access`, ...) are
  dropped, not refused: this server issues no ID token, and a refresh token whether or not
  `offline_access` was asked for (OIDC Core §11). The token response's `scope` reports what
  was granted (RFC 6749 §5.1).
- A deactivated user cannot exchange a code or a refresh token (DOT checks `is_active` only for
  the password grant).
- A public client may name itself in HTTP Basic with an empty password (RFC 6749 §2.3.1; some
  client libraries always send Basic): DOT would check that empty password against a secret the
  client was never given, and answer invalid_client.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from urllib.parse import parse_qs, unquote_plus, urlsplit

from django.conf import settings
from django.http import QueryDict
from oauth2_provider.models import get_grant_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.authorization_code import code_challenge_method_s256

from memories.bounds import unstorable_text

# OpenID Connect Core §5.4 and §11 scopes: nothing to grant here (no ID token, no claims), and a
# refresh token comes with every authorization code anyway.
IGNORED_SCOPES = frozenset({"openid", "profile", "email", "address", "phone", "offline_access"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _comparable(uri: str) -> tuple:
    """`uri` after RFC 3986 §6.2.2-6.2.3 normalisation (case of scheme and host, default port)
    and without a trailing slash on its path."""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return (uri,)
    scheme = parts.scheme.lower()
    if port == _DEFAULT_PORTS.get(scheme):
        port = None
    # A fragment, even an empty one (a bare "#"), makes it another URI: never /mcp.
    fragment = parts.fragment if "#" in uri else None
    return (
        scheme,
        (parts.hostname or "").lower(),
        port,
        parts.path.rstrip("/"),
        parts.query,
        fragment,
    )


def canonical_resource(uri: str) -> str:
    """MCP_RESOURCE_URL if `uri` names it, else `uri` as given."""
    expected = settings.MCP_RESOURCE_URL
    return expected if _comparable(uri) == _comparable(expected) else uri


def normalised_parameters(params: QueryDict, *, default_resource: bool) -> QueryDict | None:
    """The request parameters with the ignored scopes dropped, the read scope beside the write
    scope, and every `resource` that names the MCP endpoint in its exact form; with
    `default_resource`, that resource when none is named. None when nothing changes."""
    changed = params.copy()
    if "scope" in params:
        scopes = [scope for scope in params["scope"].split() if scope not in IGNORED_SCOPES]
        # Every /mcp request needs the read scope (the session's own calls: initialize, the
        # catalogues): a token of the write scope alone could call nothing. Writing includes
        # reading what one wrote, and the consent page names both.
        if settings.MEMORY_WRITE_SCOPE in scopes and settings.MEMORY_READ_SCOPE not in scopes:
            scopes.insert(0, settings.MEMORY_READ_SCOPE)
        if scopes:
            changed["scope"] = " ".join(scopes)
        else:  # as if no scope was asked for: the default scopes apply
            del changed["scope"]
    resources = [canonical_resource(uri) for uri in params.getlist("resource")]
    if resources:
        changed.setlist("resource", resources)
    elif default_resource:
        changed.setlist("resource", [settings.MCP_RESOURCE_URL])
    return None if changed == params else changed


def scopes_beyond_request(query: QueryDict, granted: str) -> list[str]:
    """The scopes of a consent that grants `granted` which its authorization request (`query`,
    as normalised_parameters left it) did not ask for. The person may grant less than a client
    asks, never more: a client that needs more asks again (step-up, docs/oauth.md), and the
    consent page offers nothing beyond the request, so only an edited form posts more. Unknown
    scopes are not counted: oauthlib refuses them (invalid_scope at the client)."""
    asked = query.get("scope")
    asked_scopes = set(asked.split()) if asked else set(oauth2_settings.DEFAULT_SCOPES)
    return sorted((set(granted.split()) - asked_scopes) & set(oauth2_settings.SCOPES))


def _requested_resources(request) -> list[str]:
    """All `resource` values of an authorization request (RFC 8707 allows repeats; oauthlib keeps
    only the last one). On the consent POST, DOT passes them as a list in the credentials."""
    if isinstance(request.resource, list):
        return request.resource
    if request.http_method == "GET":
        return parse_qs(request.uri_query or "").get("resource", [])
    return [value for value in (request.resource or "").split() if value]


def check_mcp_resource(resources: list[str], request) -> None:
    """RFC 8707 §2: a request must name this server's MCP endpoint, and nothing else. It has one
    name whatever host name the server was reached by (the protected resource metadata and the
    audience check at /mcp both use MCP_RESOURCE_URL): a client that names the endpoint by the
    address it was configured with did not follow the metadata, and is told what it names."""
    expected = settings.MCP_RESOURCE_URL
    # §2: the resource "MUST NOT include a fragment component".
    with_fragment = [uri for uri in resources if "#" in uri]
    if with_fragment:
        raise errors.CustomOAuth2Error(
            error="invalid_target",
            description=f"resource must not include a fragment (got {with_fragment[0]}).",
            request=request,
        )
    if [canonical_resource(uri) for uri in resources] != [expected]:
        described = ", ".join(resources) if resources else "none"
        raise errors.CustomOAuth2Error(
            error="invalid_target",
            description=(
                f"resource must be {expected}, the resource this server's protected resource "
                f"metadata names under every host name (got {described})."
            ),
            request=request,
        )


S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
# The grant's column (django-oauth-toolkit's Grant.nonce).
NONCE_MAX = 255


def require_s256_and_mcp_resource(request) -> dict:
    """oauthlib `pre_auth` validator: runs after client_id and redirect_uri are validated (so the
    error is redirected to the client) and before the consent page is shown."""
    if request.code_challenge is None:
        raise errors.MissingCodeChallengeError(request=request)
    if request.code_challenge_method != "S256":
        raise errors.InvalidRequestError(
            description="code_challenge_method must be S256 (plain and missing are refused).",
            request=request,
        )
    # RFC 7636 §4.2: an S256 challenge is BASE64URL(SHA-256(verifier)) unpadded, 43 characters.
    # Refused here, before the consent page, rather than by the grant's column once allowed.
    if not S256_CHALLENGE.fullmatch(request.code_challenge):
        raise errors.InvalidRequestError(
            description="code_challenge must be the 43-character BASE64URL S256 digest.",
            request=request,
        )
    if len(getattr(request, "nonce", None) or "") > NONCE_MAX:
        raise errors.InvalidRequestError(
            description=f"nonce must be at most {NONCE_MAX} characters.", request=request
        )
    check_mcp_resource(_requested_resources(request), request)
    return {}


def require_mcp_resource_if_named(request) -> None:
    """oauthlib `post_token` validator (code and refresh grants): a token request that names a
    resource must name /mcp alone. Checked while the request is validated so that the refusal is a
    proper JSON error response; a request without `resource` inherits the grant's, which the
    authorization endpoint has already pinned to /mcp."""
    named = [value for key, value in (request.decoded_body or []) if key == "resource"]
    if named:
        check_mcp_resource(named, request)


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """The client_id and password of an HTTP Basic `Authorization` value, each form-decoded
    (RFC 6749 §2.3.1) as DOT decodes them; None for any other value, and for a client_id
    PostgreSQL cannot hold (it names no client; a lookup of it would fail)."""
    scheme, _, encoded = (authorization or "").partition(" ")
    if scheme != "Basic":
        return None
    try:  # binascii.Error and UnicodeDecodeError are ValueErrors, as is a missing colon
        client_id, password = base64.b64decode(encoded).decode().split(":", 1)
    except ValueError:
        return None
    client_id = unquote_plus(client_id)
    return None if unstorable_text(client_id) else (client_id, unquote_plus(password))


def code_token_family(code: str) -> uuid.UUID:
    """The refresh-token family of the tokens issued for an authorization code: derived from the
    code (a one-way digest, so the stored family does not reveal it)."""
    digest = hashlib.sha256(b"authorization-code-family\n" + code.encode(errors="replace")).digest()
    return uuid.UUID(bytes=digest[:16], version=4)


def _s256_or_say_why(verifier: str, challenge: str) -> bool:
    """RFC 7636 §4.6 S256 verification; a mismatch is invalid_grant saying so (oauthlib's
    carries no description)."""
    if code_challenge_method_s256(verifier, challenge):
        return True
    raise errors.InvalidGrantError(
        description="code_verifier does not match the authorization request's code_challenge"
    )


class McpAuthorizationServer(Server):
    """oauthlib's combined server with the MCP profile's checks, and S256 as the only PKCE
    transform (the pre_auth check refuses `plain` first; this makes the token endpoint agree)."""

    def __init__(self, request_validator, *args, **kwargs) -> None:
        super().__init__(request_validator, *args, **kwargs)
        self.auth_grant._code_challenge_methods = {"S256": _s256_or_say_why}
        self.auth_grant.custom_validators.pre_auth.append(require_s256_and_mcp_resource)
        self.auth_grant.custom_validators.post_token.append(require_mcp_resource_if_named)
        self.refresh_grant.custom_validators.post_token.append(require_mcp_resource_if_named)


class McpOAuth2Validator(OAuth2Validator):
    def client_authentication_required(self, request, *args, **kwargs) -> bool:
        # A public client has no secret to prove (PKCE protects its code): HTTP Basic with an
        # empty password names it as a body client_id would, and it goes on as a public
        # client. A password, a secret in the body or a body client_id naming another client is
        # a claim DOT checks, and refuses (invalid_client): a public client was issued no secret.
        credentials = basic_credentials(request.headers.get("HTTP_AUTHORIZATION"))
        if credentials is not None:
            client_id, password = credentials
            if (
                not password
                and not request.client_secret
                and request.client_id in (None, "", client_id)
                and self._load_application(client_id, request) is not None
                and request.client.client_type == request.client.CLIENT_PUBLIC
            ):
                request.client_id = client_id
                return False
        return super().client_authentication_required(request, *args, **kwargs)

    def authenticate_client(self, request, *args, **kwargs) -> bool:
        # Basic naming one client and the body another: DOT authenticates the one in Basic, and
        # oauthlib then answers server_error. Which client is asking is unclear: invalid_client.
        credentials = basic_credentials(request.headers.get("HTTP_AUTHORIZATION"))
        if credentials is not None and request.client_id not in (None, "", credentials[0]):
            return False
        return super().authenticate_client(request, *args, **kwargs)

    def validate_scopes(self, client_id, scopes, client, request, *args, **kwargs) -> bool:
        # A refusal names what was wrong (oauthlib's invalid_scope carries no description): a
        # client that sent a scope of another server, or the scopes joined by commas, is told
        # which scopes there are and how they are written (RFC 6749 §3.3).
        if super().validate_scopes(client_id, scopes, client, request, *args, **kwargs):
            return True
        unknown = sorted(set(scopes) - set(oauth2_settings.SCOPES)) or sorted(scopes)
        raise errors.InvalidScopeError(
            description=(
                f"scope: {' '.join(unknown)} is not a scope of this server, which has "
                f"{' and '.join(oauth2_settings.SCOPES)}, separated by spaces"
            ),
            request=request,
        )

    def is_within_original_scope(self, request_scopes, refresh_token, request, *args, **kwargs):
        # Asked only when a refresh names a scope beyond its grant's: refused, and told why.
        raise errors.InvalidScopeError(
            description=(
                "scope: a refresh keeps or narrows the scope its authorization granted, never "
                "widens it; authorize again to be granted more"
            ),
            request=request,
        )

    def _load_application(self, client_id, request):
        # A client_id PostgreSQL cannot hold names no client. Form parameters never get here
        # (accounts.middleware refuses them); HTTP Basic credentials do, decoded by DOT itself.
        # basic_credentials decodes them too (for this validator and refresh_grace), and reads
        # such a client_id as no credentials, so refresh_grace's lookup of it cannot fail.
        if not isinstance(client_id, str) or unstorable_text(client_id):
            return None
        return super()._load_application(client_id, request)

    def _check_and_set_request_resource(self, request) -> None:
        # Last line of defence, at save time (inside DOT's transaction, before the code is
        # invalidated): whatever DOT resolved — inherited from a grant or refresh token, or
        # narrowed — the issued token is bound to /mcp alone. Requests are refused earlier, by
        # require_mcp_resource_if_named; this only trips on grants or refresh tokens stored with
        # another resource (e.g. before this profile existed).
        super()._check_and_set_request_resource(request)
        check_mcp_resource(list(request.resource), request)
        request.resource = [settings.MCP_RESOURCE_URL]

    def confirm_redirect_uri(self, client_id, code, redirect_uri, client, request, *args, **kwargs):
        # RFC 6749 §5.2: a redirect_uri that differs from the authorization request's is
        # invalid_grant (oauthlib would answer invalid_request).
        if not super().confirm_redirect_uri(
            client_id, code, redirect_uri, client, request, *args, **kwargs
        ):
            raise errors.InvalidGrantError(
                description="redirect_uri does not match the authorization request.",
                request=request,
            )
        return True

    def validate_code(self, client_id, code, client, request, *args, **kwargs) -> bool:
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            # RFC 6749 §4.1.2: a code used more than once MUST be denied, and the server SHOULD
            # revoke all tokens previously issued based on it. DOT deletes the grant when the
            # code is exchanged; the tokens are found through their family, named by the code.
            # A code that never was names no family, and this revokes nothing.
            get_refresh_token_model().revoke_family(code_token_family(code))
            raise errors.InvalidGrantError(
                description="code is unknown, expired or already used", request=request
            )
        return request.user.is_active

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous):
        # The first refresh token of a code exchange starts the family named by the code;
        # rotations inherit it (DOT copies the family of the previous refresh token).
        refresh_token = super()._create_refresh_token(
            request, refresh_token_code, access_token, previous
        )
        if previous is None and request.grant_type == "authorization_code" and request.code:
            refresh_token.token_family = code_token_family(request.code)
            refresh_token.save(update_fields=["token_family"])
        return refresh_token

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs) -> bool:
        # A deactivated user's refresh token must not mint new access tokens.
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        return request.user.is_active

    def get_code_challenge(self, code, request):
        # The grant may be gone since validate_code: exchanged by a concurrent request with the
        # same code, or deleted by a revocation or an erasure. DOT's lookup then raised (a 500).
        return self._grant_pkce(code, request)[0]

    def get_code_challenge_method(self, code, request):
        return self._grant_pkce(code, request)[1]

    def _grant_pkce(self, code, request) -> tuple[str | None, str | None]:
        pkce = (
            get_grant_model()
            .objects.filter(code=code, application=request.client)
            .values_list("code_challenge", "code_challenge_method")
            .first()
        )
        if pkce is None:
            raise errors.InvalidGrantError(request=request)
        return pkce[0] or None, pkce[1] or None

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs):
        # Spent in _save_bearer_token already, in the transaction that saved its tokens.
        if not getattr(request, "code_spent", False):
            super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)

    def _save_bearer_token(self, token, request, *args, **kwargs):
        # The code is spent in the transaction that saves its tokens, its grant locked first: a
        # second exchange of it racing this one waits, then finds it gone (invalid_grant,
        # nothing saved); a revocation or an erasure, which lock the codes first too
        # (accounts/revocation.lock_codes), wait, then revoke the tokens saved here. oauthlib
        # spends it after the tokens are committed, so the loser of such a race had tokens saved
        # and then got invalid_grant.
        code_grant = None
        if request.grant_type == "authorization_code":
            code_grant = get_grant_model().objects.filter(
                code=request.code, application=request.client
            )
            if not code_grant.select_for_update().values("pk"):
                raise _RefusedWhileSaving(
                    description="The authorization code was already used or revoked.",
                    request=request,
                )
        # A refresh validated just before the person revoked the app (or erased the account)
        # must not mint tokens once that revocation has committed: DOT's rotation would revoke
        # the already revoked token (a no-op) and issue a new pair. So the refresh token is read
        # again under the lock the revocation holds until it commits (accounts/revocation.py:
        # the same lock order), and a revoked one is refused (RFC 6749 §5.2 invalid_grant).
        previous = getattr(request, "refresh_token_instance", None)
        if request.grant_type == "refresh_token" and previous is not None:
            current = (
                get_refresh_token_model()
                .objects.select_for_update()
                .filter(pk=previous.pk, revoked__isnull=True)
                .first()
            )
            if current is None:
                raise _RefusedWhileSaving(
                    description="The refresh token was revoked.", request=request
                )
        saved = super()._save_bearer_token(token, request, *args, **kwargs)
        if code_grant is not None:
            code_grant.delete()
            request.code_spent = True
        return saved


class _RefusedWhileSaving(errors.InvalidGrantError):
    """invalid_grant raised while the tokens are saved: oauthlib's own errors of that stage
    carry no headers (it adds them to the errors it catches itself), and RFC 6749 §5.1-5.2 want
    JSON that is never cached."""

    @property
    def headers(self) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "Cache-Control": "no-store",
            "Pragma": "no-cache",
        }
