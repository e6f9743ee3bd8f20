# The gateway's live-server and data fixtures, shared with the end-to-end tests.
from tests.mcp_gateway.conftest import (  # noqa: F401
    live_daphne,
    live_uvicorn,
    seeded,
)


def server_user():
    """A user whose password a live server with the production settings checks: the test
    settings hash with MD5 for speed, which those servers do not accept."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from tests.factories import PASSWORD, UserFactory

    hasher = PBKDF2PasswordHasher()
    user = UserFactory()
    user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    return user


def logged_in(url: str, user):
    """An HTTP client of the live server at `url`, logged in as `user` through the log-in page."""
    import re

    import httpx2

    from tests.factories import PASSWORD

    http = httpx2.Client(base_url=url, timeout=10)
    page = http.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]
    response = http.post(
        "/login/",
        data={"csrfmiddlewaretoken": token, "username": user.username, "password": PASSWORD},
    )
    assert response.status_code == 302, response.text
    return http
