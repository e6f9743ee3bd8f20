"""Bounds on tenant-written memory fields, enforced where data enters (the services call these
before any write). The database repeats the essential ones as CHECK constraints."""

from __future__ import annotations

import calendar
import itertools
import json
import re
import unicodedata
from collections.abc import Iterable, Sized
from datetime import UTC, date, datetime, time, timedelta, timezone

from memories.errors import InvalidInput

CONTENT_MAX = 2_000
TOPIC_MAX = 256
TAG_MAX = 64
TAGS_MAX = 32
# The tags a call may send before repeats are merged (TAGS_MAX counts them after): room for a
# list that repeats each tag in a few spellings, yet bounded work for a list of thousands.
TAGS_SENT_MAX = 256
SCOPE_MAX = 64
PROJECT_MAX = 256
THREAD_NAME_MAX = 100
# Longer than any spelling of a UUID (braces, urn:uuid: prefix): no memory id can be longer.
MEMORY_ID_MAX = 64
# The words of the memory browser's filter box (memories.browsing.filter_words): each one is one
# more match over every memory the account has.
FILTER_WORDS_MAX = 16
DEFAULT_SCOPE = "personal"
# The scope erasure gives every memory of an account (accounts/erasure.py), which counts it as
# empty (memories/account_indexes.py): no live memory may take it.
ERASED_SCOPE = "erased"
# The text erasure writes over a memory's substance: no live memory's content may be it (the
# unique index on live content leaves it out, and an erased memory holds no vector).
ERASED = "[erased]"
SCOPE_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SCOPE_PATTERN_SQL = r"^[a-z0-9]+(-[a-z0-9]+)*$"
# SCOPE_PATTERN in words, as every refusal of a scope says it.
SCOPE_RULE = "must be kebab-case: lowercase letters and digits separated by single hyphens"
# Instants from callers, in UTC: years PostgreSQL's timestamptz and Python's datetime both hold
# whatever offset they are later shown in (year 10000 is a valid timestamptz that psycopg cannot
# read back), and none before the Unix epoch, which no memory can be due at or recorded before.
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
INSTANT_RANGE = "1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"
_OUT_OF_RANGE = f"must be within {INSTANT_RANGE} after applying its UTC offset"
# RFC 3339 §5.6 offsets are hours and minutes; the zones in use span -12:00..+14:00.
MAX_UTC_OFFSET = timedelta(hours=14)

# A lone surrogate (a JSON `\u` escape can write one; json.loads pairs the others), or
# UNPAIRED_SURROGATE_MARK, which stands for one where a JSON parser that refuses them had to be
# given the text (mcp_gateway.wire, the 2025 wire).
_LONE_SURROGATES = "\ud800-\udfff"
LONE_SURROGATE = re.compile(f"[{_LONE_SURROGATES}]")
UNPAIRED_SURROGATE_MARK = "\ufffe"  # a noncharacter: never in text meant to be read
_SURROGATE = re.compile(f"[{_LONE_SURROGATES}{UNPAIRED_SURROGATE_MARK}]")


def unstorable_text(value: str) -> str | None:
    """Why PostgreSQL cannot store `value` as text, or None: its text types refuse NUL, and a
    lone surrogate (which a JSON `\\u` escape can produce) has no UTF-8 encoding."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if not value.isascii() and _SURROGATE.search(value):  # ASCII has none: skip the scan
        return "must not contain lone surrogates (invalid Unicode) or U+FFFE"
    return None


# Levels of lists and objects an argument may nest: the deepest schema has a few.
NESTING_MAX = 32


def text_problem_in(value: object, path: str = "") -> str | None:
    """The first string inside `value` (nested lists and objects, keys included) that cannot be
    stored, as '<path>: <why>', or None; also a nesting deeper than NESTING_MAX, which no
    argument has and which would otherwise exhaust the stack of the code walking it. The walk
    keeps its own stack, so any depth a JSON parser accepted is answered."""
    # (what, path, depth): what is ("value", v) or ("key", k)
    pending: list[tuple[str, object, str, int]] = [("value", value, path, 0)]
    while pending:
        kind, item, where, depth = pending.pop()
        if kind == "key":
            if isinstance(item, str) and (problem := unstorable_text(item)):
                return f"{where or 'object'} key {shown_key(item)!r}: {problem}"
        elif isinstance(item, str):
            if problem := unstorable_text(item):
                return f"{where or 'value'}: {problem}"
        elif isinstance(item, dict | list | tuple):
            if depth >= NESTING_MAX:
                return f"{where or 'value'}: nested more than {NESTING_MAX} levels deep"
            if isinstance(item, dict):
                children = []
                for key, child in item.items():
                    # A key may be huge: a made-up one is repeated in part, in a path too.
                    shown = shown_field_name(str(key))
                    key_path = f"{where}.{shown}" if where else shown
                    children += [("key", key, where, depth), ("value", child, key_path, depth + 1)]
            else:
                children = [
                    ("value", child, f"{where}[{index}]", depth + 1)
                    for index, child in enumerate(item)
                ]
            pending.extend(reversed(children))  # first child on top: checked in order
    return None


# How much of an object key (a name the sender may have made up) a refusal repeats.
SHOWN_KEY_MAX = 64


def shown_key(key: str) -> str:
    """A name the caller made up, as an error repeats it: cut past SHOWN_KEY_MAX."""
    return key if len(key) <= SHOWN_KEY_MAX else f"{key[:SHOWN_KEY_MAX]}…"


def shown_field_name(name: str) -> str:
    """A field name the caller sent, as a refusal names it: cut as shown_key, and quoted as
    JSON (invisible characters escaped) when it would not show as sent: empty, with white space
    or characters that show nothing at an end, or with a control character (`"": unknown field`
    names the field; `: unknown field` does not)."""
    shown = shown_key(name)
    if name and name.isprintable() and not _UNSEEN_ENDS.search(name):
        return shown
    return json.dumps(shown)


# White space, and the characters that show nothing, at either end of a text: Unicode's
# Default_Ignorable_Code_Point (soft hyphen, joiners and marks of direction, invisible operators,
# Hangul fillers, byte-order mark...) but for the variation selectors and tag characters, which
# end an emoji ("❤️" is a heart and U+FE0F) or a flag as it shows.
_UNSEEN = (
    r"\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u206f\u3164\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
)
_UNSEEN_ENDS = re.compile(f"^[{_UNSEEN}]+|[{_UNSEEN}]+$")


def trimmed(value: str) -> str:
    """A text in the one spelling names are stored and compared in: NFC, without white space or
    invisible characters at either end (see _text)."""
    return _UNSEEN_ENDS.sub("", unicodedata.normalize("NFC", value))


def caseless(value: str) -> str:
    """The key under which texts are one whatever their case and however they were typed:
    Unicode's canonical caseless match (Unicode 16.0, 3.13: NFD, full case folding, NFD), so
    "STRASSE" is "Straße" and "ΟΔΌΣ" is "Οδός"."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", value).casefold())


def _text(field: str, value: object, *, maximum: int, minimum: int = 1) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, "must be a string")
    if problem := unstorable_text(value):
        raise InvalidInput(field, problem)
    # One spelling per text: NFC (macOS input often arrives decomposed, NFD), so a thread name,
    # a duplicate or a filter value is the same whichever way it was typed; and no white space
    # or invisible character at either end ("launch" and "launch" + a zero-width space would be
    # two names that look one).
    sent = len(value)
    value = trimmed(value)
    # len() counts Unicode code points, which is what the limits are stated in.
    if len(value) < minimum:
        raise InvalidInput(field, f"must be at least {minimum} character(s) after trimming")
    if len(value) > maximum:
        # NFC spells a few characters in more code points (U+0958 as U+0915 U+093C): a text that
        # fit as sent may not, and the count is then not the sender's.
        grown = f" ({sent} as sent)" if sent <= maximum else ""
        raise InvalidInput(
            field,
            f"must be at most {maximum} characters (Unicode code points, in NFC) after "
            f"trimming; got {len(value)}{grown}",
        )
    return value


def clean_text(field: str, value: object, *, maximum: int) -> str:
    """Any other caller text (a search query, a handoff label): trimmed, 1..maximum."""
    return _text(field, value, maximum=maximum)


def clean_content(value: object) -> str:
    content = _text("content", value, maximum=CONTENT_MAX)
    if content == ERASED:
        raise InvalidInput("content", f"'{ERASED}' is reserved (erasure writes it)")
    return content


def clean_topic(value: object) -> str:
    return _text("topic", value, maximum=TOPIC_MAX)


def scope_refusal(value: object) -> str:
    """SCOPE_RULE, and the kebab-case form of `value` when it has one: a model that wrote
    "Work Notes" is shown "work-notes" rather than left to work the rule out."""
    if not isinstance(value, str):
        return SCOPE_RULE
    folded = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    kebab = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    if not kebab or len(kebab) > SCOPE_MAX or kebab == ERASED_SCOPE:
        return SCOPE_RULE
    return f"{SCOPE_RULE}, e.g. '{kebab}'"


def clean_scope(value: object, field: str = "scope") -> str:
    if value is None:
        return DEFAULT_SCOPE
    scope = _text(field, value, maximum=SCOPE_MAX)
    if not SCOPE_PATTERN.match(scope):
        raise InvalidInput(field, scope_refusal(scope))
    if scope == ERASED_SCOPE:
        raise InvalidInput(field, f"'{ERASED_SCOPE}' is reserved")
    return scope


def clean_project(value: object) -> str | None:
    if value is None:
        return None
    # Blank is refused as the schema refuses "": it would silently mean no project (and on a
    # revision, drop the one it had).
    return _text("project", value, maximum=PROJECT_MAX)


def clean_tags_as_sent(value: object) -> dict[str, int]:
    """The tags, in order, each with its index in the list the caller sent: a refusal of one
    names that index, not its place among the tags kept."""
    if value is None:
        return {}
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput("tags", "must be a list of strings")
    sent = list(itertools.islice(value, TAGS_SENT_MAX + 1))
    if len(sent) > TAGS_SENT_MAX:
        count = len(value) if isinstance(value, Sized) else f"more than {TAGS_SENT_MAX}"
        raise InvalidInput("tags", f"at most {TAGS_SENT_MAX} items; got {count}")
    tags: dict[str, int] = {}
    seen: set[str] = set()
    for index, tag in enumerate(sent):
        tag = _text(f"tags[{index}]", tag, maximum=TAG_MAX)
        # A repeated tag adds nothing, in any case ("Perf", "perf"): search and the memory
        # browser match tags caselessly, so a second spelling finds nothing the first does not.
        # The first spelling given is kept, and the bound counts the tags kept.
        if (key := caseless(tag)) not in seen:
            seen.add(key)
            tags[tag] = index
    if len(tags) > TAGS_MAX:
        raise InvalidInput(
            "tags",
            f"at most {TAGS_MAX} distinct tags (a tag repeated in any case counts once); "
            f"got {len(tags)}",
        )
    return tags


def clean_thread_name(value: object, field: str = "name") -> str:
    return _text(field, value, maximum=THREAD_NAME_MAX)


# The one form of an instant taken: RFC 3339's date-time (§5.6), what the schemas' `format:
# date-time` names and what every result gives back. The "T" and "Z" in either case and one
# space for the "T" (RFC 3339 allows both); the seconds always written; a fraction of the second
# after "." (digits past the sixth, finer than the microseconds stored, are dropped); an offset
# of hours and minutes. ISO 8601's other forms (week dates, the basic format 20261210T100000Z, an
# offset of hours alone +05 or +0530, a time without seconds, a decimal comma) are not taken:
# one form, read one way, that a client which checks the schema's format sends too. A year of
# more than 4 digits or with a sign (ISO 8601's expanded years) is read so as to be refused by
# the range.
_YEAR = r"(?P<year>[+-]?[0-9]{4,})"
_DATE = rf"(?P<date>{_YEAR}-(?P<month>[0-9]{{2}})-(?P<day>[0-9]{{2}}))"
_FULL_DATE = re.compile(_DATE)
_DATE_TIME = re.compile(
    rf"{_DATE}[Tt ](?P<time>(?P<hour>[0-9]{{2}}):(?P<minute>[0-9]{{2}}):(?P<second>[0-9]{{2}}))"
    r"(?:\.(?P<fraction>[0-9]+))?"
    r"(?P<offset>[Zz]|(?P<sign>[+-])(?P<offset_hours>[0-9]{2}):(?P<offset_minutes>[0-9]{2}))?"
)
# The form in words, as every refusal of one not taken names it.
DATE_TIME_FORM = (
    "YYYY-MM-DDTHH:MM:SS, a fraction of the second after '.' if any, and Z or an offset ±HH:MM"
)
# The instant a date alone is due at: its last in UTC, so that the commitment is overdue (due
# before now) from the next day on, never during the day it names.
END_OF_DAY = time(23, 59, 59, 999_999)
_EXAMPLE = "e.g. 2026-12-31T17:00:00Z"
_OR_A_DATE = ", or a date alone, YYYY-MM-DD (due by the end of that day, UTC)"
_OFFSET_RANGE = "UTC offset must be whole minutes within -14:00..+14:00"


def clean_datetime(field: str, value: object, *, end_of_day_dates: bool = False) -> datetime:
    """An instant from caller input, an aware datetime or an RFC 3339 date-time (_DATE_TIME),
    in UTC and within EARLIEST_INSTANT..LATEST_INSTANT. With `end_of_day_dates`, a date alone
    (YYYY-MM-DD) is the last instant of that day in UTC."""
    or_a_date = _OR_A_DATE if end_of_day_dates else ""
    if isinstance(value, datetime):
        return _in_range(field, value, or_a_date)
    written = value.strip() if isinstance(value, str) else value
    if not isinstance(written, str):
        raise InvalidInput(field, _not_a_date_time(written, or_a_date))
    if date_alone := _FULL_DATE.fullmatch(written):
        day = _calendar_date(field, date_alone, or_a_date)
        if not end_of_day_dates:
            # It would be the start of its day for one filter and the end for another.
            raise InvalidInput(
                field,
                f"must be a date-time with a UTC offset, {_EXAMPLE} (no date alone); "
                f"got {written!r}",
            )
        return _in_range(field, datetime.combine(day, END_OF_DAY, tzinfo=UTC), or_a_date)
    shape = _DATE_TIME.fullmatch(written)
    if shape is None:
        raise InvalidInput(field, _not_a_date_time(written, or_a_date))
    day = _calendar_date(field, shape, or_a_date)
    hour, minute, second = int(shape["hour"]), int(shape["minute"]), int(shape["second"])
    if second == 60:
        raise InvalidInput(
            field,
            f"has a leap second (:60), which is not taken; seconds run to 59, {_EXAMPLE}"
            f"{or_a_date}",
        )
    if hour > 23 or minute > 59 or second > 59:
        raise InvalidInput(
            field,
            f"{shape['time']} is no time of day: hours run to 23, minutes and seconds to 59; "
            f"{_EXAMPLE}{or_a_date}",
        )
    if shape["offset"] is None:
        raise InvalidInput(field, f"must include a UTC offset, {_EXAMPLE}{or_a_date}")
    offset = timedelta(0)
    if shape["sign"]:
        if int(shape["offset_minutes"]) > 59:
            raise InvalidInput(
                field,
                f"UTC offset {shape['offset']} is no hours and minutes: its minutes run to 59, "
                f"{_EXAMPLE}",
            )
        offset = timedelta(hours=int(shape["offset_hours"]), minutes=int(shape["offset_minutes"]))
        offset = -offset if shape["sign"] == "-" else offset
        if abs(offset) > MAX_UTC_OFFSET:
            raise InvalidInput(field, _OFFSET_RANGE)
    microsecond = int(f"{shape['fraction'] or ''}000000"[:6])
    instant = datetime.combine(
        day, time(hour, minute, second, microsecond), tzinfo=timezone(offset)
    )
    return _in_range(field, instant, or_a_date)


def _calendar_date(field: str, shape: re.Match, or_a_date: str) -> date:
    """The day `shape` (a _FULL_DATE or _DATE_TIME match) names, refused when it is out of
    range or not in the calendar."""
    if len(shape["year"]) != 4 or shape["year"] == "0000":
        # Year 0000 (ISO 8601's 1 BC, which Python's dates have not) and the expanded years are
        # before EARLIEST_INSTANT or after LATEST_INSTANT whatever the rest.
        raise InvalidInput(field, _OUT_OF_RANGE)
    year, month, day = int(shape["year"]), int(shape["month"]), int(shape["day"])
    try:
        return date(year, month, day)
    except ValueError:
        if 1 <= month <= 12:
            why = f"{year:04}-{month:02} has {calendar.monthrange(year, month)[1]} days"
        else:
            why = "months run from 01 to 12"
        raise InvalidInput(
            field, f"{shape['date']} does not exist ({why}); {_EXAMPLE}{or_a_date}"
        ) from None


def _in_range(field: str, value: datetime, or_a_date: str) -> datetime:
    """`value` in UTC, refused without an offset, with one past ±14:00 or out of range."""
    offset = value.utcoffset()
    if offset is None:
        raise InvalidInput(field, f"must include a UTC offset, {_EXAMPLE}{or_a_date}")
    if abs(offset) > MAX_UTC_OFFSET or offset % timedelta(minutes=1):
        raise InvalidInput(field, _OFFSET_RANGE)
    try:
        instant = value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:00:00-14:00 is in year 10000
        instant = None
    if instant is None or not EARLIEST_INSTANT <= instant <= LATEST_INSTANT:
        raise InvalidInput(field, _OUT_OF_RANGE)
    return instant


def _not_a_date_time(sent: object, or_a_date: str) -> str:
    """Why `sent`, in no form taken, is refused: the form, and today's date for words."""
    return (
        f"must be an RFC 3339 date-time, {DATE_TIME_FORM}, {_EXAMPLE}{or_a_date}"
        + _relative_word_note(sent)
    )


def _relative_word_note(sent: object) -> str:
    """For a date in words ('tomorrow', 'next Friday'): today's date, which a model that has no
    clock needs to write the date it means, and which the refusal would otherwise not give."""
    if not isinstance(sent, str) or not any(character.isalpha() for character in sent):
        return ""  # nothing in words: blank, or punctuation alone
    if any(character.isdigit() for character in sent):
        return ""  # a date, written in a form not taken
    today = datetime.now(UTC).date().isoformat()
    return f"; a date in words ('tomorrow') is not read: today is {today} in UTC"


def within_bounds(instant: datetime | None) -> datetime | None:
    """A stored instant brought within EARLIEST_INSTANT..LATEST_INSTANT (an old row may hold one
    outside): what a revision carries over of it, so that it passes clean_datetime."""
    if instant is None:
        return None
    return min(max(instant, EARLIEST_INSTANT), LATEST_INSTANT)


def clean_due_at(value: object, *, memory_type: str) -> datetime | None:
    if value is None:
        return None
    if memory_type != "commitment":
        raise InvalidInput("dueAt", "only a commitment can have a due date")
    return clean_datetime("dueAt", value, end_of_day_dates=True)
