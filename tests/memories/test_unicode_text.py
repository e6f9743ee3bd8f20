"""Text as people type it: one spelling per text (NFC), nothing invisible at its ends, and
excerpts that never cut a character that shows as one in two."""

import typing
import unicodedata

import pytest
from django.db.models import F, Value
from hypothesis import given, settings
from hypothesis import strategies as st

from memories.errors import Conflict, DuplicateMemory, InvalidInput
from memories.excerpts import WORD_BACKOFF_MAX, excerpt
from memories.models import Memory, Thread, ThreadNameKey, thread_name_key
from memories.services import record_memory
from memories.threads import create_thread, pin_thread

NFC, NFD = unicodedata.normalize("NFC", "Café"), unicodedata.normalize("NFD", "Café")


def test_a_thread_name_typed_decomposed_is_the_same_thread(tenant):
    assert NFC != NFD
    create_thread(owner=tenant, name=NFC)
    assert pin_thread(owner=tenant, name=NFD, pinned=True).name == NFC
    with pytest.raises(Conflict):
        create_thread(owner=tenant, name=NFD)
    assert Thread.objects.filter(owner=tenant).count() == 1


def test_the_same_content_typed_decomposed_is_a_duplicate(tenant):
    record_memory(owner=tenant, memory_type="note", topic="t", content=f"Lunch at {NFC}")
    with pytest.raises(DuplicateMemory):
        record_memory(owner=tenant, memory_type="note", topic="t", content=f"Lunch at {NFD}")


def test_a_text_that_nfc_lengthens_past_its_limit_is_refused_naming_both_counts(tenant):
    # U+0958 is a composition exclusion: NFC spells it U+0915 U+093C.
    with pytest.raises(InvalidInput) as refused:
        record_memory(owner=tenant, memory_type="note", topic="t", content="\u0958" * 1500)
    assert str(refused.value) == (
        "invalid_input: content: must be at most 2000 characters (Unicode code points, in NFC) "
        "after trimming; "
        "got 3000 (1500 as sent)"
    )
    assert not Memory.objects.exists()
    stored = record_memory(owner=tenant, memory_type="note", topic="t", content="\u0958" * 1000)
    assert stored.content == "\u0915\u093c" * 1000


def test_an_invisible_character_at_an_end_makes_no_other_name(tenant):
    create_thread(owner=tenant, name="launch")
    with pytest.raises(Conflict):
        create_thread(owner=tenant, name="launch\u200b")
    with pytest.raises(InvalidInput, match="at least 1 character"):
        create_thread(owner=tenant, name="\u200b\u200d\ufeff")


# A left-to-right mark, a soft hyphen, an invisible separator, a combining grapheme joiner, a
# Hangul filler: each shows nothing.
INVISIBLE = ["\u200e", "\u200f", "\u00ad", "\u2063", "\u034f", "\u3164"]


@pytest.mark.parametrize("invisible", INVISIBLE)
def test_a_text_of_invisible_characters_is_refused_and_one_at_an_end_makes_no_other(
    tenant, invisible
):
    kept = record_memory(owner=tenant, memory_type="fact", topic="db", content="We use PostgreSQL")
    with pytest.raises(DuplicateMemory):
        record_memory(
            owner=tenant, memory_type="fact", topic="db", content=f"We use PostgreSQL{invisible}"
        )
    with pytest.raises(InvalidInput, match="topic: must be at least 1 character"):
        record_memory(owner=tenant, memory_type="fact", topic=invisible, content="x")
    assert [m.id for m in Memory.objects.filter(owner=tenant)] == [kept.id]


def test_an_emoji_keeps_its_presentation_selector_at_an_end(tenant):
    memory = record_memory(
        owner=tenant, memory_type="note", topic="mood", content="love it \u2764\ufe0f"
    )
    assert memory.content.endswith("\u2764\ufe0f")


def test_an_excerpt_never_ends_in_half_a_flag_or_a_dangling_joiner():
    flags = excerpt("\U0001f1eb\U0001f1f7" * 400, 600).text  # 400 French flags
    assert flags.endswith("\U0001f1f7\u2026") and (len(flags) - 1) % 2 == 0
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    waving = "\U0001f44b\U0001f3fd"  # a waving hand and its skin tone
    for character in (family, waving, "e\u0301", "1\ufe0f\u20e3"):
        for shift in range(len(character) + 1):
            text = excerpt("a" * (599 - shift) + character + "x" * 20, 600).text
            # The whole character or none of it: a family cut after its second person would
            # show a couple, a hand cut before its tone another hand.
            assert text[:-1].lstrip("a") in ("", character), (character, shift, text[-6:])


def test_thread_names_saved_decomposed_before_are_composed_by_the_migration(tenant):
    """Migration 0015: a name saved in NFD before the services composed names is reachable by
    its name again; one whose composed form another thread already had is marked instead."""
    import importlib

    from django.db import connection

    from tests.factories import ThreadFactory

    migration = importlib.import_module("memories.migrations.0015_thread_names_nfc")
    lone = ThreadFactory(owner=tenant, name="Résumé")
    twin_nfc = ThreadFactory(owner=tenant, name=NFC)
    twin_nfd = ThreadFactory(owner=tenant, name="placeholder")
    with connection.cursor() as cursor:  # as an older server stored them, under its index
        cursor.execute("DROP INDEX thread_unique_name")
        cursor.execute(
            "UPDATE memories_thread SET name = %s WHERE id = %s",
            [unicodedata.normalize("NFD", "Résumé"), lone.id],
        )
        cursor.execute("UPDATE memories_thread SET name = %s WHERE id = %s", [NFD, twin_nfd.id])
        cursor.execute(migration.FORWARD)
    assert pin_thread(owner=tenant, name="Résumé", pinned=True).id == lone.id
    assert pin_thread(owner=tenant, name=NFC, pinned=True).id == twin_nfc.id
    twin_nfd.refresh_from_db()
    assert twin_nfd.name == f"{NFC} (renamed)"


@pytest.mark.parametrize(
    ("name", "in_capitals"),
    [
        ("\u039f\u03b4\u03cc\u03c2", "\u039f\u0394\u038c\u03a3"),
        ("Stra\u00dfe", "STRASSE"),
        # Capitals whose lower case decomposes: lower() of the capital is not the name.
        ("\u03c0\u03c1\u03bf\u0390\u03c3\u03c4\u03bf\u03c1\u03af\u03b1",
         "\u03a0\u03a1\u039f\u03aa\u0301\u03a3\u03a4\u039f\u03a1\u038a\u0391"),
        ("\u01f0ob", "J\u030cOB"),
    ],
)  # fmt: skip
def test_a_name_in_capitals_is_the_same_thread_where_lower_case_has_no_one_letter_capital(
    tenant, name, in_capitals
):
    """The Greek final sigma and the German sharp s: "ΟΔΌΣ" is "Οδός", "STRASSE" is "Straße";
    "ΠΡΟΪ́ΣΤΟΡΊΑ" is "προΐστορία"."""
    assert unicodedata.normalize("NFC", in_capitals) == unicodedata.normalize("NFC", name.upper())
    create_thread(owner=tenant, name=name)
    assert pin_thread(owner=tenant, name=in_capitals, pinned=True).name == name
    with pytest.raises(Conflict):
        create_thread(owner=tenant, name=in_capitals)


def test_names_alike_under_the_new_comparison_are_marked_by_the_migration(tenant):
    """Migration 0016 builds the folded unique index; two names it finds alike (possible before
    it) first get the later one's name marked."""
    import importlib

    from django.db import connection

    from tests.factories import ThreadFactory

    migration = importlib.import_module("memories.migrations.0016_thread_names_compare_folded")
    first = ThreadFactory(owner=tenant, name="Stra\u00dfe")
    later = ThreadFactory(owner=tenant, name="placeholder")
    with connection.cursor() as cursor:  # the old index told them apart; this one would not
        cursor.execute("DROP INDEX thread_unique_name")
        cursor.execute("UPDATE memories_thread SET name = 'STRASSE' WHERE id = %s", [later.id])
        cursor.execute(migration.MARK_ALIKE)
    first.refresh_from_db()
    later.refresh_from_db()
    assert first.name == "Stra\u00dfe"
    assert later.name == f"STRASSE ({str(later.id)[:8]})"


def test_names_compare_alike_whatever_the_databases_locale(tenant):
    """A database created under the C locale folds ASCII only in lower(): the comparison names
    its collation, so "Équipe" and "équipe" are one thread there too."""
    from django.db import connection

    with connection.cursor() as cursor:  # the collation a C-locale database gives the column
        cursor.execute(
            'ALTER TABLE memories_thread ALTER COLUMN name TYPE varchar(100) COLLATE "C"'
        )
    create_thread(owner=tenant, name="\u00c9quipe")
    with pytest.raises(Conflict):
        create_thread(owner=tenant, name="\u00e9quipe")
    assert pin_thread(owner=tenant, name="\u00c9QUIPE", pinned=True).name == "\u00c9quipe"


def test_the_name_key_is_taken_of_a_name_column_or_a_name_value():
    assert typing.get_type_hints(thread_name_key) == {
        "name": F | Value,
        "return": ThreadNameKey,
    }


@pytest.mark.parametrize(
    "prefix", ["\u00e9qu", unicodedata.normalize("NFD", "\u00c9qu"), "STRASS", "stra\u00df"]
)
def test_a_thread_name_completes_from_a_prefix_as_names_compare(tenant, prefix):
    from memories.environment import facet_values

    for name in ("\u00c9quipe", "Stra\u00dfe", "Strand"):
        create_thread(owner=tenant, name=name)
    expected = ["Stra\u00dfe"] if prefix.lower().startswith("stra") else ["\u00c9quipe"]
    assert facet_values(owner_id=tenant.pk, facet="thread", prefix=prefix) == expected


def test_names_alike_made_at_once_are_each_marked_apart_by_the_migration(tenant):
    """Four names alike under the canonical caseless match (the ligatures fold), made within the
    same minute (their ids start alike): each later one gets a mark of its own, and the index
    builds."""
    import importlib

    from django.db import connection

    from tests.factories import ThreadFactory

    migration = importlib.import_module("memories.migrations.0017_thread_names_fold_canonically")
    names = ["\ufb01\ufb02 notes", "fi\ufb02 notes", "\ufb01fl notes", "fifl notes"]
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX thread_unique_name")  # as an older index told them apart
    threads = [ThreadFactory(owner=tenant, name=name) for name in names]
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred checks before the index
        cursor.execute(migration.MARK_ALIKE)
        key = migration.KEY.format(name="name")
        cursor.execute(
            f"CREATE UNIQUE INDEX thread_unique_name ON memories_thread (owner_id, ({key}))"
        )
    for thread in threads:
        thread.refresh_from_db()
    assert [t.name for t in threads] == [names[0]] + [
        f"{n} ({t.id})" for n, t in zip(names[1:], threads[1:], strict=True)
    ]


@pytest.mark.parametrize(
    "name",
    # Letters of Unicode 16.0, which the database folds and Python 3.12 (Unicode 15.0) does not.
    ["\U00010d50\U00010d70 plans", "\ua7cb plans"],
)
def test_a_thread_name_completes_from_itself_whatever_unicode_version_python_has(tenant, name):
    from memories.environment import facet_values

    create_thread(owner=tenant, name=name)
    assert facet_values(owner_id=tenant.pk, facet="thread", prefix=name) == [name]


def test_names_alike_under_the_canonical_caseless_match_are_marked_by_the_migration(tenant):
    """Migration 0017 builds the unique index on the canonical caseless key; two names it finds
    alike (possible before it) first get the later one's name marked."""
    import importlib

    from django.db import connection

    from tests.factories import ThreadFactory

    migration = importlib.import_module("memories.migrations.0017_thread_names_fold_canonically")
    small = "\u03c0\u03c1\u03bf\u0390\u03c3\u03c4\u03bf\u03c1\u03af\u03b1"
    first = ThreadFactory(owner=tenant, name=small)
    later = ThreadFactory(owner=tenant, name="placeholder")
    capital = unicodedata.normalize("NFC", small.upper())
    with connection.cursor() as cursor:  # the old index told them apart; this one would not
        cursor.execute("DROP INDEX thread_unique_name")
        cursor.execute("UPDATE memories_thread SET name = %s WHERE id = %s", [capital, later.id])
        cursor.execute(migration.MARK_ALIKE)
    first.refresh_from_db()
    later.refresh_from_db()
    assert first.name == small
    assert later.name == f"{capital} ({later.id})"


# Pieces of text that join into one character in every way UAX #29 knows: emoji sequences,
# skin tones, flags, keycaps, combining marks, Hangul jamo, Indic conjuncts and vowel signs,
# Thai AM, halfwidth katakana marks, CR LF; and plain letters, spaces and CJK between them.
PIECES = [
    "a", "b", " ", "\u6570", "\u0915", "\u094d", "\u0937", "\u093f", "\u1112", "\u1161",
    "\u11ab", "\ud55c", "\U0001f468", "\u200d", "\U0001f469", "\U0001f3fd", "\U0001f1eb",
    "\U0001f1f7", "\u0301", "\ufe0f", "\u20e3", "\u0e01", "\u0e33", "\uff76", "\uff9e", "\r",
    "\n", "\u0d4e",
]  # fmt: skip


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=90), st.integers(3, 40))
def test_an_excerpt_keeps_whole_characters_only(pieces, limit):
    import regex

    content = "".join(pieces)
    cut = excerpt(content, limit)
    if len(content) <= limit:
        assert (cut.text, cut.truncated) == (content, False)
        return
    # What segmenting the whole body from its start keeps (UAX #29, extended grapheme clusters).
    whole = [c.end() for c in regex.finditer(r"\X", content, endpos=limit) if c.end() < limit]
    kept = content[: whole[-1] if whole else 0].rstrip()
    assert cut.text.endswith("\u2026") and len(cut.text) <= limit and cut.truncated
    text = cut.text[:-1]
    if text != kept:
        # The partial word at the cut given up (tests/memories/test_excerpts.py): the text ends
        # before a space near the cut, on a boundary of whole characters.
        assert kept.startswith(text) and content[len(text)].isspace(), (content, limit, text)
        assert len(text) in whole and len(kept) - len(text) <= WORD_BACKOFF_MAX
