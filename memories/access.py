"""The access gate for reading memory bodies: one function serves both the
`threengram://memory/{id}` resource and the `get_memories` tool, so both answer alike for
missing, malformed and foreign ids (seed design, "Authorization")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memories.models import Memory
from memories.services import parse_memory_id


async def read_owned_memories(*, owner_id: int, ids: Sequence[object]) -> dict[uuid.UUID, Memory]:
    """The owner's memories among `ids`, keyed by id. Missing, malformed and foreign ids are
    simply absent from the result: callers cannot tell them apart, and neither can a timer,
    since all three run the same single query."""
    parsed = [memory_id for memory_id in map(parse_memory_id, ids) if memory_id is not None]
    rows = Memory.objects.filter(owner_id=owner_id, id__in=parsed)
    return {memory.id: memory async for memory in rows}
