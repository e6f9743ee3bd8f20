"""Settings for the test suite: the production settings with a throwaway key and fast hashing."""

import os

os.environ["THREENGRAM_ENV_FILE"] = ""  # inherited by live-server subprocesses too
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
# Production cookies, although the tests' origin is plain-http loopback (which relaxes them).
os.environ.setdefault("SESSION_COOKIE_SECURE", "1")
os.environ.setdefault("CSRF_COOKIE_SECURE", "1")
# The production settings start no database with DEBUG off. The suite, run without a
# DATABASE_URL (scripts/dev.py test passes the one it started), uses the embedded PostgreSQL.
if not os.environ.get("DATABASE_URL"):
    from threengram.embedded_db import start as start_embedded_postgres

    os.environ["DATABASE_URL"] = start_embedded_postgres()

from threengram.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Serve static files straight from the source folders (no collectstatic in the test run).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# Each async test runs on its own event loop: no pooled connection may outlive it.
ASYNC_DATABASE_POOL_MAX = 0

# In-process tests write their fixtures as the owner (factories act for no tenant); the live
# server processes of the end-to-end and browser tests run as the application role, as in
# production, and tests/memories/test_row_level_security.py switches it on where it tests it.
DATABASE_APP_ROLE = os.environ.get("DATABASE_APP_ROLE", "")
