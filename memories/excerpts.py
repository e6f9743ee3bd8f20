"""The one excerpt rule shared by search, briefing and handoff: bodies longer than the limit are
cut and end in an ellipsis, and the caller is told (truncated, contentLength) so it can fetch the
full body from the cacheable `threengram://memory/{id}` resource. A search hit whose leading
excerpt does not show the words it was found by shows instead a window around them, marked as
such (excerpt_showing). Also the one row shape they
read a memory in (`EXCERPT_COLUMNS`, `MemoryExcerpt.row_fields`)."""

from __future__ import annotations

import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime

import regex

from memories.fields import readable_instant_sql
from memories.models import MemoryResource, is_overdue

ELLIPSIS = "\u2026"
# The longest excerpt of a memory's content any tool shows (search hits, handoffs, full briefings).
EXCERPT_MAX = 600
# A cut inside a word gives the partial word up, ending at the space before it, when that space
# is at most this many code points (and a fifth of the limit) back: "against the sta…" made a
# model guess a word. A longer word (a URL, text written without spaces) is cut where it falls.
WORD_BACKOFF_MAX = 30


@dataclass(frozen=True)
class Excerpt:
    text: str
    truncated: bool
    # Where in the content the text starts: 0, or a window's first code point (its text then
    # starts with ELLIPSIS, which is not in the content).
    start: int = 0


def excerpt(content: str, limit: int = EXCERPT_MAX) -> Excerpt:
    """At most `limit` code points: the body as is, or its whole characters (Unicode's extended
    grapheme clusters: an emoji sequence, a flag, a letter with its marks, a Hangul syllable of
    jamo, an Indic conjunct) within the first limit-1 and an ellipsis, so that a cut never shows
    a character that is not in the body, and at the end of a word when one ends near the cut
    (WORD_BACKOFF_MAX). `content` needs only its first `limit` + 1 code points (a character that
    reaches the last of them may go on: it is not kept)."""
    if len(content) <= limit:
        return Excerpt(content, False)
    end = start = _cluster_start_before(content, limit - 1)
    for character in _CHARACTER.finditer(content, start, limit):
        if character.end() > limit - 1:
            break
        end = character.end()
    return Excerpt(_before_partial_word(content, end) + ELLIPSIS, True)


def excerpt_showing(content: str, match: tuple[int, int], limit: int = EXCERPT_MAX) -> Excerpt:
    """The excerpt of `content` (whole, or at least its first `match` end + `limit` code points)
    that shows the text at `match` (start, end): the leading one when it does, else a window of
    the same bound around it. The window starts with ELLIPSIS, then the content from a word's
    start at most a fifth of the limit before the match (earlier when the content ends sooner,
    so that the window is full), cut as a leading excerpt is cut (excerpt, within `limit` - 1):
    at most `limit` code points in all, both ellipses included."""
    leading = excerpt(content, limit)
    shown = len(leading.text) - 1 if leading.truncated else len(leading.text)
    if match[1] <= shown:
        return leading
    earliest = max(1, min(match[0] - limit // 5, len(content) - (limit - 1)))
    start = _word_start_after(content, earliest, match[0])
    body = excerpt(content[start : start + limit], limit - 1)
    return Excerpt(ELLIPSIS + body.text, True, start)


def _word_start_after(content: str, earliest: int, latest: int) -> int:
    """Where a window of `content` from `earliest` starts: at the first word's start from there
    (after white space, before a plain character that is not), if one comes within
    WORD_BACKOFF_MAX and by `latest`; else at the first whole character's start from there (a
    long word, a URL, text written without spaces is entered where the window falls)."""
    for position in range(earliest, min(earliest + WORD_BACKOFF_MAX, latest) + 1):
        following = content[position]
        if content[position - 1].isspace() and _plain(following) and not following.isspace():
            return position
    for character in _CHARACTER.finditer(content, _cluster_start_before(content, earliest)):
        if character.start() >= earliest:
            return character.start()
    return latest


def _before_partial_word(content: str, end: int) -> str:
    """`content[:end]` without its trailing spaces, and without the start of a word the cut at
    `end` falls inside (a letter or digit follows the cut; punctuation after a whole word does
    not make it partial), if a space comes at most WORD_BACKOFF_MAX (and a fifth of `end`)
    before it and a plain character before that space (so no character that joins what
    follows, such as a Prepend mark, is left without it)."""
    kept = content[:end].rstrip()
    if len(kept) < end or end == 0 or not content[end].isalnum() or content[end - 1].isspace():
        return kept  # the cut is at a word's end already (before a space or punctuation)
    backoff = min(WORD_BACKOFF_MAX, end // 5)
    for position in range(end - 1, end - backoff - 1, -1):
        if content[position].isspace():
            shorter = content[:position].rstrip()
            return shorter if shorter and _plain(shorter[-1]) else kept
    return kept


# An extended grapheme cluster (Unicode Standard Annex #29): what a reader sees as one character.
_CHARACTER = regex.compile(r"\X")
# Segmenting from the start of a long body costs a regex match per character: the search starts
# instead at a boundary at most this far before the cut, found between two plain characters.
_SEGMENT_WINDOW = 256
# Plain characters: letters, digits, punctuation, spaces and math or currency signs, between
# which UAX #29 always breaks. Not symbols (So: emoji, flags; Sk: skin tones), marks, format
# characters (joiners), Hangul jamo (they join into syllables) nor the few letters that join.
_PLAIN_CLASSES, _PLAIN_SYMBOLS_AND_SPACE = ("L", "N", "P"), ("Sm", "Sc", "Zs")
_JAMO = ((0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF))
# Letters that join what follows (Prepend) or what precedes (Thai and Lao AM, spacing marks;
# the halfwidth katakana sound marks, extending).
_JOINING_LETTERS = (0x0D4E, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, 0x11D46, 0x11F02)
_JOINING = frozenset(
    chr(code)
    for code in (*_JOINING_LETTERS, *range(0x11A84, 0x11A8A), 0x0E33, 0x0EB3, 0xFF9E, 0xFF9F)
)


def _plain(character: str) -> bool:
    code = ord(character)
    category = unicodedata.category(character)
    return (
        (category.startswith(_PLAIN_CLASSES) or category in _PLAIN_SYMBOLS_AND_SPACE)
        and not any(low <= code <= high for low, high in _JAMO)
        and character not in _JOINING
    )


def _cluster_start_before(content: str, cut: int) -> int:
    """A grapheme cluster boundary at or before `cut`: between two plain characters within
    _SEGMENT_WINDOW of it, else the start."""
    for position in range(cut, max(0, cut - _SEGMENT_WINDOW), -1):
        if _plain(content[position - 1]) and _plain(content[position]):
            return position
    return 0


# The columns of a memory `m` that `MemoryExcerpt.row_fields` reads, in its order. The content is
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

    @property
    def current(self) -> bool:
        """In force: not since revised (a version's archive state is `status`, apart)."""
        return self.valid_to is None

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
            "overdue": is_overdue(
                due_at=row[11],
                commitment_status=row[8],
                valid_to=row[10],
                status=row[7],
                now=now,
            ),
        }
