"""The OAuth routes MCP clients need, and nothing else: RFC 8414 metadata at the origin root
(the issuer is the bare origin, so its well-known URI has no path suffix), authorize, token,
RFC 7009 revocation and RFC 7591/7592 registration. DOT's application-management, authorized-token,
introspection, device and OIDC views are deliberately not mounted.

The namespace is DOT's own: its views and metadata reverse "oauth2_provider:<name>".
"""

from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider import views as dot_views

from accounts import oauth_views

app_name = "oauth2_provider"

urlpatterns = [
    # Read by programs, whose requests carry no CSRF token: another method gets the 405 naming
    # the methods, in JSON, not the site's "form expired" page.
    path(
        ".well-known/oauth-authorization-server",
        csrf_exempt(dot_views.OAuthServerMetadataView.as_view()),
        name="oauth-server-metadata",
    ),
    path("oauth/authorize/", oauth_views.McpAuthorizationView.as_view(), name="authorize"),
    path("oauth/token/", oauth_views.McpTokenView.as_view(), name="token"),
    path("oauth/revoke/", dot_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", oauth_views.McpClientRegistrationView.as_view(), name="dcr-register"),
    # RFC 7592 management of a registration, authenticated by its (expiring) registration token.
    path(
        "oauth/register/<str:client_id>/",
        oauth_views.McpClientManagementView.as_view(),
        name="dcr-register-management",
    ),
]
