from django.contrib import admin
from django.urls import include, path

from threengram import observability

urlpatterns = [
    path("admin/", admin.site.urls),
    path("health", observability.health, name="health"),
    path("ready", observability.ready, name="ready"),
    path("version", observability.version_view, name="version"),
    path("", include("accounts.urls")),
]
