from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from infra import observability


class SiteIcon(RedirectView):
    """/favicon.ico, which a browser asks for by default (a feed reader, a page it shows without
    the site's HTML): the icon every page links, where WhiteNoise serves it. Looked up per request,
    so a static files storage that names files by their content gives the current name."""

    def get_redirect_url(self, *args: object, **kwargs: object) -> str:
        return static("favicon.svg")


urlpatterns = [
    path("admin/", admin.site.urls),
    path("version", observability.version_view, name="version"),
    path("favicon.ico", SiteIcon.as_view(), name="favicon"),
    path("", include("accounts.urls")),
    # OAuth 2.1 authorization server for MCP clients (RFC 8414 metadata at the root).
    path("", include("accounts.oauth_urls")),
]

# A database outage is a 503 + Retry-After page, not a 500 (infra/dbfaults.py).
handler500 = "infra.dbfaults.server_error"
# Not found: JSON at the addresses programs call, the friendly page elsewhere.
handler404 = "accounts.views.not_found"
