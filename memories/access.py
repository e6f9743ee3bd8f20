"""The access gate for reading memory bodies: one function serves both the
`threengram://memory/{id}` resource and the `get_memories` tool, so both answer alike for
missing, malformed and foreign ids (seed design, "Authorization")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memories.models import Memory
from memories.services import parse_memory_id

NIL_ID = uuid.UUID(int=0)


async def read_owned_memories(*, owner_id: int, ids: Sequence[object]) -> dict[uuid.UUID, Memory]:
    """The owner's memories among `ids`, keyed by id. Missing, malformed and foreign ids are
    simply absent from the result: callers cannot tell them apart, and neither can a timer,
    since all three run the same single query."""
    # A malformed id becomes the nil UUID (never issued: ids are UUIDv7), so the same query runs
    # for it as for a well-formed one.
    parsed = [parse_memory_id(memory_id) or NIL_ID for memory_id in ids]
    rows = Memory.objects.filter(owner_id=owner_id, id__in=parsed)
    return {memory.id: memory async for memory in rows}
