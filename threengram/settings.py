"""Settings, read from the environment (12-factor). See .env.example for every variable.

Production is the default: DEBUG is off unless DEBUG=1, SECRET_KEY must then be provided, and the
security settings below pass `manage.py check --deploy`.
"""

from __future__ import annotations

import math
import re
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import conninfo_to_dict

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def _written(name: str) -> str | None:
    """The variable's value, trimmed, or None when it is unset or empty: deploy tooling writes
    `NAME=` for a variable it leaves unset (a compose file's environment, a blank .env line), so
    an empty value is the default, not a value to refuse or to read as "off". The exceptions
    give "" a meaning of its own and say so where they are read: DATABASE_APP_ROLE,
    THREENGRAM_ENV_FILE and the lists (none)."""
    written = env.ENVIRON.get(name, "").strip()
    return written or None


def _text(name: str, default: str) -> str:
    """A text variable, trimmed; its default when unset or empty."""
    return _written(name) or default


def _at_least(name: str, default: int, minimum: int, maximum: int | None = None) -> int:
    """An integer variable, refused at start-up (naming it) when it is not one or is out of
    range: a window of 0 or a negative timeout would start, then fail every request."""
    if _written(name) is None:
        return default
    try:
        value = env.int(name)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value}: must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value}: must be at most {maximum}.")
    return value


def _seconds(name: str, default: float) -> float:
    """A positive number of seconds, as written (django-environ's float drops every character
    that is not a digit, a sign or a separator: "500ms" would be 500), refused at start-up
    (naming it) otherwise."""
    written = _written(name)
    if written is None:
        return default
    try:
        value = float(written)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={written!r}: must be a number of seconds.") from None
    if not 0 < value < math.inf:
        raise ImproperlyConfigured(f"{name}={written!r}: must be more than 0 seconds.")
    return value


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _flag(name: str, default: bool, *, empty_refused: bool = False) -> bool:
    """A boolean variable, refused at start-up (naming it) unless it is one of 1/0, true/false,
    yes/no, on/off: django-environ reads any other word, a typo of "true" too, as false. Empty
    is the default: read as "off", `SESSION_COOKIE_SECURE=` in a compose file would send the
    session cookie over plain http. `empty_refused`: for a flag whose default opens what "off"
    keeps closed, where an operator may write empty to mean "off": taken for the default, it
    would open that silently."""
    written = (_written(name) or "").lower()
    if not written and empty_refused and name in env.ENVIRON:
        raise ImproperlyConfigured(
            f"{name} is empty: set it to 1 or 0 (or leave it out for {int(default)})."
        )
    if not written:
        return default
    if written not in _TRUE + _FALSE:
        raise ImproperlyConfigured(
            f"{name}={env.ENVIRON[name]!r}: must be one of 1, true, yes, on, 0, false, no, off."
        )
    return written in _TRUE


def _names(name: str, default: list[str]) -> list[str]:
    """A comma-separated list, each entry trimmed: "a.example, b.example" names two hosts, not
    "a.example" and " b.example" (which matches nothing)."""
    return [entry.strip() for entry in env.list(name, default=default) if entry.strip()]


def _pool_sizes(prefix: str, minimum: int, maximum: int, *, smallest: int = 1) -> tuple[int, int]:
    """`<prefix>_MIN` and `<prefix>_MAX`, refused at start-up when the minimum is over the
    maximum (the pool would refuse them on the first query, failing every request). A maximum of
    0, where `smallest` allows it, means no pool."""
    low = _at_least(f"{prefix}_MIN", minimum, 0)
    high = _at_least(f"{prefix}_MAX", maximum, smallest)
    if high and low > high:
        raise ImproperlyConfigured(f"{prefix}_MIN={low} is more than {prefix}_MAX={high}.")
    return low, high


# A local .env (written by `scripts/dev.py serve`) fills in unset variables. The test suite
# sets THREENGRAM_ENV_FILE="" so a developer's .env never changes what the tests see.
ENV_FILE = env.str("THREENGRAM_ENV_FILE", default=str(BASE_DIR / ".env"))
if ENV_FILE:
    environ.Env.read_env(ENV_FILE, overwrite=False)

DEBUG = _flag("DEBUG", False)
SECRET_KEY = env.str("SECRET_KEY", default="")
# White space only is as unset (an empty value in an env file written with a stray space).
if not SECRET_KEY.strip():
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG-on"

# The public origin of this server, e.g. https://memory.example.com. The MCP resource URL
# (RFC 8707 audience of every token) and the OAuth issuer derive from it.
PUBLIC_BASE_URL = _text("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")


def _is_origin(url: str) -> bool:
    """An http(s) origin: scheme, host and an optional port of 1-65535, nothing more (RFC 6454
    §4); no user, no empty port, no white space."""
    try:
        parts = urlsplit(url)
        port = parts.port  # refuses a port that is no number, or past 65535
    except ValueError:  # an unclosed IPv6 literal too
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and f"{parts.scheme}://{parts.netloc}" == url
        and "@" not in parts.netloc
        and not parts.netloc.endswith(":")
        and port != 0
        and not any(character.isspace() for character in url)
    )


if not _is_origin(PUBLIC_BASE_URL):
    raise ImproperlyConfigured(
        f"PUBLIC_BASE_URL={PUBLIC_BASE_URL!r}: must be an origin, scheme and host only "
        "(e.g. https://memory.example.com; the MCP endpoint is PUBLIC_BASE_URL/mcp)."
    )
# The MCP endpoint's path, written once: the resource URL, the router's paths and the RFC 9728
# metadata's (mcp_gateway.asgi, mcp_gateway.auth) derive from it.
MCP_PATH = "/mcp"
MCP_RESOURCE_URL = f"{PUBLIC_BASE_URL}{MCP_PATH}"

ALLOWED_HOSTS = _names("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
if not ALLOWED_HOSTS and not DEBUG:
    # Django would answer every request 400 (it allows the loopback names unnamed in DEBUG only).
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS: must name at least one host this server answers for (e.g. "
        "memory.example.com), or be unset for the loopback names."
    )
CSRF_TRUSTED_ORIGINS = _names("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    # Django's admin, with the throttled log-in (accounts/admin_site.py).
    "accounts.admin_site.StaffAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "threengram",  # only for its system checks (threengram/checks.py)
    "oauth2_provider",
    "corsheaders",
    "accounts",
    "memories",
    "mcp_gateway",
]

MIDDLEWARE = [
    "infra.observability.RequestIdMiddleware",
    # /health and /ready, before the host check and the https redirect (infra/observability.py).
    "infra.observability.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # CORS for browser-based MCP clients on the OAuth endpoints (mcp_gateway/cors.py); before
    # anything that may answer, so its answers carry the headers too.
    "mcp_gateway.cors.CorsMiddleware",
    # Serves /static/ from the app server (no separate web server or build step needed).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # NUL and lone surrogates are refused (400) before sessions, log-in or any view look them
    # up in the database (accounts/middleware.py).
    "accounts.middleware.UnstorableTextMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A signed-in person's pages are never cached; a 405 names the methods (accounts/middleware.py).
    "accounts.middleware.private_pages",
    "accounts.middleware.explained_405",
    # Row-level security: the logged-in user is the tenant (memories/tenancy.py).
    "memories.tenancy.TenantMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "threengram.urls"
CSRF_FAILURE_VIEW = "accounts.views.csrf_failure"
ASGI_APPLICATION = "threengram.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "accounts.context_processors.signup",
            ],
        },
    },
]


# A slow database must not make every request slow: each statement is cancelled after
# DATABASE_STATEMENT_TIMEOUT_MS and each lock wait after DATABASE_LOCK_TIMEOUT_MS (0 = off), and
# the request gets a retryable 503 (infra/dbfaults.py). Sent as libpq startup options, so
# they hold for both pools (Django's and infra/asyncdb.py's). Long maintenance (a migration
# that builds an index on a large table) runs with DATABASE_STATEMENT_TIMEOUT_MS=0.
# PostgreSQL takes either up to 2^31 - 1 ms, and refuses every connection asking for more.
_TIMEOUT_MS_MAX = 2_147_483_647
DATABASE_STATEMENT_TIMEOUT_MS = _at_least("DATABASE_STATEMENT_TIMEOUT_MS", 5000, 0, _TIMEOUT_MS_MAX)
DATABASE_LOCK_TIMEOUT_MS = _at_least("DATABASE_LOCK_TIMEOUT_MS", 2000, 0, _TIMEOUT_MS_MAX)
# How long a pool keeps retrying a lost connection in the background (psycopg_pool, with backoff
# from 1 s, doubling) before it gives up and connects again on the next request instead. Short:
# after a database restart the next request reconnects at once rather than waiting out a backoff
# grown during the outage (docs/operations.md).
DATABASE_RECONNECT_TIMEOUT = _seconds("DATABASE_RECONNECT_TIMEOUT", 2.0)


# Behind a transaction pooler (PgBouncer with pool_mode = transaction, deploy/pgbouncer.ini) each
# transaction may run on another server connection, shared with other clients: nothing may rely
# on session state or leave any behind. With this on, no libpq startup options are sent (the
# pooler refuses them; its connect_query sets the timeouts instead), server-side cursors and
# prepared statements are off, and the role and tenant of row-level security are set inside
# every transaction (memories/tenancy.py, infra/asyncdb.py).
DATABASE_TRANSACTION_POOLER = _flag("DATABASE_TRANSACTION_POOLER", False)


def _database_from_url(
    url: str, *, pooled: bool = DATABASE_TRANSACTION_POOLER, name: str = "DATABASE_URL"
) -> dict:
    """Django's settings of the database at `url` (the variable `name`); `pooled`: reached
    through a transaction pooler, which refuses startup options (its connect_query sets the
    timeouts instead). A URL that libpq would refuse, or read as another port, is refused at
    start-up, naming the variable but never echoing the URL (it holds the password)."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)  # a URL, not key=value pairs
    if scheme and scheme[1] not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"{name}: must be a postgresql:// URL; got {scheme[1]}://…")
    try:
        params = conninfo_to_dict(url)
    except Exception:
        raise ImproperlyConfigured(f"{name}: is not a PostgreSQL connection URL.") from None
    # One port per host, an empty one for the default (libpq's multi-host form); libpq refuses
    # every connection to a port past the TCP range.
    if any(
        part and not (part.isascii() and part.isdigit() and 1 <= int(part) <= 65535)
        for part in str(params.get("port", "")).split(",")
    ):
        raise ImproperlyConfigured(f"{name}: the port must be a number from 1 to 65535.")
    pool_min, pool_max = _pool_sizes("DATABASE_POOL", 2, 10)
    if not pooled:
        params["options"] = (
            f"{params.get('options', '')} -c statement_timeout={DATABASE_STATEMENT_TIMEOUT_MS}"
            f" -c lock_timeout={DATABASE_LOCK_TIMEOUT_MS}"
        ).strip()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.pop("dbname", "threengram"),
        "USER": params.pop("user", ""),
        "PASSWORD": params.pop("password", ""),
        "HOST": params.pop("host", ""),
        "PORT": params.pop("port", ""),
        # A named cursor (QuerySet.iterator) lives in its session, which a transaction pooler
        # does not keep.
        "DISABLE_SERVER_SIDE_CURSORS": pooled,
        "OPTIONS": {
            **params,
            # psycopg 3 connection pool (Django 5.1+). Sized per server process.
            "pool": {
                "min_size": pool_min,
                "max_size": pool_max,
                "timeout": _seconds("DATABASE_POOL_TIMEOUT", 5.0),
                "reconnect_timeout": DATABASE_RECONNECT_TIMEOUT,
            },
        },
    }


DATABASE_URL = env.str("DATABASE_URL", default="").strip()
# Without DATABASE_URL a development process starts (or attaches to) the embedded PostgreSQL in
# the checkout's .pgdata/, which stops with the last process using it: never a deployment's
# database. With DEBUG off that is a configuration error, not a silent fallback
# (threengram/checks.py says so under `check --deploy` too).
EMBEDDED_DATABASE = not DATABASE_URL
if EMBEDDED_DATABASE:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DATABASE_URL must be set when DEBUG is off: the embedded PostgreSQL is for "
            "development only (DEBUG=1, or python3 scripts/dev.py serve)."
        )
    from threengram.embedded_db import start as start_embedded_postgres

    DATABASE_URL = start_embedded_postgres()
DATABASES = {"default": _database_from_url(DATABASE_URL)}
# A streaming read replica of DATABASE_URL's server for the reads that tolerate lag
# (memories/replica.py). Its pool gives up quickly: a replica that cannot answer costs a read on
# the primary, not a wait.
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="").strip()
# Whether the replica too is reached through a transaction pooler. A replica reached directly
# while the primary goes through PgBouncer (=0) gets the timeouts as startup options, as
# nothing else would set them there; one reached through PgBouncer while the primary is not (=1)
# gets the role and tenant of row-level security in every transaction (memories/tenancy.py).
DATABASE_REPLICA_TRANSACTION_POOLER = _flag(
    "DATABASE_REPLICA_TRANSACTION_POOLER", DATABASE_TRANSACTION_POOLER
)
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = _database_from_url(
        DATABASE_REPLICA_URL,
        pooled=DATABASE_REPLICA_TRANSACTION_POOLER,
        name="DATABASE_REPLICA_URL",
    )
    DATABASES["replica"]["OPTIONS"]["pool"]["timeout"] = _seconds(
        "DATABASE_REPLICA_POOL_TIMEOUT", 1.0
    )
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["memories.replica.ReplicaRouter"]
# Row-level security (memories/tenancy.py), a switch despite its name: "threengram_app" (the
# default, on, fail closed) = every connection acts as that role, subject to the tenant policies
# of migration memories/0007 — the second wall of tenant isolation; "" = act as the configured
# user, i.e. the owner, whom the policies do not bind: only for operators' scripts. No other value:
# the migrations grant that role alone (a system check refuses any other, threengram/checks.py).
# `manage.py migrate` always runs as the owner.
DATABASE_APP_ROLE = env.str("DATABASE_APP_ROLE", default="threengram_app").strip()
# Native asyncio connections for the MCP hot path (infra/asyncdb.py), per server process.
# 0 = no pool, a connection per use (the test settings).
ASYNC_DATABASE_POOL_MIN, ASYNC_DATABASE_POOL_MAX = _pool_sizes(
    "ASYNC_DATABASE_POOL", 2, 8, smallest=0
)
ASYNC_DATABASE_POOL_TIMEOUT = _seconds("DATABASE_POOL_TIMEOUT", 5.0)
# Prepare the hot statements once per connection (SQL PREPARE, and psycopg's automatic
# protocol-level preparation). False behind a transaction pooler that does not keep a
# connection's prepared statements between transactions (PgBouncer in transaction mode): the
# statements are then sent whole and planned on every call (docs/operations.md).
ASYNC_DATABASE_PREPARE = _flag("ASYNC_DATABASE_PREPARE", True) and not DATABASE_TRANSACTION_POOLER

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
# Django's password check, refusing erased accounts (accounts/backends.py).
AUTHENTICATION_BACKENDS = ["accounts.backends.AccountBackend"]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "/"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

# Shared state for the rate limits and the log-in throttle (infra/rate_limit.py,
# accounts/throttle.py). The default local-memory cache is per process: with several server
# processes set CACHE_URL to a shared cache (e.g. redis://… or memcached), or each process counts
# on its own and a client gets up to N times the limit. Not a database cache while the /mcp
# limit is on: that limit counts on the event loop, where Django refuses a database call (below).
# The client library each shared cache backend imports on first use, and how to install it.
_CACHE_CLIENTS = {
    "django.core.cache.backends.redis.RedisCache": ("redis", "pip install -e .[redis]"),
    "django.core.cache.backends.memcached.PyMemcacheCache": (
        "pymemcache",
        "pip install -e .[memcached]",
    ),
    "django.core.cache.backends.memcached.PyLibMCCache": (
        "pylibmc",
        "pip install pylibmc, or use pymemcache:// with pip install -e .[memcached]",
    ),
}


def _cache(name: str) -> dict:
    """The cache `name` names, refused at start-up when its backend could not be used: every
    log-in, token request and rate-limited call would fail on the cache's first use."""
    url = _text(name, "locmemcache://")
    try:
        cache = env.cache_url_config(url)
    except ImproperlyConfigured as unknown:
        raise ImproperlyConfigured(f"{name}: {unknown}") from None
    if urlsplit(url).scheme.lower() == "pymemcache":
        # django-environ reads pymemcache:// as pylibmc's backend while pymemcache is not
        # installed: start-up would then name the wrong client and extra.
        cache["BACKEND"] = "django.core.cache.backends.memcached.PyMemcacheCache"
    backend = cache["BACKEND"]
    if backend.endswith(".MemcachedCache"):  # python-memcached, removed in Django 4.1
        raise ImproperlyConfigured(f"{name}: memcache:// is no longer supported; use pymemcache://")
    if backend in _CACHE_CLIENTS:
        module, install = _CACHE_CLIENTS[backend]
        if find_spec(module) is None:
            raise ImproperlyConfigured(
                f"{name} names a cache whose client ({module}) is not installed: {install}"
            )
    return cache


CACHES = {"default": _cache("CACHE_URL")}

# --- Search -------------------------------------------------------------------------------------
# The model that embeds memories and queries for semantic search (memories/embedding.py):
# `wordllama` (ships in its wheel), `sentence-transformers:<folder>`, `fastembed:<folder>` or
# `none` (words only). After a change, `manage.py embed_memories --reembed`.
SEARCH_EMBEDDER = _text("SEARCH_EMBEDDER", "wordllama")
_EMBEDDER_KIND, _, _EMBEDDER_FOLDER = SEARCH_EMBEDDER.partition(":")
# Checked here, not only where the model loads (the server's start): `manage.py check` and the
# maintenance commands refuse a value no server could start with.
if SEARCH_EMBEDDER not in ("wordllama", "none") and not (
    _EMBEDDER_KIND in ("sentence-transformers", "fastembed") and _EMBEDDER_FOLDER.strip()
):
    raise ImproperlyConfigured(
        f"SEARCH_EMBEDDER={SEARCH_EMBEDDER[:80]!r}: expected wordllama, none, "
        "sentence-transformers:<model folder> or fastembed:<model folder>"
    )

# --- Accounts pages ----------------------------------------------------------------------------
# Empty is refused: written to close the page, it would open it to anyone as the default.
SIGNUP_ENABLED = _flag("SIGNUP_ENABLED", True, empty_refused=True)
# Sign-ups per client address and window (accounts/throttle.py), past which the form is refused
# (HTTP 429) until the window ends: SIGNUP_RATE accounts created, so that a script cannot make
# tenants without end from one address, and SIGNUP_FAILURES_PER_IP refused forms (a name taken,
# passwords that differ), bounding the probing of taken names while leaving a person room to
# correct typos. A few people behind one address (a household, an office) can each sign up; a
# class or a workshop signing up together from one network needs a higher SIGNUP_RATE.
SIGNUP_RATE = _at_least("SIGNUP_RATE", 5, 1)
SIGNUP_FAILURES_PER_IP = _at_least("SIGNUP_FAILURES_PER_IP", 30, 1)
SIGNUP_RATE_WINDOW = _at_least("SIGNUP_RATE_WINDOW", 3600, 1)
# Failed password checks (log-in, admin log-in, password change, account deletion) allowed per
# window before further attempts are refused (HTTP 429) until the window ends: per account and
# client address, per address, and per account from all addresses except those the account
# recently logged in from (accounts/throttle.py).
LOGIN_FAILURES_PER_ACCOUNT_ADDRESS = _at_least("LOGIN_FAILURES_PER_ACCOUNT_ADDRESS", 5, 1)
LOGIN_FAILURES_PER_IP = _at_least("LOGIN_FAILURES_PER_IP", 20, 1)
LOGIN_FAILURES_PER_ACCOUNT = _at_least("LOGIN_FAILURES_PER_ACCOUNT", 50, 1)
LOGIN_FAILURE_WINDOW_SECONDS = _at_least("LOGIN_FAILURE_WINDOW_SECONDS", 15 * 60, 1)

# --- Security (production defaults) -----------------------------------------------------------
# Plain http is relaxed only where it cannot work otherwise: with DEBUG on, or when the public
# origin is http on this machine's loopback and the server answers for loopback names only
# (`scripts/dev.py serve`, reachable from this machine only): Secure cookies would never come
# back over http, and there is no https to redirect to. Any other origin gets the https
# defaults, and so does a public host in ALLOWED_HOSTS: PUBLIC_BASE_URL left unset (its default
# is loopback http) must not serve that host's log-in with cookies that travel over plain http.
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_ORIGIN = urlsplit(PUBLIC_BASE_URL)
LOCAL_HTTP = (
    _ORIGIN.scheme == "http"
    and _ORIGIN.hostname in _LOOPBACK
    and all(host.lower().strip("[]") in _LOOPBACK for host in ALLOWED_HOSTS)
)
_HTTPS = not (DEBUG or LOCAL_HTTP)
SECURE_SSL_REDIRECT = _flag("SECURE_SSL_REDIRECT", _HTTPS)
SESSION_COOKIE_SECURE = _flag("SESSION_COOKIE_SECURE", _HTTPS)
CSRF_COOKIE_SECURE = _flag("CSRF_COOKIE_SECURE", _HTTPS)
SECURE_HSTS_SECONDS = _at_least("SECURE_HSTS_SECONDS", 31_536_000 if _HTTPS else 0, 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _flag("SECURE_HSTS_INCLUDE_SUBDOMAINS", _HTTPS)
SECURE_HSTS_PRELOAD = _flag("SECURE_HSTS_PRELOAD", _HTTPS)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if _flag("BEHIND_TLS_PROXY", False) else None
)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

from django.utils.csp import CSP  # noqa: E402

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}

# --- MCP -------------------------------------------------------------------------------------
# A memory body never changes (append-only, immutable-field body), so it may be cached for long;
# the catalogs change on deployment. Two separate settings so tuning one never retunes the other.
MEMORY_RESOURCE_CACHE_TTL_MS = _at_least("MEMORY_RESOURCE_CACHE_TTL_MS", 24 * 60 * 60 * 1000, 0)
MCP_CATALOG_CACHE_TTL_MS = _at_least("MCP_CATALOG_CACHE_TTL_MS", 60 * 60 * 1000, 0)
# One JSON access line per /mcp request (ids, MCP method, status, latency; never bodies).
MCP_ACCESS_LOG = _flag("MCP_ACCESS_LOG", True)
MEMORY_READ_SCOPE = "memory:read"
MEMORY_WRITE_SCOPE = "memory:write"
# Requests to /mcp allowed per user (the token's user, all of its tokens together) and window;
# past it, HTTP 429 with Retry-After. Generous on purpose: the limit is there to stop one
# account from monopolizing the server, not to pace ordinary use, so it sits above the rate one
# account reaches in the load benchmarks (docs/performance.md): agents and the benchmarks, which
# spread their load over many tenants, are not throttled. 0 disables the limit (a benchmark that
# drives one tenant flat out sets MCP_RATE_LIMIT=0).
MCP_RATE_LIMIT = _at_least("MCP_RATE_LIMIT", 6000, 0)
MCP_RATE_LIMIT_WINDOW = _at_least("MCP_RATE_LIMIT_WINDOW", 60, 1)
# Requests to /mcp of one account (the token's user) served at once by one server process; past
# it, a request waits for one of its account's slots (MCP clients do not retry a 429). The rate
# limit bounds a count per minute, not how many of one account's requests hold the process and
# its database pool at the same moment: without this bound, one account's concurrent searches
# queue every other account's behind them. Small: a handful of agents of one person rarely have
# more calls in flight, and a slot is held only while a request is served. 0 disables the bound.
MCP_ACCOUNT_CONCURRENCY_MAX = _at_least("MCP_ACCOUNT_CONCURRENCY_MAX", 4, 0)
# How long such a request waits for a slot before it is refused (429). Below the 30 s an MCP
# client (the SDK's default timeout) and deploy/nginx.conf give a request, less the time serving
# it may take (the pool's 5 s, a statement's 5 s), so the client reads why rather than timing out;
# far above a slot's usual turn (tens of milliseconds). 0: refused at once, never queued.
MCP_ACCOUNT_QUEUE_WAIT_MS = _at_least("MCP_ACCOUNT_QUEUE_WAIT_MS", 10_000, 0)
# Requests of one account that may wait at once per process; one more is refused at once. Each
# waiter holds its body (up to 1 MiB) and a coroutine, so this bounds an account's memory (64 MiB
# at worst); and 64 waiters behind 4 slots are about what drains within the wait above at a
# loaded server's search time, so more would mostly wait only to be refused. 0: none waits.
MCP_ACCOUNT_QUEUE_MAX = _at_least("MCP_ACCOUNT_QUEUE_MAX", 64, 0)
if MCP_RATE_LIMIT and CACHES["default"]["BACKEND"].endswith(".DatabaseCache"):
    raise ImproperlyConfigured(
        "CACHE_URL names a database cache, which the /mcp rate limit cannot count in (it counts "
        "on the event loop, where a database call is refused): use redis, memcached or the "
        "local-memory default, or set MCP_RATE_LIMIT=0."
    )
# Memory rows (versions) one account may hold: every one counts, current, superseded and
# archived, since none is ever deleted; each row's size is bounded by the content limits, so a
# count bounds the disk one tenant can take from the others. Past it, remember and revise are
# refused (memories.services). Far above what an agent's account stores in years of use, and
# above the load benchmarks' largest tenant with its revisions (docs/performance.md), so a
# benchmark never meets it; low enough that one account cannot fill a database sized for many.
# At most PostgreSQL's bigint, which the database compares it as.
MEMORY_VERSIONS_PER_ACCOUNT_MAX = _at_least(
    "MEMORY_VERSIONS_PER_ACCOUNT_MAX", 250_000, 1, 2**63 - 1
)

# --- CORS for browser-based MCP clients (django-cors-headers; /mcp applies the same policy) --
# Origins allowed to call /mcp and the OAuth endpoints from a browser: exact origins, and
# patterns. By default any loopback origin (a client or the MCP Inspector running on this
# machine), nothing else. Other origins get no CORS headers, and /mcp refuses them unless their
# host is one of ALLOWED_HOSTS (DNS-rebinding protection, mcp_gateway/guards.py). Not
# CORS_ALLOW_ALL_ORIGINS: `check --deploy` refuses it (threengram/checks.py).
CORS_ALLOWED_ORIGINS = _names("CORS_ALLOWED_ORIGINS", default=[])
# Patterns are separated by whitespace, not commas: a comma belongs in a pattern ({1,5}).
CORS_ALLOWED_ORIGIN_REGEXES = env.str(
    "CORS_ALLOWED_ORIGIN_REGEXES",
    default=r"^https?://(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?$",
).split()
for _pattern in CORS_ALLOWED_ORIGIN_REGEXES:
    try:
        re.compile(_pattern)
    except re.error as invalid:
        # django-cors-headers compiles them on each request: a 500 on every one from a browser.
        raise ImproperlyConfigured(
            f"CORS_ALLOWED_ORIGIN_REGEXES: {_pattern!r} is not a valid pattern ({invalid})."
        ) from None
# The OAuth endpoints an MCP client calls; the account pages and the admin stay same-origin.
CORS_URLS_REGEX = r"^/(\.well-known/|oauth/(token|revoke|register)/)"
# PUT and DELETE: a browser client updates and deletes its registration (RFC 7592); /mcp
# itself answers anything but POST with 405.
CORS_ALLOW_METHODS = ("GET", "POST", "PUT", "DELETE", "OPTIONS")
# What MCP clients send (Streamable HTTP transport, 2025-11-25 and 2026-07-28).
CORS_ALLOW_HEADERS = (
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "last-event-id",
)
# What they read: the challenge (step-up), the session id, and the retry hints.
CORS_EXPOSE_HEADERS = ("www-authenticate", "mcp-session-id", "retry-after", "x-request-id")

# --- OAuth 2.1 authorization server (django-oauth-toolkit; see accounts/oauth_*.py) -----------
# The issuer is the bare public origin: the RFC 9728 metadata of /mcp names it in
# `authorization_servers`, and MCP clients require the RFC 8414 `issuer` to be that exact string
# (RFC 8414 §3.3) and the RFC 9207 `iss` of every authorization response to equal it.
OAUTH_ISSUER = PUBLIC_BASE_URL
# Anonymous dynamic client registrations (RFC 7591) and updates of them (RFC 7592) allowed per
# client IP and window. Some MCP clients register anew on every connection, and the hosted ones
# (a web chat's connectors) register all of their users' connections from a few shared
# addresses: 600 an hour leaves them room while bounding how fast one address can fill the
# client table.
OAUTH_REGISTRATION_RATE = _at_least("OAUTH_REGISTRATION_RATE", 600, 1)
OAUTH_REGISTRATION_RATE_WINDOW = _at_least("OAUTH_REGISTRATION_RATE_WINDOW", 3600, 1)
# Token endpoint requests (code exchanges and refreshes) allowed per client IP and window: a
# client refreshes about once an hour, so 60 a minute leaves room for many clients behind one
# address while bounding guessing of codes and refresh tokens.
OAUTH_TOKEN_RATE = _at_least("OAUTH_TOKEN_RATE", 60, 1)
# RFC 9700 §4.14.2: a rotated refresh token used again by the same public client within this
# many seconds gets the same new tokens (two windows sharing a token store, a retried refresh);
# after it, reuse revokes the token family. Kept in the cache (CACHE_URL): with several server
# processes, a shared one, or a retry landing on another process revokes the family.
OAUTH_REFRESH_GRACE_SECONDS = _at_least("OAUTH_REFRESH_GRACE_SECONDS", 60, 0)
OAUTH_TOKEN_RATE_WINDOW = _at_least("OAUTH_TOKEN_RATE_WINDOW", 60, 1)

# RFC 8252 §7.1: desktop clients that register a callback of their own URI scheme
# (Cursor: cursor://anysphere.cursor-mcp/oauth/callback, beside its https and loopback ones; a
# registration with one refused URI is refused whole). PKCE binds the code to the client that
# asked for it, as for a loopback callback. Schemes a browser would run or read as a page are
# never accepted.
OAUTH_NATIVE_REDIRECT_SCHEMES = _names(
    "OAUTH_NATIVE_REDIRECT_SCHEMES", default=["cursor", "vscode", "vscode-insiders"]
)
_NEVER_REDIRECT_SCHEMES = {
    "javascript", "vbscript", "data", "file", "about", "blob", "filesystem", "ftp", "ws", "wss",
    "http", "https",
}  # fmt: skip
for _scheme in OAUTH_NATIVE_REDIRECT_SCHEMES:
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*", _scheme) or _scheme in _NEVER_REDIRECT_SCHEMES:
        raise ImproperlyConfigured(
            f"OAUTH_NATIVE_REDIRECT_SCHEMES: {_scheme!r} is not a private-use URI scheme "
            "(lower case, RFC 3986 3.1; not http, https, javascript, data, file or the like)."
        )

OAUTH2_PROVIDER = {
    "SCOPES": {
        MEMORY_READ_SCOPE: "Read your memories",
        MEMORY_WRITE_SCOPE: "Write, revise, archive and resolve your memories",
    },
    # An authorization request without `scope` asks for the whole tool surface, as one with the
    # challenged scope does: a client that sends none (and knows no step-up) would otherwise be
    # read-only for good. The person still chooses on the consent page ("Read only" is offered).
    "DEFAULT_SCOPES": [MEMORY_READ_SCOPE, MEMORY_WRITE_SCOPE],
    "OIDC_ISS_ENDPOINT": OAUTH_ISSUER,
    # oauthlib server and validator with the MCP profile: S256 only, `resource` = /mcp required,
    # inactive users refused (accounts/oauth_validators.py).
    "OAUTH2_SERVER_CLASS": "accounts.oauth_validators.McpAuthorizationServer",
    "OAUTH2_VALIDATOR_CLASS": "accounts.oauth_validators.McpOAuth2Validator",
    # RFC 8414 advertisement: only what is really accepted.
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_basic",
        "client_secret_post",
    ],
    "PKCE_REQUIRED": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    # DOT enforces this as idle expiry: a refresh token dies 30 days after its access token.
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
    "ROTATE_REFRESH_TOKEN": True,
    # OAuth 2.1 §4.3.1 / RFC 9700 §4.14.2: replaying a rotated refresh token revokes its family.
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # 0: DOT's grace period needs the previous tokens in plain text (E001 with hashed storage);
    # accounts/refresh_grace.py gives the same grace with OAUTH_REFRESH_GRACE_SECONDS instead.
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,
    # Consent is asked every time; a client cannot skip it with approval_prompt=auto.
    "REQUEST_APPROVAL_PROMPT": "force",
    # RFC 8252 §7.3: native clients (Claude Code, VS Code) listen on any loopback port.
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https", *OAUTH_NATIVE_REDIRECT_SCHEMES],
    "DCR_ENABLED": True,
    # Open to anonymous MCP clients; the view rate-limits and polices the metadata instead.
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "DCR_REGISTRATION_TOKEN_EXPIRE_SECONDS": 7 * 24 * 3600,
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "accounts.oauth_registration.PolicedMetadataFetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
    # RFC 9700 gates (DOT defaults them to legacy behaviour until 4.0).
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # Only the SHA-256 `token_checksum` of access and refresh tokens is stored.
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # The staff admin's pages of these objects are read only (accounts/oauth_admin.py): DOT's
    # own let staff move a token to another account.
    "APPLICATION_ADMIN_CLASS": "accounts.oauth_admin.ApplicationAdmin",
    "ACCESS_TOKEN_ADMIN_CLASS": "accounts.oauth_admin.AccessTokenAdmin",
    "REFRESH_TOKEN_ADMIN_CLASS": "accounts.oauth_admin.RefreshTokenAdmin",
    "GRANT_ADMIN_CLASS": "accounts.oauth_admin.GrantAdmin",
    "ID_TOKEN_ADMIN_CLASS": "accounts.oauth_admin.IDTokenAdmin",
}

# DOT warns that `http` redirect URIs are allowed: they must be, for native clients' loopback
# callbacks (RFC 8252 §7.3), and registration refuses `http` for any other host
# (accounts/oauth_registration.py, tested in tests/accounts/test_oauth_registration.py).
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]

# JSON lines on stderr (LOG_FORMAT=plain for humans). Never memory content or tokens.
LOG_FORMAT = _text("LOG_FORMAT", "json").lower()
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: must be json or plain.")
LOG_LEVEL = _text("LOG_LEVEL", "INFO").upper()
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
if LOG_LEVEL not in _LOG_LEVELS:
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r}: must be one of {', '.join(_LOG_LEVELS)}.")
# Python's warnings become log records too (logger py.warnings), not bare lines among the JSON.
LOGGING_CONFIG = "infra.observability.configure_logging"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "infra.observability.JsonFormatter"},
        "plain": {
            "()": "infra.observability.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "filters": {"client_gone": {"()": "infra.observability.DropClientDisconnect"}},
    "handlers": {
        "console": {
            # stderr, written from a background thread (never blocks the event loop)
            "()": "infra.observability.BackgroundStreamHandler",
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "embedded_postgres": {"level": "WARNING"},
        # The access line comes from RequestIdMiddleware (with request id and tenant id).
        "django.server": {"level": "WARNING"},
        # uvicorn's own lines (start-up, shutdown, its errors) in the same format as the app's.
        # uvicorn gives this logger a plain-text handler before it imports the application;
        # naming it here replaces that handler with none, so its records reach the root's. Its
        # children are named too (with no level: they keep the one uvicorn's --log-level gave
        # them), or dictConfig would reset the level of every unnamed child of a named logger.
        "uvicorn": {"propagate": True},
        "uvicorn.error": {},
        "uvicorn.asgi": {},
        # uvicorn's own access line holds the query string (a page's search, an OAuth code).
        "uvicorn.access": {"level": "WARNING"},
        # At DEBUG these log authorization codes and tokens: never below INFO, whatever
        # LOG_LEVEL says.
        "oauthlib": {"level": "INFO"},
        "oauth2_provider": {"level": "INFO"},
        # The SDK's legacy-wire transport says "Terminating session: None" at INFO after every
        # stateless request (its only INFO line): a second line per request, with nothing in it.
        "mcp.server.streamable_http": {"level": "WARNING", "filters": ["client_gone"]},
    },
}
