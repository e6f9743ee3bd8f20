"""Lifecycle use cases. Each writes in one transaction: a write that lost its insert to a
duplicate gone by the time it is looked up runs again in a new one, up to WRITE_ATTEMPTS times
(_written). None ever writes content, topic or tags of an existing memory (only erase_account in
accounts.erasure does, to the sentinel)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from infra import dbfaults
from memories import bounds
from memories.credentials import refuse_credential
from memories.embedding import embed_memories, memory_text, storable_with
from memories.errors import (
    AccountInactive,
    Conflict,
    DomainError,
    DuplicateMemory,
    InvalidInput,
    InvalidTransition,
    NotFound,
)
from memories.fields import ReadableDateTimeField, readable_instant_sql
from memories.models import (
    COMMITMENT_TRANSITIONS,
    CommitmentStatus,
    MembershipState,
    Memory,
    MemoryType,
    Status,
    ThreadMembership,
    parse_memory_id,
)

_UNSET = object()

# What a revision empties when given None: a commitment's due date, the project, the tags (a
# deadline dropped, a memory that belongs to no project after all). A type, a topic and a scope
# every memory has; None for one is refused by its name rather than read as a default.
CLEARABLE_FIELDS = frozenset({"due_at", "project", "tags"})
_HELD_BY_EVERY_MEMORY = {"memory_type": "memoryType", "topic": "topic", "scope": "scope"}


def _clean_memory_type(value: object) -> str:
    if value not in MemoryType.values:
        raise InvalidInput("memoryType", f"must be one of: {', '.join(MemoryType.values)}")
    return value  # type: ignore[return-value]


# The transaction-local setting in which a write declares the account's cap on memory versions
# to the trigger that counts them (migration memories/0027), and the name it refuses an insert
# past it by.
VERSIONS_MAX_SETTING = "threengram.memory_versions_max"
VERSIONS_CAP_CONSTRAINT = "memory_versions_per_account"


def lock_live_owner(owner: AbstractBaseUser) -> str | None:
    """Serialize with erase_account (which takes FOR UPDATE on the same row): a write either
    completes before an erasure and is erased by it, or sees the account inactive. Returns which
    embedder made the stored vectors (StoredVectors), read in the same statement: a memory
    written in the transaction gets its vector only if it is theirs (_insert). The same
    statement declares MEMORY_VERSIONS_PER_ACCOUNT_MAX for the rest of the transaction, which
    the database holds every insert of a memory to: no round trip of its own."""
    # FOR SHARE has no ORM spelling; the table and key come from the user model, whichever it is.
    meta = get_user_model()._meta
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT u.is_active, (SELECT v.embedder FROM memories_storedvectors v WHERE v.id = 1),"  # noqa: S608
            f" set_config('{VERSIONS_MAX_SETTING}', %s, true)"
            f" FROM {connection.ops.quote_name(meta.db_table)} u"
            f" WHERE u.{connection.ops.quote_name(meta.pk.column)} = %s FOR SHARE OF u",
            [str(settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX), owner.pk],
        )
        row = cursor.fetchone()
    if row is None or not row[0]:
        raise AccountInactive("this account is deactivated")
    return row[1]


def versions_cap_reached() -> Conflict:
    """The refusal of a write that would take its account past MEMORY_VERSIONS_PER_ACCOUNT_MAX,
    worded as the cap on threads is (threads.create_thread), with what the caller can do: no
    version can be deleted to make room, so it is the operator's to raise."""
    cap = settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX
    return Conflict(
        f"at most {cap} memory versions per account, and this account has reached it: every "
        "version counts (current, archived, and each one a revision superseded), as none is "
        "ever deleted; nothing was stored. Export the account's memories (/memories/export.json "
        "on the account's site) to keep them elsewhere, or ask the server's operator to raise "
        "MEMORY_VERSIONS_PER_ACCOUNT_MAX"
    )


class _LostInsert(Exception):
    """The insert violated a uniqueness rule; raised inside the transaction so it rolls back."""

    def __init__(self, constraint: str, memory: Memory) -> None:
        self.constraint = constraint
        self.memory = memory


def _insert(memory: Memory, vectors_by: str | None) -> Memory:
    """Insert, letting the database's unique indexes decide duplicates and lost revise races:
    no pre-check query on the hot path, and no window between a check and the write. The
    memory's vector only if the model that made the stored ones (`vectors_by`, as
    lock_live_owner read it) made it too: a server running another SEARCH_EMBEDDER than the
    table's (before `embed_memories --reembed` has recorded it, or still the old one after) would
    add a vector that searches compare as one of theirs and that no fill replaces."""
    if memory.embedding is not None and not storable_with(vectors_by):
        memory.embedding = None
    try:
        memory.save(force_insert=True)
    except IntegrityError as error:
        constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", None)
        if constraint in ("memory_unique_live_content", "memory_one_successor"):
            raise _LostInsert(constraint, memory) from None
        if constraint == VERSIONS_CAP_CONSTRAINT:
            raise versions_cap_reached() from None
        raise
    except OperationalError as error:
        # The one wait an insert of a new row has is the unique index's, for the writer of an
        # equal content (or of the row being closed that holds it). Two revisions swapping two
        # memories' contents each wait so for the other's predecessor to close, and PostgreSQL
        # ends one of them: that one lost to the content still current, as one after the other.
        if dbfaults.is_deadlock(error):
            raise _LostInsert("memory_unique_live_content", memory) from None
        raise
    return memory


def superseded(
    owner_id: int, memory_id: uuid.UUID, action: str, *, needs_type: str | None = None
) -> Conflict:
    """The Conflict of an action on a superseded memory, naming the newest revision to act on
    instead (so the agent needs no get_memories to find it). When the action needs a type
    (`needs_type`: resolve, a commitment) and a revision changed the type, the newest is named
    as what it is now, not as something to act on: acting on it would only be refused."""
    newest = Memory.objects.newest_revision_id(owner_id, memory_id)
    if needs_type is not None:
        newest_type = (
            Memory.objects.filter(owner_id=owner_id, id=newest)
            .values_list("memory_type", flat=True)
            .first()
        )
        if newest_type is not None and newest_type != needs_type:
            return Conflict(
                f"memory {memory_id} is already superseded by {newest}, a {newest_type}, not a "
                f"{needs_type}: there is no {needs_type} left to {action}"
            )
    return Conflict(f"memory {memory_id} is already superseded by {newest}; {action} {newest}")


def _explain_lost_insert(lost: _LostInsert) -> DomainError | None:
    """After the rollback: the domain error for a lost insert, naming the winner; None when the
    current memory it repeated is current no more (revised or erased since the insert was
    refused), and so stands in its way no longer."""
    memory = lost.memory
    if lost.constraint == "memory_one_successor":
        return superseded(memory.owner_id, memory.predecessor_id, "revise")
    existing = (
        Memory.objects.owned_by(memory.owner_id)
        .current()
        .filter(content=memory.content)
        .values_list("id", "status")
        .first()
    )
    if existing is None:
        return None
    existing_id, status = existing
    return DuplicateMemory(existing_id, archived=status == Status.ARCHIVED)


# How many times a write runs while the duplicate it lost to keeps leaving before it is named.
WRITE_ATTEMPTS = 3


def _written(write: Callable[[], Memory]) -> Memory:
    """`write` (one transaction), its lost insert as its domain error; run again when the
    duplicate it lost to was current no more once looked up (see _explain_lost_insert)."""
    for _ in range(WRITE_ATTEMPTS):
        try:
            return write()
        except _LostInsert as lost:
            error = _explain_lost_insert(lost)
            if error is not None:
                raise error from None
    raise Conflict("the same content was current at each attempt, then revised or erased; retry")


@dataclass(frozen=True)
class MemoryFields:
    """Validated, trimmed substance for a new memory."""

    memory_type: str
    topic: str
    content: str
    scope: str
    project: str | None
    tags: list[str]
    due_at: datetime | None = None

    @classmethod
    def of(cls, memory: Memory) -> MemoryFields:
        """A stored memory's substance, to compare with what a revision asks for."""
        return cls(**{field.name: getattr(memory, field.name) for field in dataclass_fields(cls)})

    @classmethod
    def clean(
        cls,
        *,
        memory_type: object,
        topic: object,
        content: object,
        scope: object = None,
        project: object = None,
        tags: object = None,
        due_at: object = None,
        carried_over: Collection[str] = (),
    ) -> MemoryFields:
        """`carried_over`: the fields a revision copies from its predecessor (named as here),
        which a refusal of their text says the caller did not send."""
        cleaned_type = _clean_memory_type(memory_type)
        tags_as_sent = bounds.clean_tags_as_sent(tags)
        fields = cls(
            memory_type=cleaned_type,
            topic=bounds.clean_topic(topic),
            content=bounds.clean_content(content),
            scope=bounds.clean_scope(scope),
            project=bounds.clean_project(project),
            tags=list(tags_as_sent),
            due_at=bounds.clean_due_at(due_at, memory_type=cleaned_type),
        )
        fields._refuse_credentials(carried_over, tags_as_sent)
        return fields

    def _refuse_credentials(
        self, carried_over: Collection[str], tags_as_sent: dict[str, int]
    ) -> None:
        """No text a memory stores may hold a credential (memories.credentials). A tag is named
        by its index in the list sent (`tags_as_sent`): a repeated tag before it is counted."""
        texts = [
            ("topic", "topic", self.topic),
            ("content", "content", self.content),
            ("scope", "scope", self.scope),
            ("project", "project", self.project),
            *(("tags", f"tags[{index}]", tag) for tag, index in tags_as_sent.items()),
        ]
        for name, field, text in texts:
            if text is not None:
                refuse_credential(field, text, carried_over=name in carried_over)


def _in_known_spelling(owner: AbstractBaseUser, fields: MemoryFields) -> MemoryFields | None:
    """`fields` with its project spelt as the account already spells it in another case
    (Memory.objects.project_spelling); None when no current memory of the account has the
    project in any case: a project new to it, whose first spelling the write settles under a
    lock (_in_settled_spelling)."""
    if fields.project is None:
        return fields
    spelling = Memory.objects.project_spelling(owner.pk, fields.project)
    if spelling is None:
        return None
    return fields if spelling == fields.project else replace(fields, project=spelling)


def _in_settled_spelling(owner: AbstractBaseUser, fields: MemoryFields) -> MemoryFields:
    """`fields` of a project new to the account, in the spelling a concurrent write gave it
    first, if one did; inside the write's transaction, before its insert. The lookup that found
    the project new took no lock, so two first writes at once of 'Atlas' and 'atlas' (an
    agent's parallel calls) would each find nothing and commit a spelling of their own: the
    split the lookup is there to prevent. Under the account's lock on the project, held to the
    end of the transaction, the second waits for the first and then finds its spelling. A
    project the account already has is settled and pays for none of this."""
    Memory.objects.lock_project_spelling(owner.pk, fields.project)
    return _in_known_spelling(owner, fields) or fields


def _spelling_before_close(owner: AbstractBaseUser, project: object) -> str | None:
    """For a revision into `project` (as sent): the account's spelling of it, its predecessor's
    included, or None for a project new to the account, whose lock (_in_settled_spelling) is
    then taken here. Before
    the predecessor's row is locked (_close), never after: a first write of the project that
    holds the lock may wait on that row (the unique index of live content, for a content the
    predecessor holds), and a revision holding the row while it waits for the lock would
    deadlock with it. A project refused as sent is refused with the other fields, later."""
    if project is _UNSET or project is None:
        return None
    try:
        cleaned = bounds.clean_project(project)
    except InvalidInput:
        return None
    spelling = Memory.objects.project_spelling(owner.pk, cleaned)
    if spelling is None:
        Memory.objects.lock_project_spelling(owner.pk, cleaned)
    return spelling


def _new_memory(
    owner,
    fields: MemoryFields,
    *,
    predecessor: Memory | None = None,
    recorded_at: datetime | None = None,
) -> Memory:
    commitment_status = None
    resolved_at = None
    if fields.memory_type == MemoryType.COMMITMENT:
        carried = predecessor.commitment_status if predecessor is not None else None
        commitment_status = carried or CommitmentStatus.OPEN
        if carried == CommitmentStatus.RESOLVED:
            # A revision of a resolved commitment (its wording, say) resolves nothing again.
            resolved_at = predecessor.resolved_at
    [embedding] = embed_memories(
        [
            memory_text(
                topic=fields.topic,
                content=fields.content,
                tags=fields.tags,
                project=fields.project,
            )
        ]
    )
    return Memory(
        owner=owner,
        embedding=embedding,
        content=fields.content,
        content_length=len(fields.content),
        memory_type=fields.memory_type,
        topic=fields.topic,
        scope=fields.scope,
        project=fields.project,
        tags=fields.tags,
        recorded_at=recorded_at or timezone.now(),
        predecessor=predecessor,
        commitment_status=commitment_status,
        resolved_at=resolved_at,
        due_at=fields.due_at,
    )


def record_memory(
    *,
    owner: AbstractBaseUser,
    memory_type: object,
    topic: object,
    content: object,
    scope: object = None,
    project: object = None,
    tags: object = None,
    due_at: object = None,
    and_then: Callable[[Memory], None] | None = None,
) -> Memory:
    """Store one new memory. The same content already current for this tenant is a
    DuplicateMemory; a commitment starts `open` (and may carry a due date). `and_then` is
    called with the new memory inside the write's transaction, so that what it writes commits
    or rolls back with the memory, without a transaction of the caller's around this one (which
    would make this one a savepoint: another round trip on every write)."""
    fields = MemoryFields.clean(
        memory_type=memory_type,
        topic=topic,
        content=content,
        scope=scope,
        project=project,
        tags=tags,
        due_at=due_at,
    )
    known = _in_known_spelling(owner, fields)
    memory = _new_memory(owner, known or fields)

    def write() -> Memory:
        nonlocal memory
        with transaction.atomic():
            vectors_by = lock_live_owner(owner)
            if known is None:
                settled = _in_settled_spelling(owner, fields)
                if settled.project != memory.project:
                    # The vector is made from the project too: one made from the spelling not
                    # stored would stand for a text the memory does not hold, and no fill ever
                    # replaces a vector. Only a write that lost such a race embeds twice.
                    memory = _new_memory(owner, settled)
            _insert(memory, vectors_by)
            if and_then is not None:
                and_then(memory)
            return memory

    return _written(write)


def revise_memory(
    *,
    owner: AbstractBaseUser,
    predecessor_id: object,
    content: object = _UNSET,
    memory_type: object = _UNSET,
    topic: object = _UNSET,
    scope: object = _UNSET,
    project: object = _UNSET,
    tags: object = _UNSET,
    due_at: object = _UNSET,
    and_then: Callable[[Memory], None] | None = None,
) -> Memory:
    """Supersede a memory: close the predecessor (valid_to) and insert a successor with a new id
    pointing back to it. Fields not given are carried over, content too (a due date only while
    the successor stays a commitment); None empties one of CLEARABLE_FIELDS and is InvalidInput
    for the others.
    Revising a memory that is already superseded is a Conflict, so two concurrent revisions yield
    one successor and one Conflict. `and_then`: as in `record_memory`, called with the
    successor."""
    given = {
        "memory_type": memory_type,
        "topic": topic,
        "scope": scope,
        "project": project,
        "tags": tags,
        "due_at": due_at,
    }
    for name, field in _HELD_BY_EVERY_MEMORY.items():
        if given[name] is None:
            raise InvalidInput(
                field, "cannot be cleared: every memory has one; leave it out to keep it as it is"
            )
    return _written(
        lambda: _revise(
            owner=owner,
            predecessor_id=predecessor_id,
            content=content,
            and_then=and_then,
            given=given,
        )
    )


def _returned(field) -> str:
    """A column as the close statement returns it: clamped to the readable range where every
    read of it is (an instant an old row may hold out of Python's range)."""
    if isinstance(field, ReadableDateTimeField):
        return f"{readable_instant_sql(field.column)} AS {field.column}"
    return field.column


# Closes a current memory and reads it back in one statement; the row lock it takes makes a
# concurrent revision of the same memory wait, then find it closed (0 rows: Conflict). It closes
# no earlier than the memory was recorded (the table's constraint): a memory recorded by a host
# whose clock runs ahead of this one's is closed at its own recording time.
_CLOSE_SQL = (
    f"UPDATE {Memory._meta.db_table} SET valid_to = GREATEST(%s, recorded_at) "  # noqa: S608 (constants)
    "WHERE owner_id = %s AND id = %s AND valid_to IS NULL "
    f"RETURNING {', '.join(_returned(field) for field in Memory._meta.concrete_fields)}"
)


def memory_not_found(owner: AbstractBaseUser, memory_ids: Sequence[object]) -> NotFound:
    """The NotFound of memory ids the owner has none of (the first five named). When one is the
    id of one of the owner's thread proposals (remember and revise answer both side by side, and
    a model takes one for the other), it says so and names the proposal's memory; another tenant's
    proposal id is answered as any unknown id."""
    named = f"memory {', '.join(str(value) for value in memory_ids[:5])}"
    parsed = [p for p in map(parse_memory_id, memory_ids[:5]) if p is not None]
    proposal = (
        ThreadMembership.objects.filter(owner=owner, id__in=parsed)
        .select_related("thread")
        .order_by("id")
        .first()
        if parsed
        else None
    )
    if proposal is None:
        return NotFound(named)
    if proposal.state == MembershipState.PROPOSED:
        what = "an open thread proposal's id; accept_proposal or reject_proposal takes it"
    else:
        what = f"the id of a thread proposal decided already ({proposal.state})"
    return NotFound(
        f"{named}: {proposal.id} is {what}; the memory it proposes for thread "
        f"'{proposal.thread.name}' is {proposal.memory_id}"
    )


def _close(owner: AbstractBaseUser, predecessor_id: object, at: datetime) -> Memory:
    parsed = parse_memory_id(predecessor_id)
    if parsed is None:
        raise NotFound(f"memory {predecessor_id}")
    closed = next(iter(Memory.objects.raw(_CLOSE_SQL, [at, owner.pk, parsed])), None)
    if closed is None:
        if Memory.objects.filter(owner=owner, id=parsed).exists():
            raise superseded(owner.pk, parsed, "revise")
        raise memory_not_found(owner, [predecessor_id])
    return closed


def _revise(
    *,
    owner,
    predecessor_id: object,
    content: object,
    given: dict,
    and_then: Callable[[Memory], None] | None,
) -> Memory:
    with transaction.atomic():
        vectors_by = lock_live_owner(owner)
        spelling = _spelling_before_close(owner, given["project"])
        predecessor = _close(owner, predecessor_id, timezone.now())
        # The successor is current from the instant its predecessor stopped being.
        now = predecessor.valid_to

        inherited = {
            name: getattr(predecessor, name) if value is _UNSET else value
            for name, value in given.items()
            if name != "due_at"
        }
        due_at = given["due_at"]
        if due_at is _UNSET:
            # A due date carries over only while the memory stays a commitment.
            commitment = inherited["memory_type"] == MemoryType.COMMITMENT
            due_at = bounds.within_bounds(predecessor.due_at) if commitment else None
        carried_over = {name for name, value in given.items() if value is _UNSET}
        if content is _UNSET:
            # Changing a due date, topic or tag alone needs no copy of the text, which a caller
            # holding only an excerpt of it would cut short.
            content = predecessor.content
            carried_over.add("content")
        fields = MemoryFields.clean(
            content=content, due_at=due_at, carried_over=carried_over, **inherited
        )
        if "project" not in carried_over and fields.project is not None:
            # Before the successor (and its vector) is made: nothing to make again. Looked up
            # again, now that the predecessor is closed, unless the account spells it as sent:
            # another case may have been the predecessor's alone (the revision changes it), and
            # a project new to the account may have been given its first spelling by a
            # concurrent write that held the lock until it committed.
            if spelling != fields.project:
                spelling = Memory.objects.in_account_spelling(owner.pk, fields.project)
            fields = replace(fields, project=spelling)
        if predecessor.status == Status.ACTIVE and fields == MemoryFields.of(predecessor):
            # A successor the same as its predecessor in every field would only bury it under a
            # new id. (Of an archived memory it is the way back: the successor is active.)
            if len(carried_over) == len(given) + 1:  # content and every other field
                raise InvalidInput(
                    "predecessorId",
                    "no field to change was given: send the fields that change with it "
                    "(content, memoryType, topic, scope, project, tags, dueAt), or name in "
                    "clear those to empty; omitted ones carry over",
                )
            if "content" in carried_over:
                raise InvalidInput(
                    "predecessorId",
                    f"memory {predecessor.id} already holds every field given; nothing to revise",
                )
            raise InvalidInput(
                "content",
                f"is memory {predecessor.id}'s as it stands, and so is every other field; "
                "nothing to revise",
            )
        successor = _insert(
            _new_memory(owner, fields, predecessor=predecessor, recorded_at=now), vectors_by
        )
        if and_then is not None:
            and_then(successor)
        return successor


def archive_memory(*, owner: AbstractBaseUser, memory_id: object) -> Memory:
    """Move a current memory to `archived` (lifecycle only). Archiving twice is a no-op."""
    with transaction.atomic():
        lock_live_owner(owner)
        memory = _locked(owner, memory_id)
        if memory.valid_to is not None:
            raise superseded(owner.pk, memory.id, "archive")
        if memory.status != Status.ARCHIVED:
            memory.status = Status.ARCHIVED
            memory.save(update_fields=["status"])
        return memory


def resolve_commitment(*, owner: AbstractBaseUser, memory_id: object, status: object) -> Memory:
    """Move a commitment through its state machine (COMMITMENT_TRANSITIONS), noting when it was
    resolved (resolved_at, cleared by any other move). The same state is a no-op; an illegal
    move raises InvalidTransition naming both states and the moves there are. An archived
    commitment is refused, the same state included: it keeps the state it had."""
    if status not in CommitmentStatus.values:
        raise InvalidInput("status", f"must be one of: {', '.join(CommitmentStatus.values)}")
    with transaction.atomic():
        lock_live_owner(owner)
        memory = _locked(owner, memory_id)
        if memory.valid_to is not None:
            # First: what this version was matters less than what its newest revision is (a
            # note revised into a commitment is resolved by the commitment's id).
            raise superseded(owner.pk, memory.id, "resolve", needs_type=MemoryType.COMMITMENT)
        if memory.memory_type != MemoryType.COMMITMENT:
            # An agent done with a blocker or a note reaches for resolve: name the way that is.
            way = (
                "it is archived already; revise it if it changed (which brings it back)"
                if memory.status == Status.ARCHIVED
                else "archive this one if it no longer holds (it stays readable by id), or "
                "revise it if it changed"
            )
            raise InvalidInput(
                "memoryId",
                f"memory {memory.id} is a {memory.memory_type}, not a commitment: only a "
                f"commitment has a state to resolve; {way}",
            )
        if memory.status == Status.ARCHIVED:
            # Set aside, it is in no briefing or handoff and never overdue: a move would be
            # answered as done while the commitment stays out of every list its state puts it
            # in. The same state is refused too, rather than answered as a commitment in play.
            # A revision is the way back, and carries the state over (_new_memory).
            raise InvalidInput(
                "memoryId",
                f"memory {memory.id} is archived: an archived commitment keeps the state it had "
                f"('{memory.commitment_status}'), which resolve cannot change, not even to that "
                f"same state; revise it (predecessorId {memory.id}, no other field needed) to "
                "bring it back as an active commitment in that state, then resolve the new id",
            )
        if status != memory.commitment_status:
            moves = COMMITMENT_TRANSITIONS[memory.commitment_status]
            if status not in moves:
                raise InvalidTransition(memory.commitment_status, status, moves)  # type: ignore[arg-type]
            memory.commitment_status = status
            # Reopened, it is no longer resolved: the handoff's recently resolved drop it.
            memory.resolved_at = timezone.now() if status == CommitmentStatus.RESOLVED else None
            memory.save(update_fields=["commitment_status", "resolved_at"])
        return memory


def _locked(owner: AbstractBaseUser, memory_id: object) -> Memory:
    parsed = parse_memory_id(memory_id)
    memory = (
        Memory.objects.select_for_update().filter(owner=owner, id=parsed).first()
        if parsed
        else None
    )
    if memory is None:
        raise memory_not_found(owner, [memory_id])
    return memory
