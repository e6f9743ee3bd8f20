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
