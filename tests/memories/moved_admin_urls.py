"""A URLconf that mounts the admin at another path than threengram/urls.py does."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("staff-console/", admin.site.urls)]
