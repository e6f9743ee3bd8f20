"""The account pages: thin views over Django's auth views and the accounts/memories services."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import InvalidPage, Page, Paginator
from django.db import IntegrityError, transaction
from django.forms import BaseForm
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from accounts.connected_apps import list_connected_apps, revoke_app_access
from accounts.erasure import erase_account
from accounts.export import check_export_readable, export_memories_json
from accounts.forms import (
    DeleteAccountForm,
    MemoryFilterForm,
    SignUpForm,
    ThrottledAuthenticationForm,
    ThrottledPasswordChangeForm,
    nearest_names_hint,
)
from accounts.middleware import answers_in_json
from accounts.oauth_views import application_asking
from memories import replica
from memories.access import NIL_ID
from memories.browsing import BrowseFilters, browse_memories
from memories.models import Memory, MemoryType, Thread, parse_memory_id

MEMORIES_PER_PAGE = 20
# Set by the erasure in the session that follows it: the one visit the confirmation is shown to.
JUST_DELETED_SESSION_KEY = "account_just_deleted"
# A page "number" is echoed in the message refusing it, cut to this many characters.
PAGE_SHOWN_MAX = 20


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:memories")
    return redirect("accounts:login")


@require_http_methods(["GET", "HEAD", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.SIGNUP_ENABLED:
        raise Http404("Sign-up is closed.")
    # The page the person was on its way to (an OAuth authorization request's consent page,
    # through the log-in page's "Sign up" link), checked as Django's log-in checks it: this
    # host only, else the default page. Not through redirect(): it would take a bare word
    # for the name of a URL.
    next_url = auth_views.RedirectURLMixin().get_redirect_url(request)
    if request.user.is_authenticated:
        return HttpResponseRedirect(next_url or reverse("accounts:memories"))
    form = SignUpForm(request.POST if request.method == "POST" else None, request=request)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                user = form.save()
        except IntegrityError:
            # Taken meanwhile by a sign-up that passed the same check (the database's unique
            # index on the lower-case name decided).
            form.add_error("username", "A user with that username already exists.")
        else:
            login(request, user, backend="accounts.backends.AccountBackend")
            messages.success(request, f"Welcome, {user.username}. Your account is ready.")
            return HttpResponseRedirect(next_url or reverse("accounts:memories"))
    context = {"form": form, "nav": "signup", "next": next_url}
    return throttled(render(request, "accounts/signup.html", context), form)


def throttled(response: HttpResponse, form: BaseForm) -> HttpResponse:
    """A form refused by the log-in throttle or the sign-up limit is answered 429 Too Many
    Requests (RFC 6585 §4) with Retry-After, the form and a message saying how long to wait."""
    if getattr(form, "retry_after", None):
        response.status_code = 429
        response["Retry-After"] = str(form.retry_after)
    return response


class LoginView(auth_views.LoginView):
    """Django's log-in view behind the log-in throttle."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True
    # A form is posted: Django's form views also take PUT, as a POST without its fields.
    http_method_names = ["get", "head", "post", "options"]
    extra_context = {"nav": "login"}

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        # Sent here by an app's authorization request: the page says which app is asking.
        context["application_asking"] = application_asking(context.get("next") or "")
        return context

    def get_success_url(self) -> str:
        # A `next` naming this page would send a signed-in person back here forever (Django
        # raises on that loop): they go to the default page instead.
        url = super().get_success_url()
        return resolve_url(settings.LOGIN_REDIRECT_URL) if url == self.request.path else url

    def form_invalid(self, form):
        return throttled(super().form_invalid(form), form)


class LogoutView(auth_views.LogoutView):
    """POST only (Django's LogoutView refuses GET), so a link on another site cannot log you out."""

    next_page = reverse_lazy("accounts:login")

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        # After the session is gone: the message travels in its own cookie.
        messages.info(request, "You are logged out.")
        return response


class PasswordChangeView(auth_views.PasswordChangeView):
    form_class = ThrottledPasswordChangeForm
    success_url = reverse_lazy("accounts:password_change_done")
    http_method_names = LoginView.http_method_names
    extra_context = {"nav": "account"}

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form):
        return throttled(super().form_invalid(form), form)


class PasswordChangeDoneView(auth_views.PasswordChangeDoneView):
    extra_context = {"nav": "account"}


@login_required
@require_safe
def connected_apps(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "accounts/connected_apps.html",
        {
            "apps": list_connected_apps(user=request.user),
            "mcp_url": settings.MCP_RESOURCE_URL,
            "nav": "apps",
        },
    )


@login_required
@require_POST
def revoke_app(request: HttpRequest, pk: int) -> HttpResponse:
    # Only an app connected to me. Any other id (one already revoked by a second click or a
    # page left open, another person's, none) gets the same answer, so ids of other people's
    # apps tell nothing.
    connected = {
        app.application.pk: app.application for app in list_connected_apps(user=request.user)
    }
    application = connected.get(pk)
    if application is None:
        messages.info(request, "That app is not connected to your account: nothing to revoke.")
        return redirect("accounts:connected_apps")
    revoke_app_access(user=request.user, application=application)
    messages.success(
        request,
        f"{application.name or application.client_id} is disconnected: its tokens no longer work.",
    )
    return redirect("accounts:connected_apps")


@login_required
@require_safe
def memory_list(request: HttpRequest) -> HttpResponse:
    form = MemoryFilterForm(request.GET)
    applied = form.applied()
    show_all = applied.get("show") == "all"
    requested_page = request.GET.get("page")
    # Browsing may lag the agent's last write by a moment: on the read replica when there is one.
    browse = replica.tolerant_read(
        browse_memories,
        owner_id=request.user.pk,
        filters=BrowseFilters(
            text=applied.get("q"),
            memory_type=applied.get("type"),
            project=applied.get("project"),
            thread=applied.get("thread"),
            commitment_status=applied.get("state"),
        ),
        show_all=show_all,
        paginate=lambda memories: _page(Paginator(memories, MEMORIES_PER_PAGE), requested_page),
    )
    # As the filters were applied: the project in the account's spelling, the thread's name as
    # stored.
    for name, value in (("project", browse.filters.project), ("thread", browse.filters.thread)):
        if value:
            applied[name] = value
    page = browse.page
    page_problem = _page_problem(page, requested_page)
    problems = form.problems() + ([page_problem] if page_problem else [])
    if browse.project_unknown:
        problems.append(
            f"You have no current memory in project “{applied['project']}”"
            f"{nearest_names_hint(browse.near_projects)}."
        )
    text = browse.text
    if text and not browse.filters.text:
        problems.append(
            f"The search text holds only common words ({_quoted(text.common)}), which the filter "
            "leaves out; it was not applied."
        )
        del applied["q"]
    if browse.thread_unknown:
        problems.append(
            f"You have no thread named “{applied['thread']}”"
            f"{nearest_names_hint(browse.near_threads)}."
        )
    return render(
        request,
        "accounts/memory_list.html",
        {
            "page": page,
            "form": form,
            "applied": applied,
            "filtered": browse.filters.given,
            "narrowed": bool(applied.keys() & {"type", "project", "state", "thread"}),
            # An empty page of several words says every one must be found.
            "several_words": bool(browse.filters.text and len(text.words) > 1),
            # Named, so that no one takes the list for memories holding them.
            "left_out": text.common if browse.filters.text else [],
            # A state beside another type finds nothing: only commitments have one.
            "state_of_another_type": bool(
                applied.get("state")
                and applied.get("type", MemoryType.COMMITMENT) != MemoryType.COMMITMENT
            ),
            "problems": problems,
            "project_unknown": browse.project_unknown,
            "thread_unknown": browse.thread_unknown,
            "projects": browse.projects,
            "threads": browse.threads,
            "show_all": show_all,
            "hidden_exist": browse.hidden_exist,
            "mcp_url": settings.MCP_RESOURCE_URL,
            "nav": "memories",
        },
    )


def _quoted(words: list[str]) -> str:
    return ", ".join(f"“{word}”" for word in words)


def _page(paginator: Paginator, requested: str | None) -> Page:
    """The page asked for; for one that does not exist, the nearest: the last past the end, the
    first for a number below 1 (Paginator.get_page gives the last, the account's oldest
    memories) or for no number at all."""
    try:
        below_first = requested is not None and int(requested) < 1
    except ValueError:
        below_first = False
    return paginator.page(1) if below_first else paginator.get_page(requested)


def _page_problem(page: Page, requested: str | None) -> str | None:
    """The message saying that the page asked for does not exist, rather than passing off
    `page`, the nearest (_page), as it; None when it does, or when none was asked for."""
    if not requested:
        return None
    try:
        page.paginator.validate_number(requested)
    except InvalidPage:
        shown = requested if len(requested) <= PAGE_SHOWN_MAX else requested[:PAGE_SHOWN_MAX] + "…"
        return (
            f"There is no page “{shown}”: pages run from 1 to {page.paginator.num_pages}. "
            f"This is page {page.number}."
        )
    return None


@login_required
@require_safe
def memory_detail(request: HttpRequest, memory_id: str) -> HttpResponse:
    owned = Memory.objects.owned_by(request.user)
    # Malformed, missing and foreign ids all end in the same 404.
    memory = owned.filter(id=parse_memory_id(memory_id) or NIL_ID).first()
    if memory is None:
        raise Http404("No such memory.")
    return render(
        request,
        "accounts/memory_detail.html",
        {
            "memory": memory,
            "chain": Memory.objects.revision_chain(memory),
            "threads": Thread.objects.holding(request.user.pk, memory.id).in_name_order(),
            "list_query": _list_query_came_from(request),
            "nav": "memories",
        },
    )


def _list_query_came_from(request: HttpRequest) -> str:
    """The filters and page of the My memories list this page was opened from (its referrer on
    this site), so that the way back returns to them; '' from anywhere else."""
    try:
        came_from = urlsplit(request.headers.get("Referer", ""))
    except ValueError:  # a referrer that is no URL (an unclosed "[" of an IPv6 host)
        return ""
    same_site = (came_from.scheme, came_from.netloc) == (request.scheme, request.get_host())
    return came_from.query if same_site and came_from.path == reverse("accounts:memories") else ""


@login_required
@require_safe
def export_memories(request: HttpRequest) -> HttpResponse:
    if request.method == "HEAD":
        # The headers alone: no export is made, and a server that would send a streamed body
        # to a HEAD request (daphne does) has none to send.
        response = HttpResponse(content_type="application/json; charset=utf-8")
        response["Cache-Control"] = "no-store"
        return response
    # Before the answer starts: a database that cannot answer gets the retryable 503.
    check_export_readable(owner_id=request.user.pk)
    response = StreamingHttpResponse(
        export_memories_json(owner_id=request.user.pk, username=request.user.get_username()),
        content_type="application/json; charset=utf-8",
    )
    stamp = timezone.now().strftime("%Y-%m-%d")
    response["Content-Disposition"] = f'attachment; filename="threengram-memories-{stamp}.json"'
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_safe
def account(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/account.html", {"nav": "account"})


@login_required
@require_POST
def forget_email(request: HttpRequest) -> HttpResponse:
    """An account that gave an e-mail address at sign-up, when sign-up still asked for one,
    removes it here."""
    request.user.forget_email()
    messages.success(request, "Your e-mail address is removed.")
    return redirect("accounts:account")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def delete_account(request: HttpRequest) -> HttpResponse:
    form = DeleteAccountForm(
        request.POST if request.method == "POST" else None, user=request.user, request=request
    )
    if request.method == "POST" and form.is_valid():
        erase_account(user=request.user)
        logout(request)
        # In the fresh session logout leaves: set before it, the flag would be flushed with the
        # old one.
        request.session[JUST_DELETED_SESSION_KEY] = True
        return redirect("accounts:account_deleted")
    page = render(request, "accounts/delete_account.html", {"form": form, "nav": "account"})
    return throttled(page, form)


@require_safe
def account_deleted(request: HttpRequest) -> HttpResponse:
    """The confirmation, once, right after the erasure: someone logged in (a bookmark, the
    history) has an account, and anyone else (logged out the ordinary way) never had theirs
    deleted; neither is told otherwise."""
    if request.user.is_authenticated:
        return redirect("accounts:account")
    # A HEAD (a link checker) leaves the confirmation to the GET that follows it.
    session = request.session
    just_deleted = (
        session.get(JUST_DELETED_SESSION_KEY)
        if request.method == "HEAD"
        else session.pop(JUST_DELETED_SESSION_KEY, None)
    )
    if not just_deleted:
        return redirect("accounts:login")
    return render(request, "accounts/account_deleted.html")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """The site's page for a form whose CSRF check failed (CSRF_FAILURE_VIEW): most often a page
    left open across a log-in or log-out elsewhere. Django's own page names a setting and
    styles itself inline, which the site's Content-Security-Policy blocks."""
    login_page = reverse("accounts:login")
    if request.path == login_page and request.user.is_authenticated:
        # A log-in form left open in another tab, sent after logging in from this one: what
        # it was for is done. On to where it was going (the log-in page sends someone logged
        # in to its `next`, checked as a log-in checks it).
        wanted = request.POST.get("next")
        return redirect(f"{login_page}?{urlencode({'next': wanted})}" if wanted else login_page)
    return render(request, "403_csrf.html", status=403)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The site's handler404: the friendly page, but JSON at the addresses programs call (an
    OAuth client reads an error as JSON, RFC 6749 §5.2), naming nothing of the URL patterns."""
    if answers_in_json(request):
        body = {"error": "invalid_request", "error_description": "there is nothing at this address"}
        return JsonResponse(body, status=404)
    return defaults.page_not_found(request, exception)
