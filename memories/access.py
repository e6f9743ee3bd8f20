"""The access gate for reading memory bodies: one function serves both the
`threengram://memory/{id}` resource and the `get_memories` tool, so both answer alike for
missing, malformed and foreign ids (seed design, "Authorization").

It reads with native async psycopg (threengram.asyncdb), not the async ORM: it sits on the
resource-read hot path, where an ORM thread hop costs as much as the query (docs/performance.md).
Rows come back as `MemoryRow`, an immutable snapshot with the Memory model's attribute names.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memories.models import Memory
from memories.services import parse_memory_id
from threengram import asyncdb

NIL_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory as read by the gate. Field names match `memories.models.Memory`."""

    id: uuid.UUID
    content: str
    content_length: int
    memory_type: str
    topic: str
    scope: str
    project: str | None
    recorded_at: datetime
    status: str
    valid_to: datetime | None
    commitment_status: str | None
    tags: tuple[str, ...]
    predecessor_id: uuid.UUID | None

    @property
    def resource_uri(self) -> str:
        return f"threengram://memory/{self.id}"

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


_COLUMNS = (
    "id, content, content_length, memory_type, topic, scope, project, recorded_at, "
    "status, valid_to, commitment_status, tags, predecessor_id"
)
# The owner is part of the WHERE clause, so a foreign id is exactly as absent as a missing one.
_READ_SQL = (
    f"SELECT {_COLUMNS} FROM {Memory._meta.db_table} "  # noqa: S608 (constant identifiers only)
    "WHERE owner_id = %s AND id = ANY(%s)"
)


async def read_owned_memories(
    *, owner_id: int, ids: Sequence[object]
) -> dict[uuid.UUID, MemoryRow]:
    """The owner's memories among `ids`, keyed by id. Missing, malformed and foreign ids are
    simply absent from the result: callers cannot tell them apart, and neither can a timer,
    since all three run the same single query."""
    # A malformed id becomes the nil UUID (never issued: ids are UUIDv7), so the same query runs
    # for it as for a well-formed one.
    parsed = [parse_memory_id(memory_id) or NIL_ID for memory_id in ids]
    if not parsed:
        return {}
    async with asyncdb.connection() as conn:
        cursor = await conn.execute(_READ_SQL, (owner_id, parsed))
        rows = await cursor.fetchall()
    return {row[0]: MemoryRow(*row[:11], tuple(row[11] or ()), row[12]) for row in rows}
