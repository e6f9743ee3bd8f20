"""Every bound on tenant-written fields: enforced on the way in, with a message naming the field
and the limit, and nothing written."""

import unicodedata
from datetime import UTC, datetime

import pytest

from memories.bounds import clean_datetime
from memories.browsing import containing
from memories.errors import InvalidInput
from memories.models import Memory, is_overdue
from memories.search import clean_filters, search_memories
from memories.services import record_memory


def remember_note(owner, **overrides):
    fields = {"memory_type": "note", "topic": "t", "content": "c"} | overrides
    return record_memory(owner=owner, **fields)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"content": ""}, "content", "at least 1"),
        ({"content": "   \n\t "}, "content", "at least 1"),
        ({"content": "x" * 2001}, "content", "at most 2000 characters (Unicode code points, in"),
        ({"content": 42}, "content", "must be a string"),
        # What erasure writes: a live copy would escape the duplicate check and hold no vector.
        ({"content": " [erased] "}, "content", "'[erased]' is reserved"),
        ({"content": "a\x00b"}, "content", "NUL"),
        ({"topic": ""}, "topic", "at least 1"),
        ({"topic": "t" * 257}, "topic", "at most 256"),
        ({"scope": "Not Kebab"}, "scope", "kebab-case"),
        ({"scope": "trailing-"}, "scope", "kebab-case"),
        ({"scope": "a" * 65}, "scope", "at most 64"),
        ({"scope": "erased"}, "scope", "'erased' is reserved"),
        ({"project": "p" * 257}, "project", "at most 256"),
        # As "" is: blank would mean no project (on a revision, dropping the one it had).
        ({"project": "  "}, "project", "at least 1"),
        ({"tags": [f"t{i}" for i in range(33)]}, "tags", "at most 32 distinct tags"),
        # However few they fold to: the list sent is bounded too, so the work is.
        ({"tags": ["a"] * 257}, "tags", "at most 256 items; got 257"),
        ({"tags": ["ok", "x" * 65]}, "tags[1]", "at most 64"),
        ({"tags": ["ok", "  "]}, "tags[1]", "at least 1"),
        ({"tags": "not-a-list"}, "tags", "list of strings"),
        ({"memory_type": "rumour"}, "memoryType", "must be one of: decision, commitment"),
    ],
)
def test_out_of_bounds_input_is_rejected_and_writes_nothing(tenant, overrides, field, fragment):
    with pytest.raises(InvalidInput) as error:
        remember_note(tenant, **overrides)
    assert error.value.field == field
    assert fragment in str(error.value)
    assert str(error.value).startswith(f"invalid_input: {field}:")
    assert not Memory.objects.exists()


def test_content_limit_counts_code_points_not_bytes(tenant):
    emoji = "\N{BRAIN}"  # 4 bytes in UTF-8, one code point
    memory = remember_note(tenant, content=emoji * 2000)
    assert memory.content_length == 2000
    with pytest.raises(InvalidInput, match="got 2001"):
        remember_note(tenant, content=emoji * 2001)


def test_strings_are_trimmed_and_defaults_applied(tenant):
    memory = remember_note(
        tenant, topic="  launch  ", content="\n  ship it \t", tags=[" a ", "a", "b"]
    )
    memory.refresh_from_db()
    assert (memory.topic, memory.content, memory.content_length) == ("launch", "ship it", 7)
    assert memory.tags == ["a", "b"]
    assert memory.scope == "personal"
    assert memory.project is None


def test_tags_differing_only_in_case_or_typing_are_stored_once_as_first_given(tenant):
    decomposed = unicodedata.normalize("NFD", "Café")
    memory = remember_note(
        tenant,
        content="p99 regressed after the upgrade",
        tags=["Perf", "perf", "PERF", "café", decomposed, "CAFÉ", "Straße", "STRASSE", "ops"],
    )
    memory.refresh_from_db()
    assert memory.tags == ["Perf", "café", "Straße", "ops"]
    # Read caselessly as before: the one spelling kept is found by another.
    assert list(containing(Memory.objects.owned_by(tenant), "perf")) == [memory]
    hits = search_memories(
        owner_id=tenant.pk, query="PERF", filters=clean_filters(), limit=5, cursor=None
    ).hits
    assert [hit.id for hit in hits] == [memory.id]


def test_tags_are_counted_against_their_limit_once_in_any_case(tenant):
    tags = [f"t{i}" for i in range(32)] + ["T0"]
    memory = remember_note(tenant, tags=tags)
    memory.refresh_from_db()
    assert memory.tags == tags[:32]


def test_a_list_of_tags_at_its_sent_limit_is_kept_once_per_tag(tenant):
    tags = [f"t{i % 2}" if i % 4 < 2 else f"T{i % 2}" for i in range(256)]
    memory = remember_note(tenant, tags=tags)
    memory.refresh_from_db()
    assert memory.tags == ["t0", "t1"]


def test_limits_themselves_are_accepted(tenant):
    memory = remember_note(
        tenant,
        content="c" * 2000,
        topic="t" * 256,
        scope="s" * 64,
        project="p" * 256,
        tags=[f"{i:02d}" + "x" * 62 for i in range(32)],
    )
    memory.refresh_from_db()
    assert memory.content_length == 2000 and len(memory.tags) == 32


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        # Year 10000 once in UTC: PostgreSQL would store it, psycopg could not read it back.
        ("9999-12-31T23:59:59-14:00", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("9999-12-31T23:00:00-01:00", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("1969-12-31T23:59:59Z", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("1970-01-01T13:00:00+14:00", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("0001-01-01T00:00:00Z", "within 1970-01-01T00:00:00Z"),
        # Year 0000, which Python's dates have not, is as far out of range as year 0001.
        ("0000-01-01T00:00:00Z", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("0000-12-31T23:00:00-14:00", "within 1970-01-01T00:00:00Z"),
        ("2026-06-01T12:00:00+14:01", "UTC offset must be whole minutes within -14:00..+14:00"),
        ("2026-06-01T12:00:00-15:00", "UTC offset must be whole minutes within -14:00..+14:00"),
        ("2026-06-01T12:00:00+05:30:15", "must be an RFC 3339 date-time"),
        ("2026-06-01T12:00:00", "must include a UTC offset"),
    ],
)
def test_instants_out_of_range_or_with_odd_offsets_are_refused(tenant, value, fragment):
    with pytest.raises(InvalidInput) as error:
        remember_note(tenant, memory_type="commitment", due_at=value)
    assert error.value.field == "dueAt"
    assert fragment in str(error.value)
    assert str(error.value).startswith("invalid_input: dueAt: ")
    assert not Memory.objects.exists()


FORM_REFUSAL = (
    "must be an RFC 3339 date-time, YYYY-MM-DDTHH:MM:SS, a fraction of the second after '.' if "
    "any, and Z or an offset ±HH:MM, e.g. 2026-12-31T17:00:00Z"
)


@pytest.mark.parametrize(
    "value",
    [
        # ISO 8601's other forms: a week date, the basic format, an offset of hours alone or
        # without its colon, a time without its seconds or minutes, a decimal comma.
        "2026-W50",
        "20261210",
        "2026-W50-1T10:00:00Z",
        "2026-344T10:00:00Z",
        "20261210T100000Z",
        "2026-12-10T10:00:00+05",
        "2026-12-10T10:00:00+0530",
        "2026-12-10T10:00:00.5+0100",
        "2026-12-10T10:00Z",
        "2026-12-10T10Z",
        "2026-12-10T10:00:00,5Z",
        # What Python's reader would read otherwise than written: a fraction of the hour or of
        # the minute as one of the second, a character between the time and its offset left
        # out, an offset's seconds.
        "2026-12-10T10.5Z",
        "2026-12-10T10:30.5Z",
        "2026-12-10T10:00:00!Z",
        "2026-12-10T10:00:00 Z",
        "2026-12-10T10:00:00.Z",
        "2026-12-10T10:00:00zz",
        "2026-12-10T10:00:00+01:00:60",
        "2026-12-10T10:00:00+0099",
        # Digits of another script, which Python's int() would read.
        "\uff12\uff10\uff12\uff16-12-10T10:00:00Z",
    ],
)
@pytest.mark.parametrize(
    ("field", "end_of_day_dates", "or_a_date"),
    [
        ("recordedAfter", False, ""),
        ("dueAt", True, ", or a date alone, YYYY-MM-DD (due by the end of that day, UTC)"),
    ],
)
def test_an_instant_in_a_form_not_taken_is_refused_naming_the_one_taken(
    value, field, end_of_day_dates, or_a_date
):
    """One form, RFC 3339's date-time, read one way: what the schema's `format: date-time`
    names, and what a client that checks it sends."""
    with pytest.raises(InvalidInput) as refused:
        clean_datetime(field, value, end_of_day_dates=end_of_day_dates)
    assert str(refused.value) == f"invalid_input: {field}: {FORM_REFUSAL}{or_a_date}"


def test_an_offsets_minutes_run_to_59():
    """Python's reader takes +01:60 as +02:00: refused instead."""
    with pytest.raises(InvalidInput) as refused:
        clean_datetime("recordedAfter", "2026-12-10T10:00:00+01:60")
    assert str(refused.value) == (
        "invalid_input: recordedAfter: UTC offset +01:60 is no hours and minutes: its minutes "
        "run to 59, e.g. 2026-12-31T17:00:00Z"
    )


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("2026-12-10T10:00:00+01:59", datetime(2026, 12, 10, 8, 1, tzinfo=UTC)),
        ("2026-12-10T10:00:00.5+01:00", datetime(2026, 12, 10, 9, 0, 0, 500_000, tzinfo=UTC)),
        # RFC 3339 §5.6: a space for the "T", and "t" and "z" in lower case.
        ("2026-12-10 10:00:00.25Z", datetime(2026, 12, 10, 10, 0, 0, 250_000, tzinfo=UTC)),
        ("2026-12-10t10:00:00-00:00", datetime(2026, 12, 10, 10, tzinfo=UTC)),
        (" 2026-12-10T10:00:00z\n", datetime(2026, 12, 10, 10, tzinfo=UTC)),
        # Digits past the sixth are finer than the microseconds stored: dropped, not rounded.
        ("2026-12-10T10:00:00.123456789Z", datetime(2026, 12, 10, 10, 0, 0, 123_456, tzinfo=UTC)),
        ("2026-12-10T10:00:00.9999999Z", datetime(2026, 12, 10, 10, 0, 0, 999_999, tzinfo=UTC)),
    ],
)
def test_instants_in_rfc_3339s_spellings_are_read_as_written(value, stored):
    assert clean_datetime("recordedAfter", value) == stored


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("9999-12-31T23:59:59.999999Z", datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
        ("9999-12-31T23:59:59+00:00", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("1970-01-01T00:00:00Z", datetime(1970, 1, 1, tzinfo=UTC)),
        ("1970-01-01T14:00:00+14:00", datetime(1970, 1, 1, tzinfo=UTC)),
        ("2026-06-01T00:00:00-12:00", datetime(2026, 6, 1, 12, tzinfo=UTC)),
        ("2026-06-01T05:30:00+05:30", datetime(2026, 6, 1, tzinfo=UTC)),
        # RFC 3339 §5.6: the "T" and "Z" may be lower case.
        ("2026-12-31t17:00:00z", datetime(2026, 12, 31, 17, tzinfo=UTC)),
    ],
)
def test_instants_at_the_limits_are_stored_and_read_back_in_utc(tenant, value, stored):
    memory = remember_note(tenant, memory_type="commitment", due_at=value)
    assert Memory.objects.get(pk=memory.pk).due_at == stored


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("2026-12-10", datetime(2026, 12, 10, 23, 59, 59, 999_999, tzinfo=UTC)),
        ("2028-02-29", datetime(2028, 2, 29, 23, 59, 59, 999_999, tzinfo=UTC)),
        ("1970-01-01", datetime(1970, 1, 1, 23, 59, 59, 999_999, tzinfo=UTC)),
        ("9999-12-31", datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
    ],
)
def test_a_due_date_alone_is_due_by_the_end_of_that_day_in_utc(tenant, value, stored):
    """ "Due on the 10th": the commitment is due until the day is over, in UTC."""
    memory = remember_note(tenant, memory_type="commitment", due_at=value)
    assert Memory.objects.get(pk=memory.pk).due_at == stored


def test_a_commitment_due_on_a_date_is_overdue_from_the_next_day_only(tenant):
    """As briefing and search tell it (a due date before now): never during the day named."""
    memory = remember_note(tenant, memory_type="commitment", due_at="2026-12-10")
    due_at = Memory.objects.get(pk=memory.pk).due_at
    for now, overdue in [
        (datetime(2026, 12, 10, tzinfo=UTC), False),
        (datetime(2026, 12, 10, 23, 59, 59, 999_999, tzinfo=UTC), False),
        (datetime(2026, 12, 11, tzinfo=UTC), True),
    ]:
        overdue_then = is_overdue(
            due_at=due_at, commitment_status="open", valid_to=None, status="active", now=now
        )
        assert overdue_then is overdue, now


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("2026-02-30", "2026-02-30 does not exist (2026-02 has 28 days)"),
        ("2026-13-01", "2026-13-01 does not exist (months run from 01 to 12)"),
        ("0000-01-01", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
        ("tomorrow", "must be an RFC 3339 date-time"),
        ("2026-12-10T17:00:00", "must include a UTC offset"),
        ("10/12/2026", "must be an RFC 3339 date-time"),
        ("1969-12-31", "within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z"),
    ],
)
def test_a_due_date_that_is_neither_form_is_refused_naming_both(tenant, value, fragment):
    with pytest.raises(InvalidInput) as error:
        remember_note(tenant, memory_type="commitment", due_at=value)
    assert error.value.field == "dueAt"
    assert fragment in str(error.value)
    if "within" not in fragment:
        assert "e.g. 2026-12-31T17:00:00Z, or a date alone, YYYY-MM-DD" in str(error.value)
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "2026-12-07T16:49:60Z",
            "asOf: has a leap second (:60), which is not taken; seconds run to 59, e.g. "
            "2026-12-31T17:00:00Z",
        ),
        (
            "2026-12-07T16:49:59+25:00",
            "asOf: UTC offset must be whole minutes within -14:00..+14:00",
        ),
        (
            "2026-02-30T10:00:00Z",
            "asOf: 2026-02-30 does not exist (2026-02 has 28 days); e.g. 2026-12-31T17:00:00Z",
        ),
        (
            "2028-04-31T10:00:00Z",
            "asOf: 2028-04-31 does not exist (2028-04 has 30 days); e.g. 2026-12-31T17:00:00Z",
        ),
        (
            "2026-12-07T24:10:00Z",
            "asOf: 24:10:00 is no time of day: hours run to 23, minutes and seconds to 59; e.g. "
            "2026-12-31T17:00:00Z",
        ),
        # A date alone, which these instants do not take, but first: there is no such day.
        (
            "2026-02-29",
            "asOf: 2026-02-29 does not exist (2026-02 has 28 days); e.g. 2026-12-31T17:00:00Z",
        ),
        (
            "2026-13-01",
            "asOf: 2026-13-01 does not exist (months run from 01 to 12); e.g. 2026-12-31T17:00:00Z",
        ),
        (
            "10000-01-01T00:00:00Z",
            "asOf: must be within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z after "
            "applying its UTC offset",
        ),
        (
            "+12026-01-01T00:00:00Z",
            "asOf: must be within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z after "
            "applying its UTC offset",
        ),
        (
            "0000-01-01T00:00:00Z",
            "asOf: must be within 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z after "
            "applying its UTC offset",
        ),
    ],
)
def test_a_date_time_out_of_range_is_refused_naming_what_is_out(value, error):
    """A date-time that has the shape of one but cannot be read is told what of it is out of
    range (the schema's description names both bounds), not that it is no date-time."""
    with pytest.raises(InvalidInput) as refused:
        clean_datetime("asOf", value)
    assert str(refused.value) == f"invalid_input: {error}"


@pytest.mark.parametrize(
    ("field", "value", "end_of_day_dates"),
    [
        ("dueAt", "tomorrow", True),
        ("dueAt", "next Friday", True),
        ("recordedAfter", "yesterday", False),
    ],
)
def test_a_date_in_words_is_refused_with_todays_date(field, value, end_of_day_dates):
    """A model without a clock cannot turn 'tomorrow' into a date: the refusal gives today's."""
    before = datetime.now(UTC).date().isoformat()
    with pytest.raises(InvalidInput) as error:
        clean_datetime(field, value, end_of_day_dates=end_of_day_dates)
    after = datetime.now(UTC).date().isoformat()  # the same but across midnight
    assert any(
        str(error.value).endswith(
            f"; a date in words ('tomorrow') is not read: today is {today} in UTC"
        )
        for today in (before, after)
    )


@pytest.mark.parametrize("value", ["10/12/2026", "", " - "])
def test_a_date_not_in_words_is_refused_without_todays_date(value):
    with pytest.raises(InvalidInput) as error:
        clean_datetime("dueAt", value, end_of_day_dates=True)
    assert "today is" not in str(error.value)


@pytest.mark.parametrize("field", ["asOf", "recordedAfter", "recordedBefore"])
def test_a_date_alone_is_no_instant_for_the_search_filters(tenant, field):
    """A date alone would be the start of its day for one filter and the end for another: only
    a due date takes it."""
    with pytest.raises(InvalidInput) as error:
        clean_datetime(field, "2026-12-10")
    assert str(error.value) == (
        f"invalid_input: {field}: must be a date-time with a UTC offset, e.g. "
        "2026-12-31T17:00:00Z (no date alone); got '2026-12-10'"
    )


@pytest.mark.parametrize(
    ("keyword", "field"),
    [
        ("recorded_after", "recordedAfter"),
        ("recorded_before", "recordedBefore"),
        ("as_of", "asOf"),
        ("resolved_after", "resolvedAfter"),
    ],
)
def test_year_zero_is_refused_by_the_range_in_every_search_filter(keyword, field):
    """ISO 8601's year 0000 is a year of the calendar: it is out of range, as 1969 is, and the
    refusal names the range a model can pick another instant from."""
    with pytest.raises(InvalidInput) as error:
        clean_filters(**{keyword: "0000-01-01T00:00:00Z"})
    assert str(error.value) == (
        f"invalid_input: {field}: must be within "
        "1970-01-01T00:00:00Z..9999-12-31T23:59:59.999999Z after applying its UTC offset"
    )
