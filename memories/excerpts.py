"""The one excerpt rule shared by search, briefing and handoff: bodies longer than the limit are
cut and end in an ellipsis, and the caller is told (truncated, contentLength) so it can fetch the
full body from the cacheable `threengram://memory/{id}` resource. Also the one row shape they
read a memory in (`EXCERPT_COLUMNS`, `MemoryExcerpt.from_row`)."""

from __future__ import annotations

import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime

from memories.fields import readable_instant_sql
from memories.models import MemoryResource, is_overdue

ELLIPSIS = "\u2026"
SEARCH_EXCERPT_MAX = 600


@dataclass(frozen=True)
class Excerpt:
    text: str
    truncated: bool


def excerpt(content: str, limit: int = SEARCH_EXCERPT_MAX) -> Excerpt:
    """At most `limit` code points: the body as is, or its first limit-1 and an ellipsis, the
    cut stepped back to the start of a character that the cut would split (one followed by a
    joiner, a variation selector, a combining mark or a skin tone; one joined to the one before
    it) and off half a flag, so that neither the excerpt nor the ellipsis shows another emoji
    (a family cut after its second person is a couple) nor a flag a lone letter. `content`
    needs only its first `limit` + 1 code points."""
    if len(content) <= limit:
        return Excerpt(content, False)
    kept, following = content[: limit - 1], content[limit - 1]
    while kept and (_attaches(following) or kept[-1] == _JOINER):
        kept, following = kept[:-1], kept[-1]
    kept = kept.rstrip()
    while kept and kept[-1] == _JOINER:  # before a space: it would join the ellipsis
        kept = kept[:-1]
    flags = len(kept) - len(kept.rstrip(_REGIONAL_INDICATORS))
    if flags % 2:  # regional indicators pair into flags: an odd one out is half of one
        kept = kept[:-1]
    return Excerpt(kept.rstrip() + ELLIPSIS, True)


# Mn, Me: combining marks; Cf: zero-width joiner and the like; Sk is not (a modifier letter
# stands alone), but for the emoji skin tones. Variation selectors are Mn.
_ATTACHING = frozenset({"Mn", "Me", "Cf"})
_SKIN_TONES = frozenset(chr(code) for code in range(0x1F3FB, 0x1F400))
_JOINER = "\u200d"


def _attaches(character: str) -> bool:
    """Whether `character` modifies the one before it, showing as one with it."""
    return unicodedata.category(character) in _ATTACHING or character in _SKIN_TONES


_REGIONAL_INDICATORS = "".join(chr(code) for code in range(0x1F1E6, 0x1F200))


# The columns of a memory `m` that `MemoryExcerpt.from_row` reads, in its order. The content is
# fetched cut to %(excerpt_fetch)s code points (the limit plus one: enough to know it was cut);
# the due date is read clamped, so one stored before inputs were bounded cannot fail the read.
EXCERPT_COLUMNS = f"""m.id, m.memory_type, m.topic, left(m.content, %(excerpt_fetch)s),
       m.content_length, m.scope, m.project, m.status, m.commitment_status, m.recorded_at,
       m.valid_to, {readable_instant_sql("m.due_at")}"""


@dataclass(frozen=True)
class MemoryExcerpt(MemoryResource):
    """A memory as lists show it: its fields and an excerpt of its content."""

    id: uuid.UUID
    memory_type: str
    topic: str
    excerpt: str
    truncated: bool
    content_length: int
    scope: str
    project: str | None
    status: str
    commitment_status: str | None
    recorded_at: datetime
    valid_to: datetime | None
    due_at: datetime | None
    overdue: bool

    @classmethod
    def row_fields(cls, row: tuple, *, excerpt_max: int, now: datetime) -> dict:
        """The fields of a row of EXCERPT_COLUMNS, by name."""
        cut = excerpt(row[3], excerpt_max)
        return {
            "id": row[0],
            "memory_type": row[1],
            "topic": row[2],
            "excerpt": cut.text,
            "truncated": cut.truncated,
            "content_length": row[4],
            "scope": row[5],
            "project": row[6],
            "status": row[7],
            "commitment_status": row[8],
            "recorded_at": row[9],
            "valid_to": row[10],
            "due_at": row[11],
            "overdue": is_overdue(due_at=row[11], commitment_status=row[8], now=now),
        }

    @classmethod
    def from_row(cls, row: tuple, *, excerpt_max: int, now: datetime) -> MemoryExcerpt:
        return cls(**cls.row_fields(row, excerpt_max=excerpt_max, now=now))
