"""The authorization-server views MCP clients use, as thin subclasses of DOT's."""

from __future__ import annotations

import json
import re
import sys
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.csp import CSP
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.compat import login_not_required
from oauth2_provider.models import AbstractApplication, get_application_model

# DOT's own helper for RFC 9207 (private, but DOT is pinned): replaces any `iss` and appends ours.
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import (
    AuthorizationView,
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
    TokenView,
)

from accounts import refresh_grace
from accounts.oauth_registration import (
    client_metadata_problem,
    client_update_problem,
    is_loopback_host,
    registration_window,
)
from accounts.oauth_validators import normalised_parameters, scopes_beyond_request
from infra.rate_limit import FixedWindow, client_network
from memories.bounds import NESTING_MAX


def _bad_request(problem: str) -> HttpResponse:
    return HttpResponse(render_to_string("400.html", {"problem": problem}), status=400)


def _where_sent(redirect_uri: str) -> str:
    """The host and port a redirect URI sends the person to, as the consent page names it: the
    port tells apart two clients on one machine (127.0.0.1:33418 and 127.0.0.1:6274), as
    Connected apps shows them. A desktop client's own scheme without a host is named by its
    scheme (`cursor:`)."""
    parts = urlsplit(redirect_uri)
    # The authority without user information: `https://claude.ai@evil.example/` goes to
    # evil.example, and the page must not say claude.ai.
    host = parts.netloc.rpartition("@")[2]
    return host or f"{parts.scheme}:"


def application_asking(next_url: str) -> AbstractApplication | None:
    """The registered app whose authorization request a log-in will resume, when `next_url` (a
    `next` already judged safe to return to) is this server's authorization endpoint; else None.
    Only the client_id is taken from the URL, and only an app registered under it is named: the
    URL is anyone's to write, so nothing else in it (a client_name, say) may speak for the app."""
    try:
        parts = urlsplit(next_url)
    except ValueError:
        return None
    if parts.path != reverse("oauth2_provider:authorize"):
        return None
    client_ids = parse_qs(parts.query).get("client_id", [])
    Application = get_application_model()
    # oauthlib refuses a repeated client_id; PostgreSQL takes no NUL in text (a 500 else).
    if len(client_ids) != 1 or "\x00" in client_ids[0]:
        return None
    if len(client_ids[0]) > Application._meta.get_field("client_id").max_length:
        return None
    return Application.objects.filter(client_id=client_ids[0]).first()


def _registered_redirect(application, redirect_uri: str) -> bool:
    try:
        return application.redirect_uri_allowed(redirect_uri)
    except ValueError:  # not a URI at all (an unclosed IPv6 literal)
        return False


class McpAuthorizationView(AuthorizationView):
    """Login, then the consent page (templates/oauth2_provider/authorize.html)."""

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # Habitual OIDC scopes dropped, `resource` for /mcp in its exact form, or added when
        # missing (accounts/oauth_validators.py). In the URL itself: oauthlib reads the request
        # from it, DOT's view from request.GET.
        query = normalised_parameters(request.GET, default_resource=True)
        if query is not None:
            request.GET = query
            request.META["QUERY_STRING"] = query.urlencode()
        # The consent form's scope, as the request's: the person's choice, or an edited form.
        if request.method == "POST":
            form = normalised_parameters(request.POST, default_resource=False)
            request.POST = form if form is not None else request.POST
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        # Consent is asked every time: a client must not skip it with approval_prompt=auto.
        if "approval_prompt" in request.GET:
            request.GET = request.GET.copy()
            del request.GET["approval_prompt"]
        return super().get(request, *args, **kwargs)

    def form_valid(self, form):
        # The client may be gone since the consent page was shown (a daily clean-up of stale
        # clients, staff), or its id edited in the form: DOT's lookup then raised (a 500).
        gone = "the app asking for access is no longer registered; start again from it"
        application = (
            get_application_model()
            .objects.filter(client_id=form.cleaned_data.get("client_id") or "")
            .first()
        )
        if application is None:
            return _bad_request(gone)
        # DOT sends a denial (and a refused resource) to the posted redirect_uri as it stands;
        # oauthlib matches it against the client's registered ones for an allowed request only.
        # An error goes to a registered one only (RFC 6749 §4.1.2.1); a malformed one raised.
        if not _registered_redirect(application, form.cleaned_data.get("redirect_uri") or ""):
            return _bad_request(
                "the address the app asked to return to is not one it registered; start again "
                "from the app"
            )
        # A denial may carry any scope; an allowance grants no more than the client asked.
        beyond = scopes_beyond_request(self.request.GET, form.cleaned_data.get("scope") or "")
        if beyond and form.cleaned_data.get("allow"):
            return _bad_request(
                f"the consent form came back granting {' '.join(beyond)}, which the app did not "
                "ask for (you may grant less than an app asks, never more); start again from the "
                "app"
            )
        try:
            return super().form_valid(form)
        except get_application_model().DoesNotExist:
            return _bad_request(gone)

    def form_invalid(self, form):
        # DOT would render the consent page again from the invalid form alone: no app name, no
        # address, no scopes, and an Allow button that posts the same form.
        fields = ", ".join(sorted(form.errors))
        return _bad_request(
            f"the consent form came back without a valid {fields}; start again from the app"
        )

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = context.get("application")
        redirect_uri = context.get("redirect_uri") or ""
        if application is not None:
            registered_hosts = {urlsplit(uri).hostname for uri in application.redirect_uris.split()}
            # MCP "Client ID Metadata Documents": the AS MUST display the redirect host and
            # SHOULD warn when a client can only redirect to this machine.
            context["redirect_host"] = _where_sent(redirect_uri)
            context["loopback_only"] = all(is_loopback_host(h or "") for h in registered_hosts)
            context["client_id_url"] = (
                application.client_id
                if application.registration_source == application.RegistrationSource.CIMD
                else ""
            )
            context["resources"] = (context.get("resource") or "").split()
        scopes = context.get("scopes") or []
        if settings.MEMORY_WRITE_SCOPE in scopes and settings.MEMORY_READ_SCOPE in scopes:
            # The person may grant less than the client asks: read-only, as a choice of its own
            # (MCP clients ask for the whole tool surface; RFC 6749 §3.3 lets the server grant
            # less, and the token response says what was granted).
            context["scope_choices"] = [
                (" ".join(scopes), "Read and write"),
                (settings.MEMORY_READ_SCOPE, "Read only"),
            ]
        return context

    def render_to_response(self, context, **response_kwargs):
        response = super().render_to_response(context, **response_kwargs)
        redirect_uri = context.get("redirect_uri")
        if redirect_uri and not context.get("error"):
            # CSP `form-action` also governs where the consent form's POST may redirect to
            # (CSP3 §6.3.1; Chromium enforces it), so the page allows exactly the origin of this
            # request's redirect URI, which oauthlib has matched against the registered ones.
            # A CSP host source cannot be an IPv6 literal (CSP3 §2.3.1 host-part): a browser
            # ignores `http://[::1]:port` and would block the redirect, so such a client's
            # scheme is allowed instead.
            # So is a desktop client's own scheme (RFC 8252 §7.1), which names no web origin.
            parts = urlsplit(redirect_uri)
            if ":" in (parts.hostname or "") or parts.scheme not in ("http", "https"):
                client_source = f"{parts.scheme}:"
            else:
                client_source = f"{parts.scheme}://{parts.netloc}"
            response._csp_config = {
                **settings.SECURE_CSP,
                "form-action": [CSP.SELF, client_source],
            }
        return response

    def redirect(self, redirect_to: str, application) -> HttpResponse:
        # RFC 9207 §2: `iss` in every authorization response, errors (denied consent, bad PKCE,
        # foreign resource) included; DOT adds it to successful responses only.
        issuer = oauth2_settings.oauth2_authorization_server_issuer(self.request)
        return super().redirect(_add_iss_to_redirect(redirect_to, issuer), application)


def too_many_requests(retry_after: int, what: str) -> JsonResponse:
    """The 429 answer of the OAuth endpoints, in their JSON error format (RFC 6749 §5.2 shape)."""
    response = JsonResponse(
        {
            "error": "too_many_requests",
            "error_description": f"Too many {what} from this address; "
            f"retry after {retry_after} seconds.",
        },
        status=429,
    )
    response["Retry-After"] = str(retry_after)
    return response


def _not_json_refusal(request: HttpRequest) -> HttpResponse | None:
    """400 for a registration or update whose body is not JSON as RFC 7591 §3.1 sends it:
    application/json, in UTF-8 (RFC 8259 §8.1). Python's parser would read a body of any
    declared type, and UTF-16 too, as the metadata."""
    if request.content_type != "application/json":
        sent = request.content_type[:100] or "missing"
        problem = f"the body must be application/json, not {sent}"
    else:
        try:
            request.body.decode("utf-8")
            return None
        except UnicodeDecodeError:
            problem = "the body must be JSON encoded in UTF-8"
    return JsonResponse(
        {"error": "invalid_client_metadata", "error_description": problem}, status=400
    )


def _policy_refusal(request: HttpRequest, registered=None) -> HttpResponse | None:
    """The registration policy's 400 for this request's client metadata, or None; with the
    `registered` client, the policy of an update of it too."""
    try:
        metadata = json.loads(request.body)
        problem = None
        if isinstance(metadata, dict):
            problem = client_metadata_problem(metadata) or (
                registered and client_update_problem(registered, metadata)
            )
    except RecursionError:
        # Nested deeper than Python parses: told the limit the metadata's walk names.
        problem = (
            "invalid_client_metadata",
            f"the client metadata is nested more than {NESTING_MAX} levels deep",
        )
    except json.JSONDecodeError as error:
        problem = (
            "invalid_client_metadata",
            f"the body is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})",
        )
    except ValueError:
        # The one other refusal of the parser: an integer longer than Python converts.
        problem = (
            "invalid_client_metadata",
            f"a number in the client metadata has more than {sys.get_int_max_str_digits()} digits",
        )
    if problem is None:
        return None
    error, description = problem
    return JsonResponse({"error": error, "error_description": description}, status=400)


def _registration_rate_refusal(request: HttpRequest) -> HttpResponse | None:
    retry_after = registration_window().hit(client_network(request))
    return too_many_requests(retry_after, "client registrations") if retry_after else None


# Registration answers carry the registration access token (and a confidential client's secret):
# no cache may keep them, as no cache may keep a token response (RFC 6749 §5.1).
@method_decorator(never_cache, name="dispatch")
@method_decorator(csrf_exempt, name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class McpClientRegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, open to anonymous MCP clients, rate-limited per client IP and
    limited to what an MCP client needs (accounts/oauth_registration.py)."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        refusal = (
            _registration_rate_refusal(request)
            or _not_json_refusal(request)
            or _policy_refusal(request)
        )
        if refusal:
            return refusal
        # Always anonymous, as MCP clients register: DOT would make a signed-in person the
        # owner of the client and of its registration token, which an erasure committing
        # meanwhile would leave working (and a page could register clients in their name).
        request.user = AnonymousUser()
        return _with_rfc7591_fields(super().post(request, *args, **kwargs))


def _with_rfc7591_fields(response: HttpResponse) -> HttpResponse:
    """A registration's answer with what RFC 7591 §3.2.1 asks of it beyond DOT's: when the
    client was issued (`client_id_issued_at`) and when its secret expires
    (`client_secret_expires_at`, REQUIRED with a secret: 0, never)."""
    if response.status_code != 201:
        return response
    answer = json.loads(response.content)
    issued = get_application_model().objects.filter(client_id=answer["client_id"]).first()
    if issued is not None:
        answer["client_id_issued_at"] = int(issued.created.timestamp())
    if "client_secret" in answer:
        answer["client_secret_expires_at"] = 0
    response.content = json.dumps(answer)
    return response


@method_decorator(never_cache, name="dispatch")
@method_decorator(csrf_exempt, name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class McpClientManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592 read, update and delete of a registration, by its registration access token.
    An update replaces the client's metadata (RFC 7592 §2.2), so it passes the same policy and
    the same rate limit as a registration: otherwise one PUT would turn a registered client into
    one that redirects anywhere or uses a grant this server does not offer."""

    def put(self, request: HttpRequest, client_id: str, *args, **kwargs) -> HttpResponse:
        refusal = _registration_rate_refusal(request)
        if refusal:
            return refusal
        # Authenticated first, so that a request without the registration token learns nothing
        # about the policy; DOT authenticates again in its own put().
        auth = self._authenticate_registration_request(request, client_id)
        if isinstance(auth, HttpResponse):
            return auth
        return (
            _not_json_refusal(request)
            or _policy_refusal(request, auth.application)
            or super().put(request, client_id, *args, **kwargs)
        )


# RFC 7636 §4.1: code_verifier = 43*128unreserved.
CODE_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")


def _token_parameter_refusal(request: HttpRequest) -> HttpResponse | None:
    """The refusal of a token request whose client or code parameters cannot be right, naming
    the field: oauthlib answers these with an error code alone. The error codes are oauthlib's
    (a verifier that cannot be one cannot match the challenge: invalid_grant, RFC 7636 §4.6)."""
    form = request.POST
    if not form.get("client_id") and "HTTP_AUTHORIZATION" not in request.META:
        return JsonResponse(
            {
                "error": "invalid_client",
                "error_description": "client_id is missing: a client names itself by client_id "
                "in the body or in HTTP Basic",
            },
            status=401,
        )
    if form.get("grant_type") != "authorization_code":
        return None
    problem = None
    verifier = form.get("code_verifier")
    if "code" in form and not form["code"]:
        problem = "code is empty"
    elif verifier is not None and not CODE_VERIFIER.fullmatch(verifier):
        rule = (
            "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9 and -._~ (RFC 7636 §4.1)"
        )
        if 43 <= len(verifier) <= 128:
            stray = next(c for c in verifier if not CODE_VERIFIER.fullmatch(c * 43))
            problem = f"{rule}; got a {stray!r}"
        else:
            problem = f"{rule}; got {len(verifier)}"
    if problem is None:
        return None
    return JsonResponse({"error": "invalid_grant", "error_description": problem}, status=400)


def token_window() -> FixedWindow:
    return FixedWindow(
        name="oauth-token",
        limit=settings.OAUTH_TOKEN_RATE,
        window=settings.OAUTH_TOKEN_RATE_WINDOW,
    )


@method_decorator(csrf_exempt, name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class McpTokenView(TokenView):
    """DOT's token endpoint, rate-limited per client IP (every request counts, granted or not,
    so guessing authorization codes or refresh tokens is bounded too), and open only to the
    grant types the RFC 8414 metadata advertises. A public client's refresh replayed within the
    grace period gets the first response again (accounts/refresh_grace.py)."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = self._answer(request, *args, **kwargs)
        # DOT answers some errors (parameters in the URL) without a content type: every answer
        # of this endpoint is JSON and never stored (RFC 6749 §5.1, §5.2).
        if response["Content-Type"].startswith("text/html"):
            response["Content-Type"] = "application/json"
        if not response.has_header("Cache-Control"):
            response["Cache-Control"] = "no-store"
        return response

    def _answer(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        retry_after = token_window().hit(client_network(request))
        if retry_after:
            return too_many_requests(retry_after, "token requests")
        # RFC 6749 §4.1.3, §6: the parameters come form-encoded; DOT would read a JSON body as no
        # parameters at all and answer that the grant type is unsupported.
        if request.content_type not in ("application/x-www-form-urlencoded", "multipart/form-data"):
            return JsonResponse(
                {
                    "error": "invalid_request",
                    "error_description": "the body must be application/x-www-form-urlencoded, "
                    f"not {request.content_type or 'missing'}",
                },
                status=400,
            )
        # oauthlib and DOT serve every grant type a client is registered for (DOT even answers
        # device-code polls before oauthlib sees them); the registration policy keeps dynamic
        # clients to the advertised ones, and this keeps every client, however it was created,
        # to them (RFC 6749 §5.2 unsupported_grant_type).
        grant_type = request.POST.get("grant_type")
        supported = ", ".join(oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED)
        if grant_type and grant_type not in oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED:
            return JsonResponse(
                {
                    "error": "unsupported_grant_type",
                    "error_description": f"grant_type must be one of {supported}",
                },
                status=400,
            )
        # Without one, the request misses a required parameter (§5.2 invalid_request), which
        # oauthlib answers as unsupported_grant_type with no word of what was wrong. One sent
        # in the URL gets DOT's refusal of parameters there instead.
        if not grant_type and not request.GET:
            return JsonResponse(
                {
                    "error": "invalid_request",
                    "error_description": f"grant_type is missing: it must be one of {supported}",
                },
                status=400,
            )
        if not request.GET and (refusal := _token_parameter_refusal(request)):
            return refusal
        # Habitual OIDC scopes dropped, `resource` for /mcp in its exact form; a token request
        # without one inherits the grant's (accounts/oauth_validators.py).
        body = normalised_parameters(request.POST, default_resource=False)
        if body is not None:
            request.POST = body
        client_id = refresh_grace.public_client_refreshing(request)
        if client_id is None:
            return super().post(request, *args, **kwargs)
        refresh_token = request.POST["refresh_token"]
        asked = [request.POST.get("scope"), request.POST.getlist("resource")]
        with refresh_grace.one_at_a_time(refresh_token):
            replayed = refresh_grace.replay(refresh_token, client_id, asked)
            if replayed is not None:
                return HttpResponse(
                    replayed,
                    content_type="application/json",
                    headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
                )
            response = super().post(request, *args, **kwargs)
            if response.status_code == 200:
                refresh_grace.remember(refresh_token, client_id, asked, response.content)
            return response
