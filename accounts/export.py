"""Data portability: all of one tenant's memories as a single JSON document, streamed.

The document is produced row by row from a server-side cursor (`aiterator`, `chunk_size` rows per
fetch) and handed to the server as an *async* iterator. That matters under ASGI: Django buffers a
synchronous iterator of a StreamingHttpResponse completely (`sync_to_async(list)`) before sending
it, so only an async iterator keeps a 100,000-memory export in bounded memory
(scripts/bench_export.py measures it; docs/performance.md has the figures).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from django.contrib.postgres.expressions import ArraySubquery
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import F, OuterRef
from django.utils import timezone

from memories import tenancy
from memories.models import MembershipState, Memory, Thread, ThreadMembership, memory_resource_uri

EXPORT_FORMAT = "threengram-memories-export"
EXPORT_VERSION = 1
CHUNK_ROWS = 500

# Substance, lifecycle and the supersession links in both directions: everything needed to
# rebuild the history elsewhere. The owner is implied by the document. Each memory also gets
# `current` (not superseded: valid_to unset) and its resource `uri`.
FIELDS = (
    "id",
    "memory_type",
    "topic",
    "content",
    "content_length",
    "scope",
    "project",
    "tags",
    "recorded_at",
    "status",
    "valid_to",
    "commitment_status",
    "resolved_at",
    "due_at",
)


class _Encoder(DjangoJSONEncoder):
    """Instants as the MCP tools give them, to the microsecond the database keeps, in UTC with
    `Z` (Django's encoder cuts them to milliseconds: a `recorded_at` from the file would fall
    before the memory's, and memories of one millisecond would lose their order)."""

    def default(self, o):
        if isinstance(o, datetime):
            return o.astimezone(UTC).isoformat().replace("+00:00", "Z")
        return super().default(o)


def _dumps(value) -> str:
    return json.dumps(value, cls=_Encoder, ensure_ascii=False)


def check_export_readable(*, owner_id: int) -> None:
    """Read the export's first memory, as the export will: a database that cannot answer (down,
    a lock or statement timeout) raises here, before a streaming answer has sent its 200 and
    could only break off (infra/dbfaults.py answers the error with a retryable 503)."""
    Memory.objects.filter(owner_id=owner_id).order_by("recorded_at", "id").first()


async def export_memories_json(
    *, owner_id: int, username: str, chunk_rows: int | None = None
) -> AsyncIterator[str]:
    """Yield the export document in pieces of at most `chunk_rows` memories, oldest first."""
    chunk_rows = chunk_rows or CHUNK_ROWS
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": timezone.now(),
        "account": username,
    }
    # Threads first, then the memories: a thread's members are memories, never deleted, so each
    # is in the memories read after it (read after them, a member added meanwhile would not be).
    with tenancy.acting_for(owner_id):
        threads = [thread async for thread in _threads(owner_id)]
    yield _dumps(header)[:-1] + ', "memories": ['
    rows = (
        Memory.objects.filter(owner_id=owner_id)
        .order_by("recorded_at", "id")
        .values(*FIELDS, supersedes=F("predecessor_id"), superseded_by=F("successors__id"))
    )
    count = 0
    pieces: list[str] = []
    # Row-level security: the body is produced after the view (and TenantMiddleware) returned,
    # so the generator names its tenant itself (memories/tenancy.py).
    with tenancy.acting_for(owner_id):
        async for row in rows.aiterator(chunk_size=chunk_rows):
            # Beside `status`, as the tools give it: a version since revised is still "active"
            # (status is the archive state alone), which read alone passes it off as in force.
            row["current"] = row["valid_to"] is None
            row["uri"] = memory_resource_uri(row["id"])
            pieces.append(("\n" if count == 0 else ",\n") + _dumps(row))
            count += 1
            if len(pieces) >= chunk_rows:
                yield "".join(pieces)
                pieces = []
    yield "".join(pieces) + f'\n], "memory_count": {count}, "threads": {_dumps(threads)}}}\n'


async def _threads(owner_id: int) -> AsyncIterator[dict]:
    """The tenant's threads (at most a few hundred) with their accepted members' ids, in one
    statement: a thread deleted meanwhile is exported with the members it had, not without
    them."""
    members = (
        ThreadMembership.objects.filter(
            owner_id=owner_id, thread_id=OuterRef("id"), state=MembershipState.MEMBER
        )
        .order_by("created_at")
        .values("memory_id")
    )
    queryset = (
        Thread.objects.filter(owner_id=owner_id)
        .order_by("created_at")
        .annotate(members=ArraySubquery(members))
        .values("id", "name", "pinned", "created_at", "members")
    )
    async for thread in queryset:
        yield thread
