"""Who may become an OAuth client: the metadata policy shared by Dynamic Client Registration
(RFC 7591) and Client ID Metadata Documents, and the per-IP registration rate.

MCP clients register anonymously, so the endpoint is open; what keeps it safe is that a client can
only ask for what an MCP client needs (authorization code + refresh, response type `code`) and can
only name redirect URIs that are `https`, or `http` on a loopback host (MCP "Communication
Security": redirect URIs MUST be localhost or HTTPS; RFC 8252 §7.3 and §8.3).
"""

from __future__ import annotations

import ipaddress
import ssl
import time
import unicodedata
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from oauth2_provider import cimd
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher
from oauth2_provider.models import get_application_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.validators import URIValidator

from accounts.oauth_validators import IGNORED_SCOPES
from infra.rate_limit import FixedWindow
from memories.bounds import text_problem_in

ALLOWED_RESPONSE_TYPES = {"code"}
CLIENT_NAME_MAX = 100  # shown on the consent page
SCOPE_MAX = 1_000
# Django's URLValidator (which DOT applies to each redirect URI) refuses longer URLs with a
# message that names no limit; MCP clients register one to three.
REDIRECT_URI_MAX = 2_048
REDIRECT_URIS_MAX = 20


def allowed_grant_types() -> set[str]:
    """What the RFC 8414 metadata advertises, and nothing else."""
    return set(oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: Any) -> str | None:
    """Why `uri` may not be registered, or None if it may."""
    if not isinstance(uri, str):
        return "each redirect_uri must be a string"
    if len(uri) > REDIRECT_URI_MAX:
        return f"each redirect_uri must be at most {REDIRECT_URI_MAX} characters; got {len(uri)}"
    # DOT stores the URIs space-separated: one with white space in it would register two.
    if any(character.isspace() for character in uri):
        return f"redirect_uri {uri!r} must not contain white space"
    # The authorization endpoint (oauthlib) takes ASCII URIs only (RFC 3986), so a registered
    # non-ASCII one could never be used; it also keeps look-alike host names off the consent page.
    if not uri.isascii():
        return (
            f"redirect_uri {uri!r} must be ASCII: percent-encode other characters and write an "
            "international host name in its xn-- form"
        )
    # RFC 6749 §3.1.2: no fragment (a bare "#" is one too). Checked here rather than left to
    # DOT's validator, which answers invalid_client_metadata: RFC 7591 §3.2.2 names a refused
    # redirect URI invalid_redirect_uri.
    if "#" in uri:
        return f"redirect_uri {uri!r} must not carry a fragment (#...)"
    port_range = f"redirect_uri {uri!r}: the port must be a number from 1 to 65535"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        port = parts.port
    except ValueError as error:
        # urlsplit's own words for a port out of range or not a number start so.
        return port_range if str(error).startswith("Port") else f"redirect_uri {uri!r} is not a URL"
    # Port 0 is no port a client can listen on (RFC 6335 §6: reserved).
    if port == 0:
        return port_range
    # `https://claude.ai@evil.example/cb` goes to evil.example: a page that shows the URI's
    # authority would name the wrong host (RFC 3986 §3.2.1 deprecates user information in URIs).
    if "@" in parts.netloc:
        return f"redirect_uri {uri!r} must not carry user information (user@host)"
    if parts.scheme in ("http", "https") and not host:
        return f"redirect_uri {uri!r} has no host"
    native = settings.OAUTH_NATIVE_REDIRECT_SCHEMES
    if (
        parts.scheme == "https"
        or (parts.scheme == "http" and is_loopback_host(host))
        or (parts.scheme in native and (host or parts.path))  # RFC 8252 §7.1
    ):
        return _unparsable_by_dot(uri, host)
    if parts.scheme == "http":
        return f"redirect_uri {uri!r}: http is allowed only for loopback hosts; use https"
    return (
        f"redirect_uri {uri!r}: the scheme must be https (or http on a loopback host"
        + (f", or one of {', '.join(native)}" if native else "")
        + ")"
    )


def _unparsable_by_dot(uri: str, host: str | None) -> str | None:
    """Why DOT's validator of the registered URIs refuses `uri`, which passed the checks above,
    in words (it answers with the repr of a list of Django messages), or None. What it can still
    refuse is the host: percent-encoded, with an underscore, or a label too long."""
    try:
        URIValidator(schemes=[urlsplit(uri).scheme])(uri)
    except ValidationError:
        if host:
            return f"redirect_uri {uri!r}: its host {host!r} is not a valid host name or IP address"
        return f"redirect_uri {uri!r} is not a valid URI"
    return None


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (a client wrote JSON, not Python)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _array_problem(metadata: dict[str, Any], field: str) -> str | None:
    """Why `field`, when sent, is not an array of strings (RFC 7591 §2), or None."""
    if field not in metadata:
        return None
    values = metadata[field]
    if not isinstance(values, list):
        return f"{field} must be an array of strings; got {_json_kind(values)}"
    for index, value in enumerate(values):
        if not isinstance(value, str):
            return f"{field} must be an array of strings; {field}[{index}] is {_json_kind(value)}"
    return None


def _repeated(metadata: dict[str, Any], field: str) -> str | None:
    """'<field> lists <value> more than once' for the first value listed twice, or None. DOT
    would store a redirect URI twice, and read a grant type twice as two grant types."""
    seen: set[str] = set()
    for value in metadata.get(field, []):
        if value in seen:
            shown = value if len(value) <= 100 else value[:100] + "..."
            return f"{field} lists {shown!r} more than once"
        seen.add(value)
    return None


def _refused_values(metadata: dict[str, Any], field: str, default: list, allowed: set) -> list:
    return sorted({repr(v) for v in metadata.get(field, default) if v not in allowed})


def client_metadata_problem(metadata: dict[str, Any]) -> tuple[str, str] | None:
    """(RFC 7591 §3.2.2 error code, description) when the metadata asks for more than an MCP
    client may have, else None. Applied to registrations (POST), to updates of a registration
    (RFC 7592 PUT: the same rules, or an update would undo them) and to Client ID Metadata
    Documents. DOT validates the shape and everything else."""
    problem = text_problem_in(metadata)
    if problem:
        return "invalid_client_metadata", problem
    redirect_uris = metadata.get("redirect_uris", [])
    if not isinstance(redirect_uris, list):
        return "invalid_client_metadata", _array_problem(metadata, "redirect_uris")
    if len(redirect_uris) > REDIRECT_URIS_MAX:
        return (
            "invalid_redirect_uri",
            f"redirect_uris: at most {REDIRECT_URIS_MAX} URIs; got {len(redirect_uris)}",
        )
    problem = _array_problem(metadata, "redirect_uris")
    if problem:
        return "invalid_redirect_uri", problem
    for uri in redirect_uris:
        problem = redirect_uri_problem(uri)
        if problem:
            return "invalid_redirect_uri", problem
    problem = _repeated(metadata, "redirect_uris")
    if problem:
        return "invalid_redirect_uri", problem
    problem = _array_problem(metadata, "grant_types") or _array_problem(metadata, "response_types")
    if problem:
        return "invalid_client_metadata", problem
    allowed = allowed_grant_types()
    refused = _refused_values(metadata, "grant_types", ["authorization_code"], allowed)
    if refused:
        return (
            "invalid_client_metadata",
            f"grant_types {', '.join(refused)} not supported; only {', '.join(sorted(allowed))}",
        )
    refused = _refused_values(metadata, "response_types", ["code"], ALLOWED_RESPONSE_TYPES)
    if refused:
        return (
            "invalid_client_metadata",
            f"response_types {', '.join(refused)} not supported; only code",
        )
    problem = _repeated(metadata, "grant_types") or _repeated(metadata, "response_types")
    if problem:
        return "invalid_client_metadata", problem
    methods = set(oauth2_settings.OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED)
    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    if not isinstance(method, str) or method not in methods:
        return (
            "invalid_client_metadata",
            f"token_endpoint_auth_method {method!r} not supported; "
            f"only {', '.join(sorted(methods))}",
        )
    name = metadata.get("client_name", "")
    if not isinstance(name, str) or len(name) > CLIENT_NAME_MAX:
        return (
            "invalid_client_metadata",
            f"client_name must be a string of at most {CLIENT_NAME_MAX} characters",
        )
    # The consent page names the client to the person: a bidi override (U+202E) would show
    # "Claude Code" for "edoC edualC" and reverse the rest of the line, a control character or
    # another invisible one would hide what the name really is.
    if any(unicodedata.category(character) in ("Cc", "Cf") for character in name):
        return (
            "invalid_client_metadata",
            "client_name must not contain control, formatting or bidi characters",
        )
    return _scope_problem(metadata.get("scope"))


def client_update_problem(application: Any, metadata: dict[str, Any]) -> tuple[str, str] | None:
    """(error code, description) when an RFC 7592 update would turn a public client into a
    confidential one or back, else None. DOT would make a public client confidential without
    issuing it a secret, so every later token request of it would fail; RFC 7591 §2 reads an
    omitted `token_endpoint_auth_method` as `client_secret_basic`, so an update of a public client
    must send `none` again.
    RFC 7592 §2.2 also asks an update to name the client it updates by its issued `client_id`,
    and a `client_secret` in it to be the one issued (a client may not choose its own; left
    out, or null, it keeps the one it has)."""
    issued = application.client_id
    if "client_id" not in metadata:
        return (
            "invalid_client_metadata",
            f"client_id is missing: an update names the client it updates ({issued})",
        )
    if metadata["client_id"] != issued:
        return "invalid_client_metadata", f"client_id must be this client's own, {issued}"
    secret = metadata.get("client_secret")
    if secret is not None and not _is_issued_secret(application, secret):
        return (
            "invalid_client_metadata",
            "client_secret must be the one issued to this client, or left out",
        )
    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    registered_public = application.client_type == application.CLIENT_PUBLIC
    if (method == "none") == registered_public:
        return None
    registered = "none" if registered_public else "client_secret_basic or client_secret_post"
    return (
        "invalid_client_metadata",
        f"token_endpoint_auth_method cannot change on an update: this client was registered "
        f"with {registered} (an omitted one means client_secret_basic); register a new client "
        "for another method",
    )


def _is_issued_secret(application: Any, secret: Any) -> bool:
    """Whether `secret` is the client secret issued to `application`: none (an empty one) for a
    public client; for a confidential one, checked as DOT checks it at the token endpoint."""
    if application.client_type == application.CLIENT_PUBLIC:
        return secret == ""
    return (
        isinstance(secret, str)
        and bool(secret)
        and OAuth2Validator()._check_secret(secret, application.client_secret)
    )


def _scope_problem(scope: Any) -> tuple[str, str] | None:
    """RFC 7591 §2 `scope`: space-separated values this server knows (DOT keeps no per-client
    scope: what a client gets is decided by the user on the consent page)."""
    if scope is None:
        return None
    if not isinstance(scope, str) or len(scope) > SCOPE_MAX:
        return (
            "invalid_client_metadata",
            f"scope must be a string of at most {SCOPE_MAX} characters",
        )
    # The OpenID Connect scopes clients send by habit are ignored here as at authorization.
    known = set(oauth2_settings.SCOPES) | IGNORED_SCOPES
    unknown = sorted(set(scope.split()) - known)
    if unknown:
        supported = ", ".join(sorted(oauth2_settings.SCOPES))
        return (
            "invalid_client_metadata",
            f"scope {', '.join(unknown)} not supported; only {supported}",
        )
    return None


def registration_window() -> FixedWindow:
    return FixedWindow(
        name="oauth-registration",
        limit=settings.OAUTH_REGISTRATION_RATE,
        window=settings.OAUTH_REGISTRATION_RATE_WINDOW,
    )


class PolicedMetadataFetcher(SafeMetadataFetcher):
    """DOT's SSRF-hardened CIMD fetcher (https only; every resolved address must be public and the
    connection goes to the checked address; no redirects; time and size caps), plus the same
    metadata policy as dynamic registration."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        metadata, max_age = self._fetch(client_id)
        problem = client_metadata_problem(metadata)
        if problem:
            raise CIMDError(problem[1])
        return metadata, max_age

    def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        """DOT's `SafeMetadataFetcher.fetch` (django-oauth-toolkit is pinned: this calls its
        private helpers), with two more bounds. Every read of the socket, the status line's and
        the headers' too, ends by the fetch's deadline: urllib3's timeouts bound each read alone,
        so a server dripping its headers or its body a byte at a time would hold the fetch (and
        one of the few fetch slots) for as long as it dripped. DOT's read of the body is kept:
        urllib3 decompresses no more than the size cap asks for. And addresses `ipaddress` may
        count as global but that a local gateway may route inward are refused (NOT_PUBLIC)."""
        deadline = time.monotonic() + oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        parsed = cimd._validate_client_id_url(client_id)
        port = parsed.port or 443
        addresses = cimd._resolve_and_validate(parsed.hostname, port)
        for address in addresses:
            if any(ipaddress.ip_address(address) in network for network in NOT_PUBLIC):
                raise CIMDError(f"client_id host resolves to a non-public address ({address})")
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        context = cimd.ssl.create_default_context()
        context.sslsocket_class = _reads_ending_at(deadline)
        failure = None
        for address in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # The checked address is connected to; SNI, the certificate and Host name the host.
            pool = cimd.urllib3.HTTPSConnectionPool(
                host=address,
                port=port,
                timeout=cimd.urllib3.Timeout(connect=remaining, read=remaining, total=remaining),
                retries=False,
                maxsize=1,
                ssl_context=context,
                server_hostname=parsed.hostname,
            )
            try:
                response = pool.urlopen(
                    "GET", path, headers=headers, redirect=False, preload_content=False
                )
                try:
                    return self._read_document(response)
                finally:
                    response.release_conn()
            except cimd.urllib3.exceptions.HTTPError as error:
                failure = error
            finally:
                pool.close()
        raise CIMDError(f"could not fetch client_id document: {failure}")


# Ranges that are not globally reachable but that `ipaddress` may count as global (its tables
# vary with the Python release), so that DOT's check would let them through: NAT64 for local use
# (RFC 8215; not globally reachable in IANA's IPv6 Special-Purpose Address Registry, RFC 6890),
# which a gateway may translate to a private or metadata address, and the IPv4-compatible,
# SIIT IPv4-translated and site-local ranges, which lie in space IANA keeps reserved.
NOT_PUBLIC = tuple(
    ipaddress.ip_network(network)
    for network in ("64:ff9b:1::/48", "::/96", "::ffff:0:0:0/96", "fec0::/10")
)


def _reads_ending_at(deadline: float) -> type[ssl.SSLSocket]:
    """A TLS socket class (SSLContext.sslsocket_class) whose every read ends by `deadline`."""

    class SocketReadingUntilTheDeadline(ssl.SSLSocket):
        def recv_into(self, buffer, nbytes=None, flags=0):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the client_id document's time is up")
            self.settimeout(remaining)
            return super().recv_into(buffer, nbytes, flags)

    return SocketReadingUntilTheDeadline


def registration_tokens() -> Q:
    """The access tokens that are RFC 7592 registration access tokens: one per dynamically
    registered client, issued by the registration to manage that client (read, update, delete
    its registration), never to a person and never accepted by /mcp. DOT stores them among the
    access tokens, told apart by their scope alone."""
    return Q(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)


def is_registration_token(token: Any) -> bool:
    """Whether the access token `token` is one of `registration_tokens()`."""
    return token.scope == oauth2_settings.DCR_REGISTRATION_SCOPE


def delete_stale_registered_clients(*, older_than: timedelta) -> int:
    """Delete dynamically registered clients older than `older_than` that nobody uses: no pending
    code, no access token of a user, no unrevoked refresh token. MCP clients such as Claude
    register anew on every fresh connection, so without this the table only grows. Returns the
    number of clients deleted (their registration tokens go with them)."""
    Application = get_application_model()
    cutoff = timezone.now() - older_than
    stale = (
        Application.objects.filter(
            registration_source=Application.RegistrationSource.DCR, created__lt=cutoff
        )
        .exclude(grant__isnull=False)
        .exclude(accesstoken__user__isnull=False)
        .exclude(refreshtoken__revoked__isnull=True, refreshtoken__isnull=False)
    )
    with transaction.atomic():
        ids = list(stale.select_for_update().values_list("pk", flat=True))
        Application.objects.filter(pk__in=ids).delete()
    return len(ids)
