"""Paging: the cursor is signed (django.core.signing, SECRET_KEY) and carries the position, the
candidate mode, the first page's instant, word statistics and the reach of its words walk
(Position, scoring.WordStatistics) and a fingerprint of the query and filters
(filters.SearchFilters.fingerprint); it is refused for any other query. Later pages score with
the first page's statistics, so a write between pages (a revision changes the account's size, an
archive which candidates hold a term) does not shift the scores of the rest and so repeat or
skip hits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.core import signing

from memories.errors import InvalidInput
from memories.search.scoring import Candidate, WordStatistics

CURSOR_MAX = 2048
# A cursor pages through one result list, minutes after its first page; an older one would page
# by word statistics and an instant long stale, so it is refused and the search started anew.
CURSOR_MAX_AGE = 24 * 3600
_CURSOR_SALT = "threengram.memories.search-cursor"
MODES = ("ranked", "topic", "listed")


@dataclass(frozen=True)
class Position:
    """Where a page ends, as a cursor carries it: the candidate mode, the last hit's sort key,
    the first page's instant (`snapshot`) and word statistics (ranked mode). The instant is the
    clock's (see sql.TENANT_SIZE_SQL), and a memory's `recorded_at` is taken before its write
    commits: a write still committing while the first page ran (milliseconds) may show on a
    later page. Closing that would take the first page's database snapshot in the cursor and
    each row's inserting transaction id, which the rows do not keep."""

    mode: str
    score: float
    recorded_at: datetime
    id: uuid.UUID
    snapshot: datetime
    statistics: WordStatistics | None

    def encode(self, fingerprint: str) -> str:
        # JSON writes a float as its repr, which reads back exactly: paging compares scores.
        payload = {
            "f": fingerprint,
            "m": self.mode,
            "s": self.score,
            "r": self.recorded_at.isoformat(),
            "i": str(self.id),
            "t": self.snapshot.isoformat(),
        }
        if self.statistics is not None:
            statistics = self.statistics
            payload["w"] = [
                statistics.total,
                statistics.held_by,
                statistics.average_length,
                statistics.rare,
                statistics.walked_to.isoformat() if statistics.walked_to else None,
                statistics.rare_walked_to.isoformat() if statistics.rare_walked_to else None,
                statistics.walk_max,
            ]
        return signing.dumps(payload, salt=_CURSOR_SALT, compress=True)

    @classmethod
    def decode(cls, cursor: str, fingerprint: str) -> Position:
        """The position `cursor` carries, if this server issued it for `fingerprint`."""
        try:
            payload = signing.loads(cursor, salt=_CURSOR_SALT, max_age=CURSOR_MAX_AGE)
            if payload["m"] not in MODES:
                raise ValueError(payload["m"])
            statistics = None
            if "w" in payload:
                words = payload["w"]
                total, held_by, average_length, rare, walked_to, rare_walked_to, walk_max = words
                statistics = WordStatistics(
                    total=int(total),
                    held_by=tuple(int(count) for count in held_by),
                    average_length=float(average_length),
                    rare=tuple(int(n) for n in rare),
                    walked_to=_instant(walked_to) if walked_to else None,
                    rare_walked_to=_instant(rare_walked_to) if rare_walked_to else None,
                    walk_max=None if walk_max is None else int(walk_max),
                )
            position = cls(
                mode=payload["m"],
                score=float(payload["s"]),
                recorded_at=_instant(payload["r"]),
                id=uuid.UUID(payload["i"]),
                snapshot=_instant(payload["t"]),
                statistics=statistics,
            )
            bound_to = payload["f"]
        except signing.SignatureExpired:
            raise InvalidInput(
                "cursor",
                f"has expired (a cursor lasts {CURSOR_MAX_AGE // 3600} hours); omit it to start"
                " a new search",
            ) from None
        except (signing.BadSignature, KeyError, TypeError, ValueError):
            raise InvalidInput(
                "cursor", "is not a cursor this server issued; omit it to start a new search"
            ) from None
        if bound_to != fingerprint:
            raise InvalidInput(
                "cursor",
                "was issued for a different query or filters; omit it to start a new search",
            )
        return position

    def follows(self, candidate: Candidate) -> bool:
        """Whether `candidate` sorts after this position."""
        return (candidate.score, candidate.recorded_at, candidate.id) < (
            self.score,
            self.recorded_at,
            self.id,
        )


def _instant(text: str) -> datetime:
    """An instant a cursor carries, with its offset: one without cannot be compared with the
    memories' (this server issues none)."""
    instant = datetime.fromisoformat(text)
    if instant.tzinfo is None:
        raise ValueError(text)
    return instant
