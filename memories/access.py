"""The access gate for reading memory bodies: one function serves both the
`threengram://memory/{id}` resource and the `get_memories` tool, so both answer alike for
missing, malformed and foreign ids (docs/design.md, "Authorization").

It reads with native async psycopg (infra.asyncdb), not the async ORM: it sits on the
resource-read hot path, where an ORM thread hop costs as much as the query (docs/performance.md).
Rows come back as `MemoryRow`, an immutable snapshot with the Memory model's attribute names.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime

from infra import asyncdb
from memories.fields import readable_instant_sql
from memories.models import Memory, MemoryResource, parse_memory_id

NIL_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class MemoryRow(MemoryResource):
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
    due_at: datetime | None
    resolved_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Sequence[object]) -> MemoryRow:
        """The memory of a row of COLUMNS, each value given to the field it was read for."""
        values = dict(zip(FIELDS, row, strict=True))
        values["tags"] = tuple(values["tags"] or ())
        return cls(**values)


# The gate reads one column per field of MemoryRow, in the fields' order, so that a field added,
# removed or moved cannot shift the values of the others: each is the Memory column of its name,
# the due date clamped to the readable range as the ORM reads it
# (memories.fields.ReadableDateTimeField).
FIELDS = tuple(field.name for field in fields(MemoryRow))
_COLUMN_SQL = {"due_at": readable_instant_sql("due_at")}
COLUMNS = tuple(_COLUMN_SQL.get(name, name) for name in FIELDS)


# The gate's statement. The owner is part of the WHERE clause, so a foreign id is exactly as
# absent as a missing one.
# Parameters: owner id, memory ids as one comma-separated text (UUIDs, already parsed).
READ_OWNED = asyncdb.prepared_statement(
    "threengram_read_owned_memories",
    f"SELECT {', '.join(COLUMNS)} FROM {Memory._meta.db_table} "  # noqa: S608 (constants)
    "WHERE owner_id = $1 AND id = ANY(string_to_array($2, ',')::uuid[])",
)


def parse_ids(ids: Sequence[object]) -> list[uuid.UUID]:
    # A malformed id becomes the nil UUID (never issued: ids are UUIDv7), so the same query runs
    # for it as for a well-formed one.
    return [parse_memory_id(memory_id) or NIL_ID for memory_id in ids]


async def read_owned_memories(
    *, owner_id: int, ids: Sequence[object]
) -> dict[uuid.UUID, MemoryRow]:
    """The owner's memories among `ids`, keyed by id. Missing, malformed and foreign ids are
    simply absent from the result: callers cannot tell them apart, and neither can a timer,
    since all three run the same single query."""
    parsed = parse_ids(ids)
    if not parsed:
        return {}
    read = (READ_OWNED, (owner_id, ",".join(map(str, parsed))))
    (rows,) = await asyncdb.run_as_tenant(owner_id, [read])
    return {row[0]: MemoryRow.from_row(row) for row in rows}
