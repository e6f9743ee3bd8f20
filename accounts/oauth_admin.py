"""The staff admin's pages of django-oauth-toolkit's objects: to look at, never to edit.

DOT registers its models with the classes its settings name (OAUTH2_PROVIDER's
*_ADMIN_CLASS keys, pointed here). Its own classes offer change forms: a staff member could hand
an access token to another account (its user, application, scope, resource, expiry), revive a
revoked refresh token, or give an application another client_id, redirect URI or skip consent,
and so read any tenant's memories through /mcp. Here every credential and client is shown read
only, field by field from an allowlist (never a token, a code, a checksum or a client secret),
and the one way to end a person's access from these pages is the revocation an account holder
uses on their connected apps page.

Deleting an application stays possible: it takes every credential issued to the client with it
(nothing of it authenticates afterwards) and touches no tenant data, as the removal of stale
registered clients does. Tokens, codes and ID tokens are never deleted one by one: a deleted
access token leaves its refresh token able to mint another, and a deleted refresh token loses
the tombstone that reuse detection needs.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.connected_apps import revoke_app_access
from accounts.oauth_registration import is_registration_token, registration_tokens
from infra.admin import ListedFiltersOnly

# Searches name clients and accounts, never a credential: a search term lands in the address bar
# and the access log.
_BY_CLIENT_OR_ACCOUNT = ("application__client_id", "application__name", "user__username")


def _masked(value: str) -> str:
    # Imported late: DOT's admin module imports this one while it is being loaded.
    from oauth2_provider.admin import mask_credential

    return mask_credential(value)


class _ViewOnly(ListedFiltersOnly, admin.ModelAdmin):
    """Listed and shown, never added or changed; only `fields` are rendered."""

    fields: tuple[str, ...] = ()
    deletable = False
    # DOT's Application.get_absolute_url names a page this site does not serve.
    view_on_site = False

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> tuple[str, ...]:
        return self.fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.deletable and super().has_delete_permission(request, obj)


class ApplicationAdmin(_ViewOnly):
    """Clients register themselves (Dynamic Client Registration, client ID metadata documents);
    the client secret, shown once by the registration, is never shown here."""

    list_display = ("name", "client_id", "client_type", "registration_source", "user", "created")
    list_filter = ("client_type", "authorization_grant_type", "registration_source")
    search_fields = ("name", "client_id", "user__username")
    list_select_related = ("user",)
    fields = (
        "name",
        "client_id",
        "client_type",
        "authorization_grant_type",
        "registration_source",
        "redirect_uris",
        "post_logout_redirect_uris",
        "allowed_origins",
        "skip_authorization",
        "hash_client_secret",
        "algorithm",
        "user",
        "created",
        "updated",
        "cimd_expires_at",
    )

    # See the module's docstring: the client goes with every credential it was issued.
    deletable = True


class _RevokesAccess(_ViewOnly):
    """A list of a person's credentials, with the action that ends an app's access to them."""

    actions = ("revoke_app_access",)

    @admin.action(description="Revoke the selected tokens' app access (disconnect the app)")
    def revoke_app_access(self, request: HttpRequest, queryset: QuerySet) -> None:
        # What the account holder's own "revoke" does (accounts.connected_apps): every credential
        # the person holds for that app, at once, in the revocation's lock order. A token alone
        # would leave its family able to mint another. In key order, as the erasure batch.
        connections, left = {}, 0
        tokens = queryset.select_related("user", "application").order_by("user", "application")
        for token in tokens:
            if self.belongs_to_no_person(token):
                left += 1
                continue
            connections.setdefault((token.user_id, token.application_id), token)
        for token in connections.values():
            revoke_app_access(user=token.user, application=token.application)
        self.message_user(
            request,
            f"Revoked {len(connections)} app connection(s): every token of the person for that "
            "app. The app must be authorized again to reach the account.",
            messages.SUCCESS,
        )
        if left:
            self.message_user(
                request,
                f"{left} token(s) left as they are: they belong to an app, not a person "
                "(deleting the application ends them).",
                messages.WARNING,
            )

    def belongs_to_no_person(self, token) -> bool:
        # No application would read as "every application" to the revocation.
        return token.user_id is None or token.application_id is None

    @admin.display(description="token")
    def masked_token(self, token) -> str:
        return _masked(token.token)


# The two kinds of access token DOT keeps in one table. A registration token has no user: in a
# list of tokens, after an erasure, it read as a person's token that survived it.
REGISTRATION_KIND = "registration (client management)"
USER_KIND = "user"


class AccessTokenKindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return [("registration", REGISTRATION_KIND), ("user", USER_KIND)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value == "registration":
            return queryset.filter(registration_tokens())
        if value == "user":
            return queryset.exclude(registration_tokens())
        # Django would show the whole list, as if filtered: refused (infra.admin), naming this.
        problem = ValidationError(f"kind is “registration” or “user”, not “{value[:100]}”")
        raise IncorrectLookupParameters(problem)


class AccessTokenAdmin(_RevokesAccess):
    """Registration access tokens (RFC 7592, one per dynamically registered app, no user) are
    listed with a person's tokens, so each row says which kind it is."""

    list_display = ("pk", "masked_token", "kind", "user", "application", "expires", "created")
    list_filter = (AccessTokenKindFilter, "application")
    list_select_related = ("application", "user")
    search_fields = _BY_CLIENT_OR_ACCOUNT
    fields = (
        "masked_token",
        "kind",
        "user",
        "application",
        "scope",
        "resource",
        "expires",
        "source_refresh_token",
        "created",
        "updated",
    )

    def belongs_to_no_person(self, token) -> bool:
        return super().belongs_to_no_person(token) or is_registration_token(token)

    @admin.display(description="kind")
    def kind(self, token) -> str:
        return REGISTRATION_KIND if is_registration_token(token) else USER_KIND


class RefreshTokenAdmin(_RevokesAccess):
    list_display = ("pk", "masked_token", "user", "application", "created", "revoked")
    list_filter = ("application",)
    list_select_related = ("application", "user")
    search_fields = _BY_CLIENT_OR_ACCOUNT
    fields = (
        "masked_token",
        "user",
        "application",
        "resource",
        "token_family",
        "access_token",
        "created",
        "updated",
        "revoked",
    )


class GrantAdmin(_ViewOnly):
    """Authorization codes live a minute; revoking an app's access deletes them with the rest."""

    list_display = ("pk", "masked_code", "application", "user", "expires")
    list_select_related = ("application", "user")
    search_fields = _BY_CLIENT_OR_ACCOUNT
    fields = ("masked_code", "user", "application", "redirect_uri", "scope", "expires", "created")

    @admin.display(description="code")
    def masked_code(self, grant) -> str:
        return _masked(grant.code)


class IDTokenAdmin(_ViewOnly):
    list_display = ("jti", "user", "application", "expires")
    list_filter = ("application",)
    list_select_related = ("application", "user")
    search_fields = _BY_CLIENT_OR_ACCOUNT
    fields = ("jti", "user", "application", "scope", "expires", "created", "updated")
