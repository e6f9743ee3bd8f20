"""Paging: the cursor carries the position, the candidate mode, the first page's instant, word
statistics and the reach of its words walk (Position, scoring.WordStatistics) and a fingerprint
of the query and filters (filters.SearchFilters.fingerprint); it is refused for any other query.
Later pages score with the first page's statistics, so a write between pages (a revision changes
the account's size, an archive which candidates hold a term) does not shift the scores of the
rest and so repeat or skip hits.

The cursor is encrypted (Fernet: AES-CBC with an HMAC-SHA256, a key derived from SECRET_KEY), not
only signed: whoever holds one, leaked in a log or a shared transcript, would otherwise read the
account's size and how many of its memories hold each word. The fingerprint it carries is keyed
as well, so that even its plain text would confirm no guessed query without the server's key. Its
plaintext is compressed (a question of many words carries a count for each, and a cursor must
stay under CURSOR_MAX) and padded to a multiple of _PADDED_TO bytes before it is encrypted: its
length then tells little of the numbers in it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.utils.crypto import salted_hmac

from memories.errors import InvalidInput
from memories.search.scoring import Candidate, WordStatistics

CURSOR_MAX = 2048
# A cursor pages through one result list, minutes after its first page; an older one would page
# by word statistics and an instant long stale, so it is refused and the search started anew.
CURSOR_MAX_AGE = 24 * 3600
_CURSOR_SALT = "threengram.memories.search-cursor"
_FINGERPRINT_SALT = "threengram.memories.search-cursor.fingerprint"
# The compressed plaintext is padded to a multiple of this many bytes: the counts in it are
# written in as many digits as they have, which a cursor's exact length would otherwise tell.
_PADDED_TO = 256
# zlib's default state (a 32 KiB window, some 256 KiB in all) is allocated for each cursor, and
# where the allocator maps so large a block afresh each time that alone costs more than the rest
# of the cursor's work; a 2 KiB window spans a whole cursor's payload all the same.
_WINDOW_BITS = 11
_MEMORY_LEVEL = 4
# Far above the longest payload a search writes (a cursor is read at most 2,048 characters).
_PAYLOAD_MAX = 64 * 1024
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
            "f": _keyed(fingerprint, settings.SECRET_KEY),
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
        return _sealed(payload)

    @classmethod
    def decode(cls, cursor: str, fingerprint: str) -> Position:
        """The position `cursor` carries, if this server issued it for `fingerprint`."""
        try:
            payload, secret = _opened(cursor)
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
            bound_to = str(payload["f"])
        except _Expired:
            raise InvalidInput(
                "cursor",
                f"has expired (a cursor lasts {CURSOR_MAX_AGE // 3600} hours); omit it to start"
                " a new search",
            ) from None
        except (InvalidToken, KeyError, TypeError, ValueError, zlib.error):
            raise InvalidInput(
                "cursor", "is not a cursor this server issued; omit it to start a new search"
            ) from None
        if not hmac.compare_digest(bound_to, _keyed(fingerprint, secret)):
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


class _Expired(Exception):
    """A cursor this server issued more than CURSOR_MAX_AGE ago."""


def _sealed(payload: dict, issued_at: int | None = None) -> str:
    """`payload` as a cursor: compressed, padded, encrypted under the current SECRET_KEY and
    stamped `issued_at` (seconds since the epoch; now)."""
    deflater = zlib.compressobj(
        zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, _WINDOW_BITS, _MEMORY_LEVEL
    )
    compressed = deflater.compress(json.dumps(payload, separators=(",", ":")).encode())
    compressed += deflater.flush()
    # The padding follows the end of the compressed stream, which _read stops at.
    padded = compressed + bytes(-len(compressed) % _PADDED_TO)
    at = int(time.time()) if issued_at is None else issued_at
    return _cipher(settings.SECRET_KEY).encrypt_at_time(padded, at).decode()


def _opened(cursor: str) -> tuple[dict, str]:
    """The payload `cursor` carries and the secret key it was sealed under: the current
    SECRET_KEY or one of SECRET_KEY_FALLBACKS, as Django's signing accepts while a key is
    rotated. InvalidToken if no key opens it, _Expired if it is older than CURSOR_MAX_AGE."""
    for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS):
        cipher = _cipher(secret)
        try:
            return _read(cipher.decrypt(cursor, ttl=CURSOR_MAX_AGE)), secret
        except InvalidToken:
            try:
                issued_at = cipher.extract_timestamp(cursor)
            except InvalidToken:
                continue  # sealed under another key, or under none
            if issued_at + CURSOR_MAX_AGE < time.time():
                raise _Expired from None
    raise InvalidToken


def _read(padded: bytes) -> dict:
    inflater = zlib.decompressobj(_WINDOW_BITS)
    # Bounded even though only the key's holder can seal a payload: a key leaked with a backup
    # must not let a forged cursor inflate without end.
    text = inflater.decompress(padded, _PAYLOAD_MAX)
    if inflater.unconsumed_tail:
        raise ValueError("the payload is larger than any cursor's")
    if not inflater.eof:
        raise ValueError("the compressed payload is cut short")
    return json.loads(text)


@lru_cache(maxsize=8)
def _cipher(secret: str) -> Fernet:
    # Keys are derived once per secret: a page issues and reads a cursor, each must cost
    # microseconds.
    key = salted_hmac(_CURSOR_SALT, "cipher", secret=secret, algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(key))


@lru_cache(maxsize=8)
def _fingerprint_key(secret: str) -> bytes:
    return salted_hmac(_FINGERPRINT_SALT, "fingerprint", secret=secret, algorithm="sha256").digest()


def _keyed(fingerprint: str, secret: str) -> str:
    return hmac.new(_fingerprint_key(secret), fingerprint.encode(), hashlib.sha256).hexdigest()[:32]
