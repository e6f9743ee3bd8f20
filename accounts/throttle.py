"""The log-in throttle: every form that checks a password (log-in, the admin's log-in, the
password change and the account deletion re-checks) shares one budget of failures, counted in
the server's fixed windows (infra/rate_limit.py).

Three counts, each LOGIN_FAILURE_WINDOW_SECONDS long:
- per (account, address): LOGIN_FAILURES_PER_ACCOUNT_ADDRESS, the everyday limit on guessing;
- per address, whichever accounts it tries: LOGIN_FAILURES_PER_IP (password spraying);
- per account, from every address: LOGIN_FAILURES_PER_ACCOUNT, a higher ceiling against guessing
  spread over many addresses. It does not apply from an address the account has logged in from
  recently, so a stranger's wrong guesses cannot lock the owner out from their own address.
Once a count is used up, attempts are refused without checking the password (a locked-out
guesser learns nothing) until its window ends. Usernames are case-folded as the database
compares them when logging in (accounts.models.UserManager), so every name that logs in to one
account shares its budget: `Alice` and `alice`, and `İRIS` and `iris`. Success clears the
(account, address) count only: clearing more would hand a guesser a fresh budget whenever the
owner logs in.

Sign-up has a budget of its own per client address, in windows of SIGNUP_RATE_WINDOW seconds:
SIGNUP_RATE accounts created, so that one address cannot fill the database with tenants, and
SIGNUP_FAILURES_PER_IP refused forms (a name taken, passwords that differ or that the rules
refuse), so that probing which names are taken is bounded too, while a person correcting a few
typos stays far from it. Once either is used up, a sign-up form is refused without being
checked (nothing is created, and whether its name is taken is not looked up) until the window
ends.
"""

from __future__ import annotations

import functools
import hashlib

from django.conf import settings
from django.core.cache import cache
from django.db import connection

from infra.rate_limit import FixedWindow

KNOWN_ADDRESS_SECONDS = 30 * 24 * 3600


def _window(name: str, limit: int) -> FixedWindow:
    return FixedWindow(name=name, limit=limit, window=settings.LOGIN_FAILURE_WINDOW_SECONDS)


@functools.lru_cache(maxsize=1024)
def _account(username: str) -> str:
    """The account a name logs in to, as a budget's key. Lowered by the database first, as log-in
    compares names: its lowering can join names that Python's case folding keeps apart ("İ"
    lowers to "i" there), and each such spelling must not get a budget of its own. Remembered:
    an attempt asks for it twice (before and after its password check), and a name lowers the
    same way every time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT lower(%s)", [username])
        [(lowered,)] = cursor.fetchall()
    return lowered.casefold()


def _windows(account: str, ip: str) -> list[tuple[FixedWindow, str]]:
    per_pair = _window("login-account-address", settings.LOGIN_FAILURES_PER_ACCOUNT_ADDRESS)
    per_address = _window("login-address", settings.LOGIN_FAILURES_PER_IP)
    per_account = _window("login-account", settings.LOGIN_FAILURES_PER_ACCOUNT)
    return [(per_pair, f"{account}\n{ip}"), (per_address, ip), (per_account, account)]


def _known_address_key(account: str, ip: str) -> str:
    # Hashed: cache keys must be short and safe for every backend, and usernames are free text.
    digest = hashlib.sha256(f"{account}\n{ip}".encode()).hexdigest()
    return f"login-known-address:{digest}"


def login_retry_after(*, username: str, ip: str) -> int | None:
    """Seconds until this username may try a password again from this address, or None."""
    account = _account(username)
    windows = _windows(account, ip)
    if cache.get(_known_address_key(account, ip)):
        windows = windows[:2]  # the owner's own address: the account-wide ceiling does not apply
    waits = [wait for window, subject in windows if (wait := window.retry_after(subject))]
    return max(waits, default=None)


def record_login_failure(*, username: str, ip: str) -> None:
    for window, subject in _windows(_account(username), ip):
        window.hit(subject)


def record_login_success(*, username: str, ip: str) -> None:
    account = _account(username)
    window, subject = _windows(account, ip)[0]
    window.reset(subject)
    cache.set(_known_address_key(account, ip), True, timeout=KNOWN_ADDRESS_SECONDS)


def _signup_windows() -> tuple[FixedWindow, FixedWindow]:
    window = settings.SIGNUP_RATE_WINDOW
    return (
        FixedWindow(name="signup-address", limit=settings.SIGNUP_RATE, window=window),
        FixedWindow(
            name="signup-failures-address", limit=settings.SIGNUP_FAILURES_PER_IP, window=window
        ),
    )


def signup_retry_after(*, ip: str) -> int | None:
    """Seconds until a sign-up form may be checked again from this address, or None."""
    waits = [wait for window in _signup_windows() if (wait := window.retry_after(ip))]
    return max(waits, default=None)


def record_signup_failure(*, ip: str) -> None:
    _signup_windows()[1].hit(ip)


def claim_signup(*, ip: str) -> int | None:
    """Count an account about to be created from this address. Seconds to wait when it goes
    over the limit (then none must be created), else None. Counted before the account is saved,
    not after: sign-ups sent all at once each pass `signup_retry_after` before any is counted."""
    return _signup_windows()[0].hit(ip)
