"""get_memories: full bodies of up to 20 memories with their lifecycle state, through the same
access gate as the `threengram://memory/{id}` resource (memories.access)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from memories.access import read_owned_memories
from memories.errors import InvalidInput
from memories.models import Memory, MemoryResource, is_overdue, parse_memory_id

IDS_MAX = 20
DEFAULT_BUDGET = 20_000
BUDGET_MIN = 2_000  # one memory of the longest allowed content always fits
BUDGET_MAX = 40_000  # 20 x CONTENT_MAX: the largest any call could need


@dataclass(frozen=True)
class ReadMemory(MemoryResource):
    id: uuid.UUID
    memory_type: str
    topic: str
    content: str | None  # None: withheld because the call's character budget was spent
    content_length: int
    scope: str
    project: str | None
    tags: list[str]
    recorded_at: datetime
    status: str
    valid_to: datetime | None
    commitment_status: str | None
    due_at: datetime | None
    overdue: bool  # as search and briefing tell it (models.is_overdue), as of the read
    resolved_at: datetime | None  # when a resolved commitment was resolved
    predecessor_id: uuid.UUID | None
    successor_id: uuid.UUID | None

    @property
    def current(self) -> bool:
        """In force: not since revised (a version's archive state is `status`, apart)."""
        return self.valid_to is None


@dataclass
class MemoryBatch:
    memories: list[ReadMemory] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    withheld: list[uuid.UUID] = field(default_factory=list)


async def read_memories(
    *, owner_id: int, ids: Sequence[object], budget: int = DEFAULT_BUDGET
) -> MemoryBatch:
    """The owner's memories among `ids`, in request order, full bodies while the character budget
    lasts (a body that would exceed it is withheld whole, never cut). Unknown, malformed and
    other tenants' ids all land in `not_found`, alike."""
    if not 1 <= len(ids) <= IDS_MAX:
        raise InvalidInput("ids", f"give 1 to {IDS_MAX} ids; got {len(ids)}")
    if not BUDGET_MIN <= budget <= BUDGET_MAX:
        raise InvalidInput(
            "maxChars", f"must be between {BUDGET_MIN} and {BUDGET_MAX}; got {budget}"
        )
    unique = list(dict.fromkeys(ids))
    found = await read_owned_memories(owner_id=owner_id, ids=unique)
    successors = {
        predecessor: successor
        async for predecessor, successor in Memory.objects.filter(
            owner_id=owner_id, predecessor_id__in=list(found)
        ).values_list("predecessor_id", "id")
    }
    batch = MemoryBatch()
    now = timezone.now()
    remaining = budget
    seen: set[uuid.UUID] = set()
    for requested in unique:
        parsed = parse_memory_id(requested)
        memory = found.get(parsed) if parsed else None
        if memory is not None and memory.id in seen:
            continue  # the same id spelled twice (e.g. upper and lower case)
        if memory is None:
            batch.not_found.append(str(requested))
            continue
        fits = memory.content_length <= remaining
        if fits:
            remaining -= memory.content_length
        else:
            batch.withheld.append(memory.id)
        seen.add(memory.id)
        batch.memories.append(
            ReadMemory(
                id=memory.id,
                memory_type=memory.memory_type,
                topic=memory.topic,
                content=memory.content if fits else None,
                content_length=memory.content_length,
                scope=memory.scope,
                project=memory.project,
                tags=list(memory.tags),
                recorded_at=memory.recorded_at,
                status=memory.status,
                valid_to=memory.valid_to,
                commitment_status=memory.commitment_status,
                due_at=memory.due_at,
                overdue=is_overdue(
                    due_at=memory.due_at,
                    commitment_status=memory.commitment_status,
                    valid_to=memory.valid_to,
                    status=memory.status,
                    now=now,
                ),
                resolved_at=memory.resolved_at,
                predecessor_id=memory.predecessor_id,
                successor_id=successors.get(memory.id),
            )
        )
    return batch
