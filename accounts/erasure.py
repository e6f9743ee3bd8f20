"""Account erasure: the one path that rewrites the substance of memories.

One transaction: every piece of tenant-written text becomes a sentinel, every OAuth credential of
the user is revoked, the account is deactivated and de-identified, and a content-free
ErasureRecord is written. If any step fails, nothing changes. Design note: the cached
`threengram://memory/{id}` bodies stay sound because revoking the tokens in this same transaction
ends every authorization context that could reuse a private cache entry (docs/design.md,
"Erasure: the one rewrite of substance").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import OperationalError, connection, transaction
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from accounts.models import ErasureRecord, erased_username
from accounts.revocation import lock_codes, lock_refresh_tokens, revoke_oauth_credentials
from infra import dbfaults
from memories import tenancy
from memories.models import ERASED, ERASED_SCOPE, Memory, Thread

logger = logging.getLogger(__name__)


@dataclass
class ErasureResult:
    record: ErasureRecord
    already_erased: bool
    counts: dict[str, int] = field(default_factory=dict)


# The account's memories locked in key order first: the order the vector backfill
# (memories.backfill) locks a batch of them in. An UPDATE of the whole account locks them in the
# order it reads the table, and the two writers would deadlock.
_LOCK_MEMORIES_IN_KEY_ORDER = """
SELECT count(*) FROM (
    SELECT 1 FROM memories_memory WHERE owner_id = %s ORDER BY owner_id, id FOR UPDATE) m"""


def _erase_memories(user, now) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_MEMORIES_IN_KEY_ORDER, [user.pk])
    rewritten = Memory.objects.filter(owner=user).update(
        content=ERASED,
        content_length=len(ERASED),
        topic=ERASED,
        tags=Case(When(tags=[], then=Value([])), default=Value([ERASED])),
        scope=ERASED_SCOPE,
        project=Case(When(project__isnull=True, then=Value(None)), default=Value(ERASED)),
        # A vector is derived from the text and could be matched against guesses of it.
        embedding=None,
    )
    return {"memories": rewritten}


def _erase_threads(user, now) -> dict[str, int]:
    """Thread names are tenant-written text. Memberships and proposals hold only ids, state and a
    similarity figure, so they stay (like the supersession chain of the memories)."""
    return {"threads": Thread.objects.filter(owner=user).update(name=ERASED)}


def _revoke_oauth(user, now) -> dict[str, int]:
    """Every OAuth credential of the user, for every app: after this nothing of the user
    authenticates."""
    return revoke_oauth_credentials(user=user, at=now)


def _deactivate(user, now) -> dict[str, int]:
    """Deactivate and de-identify the account, in the admin's history of it too. The unusable
    password also ends every browser session: Django compares the session's password hash on
    each request."""
    user.username = erased_username(user.pk)
    user.email = ""
    user.first_name = ""
    user.last_name = ""
    user.is_active = False
    user.is_staff = False
    user.is_superuser = False
    user.erased_at = now
    user.set_unusable_password()
    user.save()
    # The admin's history names an object by its str() when it was changed: the username.
    relabelled = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(user), object_id=str(user.pk)
    ).update(object_repr=user.username)
    return {"accounts": 1, "admin_log_entries": relabelled}


# In order. Other apps' tenant text joins this list (e.g. thread names), so the tests that prove
# erasure complete and atomic cover every step.
ERASURE_STEPS: list[Callable] = [_erase_memories, _erase_threads, _revoke_oauth, _deactivate]


# An erasure rewrites every memory of the account in one transaction, and nothing bounds how many
# an account holds: its statements may run this long, not a request's DATABASE_STATEMENT_TIMEOUT_MS
# (its lock waits keep DATABASE_LOCK_TIMEOUT_MS: a busy row is a retry, not a wait).
ERASURE_STATEMENT_TIMEOUT_MS = 600_000


@contextmanager
def _erasure_transaction() -> Iterator[None]:
    """The erasure's transaction (a savepoint in a caller's), its statements allowed
    ERASURE_STATEMENT_TIMEOUT_MS. The timeout is set for the transaction (SET LOCAL), so inside a
    caller's transaction (an admin batch, the account's delete page) the one it had is put back
    for the caller's statements after the erasure; a rolled-back savepoint undoes it itself."""
    in_callers_transaction = connection.in_atomic_block
    configured = settings.DATABASE_STATEMENT_TIMEOUT_MS
    with transaction.atomic():
        if not configured or configured >= ERASURE_STATEMENT_TIMEOUT_MS:
            yield
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('statement_timeout'),"
                " set_config('statement_timeout', %s, true)",
                [f"{ERASURE_STATEMENT_TIMEOUT_MS}ms"],
            )
            before = cursor.fetchone()[0]
        yield
        if in_callers_transaction:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [before])


def _lock_users(account_id: int, staff_member: AbstractBaseUser | None) -> AbstractBaseUser:
    """Lock the erased account's user row for update, user rows in key order: the erasure
    record's foreign key takes a key-share lock on the staff member's row, so two staff members
    erasing each other at once each waited on the row the other held. A staff member's row of a
    lower key is locked first, explicitly; one of a higher key is locked after, by the record."""
    User = get_user_model()
    if staff_member is not None and staff_member.pk < account_id:
        # The ORM offers no FOR KEY SHARE; the names come from the model, not from input.
        table = connection.ops.quote_name(User._meta.db_table)
        key = connection.ops.quote_name(User._meta.pk.column)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {table} WHERE {key} = %s FOR KEY SHARE",  # noqa: S608
                [staff_member.pk],
            )
    return User.objects.select_for_update().get(pk=account_id)


def erase_account(
    *, user: AbstractBaseUser, requested_by_staff: AbstractBaseUser | None = None
) -> ErasureResult:
    """Erase `user`'s account. `requested_by_staff` is the staff member who asked, or None when
    the account holder asked. A second call changes nothing and reports already_erased."""
    # Row-level security (memories/tenancy.py): the erasure acts for the erased account, which
    # may not be the requesting staff member's; its rows are the only tenant rows it touches.
    with tenancy.acting_for(user.pk), _erasure_transaction():
        # The user's codes and live refresh tokens before the user row: a code exchange holds
        # its code's grant, a refresh its refresh token, and each then takes a key-share lock
        # on the user row for its tokens' foreign keys (a deadlock else).
        lock_codes(user=user)
        lock_refresh_tokens(user=user)
        locked = _lock_users(user.pk, requested_by_staff)
        if locked.erased_at is not None:
            return ErasureResult(record=locked.erasure_record, already_erased=True)
        now = timezone.now()
        counts: dict[str, int] = {}
        for step in ERASURE_STEPS:
            counts.update(step(locked, now))
        record = ErasureRecord.objects.create(
            account=locked,
            erased_at=now,
            requested_by=(
                ErasureRecord.Requester.STAFF
                if requested_by_staff
                else ErasureRecord.Requester.USER
            ),
            staff_member=requested_by_staff,
            counts=counts,
        )
    user.refresh_from_db()
    # Outside the database too, once committed (a caller's transaction too): a restore of a
    # backup taken before the erasure brings the account back, and its erasure record with it is
    # gone; this line is what says which accounts to erase again (docs/operations.md, "Backup
    # and restore"). The id only: the username is what the erasure removed.
    erased = {"account_id": user.pk, "erased_at": record.erased_at.isoformat()}
    transaction.on_commit(lambda: logger.info("account erased", extra=erased))
    return ErasureResult(record=record, already_erased=False, counts=counts)


@dataclass(frozen=True)
class ErasureSelection:
    """The accounts of a staff member's selection that a batch erasure takes, and what it leaves
    out."""

    # Neither erased nor the staff member's own, in key order.
    targets: list[AbstractBaseUser]
    # The staff member's own account was selected: it leaves through its own delete page, which
    # asks for its password, not through a batch.
    skipped_self: bool
    # Accounts erased already were selected: there is nothing left of them to erase.
    already_erased: bool


@dataclass(frozen=True)
class BatchErasure(ErasureSelection):
    # Of the targets, how many this batch erased (not one that another erasure finished first).
    erased: int = 0
    # The usernames of the targets whose rows were in use: nothing of them changed.
    busy: list[str] = field(default_factory=list)


def erasure_selection(*, users: QuerySet, requested_by: AbstractBaseUser) -> ErasureSelection:
    """What `erase_accounts` would erase of `users`, as `requested_by` selected them."""
    return ErasureSelection(
        # In key order, whatever order the selection was listed in: a caller's transaction (a
        # request is one, memories.tenancy) keeps each erasure's locks until the last is done,
        # and two overlapping batches taken in different orders would wait on each other.
        targets=list(
            users.filter(erased_at__isnull=True).exclude(pk=requested_by.pk).order_by("pk")
        ),
        skipped_self=users.filter(pk=requested_by.pk).exists(),
        already_erased=users.filter(erased_at__isnull=False).exists(),
    )


def erase_accounts(*, users: QuerySet, requested_by: AbstractBaseUser) -> BatchErasure:
    """Erase the accounts among `users` that `erasure_selection` takes, one `erase_account` each,
    recorded as requested by the staff member `requested_by`. An account whose rows are held by
    another transaction past the lock timeout is left as it was (its own savepoint rolled back)
    and the others go on; any other database failure (a lost connection) ends the batch."""
    selection = erasure_selection(users=users, requested_by=requested_by)
    erased, busy = 0, []
    for user in selection.targets:
        try:
            result = erase_account(user=user, requested_by_staff=requested_by)
        except OperationalError as error:
            if not dbfaults.is_busy(error):
                raise
            busy.append(user.get_username())
            continue
        erased += not result.already_erased
    return BatchErasure(
        targets=selection.targets,
        skipped_self=selection.skipped_self,
        already_erased=selection.already_erased,
        erased=erased,
        busy=busy,
    )
