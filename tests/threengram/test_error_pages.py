"""Error pages are friendly and give nothing away: no traceback, no settings, no URL patterns
(DEBUG is off, as `serve` and production run)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import path

from threengram import urls as site_urls


def _fail(request):
    raise RuntimeError("boom: an unexpected bug")


urlpatterns = [path("fail/", _fail), *site_urls.urlpatterns]
handler500 = site_urls.handler500
handler404 = site_urls.handler404

LEAKS = ("Traceback", "boom", "RuntimeError", "URLconf", "SECRET_KEY", "DATABASE", "site-packages")


@pytest.fixture
def visitor(settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = __name__
    return Client(raise_request_exception=False)


@pytest.mark.django_db
def test_a_bug_is_a_friendly_500_page_without_details(visitor):
    response = visitor.get("/fail/")
    assert response.status_code == 500
    assert "Something went wrong" in response.text
    for leak in (*LEAKS, settings.SECRET_KEY):
        assert leak not in response.text, leak


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["/oauth/register/a/b/", "/oauth/token/x/", "/oauth/revoke/x/"])
def test_an_unknown_address_under_a_programs_endpoint_is_a_json_404(visitor, address):
    """An OAuth client reads an error as JSON: the site's page was HTML it could not parse."""
    response = visitor.get(address)
    assert response.status_code == 404
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "there is nothing at this address",
    }


@pytest.mark.django_db
def test_an_unknown_address_is_a_friendly_404_without_the_url_patterns(visitor):
    response = visitor.get("/admin-secret-page/")
    assert response.status_code == 404
    assert "Not found" in response.text
    for leak in (*LEAKS, "accounts:", "oauth/register"):
        assert leak not in response.text, leak
