"""The Memory: append-only. Substance (content, topic, tags, type, scope, project, recorded_at,
due_at) is fixed at insert; only lifecycle columns (status, valid_to, commitment_status,
resolved_at) ever move.
Revising inserts a successor with a new id. The trigger `memories_memory_guard` (as migration
0009 last defines it) enforces this in the database, and lets an embedding be filled or cleared,
never replaced; account erasure is the one permitted rewrite of substance (to ERASED).

Every key carries the tenant (migration 0008, docs/operations.md "Past one database"). In the
database the primary keys are `(owner_id, id)`, and the links between tenant rows (a memory's
predecessor, a membership's thread and memory) are composite foreign keys on `(owner_id, …)`, so
PostgreSQL itself refuses a link across tenants, and a distributed PostgreSQL (Citus, by owner)
can keep every key, constraint and join on one shard. The ORM still knows a row by its `id`
alone: ids are UUIDv7, unique by construction, and Django's admin does not take composite
primary keys. The relations are `ForeignObject`s over `(owner, …)` (memories.fields), so the
ORM's joins carry the owner too; memories/fields.py lists what such a relation does not do like a
ForeignKey (exclude across it, Count over it)."""

from __future__ import annotations

import uuid
from datetime import datetime

import uuid_utils.compat
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import TrigramSimilarity
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, models
from django.db.models import F, Q, Value
from django.db.models.functions import MD5, Length, Lower
from django.db.models.lookups import IsNull
from django.utils import timezone
from pgvector.django import VectorField

from memories import bounds
from memories.embedding import EMBEDDING_DIMENSIONS
from memories.errors import (
    SUGGESTION_SIMILARITY,
    SUGGESTIONS_MAX,
    NotFound,
    did_you_mean,
)
from memories.fields import ReadableDateTimeField, same_owner_link, tenant_owner

# The MCP resource of one memory (mcp_gateway.resources serves it; docs/design.md).
MEMORY_URI_TEMPLATE = "threengram://memory/{id}"
MEMORY_URI_PREFIX = MEMORY_URI_TEMPLATE.removesuffix("{id}")


def memory_resource_uri(memory_id: object) -> str:
    return MEMORY_URI_TEMPLATE.format(id=memory_id)


class MemoryResource:
    """Anything with a memory `id` (the model, and the rows and results read from it) names its
    resource the same way."""

    __slots__ = ()
    id: uuid.UUID

    @property
    def resource_uri(self) -> str:
        return memory_resource_uri(self.id)


ERASED = bounds.ERASED
ERASED_SCOPE = bounds.ERASED_SCOPE


def new_memory_id() -> uuid.UUID:
    """UUIDv7 (RFC 9562 §5.7): time-ordered for index locality, with 74 random bits, so ids are
    neither sequential nor guessable."""
    return uuid_utils.compat.uuid7()


def parse_memory_id(value: object) -> uuid.UUID | None:
    """A memory id from caller input, or None when it cannot be one. Callers treat None exactly
    like an unknown id, so a malformed id tells nothing a missing one does not. The memory's
    resource URI names it too: results carry both, and an agent passes either."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or len(value) > bounds.MEMORY_ID_MAX:
        return None
    value = value.strip()
    # A URI's scheme is case-insensitive (RFC 3986 §3.1).
    if value[: len(MEMORY_URI_PREFIX)].lower() == MEMORY_URI_PREFIX:
        value = value[len(MEMORY_URI_PREFIX) :]
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class MemoryType(models.TextChoices):
    DECISION = "decision"
    COMMITMENT = "commitment"
    BLOCKER = "blocker"
    FACT = "fact"
    PREFERENCE = "preference"
    PATTERN = "pattern"
    NOTE = "note"
    EVENT = "event"


class Status(models.TextChoices):
    ACTIVE = "active"
    ARCHIVED = "archived"


class CommitmentStatus(models.TextChoices):
    OPEN = "open"
    WAITING = "waiting"
    RESOLVED = "resolved"
    EXPIRED = "expired"


# The commitment state machine: current state -> states it may move to. Moving to the same
# state is a no-op, not a transition. A commitment that lapsed (expired) may still be done
# after all: it is resolved at once, since a detour through open would guard nothing and show
# it as open, perhaps overdue, between the two calls. A resolved one is reopened to be moved
# on: it was done, and only a mistake undoes that.
COMMITMENT_TRANSITIONS: dict[str, frozenset[str]] = {
    CommitmentStatus.OPEN: frozenset({"waiting", "resolved", "expired"}),
    CommitmentStatus.WAITING: frozenset({"open", "resolved", "expired"}),
    CommitmentStatus.RESOLVED: frozenset({"open"}),
    CommitmentStatus.EXPIRED: frozenset({"open", "resolved"}),
}


UNSETTLED_COMMITMENT_STATES = frozenset({CommitmentStatus.OPEN, CommitmentStatus.WAITING})


def is_overdue(
    *,
    due_at: datetime | None,
    commitment_status: str | None,
    valid_to: datetime | None,
    status: str,
    now: datetime,
) -> bool:
    """A current, active commitment still open or waiting whose due time has passed. A
    superseded version (valid_to set, as asOf and a listing's later page show one) is not: its
    successor carries the commitment, perhaps with a due date moved, and says so itself. Nor is
    an archived one: set aside (briefing lists none), it is no longer to do."""
    return (
        valid_to is None
        and status == Status.ACTIVE
        and due_at is not None
        and due_at < now
        and commitment_status in UNSETTLED_COMMITMENT_STATES
    )


class MemoryQuerySet(models.QuerySet):
    def owned_by(self, owner: AbstractBaseUser) -> MemoryQuerySet:
        """Only this tenant's memories: the start of every read path."""
        return self.filter(owner=owner)

    def current(self) -> MemoryQuerySet:
        """Not superseded (valid_to unset), whatever the archive status."""
        return self.filter(valid_to__isnull=True)

    def active(self) -> MemoryQuerySet:
        """Current and not archived: what an agent works from by default."""
        return self.current().filter(status=Status.ACTIVE)

    def project_names(self, most: int, among: int = 1_000) -> list[str]:
        """The first `most` distinct projects, by name, of the `among` newest of these memories:
        bounded work in a large account, whose recent projects are the ones asked for."""
        newest = self.exclude(project=None).order_by("-recorded_at").values_list("project")
        return sorted({project for (project,) in newest[:among]})[:most]


# A memory's revision history, both ways from it, within one owner's rows: `depth` < 0 for its
# predecessors, > 0 for its successors (revisions form a chain: one successor each at most).
_REVISION_CHAIN_SQL = """
WITH RECURSIVE older(id, predecessor_id, depth) AS (
    SELECT id, predecessor_id, 0 FROM memories_memory WHERE owner_id = %(owner)s AND id = %(id)s
    UNION ALL
    SELECT m.id, m.predecessor_id, older.depth - 1
    FROM older JOIN memories_memory m ON m.owner_id = %(owner)s AND m.id = older.predecessor_id
), newer(id, depth) AS (
    SELECT id, 0 FROM memories_memory WHERE owner_id = %(owner)s AND id = %(id)s
    UNION ALL
    SELECT m.id, newer.depth + 1
    FROM newer JOIN memories_memory m ON m.owner_id = %(owner)s AND m.predecessor_id = newer.id
)
SELECT id, depth FROM older UNION SELECT id, depth FROM newer
"""


# The newest revision of a memory (itself when it has none), following successors within the
# owner's rows.
_NEWEST_REVISION_SQL = """
WITH RECURSIVE newer(id, depth) AS (
    SELECT id, 0 FROM memories_memory WHERE owner_id = %(owner)s AND id = %(id)s
    UNION ALL
    SELECT m.id, newer.depth + 1
    FROM newer JOIN memories_memory m ON m.owner_id = %(owner)s AND m.predecessor_id = newer.id
)
SELECT id FROM newer ORDER BY depth DESC LIMIT 1
"""


# Two probes of memory_owner_project_key: the spelling as given, else any other case of it (the
# lower case's comparison implies the index's condition). Under row-level security the second
# compares lower() of each of the account's entries of the index (lower() is not leakproof, so it
# is no index condition there): it is reached only by a project the account does not spell as
# given, a first write of a project or a read of it in another case.
_PROJECT_SPELLING_SQL = """
SELECT coalesce(
    (SELECT m.project FROM memories_memory m
     WHERE m.owner_id = %(owner)s AND m.valid_to IS NULL
       AND lower(m.project) = lower(%(project)s) AND m.project = %(project)s LIMIT 1),
    (SELECT m.project FROM memories_memory m
     WHERE m.owner_id = %(owner)s AND m.valid_to IS NULL
       AND lower(m.project) = lower(%(project)s) LIMIT 1))"""

# The owner's lock on the first spelling of a project (MemoryManager.lock_project_spelling): keyed
# on the owner (the hash's seed) and the project's lower case as the lookup above lowers it, so
# that 'Atlas' and 'atlas' take the same lock. The name keeps it apart from the account's other
# advisory locks (thread creation's). Transaction-level: released by COMMIT or ROLLBACK, never
# left on a connection that a transaction pooler hands to another client next.
_PROJECT_SPELLING_LOCK_SQL = """
SELECT pg_advisory_xact_lock(
    hashtextextended('threengram.project-spelling:' || lower(%(project)s), %(owner)s))"""


class MemoryManager(models.Manager.from_queryset(MemoryQuerySet)):
    def newest_revision_id(self, owner_id: int, memory_id: uuid.UUID) -> uuid.UUID | None:
        """The id of the newest revision of the owner's memory `memory_id` (the memory's own
        when it was never revised); None when the owner has no such memory."""
        with connection.cursor() as cursor:
            cursor.execute(_NEWEST_REVISION_SQL, {"owner": owner_id, "id": memory_id})
            row = cursor.fetchone()
        return row[0] if row else None

    def project_spelling(
        self, owner_id: int, project: str, *, using: str = DEFAULT_DB_ALIAS
    ) -> str | None:
        """How the owner's current memories spell `project`: as given when one does, else the
        spelling one of them gives it in another case ('atlas' for 'Atlas'); None when none has
        it in any case (a project new to the account). A project is one project in any case:
        a write stores it in the account's spelling, since briefing, handoff and search match
        a project exactly and a second spelling would split the project's memories, and a read
        looks for it in that spelling. `using`: the reader's database (a replica's)."""
        with connections[using].cursor() as cursor:
            cursor.execute(_PROJECT_SPELLING_SQL, {"owner": owner_id, "project": project})
            row = cursor.fetchone()
        return row[0] if row else None

    def in_account_spelling(
        self, owner_id: int, project: str, *, using: str = DEFAULT_DB_ALIAS
    ) -> str:
        """`project` as the owner's current memories spell it (project_spelling), or as given
        when none has it in any case."""
        return self.project_spelling(owner_id, project, using=using) or project

    def lock_project_spelling(self, owner_id: int, project: str) -> None:
        """Wait until no other transaction of the owner's holds this lock on `project` in any
        case, then hold it until this transaction ends. A write that is about to give a
        project its first spelling takes it: another such write of the same project, in any
        case, then waits for this one to commit, and a lookup after its wait finds the
        spelling this one stored. A statement of its own: under READ COMMITTED a statement
        sees what committed before it began, so the lookup after the wait must be a later
        statement."""
        if not connection.in_atomic_block:
            # Outside a transaction the lock would end with its own statement, guarding nothing.
            raise RuntimeError("lock_project_spelling holds its lock only inside a transaction")
        with connection.cursor() as cursor:
            cursor.execute(_PROJECT_SPELLING_LOCK_SQL, {"owner": owner_id, "project": project})

    def revision_chain(self, memory: Memory) -> list[Memory]:
        """The whole revision history `memory` belongs to, oldest first, in two statements.
        Each step stays within the owner's rows, so a chain never leads into another tenant's
        memories."""
        with connection.cursor() as cursor:
            cursor.execute(_REVISION_CHAIN_SQL, {"owner": memory.owner_id, "id": memory.id})
            depth_of = dict(cursor.fetchall())
        revisions = self.filter(owner_id=memory.owner_id, id__in=list(depth_of))
        return sorted(revisions, key=lambda revision: depth_of[revision.id])

    def get_queryset(self) -> MemoryQuerySet:
        # The vector serves search alone (raw SQL); ORM reads need not fetch and parse it.
        return super().get_queryset().defer("embedding")


class TenantRow(models.Model):
    """A row of a tenant table, whose database primary key is (owner_id, id)."""

    class Meta:
        abstract = True

    def _do_update(self, base_qs, *args, **kwargs):
        # Django's save() updates a row by `id`; naming the owner too matches the primary key
        # (owner_id, id), so the update uses it, and a distributed database routes it to the
        # tenant's shard.
        updated = super()._do_update(base_qs.filter(owner_id=self.owner_id), *args, **kwargs)
        if not updated:
            # Django would fall back to an INSERT: with a changed owner, a second row of the
            # same id under another tenant. An owner never changes; a stored row is not lost.
            raise DatabaseError(
                f"{self._meta.object_name} {self.pk} has no row of owner {self.owner_id} to update"
            )
        return updated


class Memory(MemoryResource, TenantRow):
    id = models.UUIDField(primary_key=True, default=new_memory_id, editable=False)
    owner = tenant_owner("memories")
    # --- substance: fixed at insert ---------------------------------------------------------
    content = models.TextField()
    content_length = models.PositiveIntegerField(help_text="Unicode code points in content.")
    memory_type = models.CharField(max_length=16, choices=MemoryType.choices)
    topic = models.CharField(max_length=bounds.TOPIC_MAX)
    scope = models.CharField(max_length=bounds.SCOPE_MAX, default=bounds.DEFAULT_SCOPE)
    project = models.CharField(max_length=bounds.PROJECT_MAX, null=True, blank=True)
    tags = ArrayField(models.CharField(max_length=bounds.TAG_MAX), default=list, blank=True)
    recorded_at = models.DateTimeField()
    # Caller-given, so possibly stored before inputs were bounded: read clamped.
    due_at = ReadableDateTimeField(
        null=True, blank=True, help_text="When a commitment is due; set once, at insert."
    )
    predecessor_id = models.UUIDField(
        null=True, blank=True, editable=False, help_text="Set once, at insert."
    )
    predecessor = same_owner_link(
        "self",
        "predecessor_id",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="successors",
        help_text="The memory this one supersedes (same owner).",
    )
    # --- derived from substance: written with the row, or later by the backfill ------------
    # A vector may be written into an empty column or cleared (erasure, a change of model),
    # never changed in place (the append-only trigger, migration 0009). Never served.
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True, editable=False)
    # --- lifecycle: the only columns that move -------------------------------------------
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.ACTIVE)
    valid_to = models.DateTimeField(null=True, blank=True)
    commitment_status = models.CharField(
        max_length=8, choices=CommitmentStatus.choices, null=True, blank=True
    )
    resolved_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the commitment was resolved; cleared when it is reopened.",
    )

    objects = MemoryManager()

    class Meta:
        verbose_name_plural = "memories"
        indexes = [
            models.Index(fields=["owner", "-recorded_at"], name="memory_owner_recent"),
            # Covering: briefing and handoff count and pick their sections with index-only
            # scans, of a project or a scope too (each a briefing selector): without them here,
            # a selected section reads the table row of every memory of its type to test it.
            models.Index(
                fields=["owner", "memory_type", "-recorded_at"],
                name="memory_owner_type_current",
                condition=Q(valid_to__isnull=True),
                include=["status", "commitment_status", "due_at", "id", "project", "scope"],
            ),
            # The handoff's recently resolved commitments: only a resolved commitment has a
            # resolved_at (the constraint below), so this index holds those alone, and counts
            # them with an index-only scan however many memories the account has.
            models.Index(
                fields=["owner", "-resolved_at"],
                name="memory_owner_resolved",
                condition=Q(valid_to__isnull=True, resolved_at__isnull=False),
                include=["status", "id"],
            ),
            # The spelling an account already gives a project, looked up by any case on every
            # write that names one (Memory.objects.project_spelling) in two probes. Its
            # condition is the lower case's, not the project's: a query filtering on a project
            # (a briefing's sections) then cannot take it for a smaller index of the account's
            # rows, which it would read instead of counting them in memory_owner_type_current.
            models.Index(
                F("owner"),
                Lower("project"),
                F("project"),
                name="memory_owner_project_key",
                condition=Q(IsNull(Lower("project"), False), valid_to__isnull=True),
            ),
            # A project's current memories, newest first: a search filtered to a project walks
            # them (memories.search.candidates._recent), not the account's newest memories of
            # every project, of which a small project holds few. The condition is the spelling
            # index's (above), which a search states and a briefing does not: a briefing of a
            # project counts its sections index-only in memory_owner_type_current, and would
            # read the project's rows through this one instead were its filter on the project
            # enough to use it.
            models.Index(
                fields=["owner", "project", "-recorded_at"],
                name="memory_owner_project_recent",
                condition=Q(IsNull(Lower("project"), False), valid_to__isnull=True),
            ),
            # Current commitments of a state, newest first: a search filtered to commitment
            # states walks them (memories.search.candidates._recent), not every commitment. The
            # condition, which a search states, keeps briefing, handoff and listings (whose
            # state filters alone would not let them use it) counting and picking commitments
            # index-only in memory_owner_type_current, as the project index's above.
            models.Index(
                fields=["owner", "commitment_status", "-recorded_at"],
                name="memory_owner_state_recent",
                condition=Q(IsNull(Lower("commitment_status"), False), valid_to__isnull=True),
            ),
            # A scope's current memories, newest first, for a search filtered to a scope (and
            # no project, state or type), under the same condition.
            models.Index(
                fields=["owner", "scope", "-recorded_at"],
                name="memory_owner_scope_recent",
                condition=Q(IsNull(Lower("scope"), False), valid_to__isnull=True),
            ),
            # Nearest current memories by meaning, and current memories by words: an HNSW and
            # a GIN index per large account, built and dropped at run time
            # (memories/account_indexes.py), not one over every account's.
        ]
        constraints = [
            # At most one successor each, so of two concurrent revisions of one memory exactly
            # one can commit.
            models.UniqueConstraint(
                fields=["owner", "predecessor_id"], name="memory_one_successor"
            ),
            models.UniqueConstraint(
                F("owner"),
                MD5("content"),
                name="memory_unique_live_content",
                condition=Q(valid_to__isnull=True) & ~Q(content=ERASED),
            ),
            models.CheckConstraint(
                name="memory_content_length_matches",
                condition=Q(content_length=Length("content")),
            ),
            models.CheckConstraint(
                name="memory_content_length_bounds",
                condition=Q(content_length__gte=1, content_length__lte=bounds.CONTENT_MAX),
            ),
            models.CheckConstraint(name="memory_topic_not_empty", condition=Q(topic__regex=r"\S")),
            models.CheckConstraint(
                name="memory_scope_kebab_case", condition=Q(scope__regex=bounds.SCOPE_PATTERN_SQL)
            ),
            models.CheckConstraint(
                name="memory_tags_bound", condition=Q(tags__len__lte=bounds.TAGS_MAX)
            ),
            models.CheckConstraint(
                name="memory_type_valid", condition=Q(memory_type__in=MemoryType.values)
            ),
            models.CheckConstraint(
                name="memory_status_valid", condition=Q(status__in=Status.values)
            ),
            models.CheckConstraint(
                name="memory_commitment_status_only_on_commitments",
                condition=(
                    # IS NOT NULL too: a CHECK passes when `IN` yields NULL.
                    Q(
                        memory_type=MemoryType.COMMITMENT,
                        commitment_status__isnull=False,
                        commitment_status__in=CommitmentStatus.values,
                    )
                    | (~Q(memory_type=MemoryType.COMMITMENT) & Q(commitment_status__isnull=True))
                ),
            ),
            models.CheckConstraint(
                name="memory_not_own_predecessor", condition=~Q(predecessor_id=F("id"))
            ),
            models.CheckConstraint(
                name="memory_due_at_only_on_commitments",
                condition=Q(due_at__isnull=True) | Q(memory_type=MemoryType.COMMITMENT),
            ),
            models.CheckConstraint(
                name="memory_resolved_at_only_on_resolved_commitments",
                condition=Q(resolved_at__isnull=True)
                | Q(
                    memory_type=MemoryType.COMMITMENT,
                    commitment_status=CommitmentStatus.RESOLVED,
                ),
            ),
            models.CheckConstraint(
                name="memory_valid_to_after_recorded",
                condition=Q(valid_to__isnull=True) | Q(valid_to__gte=F("recorded_at")),
            ),
        ]

    def __str__(self) -> str:
        # Never the content: __str__ ends up in logs and admin lists.
        return f"{self.memory_type} {self.id}"

    @property
    def overdue(self) -> bool:
        """is_overdue, as of now."""
        return is_overdue(
            due_at=self.due_at,
            commitment_status=self.commitment_status,
            valid_to=self.valid_to,
            status=self.status,
            now=timezone.now(),
        )


class RowCount(models.Subquery):
    template = "(SELECT count(*) FROM (%(subquery)s) counted)"
    output_field = models.IntegerField()


class ThreadNameKey(models.Func):
    """What thread names are compared by, in the database: Unicode's canonical caseless match
    (Unicode 16.0, 3.13: NFD, full case folding, NFD), so "STRASSE" is "Straße", "ΟΔΌΣ" is
    "Οδός", and a capital whose lower case decomposes finds it. Under the built-in
    pg_unicode_fast collation, named here, so that the database's own locale (C folds ASCII
    only) plays no part."""

    template = (
        "normalize(casefold(normalize((%(expressions)s)::text, NFD) COLLATE pg_unicode_fast), NFD)"
    )
    output_field = models.TextField()


def thread_name_key(name: F | Value) -> ThreadNameKey:
    """The expression thread names are compared by, for a name column or value."""
    return ThreadNameKey(name)


def thread_name_key_text(name: str) -> str:
    """ThreadNameKey in Python: the same folding, for a name compared outside the database."""
    return bounds.caseless(name)


class ThreadQuerySet(models.QuerySet):
    def holding(self, owner_id: int, memory_id: uuid.UUID) -> ThreadQuerySet:
        """The owner's threads the memory is a member of (not those it is only proposed for)."""
        return self.filter(
            owner_id=owner_id,
            memberships__memory_id=memory_id,
            memberships__state=MembershipState.MEMBER,
        )

    def named(self, owner_id: int, name: str) -> ThreadQuerySet:
        """The owner's thread named `name` in any case, compared as the unique index on names
        compares them (thread_name_key)."""
        return self.alias(name_key=thread_name_key(F("name"))).filter(
            owner_id=owner_id, name_key=thread_name_key(Value(name))
        )

    def spelling(self, owner_id: int, name: str) -> str | None:
        """The name of the owner's thread named `name` in any case, as it is stored; None when
        the owner has no such thread."""
        return self.named(owner_id, name).values_list("name", flat=True).first()

    def owned_with_counts(self, owner_id: int) -> ThreadQuerySet:
        """The owner's threads, with `member_count`, the members a listing of the thread shows
        by default (current and active: not an archived one, nor a version since revised), and
        `proposal_count`, its open proposals of current memories, archived ones too, as
        list_open_proposals lists them. Counted in subqueries (the GROUP BY that Count() over
        a join writes names only `id`, which PostgreSQL does not take as the key, since the
        primary key is (owner_id, id)) that name the owner as a constant: correlated to the
        thread's owner instead, the planner assumed an average tenant and hash-joined all of a
        large tenant's rows, where probing the thread's few members is far cheaper."""
        return self.filter(owner_id=owner_id).annotate(
            member_count=RowCount(
                _memberships_of_current_memories(owner_id, MembershipState.MEMBER).filter(
                    memory__status=Status.ACTIVE
                )
            ),
            proposal_count=RowCount(
                _memberships_of_current_memories(owner_id, MembershipState.PROPOSED)
            ),
        )

    def in_name_order(self, *first: str) -> ThreadQuerySet:
        """Ordered by the fields `first`, then by name as thread names compare (thread_name_key,
        in code point order: "alpha" before "Zeta", which the names' own order puts after it,
        and "ébauche", decomposed, among the e's), then by the name itself, so that names of
        one key (only erased ones share it) keep an order too."""
        return self.order_by(*first, thread_name_key(F("name")), "name")

    def names(self, owner_id: int) -> list[str]:
        """The owner's thread names (at most THREADS_MAX), alphabetically in any case; erased
        ones left out."""
        return list(
            self.filter(owner_id=owner_id)
            .exclude(name=ERASED)
            .in_name_order()
            .values_list("name", flat=True)
        )

    def near_names(self, owner_id: int, name: str) -> list[str]:
        """The owner's thread names most like `name` (never another tenant's), nearest first."""
        return list(
            self.filter(owner_id=owner_id)
            .exclude(name=ERASED)
            .annotate(similar=TrigramSimilarity("name", Value(name)))
            .filter(similar__gte=SUGGESTION_SIMILARITY)
            .order_by("-similar", "name")
            .values_list("name", flat=True)[:SUGGESTIONS_MAX]
        )

    def not_found(self, owner_id: int, name: str) -> NotFound:
        """The NotFound of a thread name the owner has not, naming the owner's thread names most
        like it (never another tenant's)."""
        near = self.near_names(owner_id, name)
        # As an unknown scope or project is answered: where the names are, when none is near.
        hint = did_you_mean(near) or "describe_environment lists your threads"
        return NotFound(f"thread '{name}'; {hint}")


def _memberships_of_current_memories(owner_id: int, state: str) -> models.QuerySet:
    """The ids of a thread's (the outer query's) membership rows in `state` of current
    memories."""
    return ThreadMembership.objects.filter(
        owner_id=owner_id,
        thread_id=models.OuterRef("id"),
        state=state,
        memory__valid_to__isnull=True,
    ).values("id")


class Thread(TenantRow):
    """A named, curated group of memories. The name is tenant-written text: account erasure
    overwrites it (accounts.erasure)."""

    id = models.UUIDField(primary_key=True, default=new_memory_id, editable=False)
    owner = tenant_owner("threads")
    name = models.CharField(max_length=bounds.THREAD_NAME_MAX)
    pinned = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        constraints = [
            # Names are unique per tenant, case-insensitively; erased names (all alike) are exempt.
            models.UniqueConstraint(
                F("owner"),
                thread_name_key(F("name")),
                name="thread_unique_name",
                condition=~Q(name=ERASED),
            ),
            models.CheckConstraint(name="thread_name_not_empty", condition=Q(name__regex=r"\S")),
        ]

    def __str__(self) -> str:
        return f"thread {self.id}"  # never the name: tenant text stays out of logs


class MembershipState(models.TextChoices):
    PROPOSED = "proposed"  # suggested by the server; not a member until accepted
    MEMBER = "member"
    REJECTED = "rejected"  # remembered so the same proposal is not made again


class ThreadMembership(TenantRow):
    """A memory in a thread, or a proposal that it belongs there. The server creates only
    `proposed` rows; only the tenant (configure_thread) makes a memory a `member`."""

    id = models.UUIDField(primary_key=True, default=new_memory_id, editable=False)
    # The tenant of both the thread and the memory: the composite foreign keys make it one.
    owner = tenant_owner("+")
    thread_id = models.UUIDField()
    thread = same_owner_link(
        Thread, "thread_id", on_delete=models.CASCADE, related_name="memberships"
    )
    memory_id = models.UUIDField()
    memory = same_owner_link(
        Memory, "memory_id", on_delete=models.PROTECT, related_name="memberships"
    )
    state = models.CharField(max_length=8, choices=MembershipState.choices)
    similarity = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "thread_id", "memory_id"], name="membership_unique"
            ),
            models.CheckConstraint(
                name="membership_state_valid", condition=Q(state__in=MembershipState.values)
            ),
            # A decision has its time: the proposals compare a new memory with the members
            # decided most recently (membership_recent_members).
            models.CheckConstraint(
                name="membership_decided_unless_proposed",
                condition=Q(state=MembershipState.PROPOSED) | Q(decided_at__isnull=False),
            ),
        ]
        indexes = [
            models.Index(fields=["owner", "memory_id", "state"], name="membership_memory_state"),
            # A new memory's proposals compare it with the tenant's most recently added members
            # (memories.threads): read newest first from here, not sorted from all of them.
            models.Index(
                fields=["owner", "-decided_at"],
                name="membership_recent_members",
                condition=Q(state=MembershipState.MEMBER),
                include=["thread_id", "memory_id"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.state} {self.memory_id} in {self.thread_id}"


class StoredVectors(models.Model):
    """Which embedder made the vectors in `Memory.embedding` (its `SEARCH_EMBEDDER` value): one
    row, or none when not known. Vectors of two models are not comparable, so a search compares
    a question's vector only with vectors of its own model (memories/search/candidates.py), and
    a backfill adds only vectors of the table's model (`embed_memories`; `--reembed` clears the
    old model's and then records the new one)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    embedder = models.TextField()

    class Meta:
        constraints = [models.CheckConstraint(name="stored_vectors_one_row", condition=Q(id=1))]

    def __str__(self) -> str:
        return self.embedder

    @classmethod
    def embedder_in_use(cls, using: str = "default") -> str | None:
        """The `SEARCH_EMBEDDER` value that made the stored vectors, or None when not known."""
        return cls.objects.using(using).values_list("embedder", flat=True).first()

    @classmethod
    def record(cls, embedder: str) -> None:
        cls.objects.update_or_create(id=1, defaults={"embedder": embedder})


class AccountUsage(models.Model):
    """How many memory rows (versions) an account holds: current, superseded and archived alike,
    every one kept on disk. The database keeps it, not the application: a trigger on
    memories_memory counts every insert, whoever makes it, and refuses one past the cap the
    writing transaction declares (services.lock_live_owner), so a tenant cannot fill the shared
    disk (migration memories/0027). The application role may only read it. No row: none yet."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="memory_usage",
    )
    versions = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.versions} memory versions"
