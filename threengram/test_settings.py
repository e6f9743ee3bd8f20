"""Settings for the test suite: the production settings with a throwaway key and fast hashing."""

import os

os.environ["THREENGRAM_ENV_FILE"] = ""  # inherited by live-server subprocesses too
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")

from threengram.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Serve static files straight from the source folders (no collectstatic in the test run).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
