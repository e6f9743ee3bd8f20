"""Text PostgreSQL cannot store is refused where it enters the site, before any view runs."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.utils.cache import add_never_cache_headers

from accounts.forms import MemoryFilterForm
from infra.observability import method_not_allowed_json
from memories.bounds import unstorable_text

# The OAuth endpoints that clients (not people) call answer in their JSON error format.
OAUTH_JSON_PREFIXES = (
    "/oauth/token/",
    "/oauth/revoke/",
    "/oauth/register/",
    "/.well-known/oauth-authorization-server",
)
# The other addresses programs call, answering JSON (infra/observability.py): their errors are
# JSON too, not a page for people.
JSON_PATHS = ("/version",)
# RFC 7592's client configuration endpoint, /oauth/register/<client_id>/ (accounts/oauth_urls.py).
CLIENT_CONFIGURATION_VIEW = "oauth2_provider:dcr-register-management"
# The endpoints whose bodies are JSON, which their views check (and read whole: parsing them as a
# form here would consume a multipart body before the view reads it).
JSON_BODY_PREFIXES = ("/oauth/register/",)


def answers_in_json(request: HttpRequest) -> bool:
    """Whether the address is one that programs call, whose errors are JSON."""
    return request.path.startswith(OAUTH_JSON_PREFIXES) or request.path in JSON_PATHS


def _names_a_registration(request: HttpRequest) -> bool:
    """Whether the path is RFC 7592's configuration endpoint of one registration (or that
    address without its trailing slash, which is redirected to it). The client id in it is never
    looked up: the registration access token names the client, and the view answers an id the
    token is not for, one with a NUL too, as any client it does not know (401 invalid_token), so
    that a malformed id tells a caller no more than an unknown one."""
    candidates = [request.path_info]
    if settings.APPEND_SLASH and not request.path_info.endswith("/"):
        candidates.append(f"{request.path_info}/")
    for path in candidates:
        try:
            match = resolve(path, getattr(request, "urlconf", None))
        except Resolver404:
            continue
        return match.view_name == CLIENT_CONFIGURATION_VIEW
    return False


def _checked_by_the_page(request: HttpRequest) -> frozenset[str]:
    """The query parameters whose values the page checks itself: My memories' filters, which its
    form (accounts.forms.MemoryFilterForm) refuses one by one, naming the filter and applying the
    others, before any reaches the database. Their names (a key with a NUL is no filter's) and
    every other parameter, `page` included, are still checked here."""
    if request.method not in ("GET", "HEAD"):
        return frozenset()
    # Resolved as the request's own urlconf resolves it, which may mount no such page.
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return frozenset()
    if match.view_name == "accounts:memories":
        return frozenset(MemoryFilterForm.base_fields)
    return frozenset()


def unstorable_part(request: HttpRequest) -> str | None:
    """'<where>: <why>' for the first piece of the request's text that PostgreSQL could not
    store (NUL, a lone surrogate), or None. The path, the query, form fields and the session and
    CSRF cookies are what pages and OAuth endpoints read; JSON bodies are checked by the views
    that parse them (accounts/oauth_registration.py)."""
    if (problem := unstorable_text(request.path)) and not _names_a_registration(request):
        return f"path: {problem}"
    # Only the cookies this site reads: a cookie another site on the same host set must not
    # lock anyone out of this one.
    own = (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)
    cookies = {name: value for name, value in request.COOKIES.items() if name in own}
    sources = [("query parameter", request.GET), ("cookie", cookies)]
    if request.method == "POST" and not request.path.startswith(JSON_BODY_PREFIXES):
        sources.append(("form field", request.POST))
    # Which page the request is for is looked up only for a filter's value that needs it, not
    # for every request.
    checked_by_the_page: frozenset[str] | None = None
    for kind, data in sources:
        items = data.lists() if hasattr(data, "lists") else ((k, [v]) for k, v in data.items())
        for key, values in items:
            if problem := unstorable_text(key):
                return f"{kind} {key[:40]!r}: {problem}"
            for value in values:
                if not (problem := unstorable_text(value)):
                    continue
                if kind == "query parameter":
                    if checked_by_the_page is None:
                        checked_by_the_page = _checked_by_the_page(request)
                    if key in checked_by_the_page:
                        continue
                return f"{kind} {key[:40]!r}: {problem}"
    return None


# The body types a browser's form is sent in, which Django reads into request.POST.
FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
# The OAuth endpoints, which say themselves which bodies they take (a token request's form,
# a registration's JSON).
OWN_BODY_RULES_PREFIXES = ("/oauth/", "/.well-known/")


def content_coding_problem(request: HttpRequest) -> str | None:
    """Why the body cannot be read as sent, or None: Django decodes no content coding (RFC 9110
    §8.4), so a gzip body would be read as its compressed bytes (a form with one binary field,
    JSON that does not parse)."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return None
    coding = request.headers.get("Content-Encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    return f"Content-Encoding {coding[:40]} is not supported; send the body as is"


def not_a_form(request: HttpRequest) -> str | None:
    """Why the body of a POST to a page is not a form, or None. Django reads another type (a
    JSON body, say) as no fields at all, and the page would answer "This field is required."
    for fields that were sent."""
    if (
        request.method != "POST"
        or request.path.startswith(OWN_BODY_RULES_PREFIXES)
        or request.path in JSON_PATHS  # takes no POST: its 405 says so
        or request.content_type in FORM_CONTENT_TYPES
        or not request.body  # an empty POST (a bare button) is an empty form
    ):
        return None
    sent = request.content_type[:100] or "a body without a Content-Type"
    return f"the body must be a form ({' or '.join(FORM_CONTENT_TYPES)}), not {sent}"


# Django's multipart parser takes a boundary of printable ASCII characters, at most this many.
MULTIPART_BOUNDARY_MAX = 201


def unreadable_form(request: HttpRequest, error: Exception) -> str:
    """Why a form body could not be read, in words a client can act on; Django's message quotes
    the boundary whole, however long."""
    if isinstance(error, MultiPartParserError) and str(error).startswith("Invalid boundary"):
        boundary = request.content_params.get("boundary")
        if boundary is None:
            got = "none"
        elif not boundary:
            got = "an empty one"
        elif len(boundary) > MULTIPART_BOUNDARY_MAX:
            got = f"one of {len(boundary)} characters"
        else:
            got = repr(boundary[:40])
        return (
            "multipart/form-data needs a boundary parameter of 1 to "
            f"{MULTIPART_BOUNDARY_MAX} printable ASCII characters; got {got}"
        )
    return str(error)[:200]


class UnstorableTextMiddleware:
    """400 for a request carrying NUL or a lone surrogate: otherwise a form field, a query
    parameter, an OAuth parameter or a session cookie reaches a database lookup, and PostgreSQL
    refuses the statement (a 500). Also for a body past Django's size limits, naming the limit,
    and for a form body Django cannot read (a charset other than UTF-8, a multipart body without
    its boundary), saying why, and 415 for a page's POST whose body is no form (JSON) or comes
    in a content coding (gzip), which Django does not decode.
    OAuth endpoints answer in their JSON error format (RFC 6749 §5.2, RFC 7591 §3.2.2), and so
    do the site's other JSON addresses."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        status = 400
        try:
            if request.method in ("POST", "PUT") and request.path.startswith(JSON_BODY_PREFIXES):
                request.body  # noqa: B018 (read here, where its size limit is answered)
            if problem := content_coding_problem(request) or not_a_form(request):
                status = 415  # RFC 9110 §15.5.16: content in a format the page does not take
            else:
                problem = unstorable_part(request)
        except RequestDataTooBig:
            problem = f"the body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes"
        except TooManyFieldsSent:
            problem = f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} form fields"
        except (BadRequest, MultiPartParserError) as unreadable:
            problem = (
                f"the body could not be read as a form: {unreadable_form(request, unreadable)}"
            )
        if problem is None:
            return self.get_response(request)
        if answers_in_json(request):
            # RFC 7591 §3.2.2 has no invalid_request; its metadata error covers the body.
            error = (
                "invalid_client_metadata"
                if request.path.startswith(JSON_BODY_PREFIXES)
                else "invalid_request"
            )
            return JsonResponse({"error": error, "error_description": problem}, status=400)
        return HttpResponse(render_to_string("400.html", {"problem": problem}), status=status)


def private_pages(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """A page answered to a signed-in person shows their account (memories, connected apps,
    consent): no browser or proxy may keep it (RFC 9111 §5.2.2.3 no-store, §5.2.2.7 private),
    unless the view said how it may be cached."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            add_never_cache_headers(response)
        return response

    return middleware


def explained_405(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable:
    """A 405 (Django's method decorators, DOT's views) says which methods the address takes, in
    the endpoint's own format: a page for people, JSON for the OAuth endpoints clients call and
    the site's other JSON addresses.
    Django sends it with an empty body, which a browser shows as a blank error page."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code != 405 or response.content:
            return response
        allowed = response.get("Allow", "")
        if answers_in_json(request):
            return method_not_allowed_json(request.method, allowed)
        problem = f"{request.method} is not allowed here; this address takes {allowed or 'none'}"
        explained = HttpResponse(
            render_to_string("405.html", {"problem": problem}, request), status=405
        )
        if allowed:
            explained["Allow"] = allowed
        return explained

    return middleware
