from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # Minimal login for the OAuth flow (accounts:login); the account pages replace it.
    path("accounts/", include("accounts.login_urls")),
    # OAuth 2.1 authorization server for MCP clients (RFC 8414 metadata at the root).
    path("", include("accounts.oauth_urls")),
]
