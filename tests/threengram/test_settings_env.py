"""How settings read the environment: lists, and values refused at start-up."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_settings(print_expression: str, **variables: str) -> subprocess.CompletedProcess:
    """A process that imports the production settings with `variables` set and prints
    `print_expression` as JSON."""
    environment = {
        key: item
        for key, item in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", *variables)
    }
    environment.update(
        THREENGRAM_ENV_FILE="",
        DEBUG="0",
        SECRET_KEY="not-a-secret-" + "x" * 40,
        # Never connected to: importing the settings opens no connection.
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/nothing",
    )
    environment.update(variables)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            f"import json; from threengram import settings; print(json.dumps({print_expression}))",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _setting(print_expression: str, **variables: str):
    result = _load_settings(print_expression, **variables)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_the_search_embedder_is_read_trimmed():
    assert _setting("settings.SEARCH_EMBEDDER", SEARCH_EMBEDDER=" none ") == "none"


# What deploy tooling writes for a variable it leaves unset (a compose file's `NAME=`, a blank
# .env line): each is its default, not refused and not "off".
EMPTY_IS_THE_DEFAULT = {
    "SEARCH_EMBEDDER": "wordllama",
    "CACHE_URL": "django.core.cache.backends.locmem.LocMemCache",
    "LOG_FORMAT": "json",
    "LOG_LEVEL": "INFO",
    "MCP_RATE_LIMIT": 6000,
    "DATABASE_STATEMENT_TIMEOUT_MS": 5000,
    "LOGIN_FAILURES_PER_IP": 20,
    "SIGNUP_RATE": 5,
    "DATABASE_RECONNECT_TIMEOUT": 2.0,
    "MCP_ACCESS_LOG": True,
    "ASYNC_DATABASE_PREPARE": True,
    # A public server's https defaults: read as "off", the session cookie would travel over
    # plain http.
    "SESSION_COOKIE_SECURE": True,
    "CSRF_COOKIE_SECURE": True,
    "SECURE_SSL_REDIRECT": True,
    "SECURE_HSTS_SECONDS": 31_536_000,
}


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_variable_is_its_default(empty):
    names = [name for name in EMPTY_IS_THE_DEFAULT if name != "CACHE_URL"]
    read = _setting(
        f"[{', '.join(f'settings.{name}' for name in names)}, "
        "settings.CACHES['default']['BACKEND']]",
        PUBLIC_BASE_URL="https://memory.example.com",
        ALLOWED_HOSTS="memory.example.com",
        **dict.fromkeys(EMPTY_IS_THE_DEFAULT, empty),
    )
    assert dict(zip([*names, "CACHE_URL"], read, strict=True)) == EMPTY_IS_THE_DEFAULT


def test_an_empty_public_base_url_is_the_default_one():
    assert _setting("settings.PUBLIC_BASE_URL", PUBLIC_BASE_URL="") == "http://127.0.0.1:8000"


def test_an_empty_value_keeps_its_documented_meaning_where_it_has_one():
    """DATABASE_APP_ROLE= acts as the owner; an empty list names nothing."""
    assert _setting(
        "[settings.DATABASE_APP_ROLE, settings.OAUTH_NATIVE_REDIRECT_SCHEMES, "
        "settings.CORS_ALLOWED_ORIGIN_REGEXES]",
        DATABASE_APP_ROLE="",
        OAUTH_NATIVE_REDIRECT_SCHEMES="",
        CORS_ALLOWED_ORIGIN_REGEXES="",
    ) == ["", [], []]


def test_the_application_role_is_read_trimmed():
    """A role name of blanks is the empty one (the owner, which `check --deploy` warns of), not a
    role " " that every connection fails to switch to."""
    assert _setting("settings.DATABASE_APP_ROLE", DATABASE_APP_ROLE="  ") == ""
    assert _setting("settings.DATABASE_APP_ROLE", DATABASE_APP_ROLE=" threengram_app\n") == (
        "threengram_app"
    )


def test_cors_origin_regexes_are_split_on_whitespace_so_their_commas_survive():
    first = r"^https://agents\.example\.com(:\d{1,5})?$"
    second = r"^https://[a-z]{2,8}\.example\.org$"
    regexes = _setting(
        "settings.CORS_ALLOWED_ORIGIN_REGEXES",
        CORS_ALLOWED_ORIGIN_REGEXES=f"{first}  {second}\n",
    )
    assert regexes == [first, second]
    assert re.match(regexes[0], "https://agents.example.com:8443")


def test_the_default_cors_origin_regex_is_whole():
    [regex] = _setting("settings.CORS_ALLOWED_ORIGIN_REGEXES")
    assert re.match(regex, "http://127.0.0.1:6274") and re.match(regex, "http://[::1]:80")
    assert not re.match(regex, "https://evil.example.com")


def test_a_space_after_a_comma_keeps_every_host_and_origin():
    hosts, csrf_origins, cors_origins = _setting(
        "[settings.ALLOWED_HOSTS, settings.CSRF_TRUSTED_ORIGINS, settings.CORS_ALLOWED_ORIGINS]",
        ALLOWED_HOSTS="memory.example.com, www.memory.example.com,",
        CSRF_TRUSTED_ORIGINS="https://memory.example.com, https://www.memory.example.com",
        CORS_ALLOWED_ORIGINS=" https://agents.example.com ,https://inspector.example.com",
    )
    assert hosts == ["memory.example.com", "www.memory.example.com"]
    assert csrf_origins == ["https://memory.example.com", "https://www.memory.example.com"]
    assert cors_origins == ["https://agents.example.com", "https://inspector.example.com"]


@pytest.mark.parametrize(
    ("variables", "named", "limit"),
    [
        # A window of 0 divides by zero on every /mcp request or log-in; a negative one expires
        # every counter as it is written (no throttle at all).
        ({"MCP_RATE_LIMIT_WINDOW": "0"}, "MCP_RATE_LIMIT_WINDOW", "at least 1"),
        ({"LOGIN_FAILURE_WINDOW_SECONDS": "-900"}, "LOGIN_FAILURE_WINDOW_SECONDS", "at least 1"),
        ({"OAUTH_TOKEN_RATE": "0"}, "OAUTH_TOKEN_RATE", "at least 1"),
        # A limit of 0 would refuse every sign-up; a negative window, limit none.
        ({"SIGNUP_RATE": "0"}, "SIGNUP_RATE", "at least 1"),
        ({"SIGNUP_RATE": "-5"}, "SIGNUP_RATE", "at least 1"),
        ({"SIGNUP_FAILURES_PER_IP": "0"}, "SIGNUP_FAILURES_PER_IP", "at least 1"),
        ({"SIGNUP_RATE_WINDOW": "0"}, "SIGNUP_RATE_WINDOW", "at least 1"),
        ({"SIGNUP_RATE_WINDOW": "-3600"}, "SIGNUP_RATE_WINDOW", "at least 1"),
        ({"SIGNUP_RATE": "five"}, "SIGNUP_RATE", "whole number"),
        # A cap of 0 would refuse every memory; a negative one, the same.
        ({"MEMORY_VERSIONS_PER_ACCOUNT_MAX": "0"}, "MEMORY_VERSIONS_PER_ACCOUNT_MAX", "at least 1"),
        ({"MEMORY_VERSIONS_PER_ACCOUNT_MAX": "1e6"}, "MEMORY_VERSIONS_PER_ACCOUNT_MAX", "whole"),
        # PostgreSQL refuses the startup option: every request would be a 503, forever.
        ({"DATABASE_STATEMENT_TIMEOUT_MS": "-1"}, "DATABASE_STATEMENT_TIMEOUT_MS", "at least 0"),
        ({"DATABASE_LOCK_TIMEOUT_MS": "soon"}, "DATABASE_LOCK_TIMEOUT_MS", "whole number"),
        ({"DATABASE_POOL_TIMEOUT": "0"}, "DATABASE_POOL_TIMEOUT", "more than 0 seconds"),
        # The pool refuses a minimum over its maximum on the first query.
        ({"DATABASE_POOL_MIN": "20"}, "DATABASE_POOL_MIN=20", "more than DATABASE_POOL_MAX=10"),
        # The /mcp limit counts on the event loop, where Django refuses a database call.
        ({"CACHE_URL": "dbcache://throttle_cache"}, "CACHE_URL", "MCP_RATE_LIMIT=0"),
        (
            {"ASYNC_DATABASE_POOL_MIN": "9", "ASYNC_DATABASE_POOL_MAX": "4"},
            "ASYNC_DATABASE_POOL_MIN=9",
            "more than ASYNC_DATABASE_POOL_MAX=4",
        ),
        # Past PostgreSQL's integer range: it refuses every connection asking for it.
        (
            {"DATABASE_STATEMENT_TIMEOUT_MS": "3000000000"},
            "DATABASE_STATEMENT_TIMEOUT_MS",
            "at most 2147483647",
        ),
        # Read as written or refused: "500ms" is not 500 seconds.
        ({"DATABASE_POOL_TIMEOUT": "500ms"}, "DATABASE_POOL_TIMEOUT", "number of seconds"),
        ({"DATABASE_RECONNECT_TIMEOUT": "inf"}, "DATABASE_RECONNECT_TIMEOUT", "more than 0"),
        # A typo of a boolean is no silent "off" (a redirect loop behind the TLS proxy,
        # startup options PgBouncer refuses).
        ({"BEHIND_TLS_PROXY": "ture"}, "BEHIND_TLS_PROXY", "must be one of 1, true"),
        ({"DATABASE_TRANSACTION_POOLER": "enabled"}, "DATABASE_TRANSACTION_POOLER", "one of"),
        # Empty closed the sign-up page: taken for the default, it would open it unasked.
        ({"SIGNUP_ENABLED": ""}, "SIGNUP_ENABLED is empty", "set it to 1 or 0"),
        ({"SIGNUP_ENABLED": " "}, "SIGNUP_ENABLED is empty", "leave it out for 1"),
        # The issuer and the token audience derive from an origin, nothing more.
        ({"PUBLIC_BASE_URL": "https://memory.example.com/mcp"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://[::1"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://memory.example.com:abc"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://memory.example.com:99999"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://memory.example.com:0"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://memory.example.com:"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://user:pw@memory.example.com"}, "PUBLIC_BASE_URL", "an origin"),
        ({"PUBLIC_BASE_URL": "https://memory example.com"}, "PUBLIC_BASE_URL", "an origin"),
        # A shared cache whose client is not installed would fail every log-in.
        ({"CACHE_URL": "redis://cache.example.com:6379/0"}, "CACHE_URL", "pip install -e .[redis]"),
        ({"CACHE_URL": "memcache://cache.example.com:11211"}, "CACHE_URL", "pymemcache://"),
        # The documented memcached URL names its own client (not pylibmc's) and extra.
        (
            {"CACHE_URL": "pymemcache://cache.example.com:11211"},
            "CACHE_URL",
            "client (pymemcache) is not installed: pip install -e .[memcached]",
        ),
        # django-cors-headers would compile it on every request from a browser: a 500.
        (
            {"CORS_ALLOWED_ORIGIN_REGEXES": r"^https://(agents\.example\.com$"},
            "CORS_ALLOWED_ORIGIN_REGEXES",
            "not a valid pattern",
        ),
        ({"LOG_FORMAT": "text"}, "LOG_FORMAT", "json or plain"),
        ({"CACHE_URL": "pylibmc://cache.example.com:11211"}, "CACHE_URL", "client (pylibmc)"),
        # A scheme a browser runs or reads as a page is no desktop client's callback.
        (
            {"OAUTH_NATIVE_REDIRECT_SCHEMES": "cursor,javascript"},
            "OAUTH_NATIVE_REDIRECT_SCHEMES",
            "not a private-use URI scheme",
        ),
        ({"LOG_LEVEL": "VERBOSE"}, "LOG_LEVEL", "one of DEBUG, INFO"),
        # Never echoing the URL: it holds the password.
        ({"DATABASE_URL": "postgresql://memory@db.example.com:abc/m"}, "DATABASE_URL", "port"),
        # libpq refuses every connection to these.
        ({"DATABASE_URL": "postgresql://memory@db.example.com:99999/m"}, "DATABASE_URL", "1 to"),
        ({"DATABASE_URL": "postgresql://memory@db.example.com:0/m"}, "DATABASE_URL", "1 to"),
        ({"DATABASE_URL": "host=db.example.com port=70000 dbname=m"}, "DATABASE_URL", "1 to"),
        ({"DATABASE_URL": "postgresql://memory@db.example.com:\u00b2/m"}, "DATABASE_URL", "1 to"),
        (
            {"DATABASE_URL": "mysql://memory:hunter2@db.example.com/m"},
            "DATABASE_URL",
            "postgresql://",
        ),
        ({"DATABASE_URL": "   "}, "DATABASE_URL must be set", "DEBUG is off"),
        # Every request would be a 400.
        ({"ALLOWED_HOSTS": " , "}, "ALLOWED_HOSTS", "at least one host"),
        # What no server could start with fails `manage.py check` as it fails start-up.
        ({"SEARCH_EMBEDDER": "bogus"}, "SEARCH_EMBEDDER='bogus'", "expected wordllama, none"),
        ({"SEARCH_EMBEDDER": "fastembed:"}, "SEARCH_EMBEDDER", "fastembed:<model folder>"),
        ({"SEARCH_EMBEDDER": "none:x"}, "SEARCH_EMBEDDER", "expected wordllama, none"),
    ],
)
def test_a_value_that_cannot_work_stops_start_up_naming_the_variable_and_its_limit(
    variables, named, limit
):
    result = _load_settings("1", **variables)
    assert result.returncode != 0, f"{variables} was accepted"
    last_line = result.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last_line and named in last_line and limit in last_line


@pytest.mark.parametrize(
    ("url", "port"),
    [
        # libpq's multi-host form: an empty item is the default port.
        ("postgresql://memory@db1.example.com,db2.example.com:5433/m", ",5433"),
        ("host=db1.example.com,db2.example.com port=,5433 dbname=m user=memory", ",5433"),
        # A key=value string whose password holds "://" is no URL of another scheme.
        ("host=db.example.com dbname=m user=memory password=Tr0ub4dor://3", ""),
    ],
)
def test_every_connection_string_libpq_takes_is_taken(url, port):
    assert _setting("settings.DATABASES['default']['PORT']", DATABASE_URL=url) == port


def test_a_malformed_database_url_is_never_echoed():
    result = _load_settings("1", DATABASE_URL="mysql://memory:hunter2@db.example.com/m")
    assert result.returncode != 0 and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("variables", "expression", "value"),
    [
        ({"DATABASE_POOL_TIMEOUT": "0.5e1"}, "ASYNC_DATABASE_POOL_TIMEOUT", 5),
        ({"DATABASE_RECONNECT_TIMEOUT": " 2e0 "}, "DATABASE_RECONNECT_TIMEOUT", 2),
        ({"PUBLIC_BASE_URL": "https://memory.example.com/ "}, "MCP_RESOURCE_URL",
         "https://memory.example.com/mcp"),
        ({"PUBLIC_BASE_URL": "https://memory.example.com:8443"}, "MCP_RESOURCE_URL",
         "https://memory.example.com:8443/mcp"),
        ({"PUBLIC_BASE_URL": "http://[::1]:8000"}, "MCP_RESOURCE_URL", "http://[::1]:8000/mcp"),
        ({"PUBLIC_BASE_URL": "https://Memory.Example.com"}, "OAUTH_ISSUER",
         "https://Memory.Example.com"),
        ({"MCP_ACCESS_LOG": "Off", "SIGNUP_ENABLED": " yes "}, "[settings.MCP_ACCESS_LOG, "
         "settings.SIGNUP_ENABLED][0]", False),
        ({"LOG_LEVEL": "debug"}, "LOG_LEVEL", "DEBUG"),
    ],
)  # fmt: skip
def test_values_are_read_as_written(variables, expression, value):
    expression = expression if expression.startswith("[") else f"settings.{expression}"
    assert _setting(expression, **variables) == value


def test_a_database_cache_is_accepted_with_the_mcp_rate_limit_off():
    assert _setting(
        "settings.CACHES['default']['BACKEND']",
        CACHE_URL="dbcache://throttle_cache",
        MCP_RATE_LIMIT="0",
    ).endswith(".DatabaseCache")


def test_the_limits_leave_the_documented_special_values_alone():
    """MCP_RATE_LIMIT=0 turns the /mcp limit off, a 0 timeout turns PostgreSQL's off, and an
    async pool of at most 0 connections means a connection per use."""
    assert _setting(
        "[settings.MCP_RATE_LIMIT, settings.DATABASE_STATEMENT_TIMEOUT_MS, "
        "settings.ASYNC_DATABASE_POOL_MAX]",
        MCP_RATE_LIMIT="0",
        DATABASE_STATEMENT_TIMEOUT_MS="0",
        ASYNC_DATABASE_POOL_MAX="0",
    ) == [0, 0, 0]


def test_a_replica_reached_directly_behind_a_pooled_primary_keeps_the_timeouts():
    options = "[settings.DATABASES[a]['OPTIONS'].get('options') for a in ('default', 'replica')]"
    pooled = {
        "DATABASE_TRANSACTION_POOLER": "1",
        "DATABASE_REPLICA_URL": "postgresql://nobody@127.0.0.1:2/replica",
    }
    assert _setting(options, **pooled) == [None, None]  # both through PgBouncer
    primary, replica = _setting(options, **pooled, DATABASE_REPLICA_TRANSACTION_POOLER="0")
    assert primary is None
    assert replica == "-c statement_timeout=5000 -c lock_timeout=2000"


def test_only_a_database_reached_through_a_pooler_goes_without_server_side_cursors():
    # A named cursor lives in its session, which a transaction pooler does not keep.
    disabled = (
        "[settings.DATABASES[a]['DISABLE_SERVER_SIDE_CURSORS'] for a in ('default', 'replica')]"
    )
    replica = {"DATABASE_REPLICA_URL": "postgresql://nobody@127.0.0.1:2/replica"}
    assert _setting(disabled, **replica) == [False, False]
    assert _setting(disabled, **replica, DATABASE_REPLICA_TRANSACTION_POOLER="1") == [False, True]
    pooled = {**replica, "DATABASE_TRANSACTION_POOLER": "1"}
    assert _setting(disabled, **pooled, DATABASE_REPLICA_TRANSACTION_POOLER="0") == [True, False]


def test_a_public_host_keeps_secure_cookies_and_https_without_a_public_base_url(monkeypatch):
    """The plain-http relaxation is for a server reachable from this machine only: forgetting
    PUBLIC_BASE_URL (whose default is a loopback http origin) while ALLOWED_HOSTS names a public
    host must not serve that host's log-in with cookies that travel over plain http."""
    for name in ("SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_SSL_REDIRECT"):
        monkeypatch.delenv(name, raising=False)  # the test settings pin them
    secure = (
        "[settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE, "
        "settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS]"
    )
    loopback = {"PUBLIC_BASE_URL": "http://127.0.0.1:8000"}
    assert _setting(secure, **loopback) == [False, False, False, 0]
    assert _setting(secure, **loopback, ALLOWED_HOSTS="localhost, [::1]") == [False] * 3 + [0]
    public = _setting(secure, **loopback, ALLOWED_HOSTS="127.0.0.1, memory.example.com")
    assert public == [True, True, True, 31_536_000]
