from django.contrib import admin
from django.urls import include, path

from infra import observability

urlpatterns = [
    path("admin/", admin.site.urls),
    path("version", observability.version_view, name="version"),
    path("", include("accounts.urls")),
    # OAuth 2.1 authorization server for MCP clients (RFC 8414 metadata at the root).
    path("", include("accounts.oauth_urls")),
]

# A database outage is a 503 + Retry-After page, not a 500 (infra/dbfaults.py).
handler500 = "infra.dbfaults.server_error"
# Not found: JSON at the addresses programs call, the friendly page elsewhere.
handler404 = "accounts.views.not_found"
