"""Search quality and paging, on the real PostgreSQL full-text and trigram machinery."""

import json
import random
import string
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from memories import account_indexes, bounds, tenancy
from memories.errors import InvalidInput, NotFound
from memories.models import Memory, StoredVectors
from memories.search import (
    CURSOR_MAX,
    NO_MATCH,
    NOTHING_LISTED,
    NOTHING_RECORDED_BY,
    NOTHING_STORED,
    NOTHING_TO_SEARCH_BY,
    QUERY_MAX,
    TOPIC_FALLBACK_WORDS_MAX,
    TOPIC_SIMILARITY_MIN,
    UNDER_FLOOR,
    EmptyBecause,
    KindAsked,
    candidates,
    clean_filters,
    listing,
    scoring,
    search_memories,
    sql,
)
from memories.search.cursor import CURSOR_MAX_AGE, Position, _opened, _sealed
from memories.search.query import CJK_PAIRS_MAX, _cjk_paired, parse
from memories.services import archive_memory, record_memory, resolve_commitment, revise_memory
from memories.threads import add_thread_members, create_thread, delete_thread
from tests.factories import MemoryFactory, UserFactory, insert_memory_as_once_stored
from tests.memories.conftest import (
    as_never_analyzed,
    bury_under_recent_notes,
    explain_as_sent,
    patch_search,
    search_statement,
)


def run(owner, query, **kwargs):
    limit = kwargs.pop("limit", 5)
    cursor = kwargs.pop("cursor", None)
    return search_memories(
        owner_id=owner.pk, query=query, filters=clean_filters(**kwargs), limit=limit, cursor=cursor
    )


@pytest.fixture
def corpus(tenant):
    notes = [
        ("decision", "Database", "We chose PostgreSQL 18 for the memory store."),
        ("fact", "Coffee", "The office café serves espresso until 4 pm."),
        ("preference", "Editor", "Prefers Neovim with a dark theme."),
        ("note", "Deploy", "Deploys go out on Tuesdays after the database backup."),
        ("blocker", "Payments", "Stripe webhooks fail signature checks in staging."),
    ]
    return {
        topic: record_memory(owner=tenant, memory_type=kind, topic=topic, content=content)
        for kind, topic, content in notes
    }


@pytest.fixture
def buried_decision(tenant):
    """An old decision behind the account's four most recent memories, which are notes."""
    return bury_under_recent_notes(
        tenant, memory_type="decision", content="We renew the zeppelin hangar lease in March."
    )


def test_a_long_memory_keeps_its_words_and_vector_in_its_row(tenant, settings):
    """A search reads a candidate's search vector and embedding from the row itself, not from
    the TOAST table once per full-text match (migration memories/0014)."""
    settings.SEARCH_EMBEDDER = "wordllama"  # the default: a vector is written with the row
    rng = random.Random(14)
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(400))
    content = " ".join(words)[: bounds.CONTENT_MAX]
    memory = record_memory(
        owner=tenant, memory_type="fact", topic="Reconciliation", content=content
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(search_vector), pg_column_compression(search_vector),"
            " pg_column_toast_chunk_id(embedding), embedding IS NOT NULL"
            " FROM memories_memory WHERE id = %s",
            [memory.id],
        )
        assert cursor.fetchone() == (None, None, None, True)


def test_the_relevant_memory_ranks_first(tenant, corpus):
    hits = run(tenant, "postgresql database").hits
    assert hits[0].id == corpus["Database"].id
    # The topic match ranks the database decision above the deploy note that mentions databases.
    assert [hit.id for hit in run(tenant, "database").hits][:2] == [
        corpus["Database"].id,
        corpus["Deploy"].id,
    ]


RELEASE_PROCESS = (
    "How we ship the iOS and Android apps. Releases are cut every second Wednesday from the main "
    "branch: the release captain creates the release branch in the morning and bumps the version "
    "in both apps with the bump script, which also writes the changelog from the merged pull "
    "requests' labels. From the branch, CI builds a TestFlight build and an internal track build "
    "on Google Play; QA runs the smoke checklist (login, checkout with a test card, push "
    "notifications, deep links, offline mode) on two iPhones and two Android phones, one old and "
    "one new of each. Only fixes for bugs found in that pass are cherry-picked onto the branch; "
    "anything else waits for the next train. On Thursday, if the checklist is green, the captain "
    "submits to App Review and promotes the Android build to a 10% staged rollout. We watch the "
    "crash-free sessions rate for 48 hours: above 99.5% we go to 100% on Android and release on "
    "iOS by hand; below, the captain halts the rollout and the fix goes out as a patch release "
    "through the same steps. Hotfixes outside the train need the approval of the mobile lead."
)


def test_a_long_memory_that_answers_outranks_short_ones_sharing_its_words(tenant, settings):
    """A long memory is not held under short ones that merely mention the question's words: its
    length does not keep cutting what each word it holds weighs. A question a short memory
    answers still finds that one first."""
    settings.SEARCH_EMBEDDER = "wordllama"  # the default: words and meaning
    process = record_memory(
        owner=tenant, memory_type="pattern", topic="Mobile release process", content=RELEASE_PROCESS
    )
    notes = {
        topic: record_memory(owner=tenant, memory_type="fact", topic=topic, content=content)
        for topic, content in [
            ("Mobile app version", "The current phone app version is 4.12 on both stores."),
            ("New version of the API", "The public API v2 ships in Q3; v1 stays a year."),
            ("Remote hires", "We ship equipment to remote new hires a week before they start."),
            ("Phone support", "Phone support is open from 9 to 17 on weekdays."),
            ("Same-day shipping", "Orders before 14:00 ship the same day from the warehouse."),
            ("App store account", "The App Store account belongs to the company."),
            ("Crash reporting", "Crash reports from the apps go to Crashlytics."),
        ]
    }
    asked = run(tenant, "what are the steps to ship a new version of the phone app").hits
    assert asked[0].id == process.id
    version = run(tenant, "which version is the phone app on now?").hits
    assert version[0].id == notes["Mobile app version"].id


def test_accents_do_not_matter(tenant, corpus):
    assert [hit.id for hit in run(tenant, "cafe").hits] == [corpus["Coffee"].id]
    assert [hit.id for hit in run(tenant, "CAFÉ Espresso").hits] == [corpus["Coffee"].id]


def test_stemming_matches_word_forms(tenant, corpus):
    assert [hit.id for hit in run(tenant, "deploying").hits] == [corpus["Deploy"].id]


def test_nonsense_returns_no_hits(tenant, corpus):
    for query in ("xylophone quasar", "zzzz", "the of and"):
        assert run(tenant, query).hits == [], query


def test_topic_typos_still_find_by_trigram(tenant, corpus):
    hits = run(tenant, "Paymnts").hits
    assert [hit.id for hit in hits] == [corpus["Payments"].id]
    assert hits[0].score >= TOPIC_SIMILARITY_MIN


def test_a_question_in_other_words_finds_the_memory(tenant, corpus):
    # "Signature checks" and "staging" are not in the question: the asker's own wording.
    hits = run(tenant, "why do our stripe webhooks keep failing?").hits
    assert hits[0].id == corpus["Payments"].id
    assert "words" in hits[0].matched_by


def test_a_hit_names_the_questions_distinctive_words_it_lacks_as_they_were_written(tenant):
    """A question about a detail never stored finds the memory about its topic: the hit says
    which of the question's most distinctive words that memory does not hold, so the agent can
    tell "about this" from "answers this"."""
    api = record_memory(
        owner=tenant,
        memory_type="fact",
        topic="Shipment-tracking API",
        content="The shipment-tracking API is REST over HTTPS, owned by the logistics team.",
    )
    record_memory(owner=tenant, memory_type="fact", topic="Lunch", content="Soup on Fridays.")
    [hit] = run(tenant, "What\u2019s the p99 latency SLO of the shipment-tracking API?").hits
    assert hit.id == api.id
    assert sorted(hit.lacking) == ["SLO", "latency", "p99"]  # as written, not "latenc", "slo"
    [hit] = run(tenant, "who owns the shipment-tracking API?").hits
    assert (hit.id, hit.lacking) == (api.id, ())
    # A hyphenated word lacked is named once, not once for each of its parts.
    [hit] = run(tenant, "shipment-tracking API front-end").hits
    assert (hit.id, hit.lacking) == (api.id, ("front-end",))


def test_a_type_named_in_a_question_weighs_nothing_against_its_memories(tenant, settings):
    """A blocker's text need not say "blocker" (its type is not among its words): in "launch
    blocker" the word is neither counted against the blocker that holds "launch" nor named as
    lacking; a question of such words alone keeps them (what else would it be about)."""
    settings.SEARCH_EMBEDDER = "none"
    blocker = record_memory(
        owner=tenant,
        memory_type="blocker",
        topic="PCI audit",
        content="Cannot launch card vaulting until the PCI audit signs off.",
    )
    for n in range(60):
        record_memory(owner=tenant, memory_type="note", topic=f"Note {n}", content=f"Note {n}.")

    [hit] = run(tenant, "launch blocker").hits
    assert (hit.id, hit.lacking) == (blocker.id, ())
    assert run(tenant, "launch blocker", memory_types=["blocker"]).hits[0].id == blocker.id
    # A word not naming a type still weighs against a memory lacking it, a state's too: no
    # answer.
    assert run(tenant, "launch sandwich").hits == []
    assert run(tenant, "launch pending").hits == []


@pytest.mark.parametrize(
    "asked",
    [
        "why doesn't the nightly export run on Sundays?",
        "why doesn\u2019t the nightly export run on Sundays?",
        "so we're: the nightly export isn't run on Sundays, aren't we?",
    ],
)
def test_a_contraction_in_a_question_is_not_a_word_the_answer_lacks(tenant, asked):
    """The parser leaves "doesn" of "doesn't", a word no memory holds: the memory answering the
    question was said to lack it and scored below the same question asked without it."""
    export = record_memory(
        owner=tenant,
        memory_type="fact",
        topic="Nightly export",
        content="The nightly export does not run on Sundays: the warehouse is read-only then.",
    )
    [hit] = run(tenant, asked).hits
    plain = run(tenant, "why does the nightly export not run on Sundays?").hits[0]
    assert (hit.id, hit.lacking) == (export.id, ())
    assert hit.score == pytest.approx(plain.score, abs=0.02)


def test_a_word_a_contraction_would_leave_is_asked_for_when_written_whole(db):
    """The "won" of "won't" is dropped, the "won" of "we won the bid" is a word like any other."""
    with connection.cursor() as cursor:
        assert "won" in parse(cursor, "the bid we won").terms
        assert "won" not in parse(cursor, "the bid we won't lose").terms


@pytest.mark.parametrize(
    ("stored", "asked"),
    [
        ("Written updates instead of daily stand-ups.", "daily standups?"),
        ("Written updates instead of daily standups.", "daily stand-ups?"),
        ("The on-call rotation changes on Mondays.", "oncall rotation"),
        ("Our frontend is a Vite build.", "front-end build"),
        ("Written updates instead of daily stand-ups.", '"daily standups"'),
        ("Written updates instead of daily standups.", '"daily stand-ups"'),
        ("Written updates instead of daily standups.", 'written "stand-ups"'),
        # A dotted name is one word to the parser; its parts and the name joined are words too.
        ("We dropped moment.js for date-fns.", "why did we drop moment"),
        ("The dashboard is built with Next.js.", "nextjs dashboard"),
        # A question's dotted name asks for it joined too, as a memory is indexed.
        ("The dashboard is built with NextJS.", "Next.js dashboard"),
        ("We upgraded the dashboard to nextjs.", "Next.js"),
        # A phrase's dotted name, in either spelling.
        ("The NextJS dashboard is built.", '"Next.js dashboard"'),
        ("The Next.js dashboard is built.", '"NextJS dashboard"'),
    ],
)
def test_a_compound_is_found_hyphenated_or_written_as_one_word(tenant, settings, stored, asked):
    """Technical writing spells compounds and names several ways; the question finds the memory
    by its words either way, meaning aside."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(owner=tenant, memory_type="preference", topic="Team", content=stored)
    record_memory(owner=tenant, memory_type="fact", topic="Lunch", content="Soup on Fridays.")
    [hit] = run(tenant, asked).hits
    assert (hit.id, hit.matched_by, hit.lacking) == (memory.id, ("words",), ())


@pytest.mark.parametrize(
    "exclusion", ["-standups", "-stand-ups", '-"daily standups"', '-"daily stand-ups"']
)
@pytest.mark.parametrize("stored", ["daily stand-ups", "daily standups"])
def test_a_compound_is_excluded_hyphenated_or_written_as_one_word(
    tenant, settings, stored, exclusion
):
    settings.SEARCH_EMBEDDER = "none"
    record_memory(owner=tenant, memory_type="fact", topic="Team", content=f"Written {stored}.")
    kept = record_memory(owner=tenant, memory_type="fact", topic="Team", content="Written notes.")
    assert [hit.id for hit in run(tenant, f"written {exclusion}").hits] == [kept.id]


def test_a_dotted_name_the_words_of_the_query_do_not_hold_is_asked_for(tenant, settings):
    """The query's text as one gives a dotted name ("jsnext.js") that none of its words gives
    alone: it is asked for all the same."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(owner=tenant, memory_type="fact", topic="JS", content="jsnext.js ships.")
    [hit] = run(tenant, "js..-1.2.jsNext.JS.").hits
    assert hit.id == memory.id


@pytest.mark.parametrize(
    ("stored", "asked"),
    [
        ("Next Tuesday the office is closed.", "Next.js"),
        ("At the moment the build is slow.", "moment.js"),
        ("Every js file is linted.", "moment.js"),
    ],
)
def test_a_dotted_name_in_a_question_does_not_ask_for_its_parts(tenant, settings, stored, asked):
    """A library's name is not the common words it is made of: a question about Next.js finds
    no memory about next Tuesday (a memory that wrote "Next.js" is found by "next", not the
    other way round)."""
    settings.SEARCH_EMBEDDER = "none"
    record_memory(owner=tenant, memory_type="fact", topic="Note", content=stored)
    assert run(tenant, asked).hits == []


@pytest.mark.parametrize("exclusion", ["-Next.js", '-"Next.js"', "-nextjs", '-"NextJS dashboard"'])
@pytest.mark.parametrize("stored", ["Next.js dashboard", "NextJS dashboard"])
def test_a_dotted_name_is_excluded_dotted_or_written_as_one_word(
    tenant, settings, stored, exclusion
):
    settings.SEARCH_EMBEDDER = "none"
    record_memory(owner=tenant, memory_type="fact", topic="Web", content=f"Our {stored}.")
    kept = record_memory(owner=tenant, memory_type="fact", topic="Web", content="Our dashboard.")
    assert [hit.id for hit in run(tenant, f"dashboard {exclusion}").hits] == [kept.id]


@pytest.mark.parametrize(
    ("asked", "lacked"),
    [
        ("deploy the release 2024-01-05", "2024-01-05"),
        ("v1.2-beta deploy", "v1.2-beta"),
        ("задержка сервер-клиент deploy", "сервер-клиент"),
    ],
)
def test_a_hyphenated_word_with_no_one_word_spelling_stays_distinctive(
    tenant, settings, asked, lacked
):
    """A date, a version or a compound in another script has no joined spelling, so nothing else
    stands for its lexemes: a memory without it is told to lack it."""
    settings.SEARCH_EMBEDDER = "none"
    deploys = record_memory(
        owner=tenant, memory_type="fact", topic="Deploys", content="We deploy on Thursdays."
    )
    record_memory(owner=tenant, memory_type="fact", topic="Notes", content=f"{asked}, noted.")
    record_memory(owner=tenant, memory_type="fact", topic="Lunch", content="Soup on Fridays.")
    hits = {hit.id: hit for hit in run(tenant, asked).hits}
    assert lacked in hits[deploys.id].lacking


def test_a_memory_stored_before_compounds_were_joined_is_found_by_one_word_after_the_upgrade(
    transactional_db, settings
):
    """Migration 0020 rewrites the search vector of every row already stored."""
    settings.SEARCH_EMBEDDER = "none"
    owner = UserFactory()
    with memories_schema_at("0019"):
        stored = insert_memory_as_once_stored(
            owner, memory_type="fact", topic="Rota", content="The on-call rota is weekly."
        )
        assert holds_lexeme(stored, "rota") and not holds_lexeme(stored, "oncall")
    [hit] = run(owner, "oncall rota").hits
    assert (hit.id, hit.lacking) == (stored.id, ())


@pytest.mark.parametrize(
    ("stored", "asked"),
    [
        ("東京都渋谷区の事務所に引っ越しました。", "渋谷区の事務所"),
        ("決済サービスのデータベースはPostgreSQLに決定した。", "PostgreSQL 決定"),
        ("我们决定支付服务使用PostgreSQL数据库。", "支付服务"),
        ("서울에서 회의가 있습니다.", "서울 회의"),
    ],
)
def test_chinese_japanese_and_korean_are_found_by_the_characters_a_question_shares(
    tenant, settings, stored, asked
):
    """A run of such characters is one word to the parser ("東京都渋谷区の事務所に引っ越しました"),
    so memories are also indexed, and questions asked, by its pairs of characters."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(owner=tenant, memory_type="fact", topic="Note", content=stored)
    record_memory(owner=tenant, memory_type="fact", topic="Lunch", content="Soup on Fridays.")
    record_memory(owner=tenant, memory_type="fact", topic="会議", content="毎週月曜日の朝に会議。")
    [hit] = run(tenant, asked).hits
    assert (hit.id, hit.matched_by) == (memory.id, ("words",))
    assert hit.lacking == ()


def test_a_cjk_hit_lacks_the_characters_it_does_not_hold_not_the_whole_question(tenant, settings):
    """A Japanese question is one run: naming the run would say the memory lacks all of it."""
    settings.SEARCH_EMBEDDER = "none"
    office = record_memory(
        owner=tenant, memory_type="fact", topic="Office", content="東京都渋谷区の事務所。"
    )
    [hit] = run(tenant, "渋谷区の事務所はどこ").hits
    assert hit.id == office.id
    assert hit.lacking
    assert set(hit.lacking) <= {"所は", "はど", "どこ"}


def test_a_cjk_phrase_or_exclusion_holds_its_characters_in_order(tenant, settings):
    settings.SEARCH_EMBEDDER = "none"
    shibuya = record_memory(
        owner=tenant, memory_type="fact", topic="Office", content="東京都渋谷区の事務所。"
    )
    reversed_ = record_memory(
        owner=tenant, memory_type="fact", topic="Office", content="区谷渋の事務所。"
    )
    assert [hit.id for hit in run(tenant, '事務所 "渋谷区"').hits] == [shibuya.id]
    assert [hit.id for hit in run(tenant, '事務所 -"渋谷区"').hits] == [reversed_.id]
    assert [hit.id for hit in run(tenant, "事務所 -渋谷区").hits] == [reversed_.id]


def test_cjk_text_between_two_words_does_not_make_them_a_phrase(tenant, settings):
    settings.SEARCH_EMBEDDER = "none"
    apart = record_memory(
        owner=tenant, memory_type="fact", topic="Cache", content="Redis 東京 cluster."
    )
    together = record_memory(
        owner=tenant, memory_type="fact", topic="Cache", content="The Redis cluster."
    )
    assert [hit.id for hit in run(tenant, 'cache "redis cluster"').hits] == [together.id]
    assert apart.id in [hit.id for hit in run(tenant, "redis 東京").hits]


@pytest.mark.parametrize(
    ("topic", "content", "project", "phrase", "as_written"),
    [
        # The project's last word is not followed by the topic's first.
        ("retry 東京", "Backoff doubles.", "payments", '"payments retry"', '"retry 東京"'),
        # Nor is the content's last word followed by the topic's first.
        ("deploy 東京", "Rollback", None, '"rollback deploy"', '"東京 rollback"'),
        # Words after a run do not come before it.
        ("Office", "東京の事務所 retry", None, '"retry 東京"', '"事務所 retry"'),
        ("DB", "に決定した PostgreSQL 18", None, '"PostgreSQL に決定"', '"決定した PostgreSQL"'),
    ],
)
def test_a_phrase_finds_a_memory_holding_cjk_only_in_the_order_it_is_written(
    tenant, settings, topic, content, project, phrase, as_written
):
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(
        owner=tenant, memory_type="fact", topic=topic, content=content, project=project
    )
    assert [hit.id for hit in run(tenant, as_written).hits] == [memory.id]
    assert run(tenant, phrase).hits == []
    assert [hit.id for hit in run(tenant, f"{topic} -{phrase}").hits] == [memory.id]


def test_a_phrase_of_cjk_runs_apart_only_by_punctuation_finds_them_by_their_pairs(tenant, settings):
    """Pairs stand where their run stands: punctuation between two runs keeps no more apart
    than between two words ("京都、大阪" as "Kyoto, Osaka")."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(
        owner=tenant, memory_type="fact", topic="Offices", content="東京都、大阪府に事務所がある。"
    )
    assert [hit.id for hit in run(tenant, '"京都、大阪"').hits] == [memory.id]
    assert run(tenant, '"大阪、京都"').hits == []


# Characters at and beside the edges of the CJK class (migration 0021), and others a CJK text
# holds: iteration and sound marks, a middle dot, half-width katakana and Hangul, compatibility
# and Extension B ideographs, combining marks, an emoji, full-width Latin and digits.
CJK_EDGES = (
    "\u303f\u3040\u3041\u3099\u309b\u30fb\u30fc\u30ff\u3100\u31ef\u31f0\u31ff\u3200\u33ff"
    "\u3400\u4dbf\u4dc0\u4dff\u4e00\u9fff\ua000\uabff\uac00\ud7a3\ud7af\ud7b0\uf8ff\uf900"
    "\ufaff\ufb00\uff10\uff21\uff65\uff66\uff9e\uff9f\uffa0\u3005\u3007\u3001\u3002\u3000"
    "\u1100\u1161\u11a8\u0301\ufe0f\u200b\U00020000\U0002a6df\U0002f800\U0001f642"
    "東京都渋谷区のがかサービス서울에a3'\\\"-. :&|!*()"
)
cjk_texts = st.text(
    alphabet=st.sampled_from(CJK_EDGES) | st.characters(exclude_categories=("Cs",)),
    max_size=16,
).map(lambda text: text.replace("\x00", ""))


@examples(max_examples=300, deadline=None)
@given(cjk_texts)
@pytest.mark.django_db
def test_a_question_pairs_cjk_characters_as_memories_are_paired(text):
    """The question's pairs (memories.search.query) are the memory's (memories_cjk_paired), in
    the same places, whatever the characters."""
    with connection.cursor() as db:
        db.execute("SELECT memories_cjk_paired(%s)", [text])
        [stored] = db.fetchone()
    asked = _cjk_paired(text)
    assert [word for word in asked.split(" ") if word] == [
        word for word in stored.split(" ") if word
    ]


@examples(max_examples=150, deadline=None)
@given(cjk_texts.map(lambda text: bounds.trimmed(text.replace('"', ""))).filter(bool))
@pytest.mark.django_db
def test_a_memory_holds_every_term_of_its_own_text_asked_and_its_text_as_a_phrase(text):
    with connection.cursor() as db:
        db.execute("SELECT memories_search_vector('Note', %s, '{}', NULL)", [text])
        [vector] = db.fetchone()
        terms = parse(db, text).terms
        required = parse(db, f'"{text}"').required
        db.execute(
            "SELECT array(SELECT lexeme FROM unnest(%s::tsvector)), "
            "%s = '' OR %s::tsvector @@ %s::tsquery",
            [vector, required, vector, required or "x"],
        )
        lexemes, as_a_phrase = db.fetchone()
    assert set(terms) <= set(lexemes)
    assert as_a_phrase


def test_a_long_cjk_question_asks_for_a_bounded_number_of_pairs(tenant, settings):
    """Every pair of a page of CJK text would be hundreds of terms: the first ones are asked."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(
        owner=tenant, memory_type="fact", topic="Office", content="東京都渋谷区の事務所。"
    )
    question = ("渋谷区の事務所" + "".join(chr(0x4E00 + n) for n in range(600)))[:QUERY_MAX]
    with connection.cursor() as db:
        assert len(parse(db, question).terms) == CJK_PAIRS_MAX
    assert [hit.id for hit in run(tenant, question).hits] == [memory.id]


@pytest.mark.parametrize(
    "stored",
    [
        "O'Reillyの本は東京タワーの近く",  # a quote inside a word the pairs are taken from
        "a\\b東京\\'c",  # backslashes too
        "東京' | '京都:* & !",  # tsquery and tsvector syntax
        "東京🙂京都",
        "x" * 1990 + "東京",
    ],
)
def test_a_cjk_word_with_any_characters_is_stored_and_found_by_its_pairs(tenant, settings, stored):
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(owner=tenant, memory_type="fact", topic="Note", content=stored)
    assert [hit.id for hit in run(tenant, "東京").hits] == [memory.id]


@pytest.mark.parametrize(
    ("stored", "other", "asked"),
    [
        ("이 책을 다 읽었다.", "이 차를 샀다.", "책"),
        ("東京の事務所。", "大阪の事務所。", "東 事務所"),
    ],
)
def test_a_cjk_character_alone_finds_the_pairs_it_starts(tenant, settings, stored, other, asked):
    """A memory holds a character of a longer run only inside its pairs: a question of that
    character alone (a Korean word of one syllable) asks for the pairs it starts."""
    settings.SEARCH_EMBEDDER = "none"
    memory = record_memory(owner=tenant, memory_type="fact", topic="Note", content=stored)
    record_memory(owner=tenant, memory_type="fact", topic="Note", content=other)
    assert [hit.id for hit in run(tenant, asked).hits][:1] == [memory.id]


def test_an_iteration_mark_is_part_of_its_run(tenant, settings):
    """々 repeats the character before it ("佐々木"): a run does not end at it."""
    settings.SEARCH_EMBEDDER = "none"
    sasaki = record_memory(
        owner=tenant, memory_type="fact", topic="Owner", content="担当は佐々木さん。"
    )
    record_memory(owner=tenant, memory_type="fact", topic="Owner", content="担当は木村さん。")
    assert [hit.id for hit in run(tenant, "佐々木").hits] == [sasaki.id]


def test_a_cjk_memory_stored_before_its_bigrams_were_indexed_is_found_after_the_upgrade(
    transactional_db, settings
):
    """Migration 0021 computes the search vector again of the rows holding CJK characters."""
    settings.SEARCH_EMBEDDER = "none"
    owner = UserFactory()
    with memories_schema_at("0020"):
        stored = insert_memory_as_once_stored(
            owner, memory_type="fact", topic="Office", content="東京都渋谷区の事務所。"
        )
        assert not holds_lexeme(stored, "渋谷")
    assert holds_lexeme(stored, "渋谷")
    [hit] = run(owner, "渋谷区").hits
    assert hit.id == stored.id


@contextmanager
def memories_schema_at(migration: str) -> Iterator[None]:
    """The memories app's schema as `migration` left it inside the block, the latest after it."""
    from django.core.management import call_command

    call_command("migrate", "memories", migration, verbosity=0)
    try:
        yield
    finally:
        call_command("migrate", "memories", verbosity=0)


def holds_lexeme(memory, lexeme: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT search_vector @@ %s::tsquery FROM memories_memory WHERE id = %s",
            [lexeme, memory.id],
        )
        return cursor.fetchone()[0]


def test_meaning_alone_can_match(tenant):
    colour = record_memory(
        owner=tenant,
        memory_type="preference",
        topic="Favourite colour",
        content="My favourite colour is blue.",
    )
    record_memory(owner=tenant, memory_type="fact", topic="Lunch", content="Soup on Fridays.")
    # British and American spelling share no stem: only the embedding sees they mean the same.
    hits = run(tenant, "favorite color").hits
    assert [hit.id for hit in hits] == [colour.id]
    assert hits[0].matched_by == ("meaning",)


def test_a_question_is_compared_only_with_vectors_of_its_own_model(tenant, caplog):
    """After SEARCH_EMBEDDER changed and until `embed_memories --reembed` records the new model,
    the stored vectors are another model's: a search ranks by words only, and says why in the
    log, rather than compare vectors of two spaces."""
    colour = record_memory(
        owner=tenant,
        memory_type="preference",
        topic="Favourite colour",
        content="My favourite colour is blue.",
    )
    StoredVectors.record("sentence-transformers:/models/retired")
    # Only the topic's spelling is left to find it by.
    assert [hit.matched_by for hit in run(tenant, "favorite color").hits] == [("words",)]
    assert "the stored vectors were made by sentence-transformers:/models/retired" in caplog.text
    StoredVectors.record("wordllama")
    hits = run(tenant, "favorite color").hits
    assert [(hit.id, hit.matched_by) for hit in hits] == [(colour.id, ("meaning",))]


def test_a_question_about_something_never_stored_gets_no_hits(tenant, corpus):
    for question in (
        "which vendor did we pick for sending SMS one-time codes?",
        "what did we decide about offering a GraphQL endpoint to partners?",
    ):
        assert run(tenant, question).hits == [], question


def test_memories_without_a_vector_are_found_by_words(tenant):
    # Rows stored before the embedder existed, or with SEARCH_EMBEDDER=none, until the backfill.
    unembedded = MemoryFactory(owner=tenant, topic="Backup window", content="Backups at 2 am.")
    hits = run(tenant, "what is the backup window?").hits
    assert [hit.id for hit in hits] == [unembedded.id]
    assert hits[0].matched_by == ("words",)


@pytest.mark.parametrize(
    "query",
    ["a & | ! :* ' \\", "数据库", "🚀🔥", "-", '"', "x" * 500, "PostgreSQL:*", "(database"],
)
def test_any_query_text_gets_a_normal_answer(tenant, corpus, query):
    run(tenant, query)  # a list of hits, possibly empty; never a database error


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "query: "),
        ("   ", "query: "),
        ("a\x00b", "query: must not contain NUL characters"),
        ("\ud800", "query: must not contain lone surrogates"),
        ("x" * 501, "query: "),
    ],
)
def test_unusable_query_text_is_refused_by_name(tenant, query, message):
    with pytest.raises(InvalidInput, match=message):
        run(tenant, query)


def test_web_search_syntax(tenant, corpus):
    assert run(tenant, '"dark theme"').hits[0].id == corpus["Editor"].id
    assert run(tenant, '"theme dark"').hits == []
    ids = {hit.id for hit in run(tenant, "espresso or stripe").hits}
    assert ids == {corpus["Coffee"].id, corpus["Payments"].id}
    assert [hit.id for hit in run(tenant, "database -backup").hits] == [corpus["Database"].id]


def test_a_minus_before_a_phrase_excludes_it(tenant, corpus):
    ids = {hit.id for hit in run(tenant, 'database neovim -"dark theme"').hits}
    assert corpus["Editor"].id not in ids
    assert {corpus["Database"].id, corpus["Deploy"].id} <= ids
    # A hyphen inside a word is no exclusion.
    assert corpus["Editor"].id in {hit.id for hit in run(tenant, 'neovim-"dark theme"').hits}


@pytest.mark.parametrize("exclusion", ["-env:staging", "-env(staging)", "-env|staging"])
def test_an_exclusion_with_punctuation_only_excludes(tenant, corpus, exclusion):
    # Its words together are excluded; neither becomes required ("Deploy" holds neither).
    ids = {hit.id for hit in run(tenant, f"deploys database {exclusion}").hits}
    assert corpus["Deploy"].id in ids


@pytest.mark.parametrize("requirement", ["-the", '"of"', '-"of the"'])
def test_a_phrase_or_exclusion_of_stop_words_only_requires_nothing(tenant, corpus, requirement):
    question = "which postgresql database did we choose for the store"
    plain = [hit.id for hit in run(tenant, question).hits]
    assert plain[0] == corpus["Database"].id
    assert [hit.id for hit in run(tenant, f"{question} {requirement}").hits] == plain


def test_the_topic_fallback_keeps_exclusions(tenant, corpus, settings):
    settings.SEARCH_EMBEDDER = "none"  # words only: the typo below matches no word
    assert [hit.id for hit in run(tenant, "Paymnts").hits] == [corpus["Payments"].id]
    assert run(tenant, "Paymnts -stripe").hits == []  # its content holds "Stripe"
    # Nothing asked for but an exclusion: nothing to spell a topic like.
    assert run(tenant, "-payments").hits == []


def test_only_the_owners_current_active_memories_by_default(tenant, other_tenant, corpus):
    MemoryFactory(owner=other_tenant, topic="Database", content="Their PostgreSQL cluster")
    revise_memory(owner=tenant, predecessor_id=corpus["Editor"].id, content="Prefers Helix now.")
    archive_memory(owner=tenant, memory_id=corpus["Payments"].id)
    assert [h.id for h in run(tenant, "postgresql").hits] == [corpus["Database"].id]
    assert run(tenant, "neovim").hits == []  # superseded
    assert run(tenant, "stripe").hits == []  # archived
    assert [h.id for h in run(tenant, "stripe", status="archived").hits] == [corpus["Payments"].id]


def test_as_of_searches_what_was_current_then(tenant, corpus):
    before = timezone.now()
    successor = revise_memory(owner=tenant, predecessor_id=corpus["Editor"].id, content="Helix.")
    assert [h.id for h in run(tenant, "neovim", as_of=before.isoformat()).hits] == [
        corpus["Editor"].id
    ]
    assert run(tenant, "helix", as_of=before.isoformat()).hits == []
    assert [h.id for h in run(tenant, "helix").hits] == [successor.id]


def test_a_superseded_commitment_is_not_overdue_in_an_as_of_search(tenant):
    """The version an agent sees with asOf is not the commitment any more: its successor, with
    the new due date, carries it. Calling the old version overdue sends the agent chasing a
    deadline that was moved, as the hit's own Memory.overdue already says it is not."""
    late = record_memory(
        owner=tenant,
        memory_type="commitment",
        topic="launch checklist",
        content="Ship the launch checklist to Maria.",
        due_at=(timezone.now() - timedelta(days=2)).isoformat(),
    )
    before = timezone.now()
    moved = revise_memory(
        owner=tenant,
        predecessor_id=late.id,
        content="Ship the launch checklist to Maria next week.",
        due_at=(timezone.now() + timedelta(days=5)).isoformat(),
    )

    for query in ("launch checklist", None):
        [then] = run(tenant, query, as_of=before.isoformat()).hits
        assert (then.id, then.commitment_status, then.overdue) == (late.id, "open", False)
        assert then.valid_to == moved.recorded_at
    [now] = run(tenant, "launch checklist").hits
    assert (now.id, now.overdue) == (moved.id, False)


def test_filters_narrow(tenant, corpus):
    record_memory(
        owner=tenant, memory_type="note", topic="db", content="database index", scope="work"
    )
    record_memory(
        owner=tenant, memory_type="fact", topic="x", content="database size", project="atlas"
    )
    assert {h.memory_type for h in run(tenant, "database", memory_types=["decision"]).hits} == {
        "decision"
    }
    assert [h.topic for h in run(tenant, "database", scope="work").hits] == ["db"]
    assert [h.project for h in run(tenant, "database", project="atlas").hits] == ["atlas"]
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert run(tenant, "database", recorded_after=later).hits == []
    with pytest.raises(NotFound):
        run(tenant, "database", thread="no such thread")


def test_the_recorded_bounds_include_their_instant(tenant):
    """As the tool's description says: at or after, at or before."""
    memory = record_memory(owner=tenant, memory_type="note", topic="db", content="database index")
    instant = memory.recorded_at.isoformat()
    for bound in ("recorded_after", "recorded_before"):
        assert [hit.id for hit in run(tenant, "database", **{bound: instant}).hits] == [memory.id]
    just_after = (memory.recorded_at + timedelta(microseconds=1)).isoformat()
    assert run(tenant, "database", recorded_after=just_after).hits == []


@pytest.fixture
def commitments(tenant, other_tenant):
    """A commitment in each state, all about finishing the quarterly report, a blocker that
    says so too, and another account's resolved commitment of the same words."""
    made = {}
    for state in ("open", "waiting", "resolved", "expired"):
        made[state] = record_memory(
            owner=tenant,
            memory_type="commitment",
            topic=f"Quarterly report ({state})",
            content=f"Finish the quarterly report draft, {state} part.",
        )
        if state != "open":
            resolve_commitment(owner=tenant, memory_id=made[state].id, status=state)
    made["blocker"] = record_memory(
        owner=tenant,
        memory_type="blocker",
        topic="Quarterly report blocked",
        content="Cannot finish the quarterly report draft without the sales figures.",
    )
    theirs = record_memory(
        owner=other_tenant,
        memory_type="commitment",
        topic="Quarterly report",
        content="Finish the quarterly report draft.",
    )
    resolve_commitment(owner=other_tenant, memory_id=theirs.id, status="resolved")
    return made


@pytest.mark.parametrize("query", ["finish the quarterly report", "quarterly", None])
def test_commitment_status_selects_commitments_in_the_states_asked_for(commitments, query):
    """'Which tasks have I finished?': the resolved commitment, not every memory that says
    "finish" (the blocker), and never another account's."""
    tenant = commitments["open"].owner
    everything = {hit.id for hit in run(tenant, query, limit=25).hits}
    assert commitments["blocker"].id in everything and commitments["resolved"].id in everything

    resolved = run(tenant, query, commitment_status=["resolved"]).hits
    assert [(hit.id, hit.commitment_status) for hit in resolved] == [
        (commitments["resolved"].id, "resolved")
    ]
    to_do = run(tenant, query, commitment_status=["open", "waiting"], limit=25).hits
    assert {hit.id for hit in to_do} == {commitments["open"].id, commitments["waiting"].id}
    # memoryTypes that holds commitments keeps them; the state narrows them.
    typed = run(tenant, query, commitment_status=["expired"], memory_types=["commitment"]).hits
    assert [hit.id for hit in typed] == [commitments["expired"].id]


def test_commitment_status_narrows_with_the_other_filters(commitments):
    tenant = commitments["open"].owner
    archive_memory(owner=tenant, memory_id=commitments["waiting"].id)
    states = ["open", "waiting"]
    assert [h.id for h in run(tenant, "quarterly", commitment_status=states).hits] == [
        commitments["open"].id
    ]
    assert [h.id for h in run(tenant, None, commitment_status=states, status="archived").hits] == [
        commitments["waiting"].id
    ]
    record_memory(
        owner=tenant, memory_type="note", topic="Quarterly", content="Quarterly.", scope="work"
    )
    assert run(tenant, "quarterly", commitment_status=states, scope="work").hits == []


def test_a_commitment_is_found_by_the_state_it_is_in_now(commitments):
    tenant = commitments["open"].owner
    resolve_commitment(owner=tenant, memory_id=commitments["resolved"].id, status="open")
    assert run(tenant, "quarterly", commitment_status=["resolved"]).hits == []
    open_now = {h.id for h in run(tenant, "quarterly", commitment_status=["open"]).hits}
    assert open_now == {commitments["open"].id, commitments["resolved"].id}


def test_resolved_after_selects_the_commitments_resolved_since_then(tenant, other_tenant):
    """Resolved at or after the instant; one resolved before resolution times were kept has
    none and is not selected; another account's never."""
    now = timezone.now()

    def resolved(owner, days_ago):
        return MemoryFactory(
            owner=owner,
            memory_type="commitment",
            content=f"Ship the migration guide ({days_ago})",
            commitment_status="resolved",
            resolved_at=None if days_ago is None else now - timedelta(days=days_ago),
        )

    recent, _older, _untimed = resolved(tenant, 1), resolved(tenant, 10), resolved(tenant, None)
    resolved(other_tenant, 1)
    since = (now - timedelta(days=7)).isoformat()
    for query in ("migration guide", None):
        assert [h.id for h in run(tenant, query, resolved_after=since).hits] == [recent.id]
        hits = run(tenant, query, resolved_after=since, commitment_status=["resolved"]).hits
        assert [h.id for h in hits] == [recent.id]
    exactly = run(tenant, None, resolved_after=recent.resolved_at.isoformat()).hits
    assert [h.id for h in exactly] == [recent.id]
    assert len(run(tenant, None, commitment_status=["resolved"]).hits) == 3


def test_a_commitment_status_search_pages_through_its_commitments_only(tenant):
    now = timezone.now()
    done = []
    for n in range(9):
        for state in ("resolved", "open"):
            memory = MemoryFactory(
                owner=tenant,
                memory_type="commitment",
                topic=f"Invoice batch {n}",
                content=f"Send invoice batch {n} to accounting ({state}).",
                commitment_status=state,
                resolved_at=now if state == "resolved" else None,
                recorded_at=now - timedelta(minutes=n),
            )
            if state == "resolved":
                done.append(memory.id)
        MemoryFactory(owner=tenant, memory_type="note", content=f"Invoice batch {n} resolved.")
    for query in ("invoice batch", None):
        seen, cursor = [], None
        while True:
            page = run(tenant, query, commitment_status=["resolved"], limit=4, cursor=cursor)
            seen += [hit.id for hit in page.hits]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(done) and len(seen) == len(done), query


def test_a_cursor_is_bound_to_its_commitment_filters(tenant):
    for n in range(3):
        MemoryFactory(
            owner=tenant,
            memory_type="commitment",
            content=f"bound commitment {n}",
            commitment_status="resolved",
            resolved_at=timezone.now(),
        )
    since = (timezone.now() - timedelta(days=1)).isoformat()
    for query in ("bound commitment", None):
        cursor = run(tenant, query, commitment_status=["resolved"], limit=1).next_cursor
        assert cursor
        for other in (
            {},
            {"memory_types": ["commitment"]},
            {"commitment_status": ["resolved", "open"]},
            {"resolved_after": since},
        ):
            with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
                run(tenant, query, limit=1, cursor=cursor, **other)
        # The states are a set: the same ones in another order continue the search.
        cursor = run(tenant, query, commitment_status=["open", "resolved"], limit=1).next_cursor
        run(tenant, query, commitment_status=["resolved", "open"], limit=1, cursor=cursor)


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (
            {"commitment_status": ["resolved"], "memory_types": ["fact", "blocker"]},
            "commitmentStatus: selects commitments, which memoryTypes ['fact', 'blocker'] leaves",
        ),
        (
            {"resolved_after": "2026-12-01T00:00:00Z", "memory_types": ["note"]},
            "resolvedAfter: selects commitments, which memoryTypes ['note'] leaves out",
        ),
        (
            {"commitment_status": ["open"], "as_of": "2026-12-01T00:00:00Z"},
            "commitmentStatus: cannot be combined with asOf",
        ),
        (
            {"resolved_after": "2026-12-01T00:00:00Z", "as_of": "2026-12-02T00:00:00Z"},
            "resolvedAfter: cannot be combined with asOf",
        ),
        (
            {"resolved_after": "2026-12-01T00:00:00Z", "commitment_status": ["open"]},
            "resolvedAfter: selects resolved commitments only; commitmentStatus must then be",
        ),
        ({"commitment_status": []}, "commitmentStatus: must be a non-empty list"),
        ({"commitment_status": "resolved"}, "commitmentStatus: must be a non-empty list"),
        ({"commitment_status": ["done"]}, "commitmentStatus: must be among: open, waiting"),
        ({"resolved_after": "yesterday"}, "resolvedAfter: must be an RFC 3339 date-time"),
    ],
)
def test_commitment_filters_that_cannot_be_answered_are_refused_naming_the_fields(filters, message):
    with pytest.raises(InvalidInput) as refused:
        clean_filters(**filters)
    assert str(refused.value).startswith(f"invalid_input: {message}")


def test_excerpt_is_cut_at_600_with_an_ellipsis(tenant):
    body = "alpha " + "word " * 300
    memory = record_memory(owner=tenant, memory_type="note", topic="long", content=body)
    [hit] = run(tenant, "alpha").hits
    assert hit.id == memory.id and hit.truncated and hit.content_length == len(body.strip())
    assert len(hit.excerpt) <= 600 and hit.excerpt.endswith("\u2026")
    short = record_memory(owner=tenant, memory_type="note", topic="short", content="beta words")
    [hit] = run(tenant, "beta").hits
    assert (hit.id, hit.excerpt, hit.truncated) == (short.id, "beta words", False)


# Sentences that hold none of the words the tests below ask for, to make a memory long.
PREAMBLE = (
    "Context: the workspace service checks every request against the tenant's roles, and the "
    "role tables grew with each feature until a permission check took three joins. "
) * 5


def windowed_hit(hit, memory, shown: str) -> None:
    """`hit` shows `shown` in a window of `memory`'s content: marked, within the bound, and
    starting where it says it does."""
    assert hit.id == memory.id and shown in hit.excerpt
    assert hit.excerpt.startswith("\u2026") and hit.excerpt_start > 0
    assert memory.content[hit.excerpt_start :].startswith(hit.excerpt[1:].removesuffix("\u2026"))
    assert len(hit.excerpt) <= 600
    assert (hit.truncated, hit.content_length) == (True, len(memory.content))


def test_a_long_memory_found_by_a_word_near_its_end_shows_it(tenant):
    """A 1,127-character decision whose one mention of SpiceDB was near its end was found by
    'SpiceDB', but its leading 600 characters did not show the word: the agent saw a hit that
    looked unrelated."""
    decision = record_memory(
        owner=tenant,
        memory_type="decision",
        topic="Authorization",
        content=PREAMBLE + "Decision: move authorization to SpiceDB, one relationship per grant.",
    )
    [hit] = run(tenant, "SpiceDB").hits
    windowed_hit(hit, decision, "SpiceDB")
    # As much before it as fills the bound, from a word's start.
    assert hit.excerpt.endswith("one relationship per grant.")
    assert decision.content[hit.excerpt_start - 1] == " " and 570 <= len(hit.excerpt) <= 600
    # Listed without a query, its excerpt is its start.
    [listed] = run(tenant, None).hits
    assert not listed.excerpt.startswith("\u2026") and listed.excerpt_start == 0


@pytest.mark.parametrize(
    ("asked", "ending", "shown"),
    [
        ('"token bucket"', "The limiter is a token bucket per tenant.", "token bucket"),
        ("retries", "Each retry waits twice as long as the last.", "retry"),
        ("muller", "Café Müller reviews every grant.", "Müller"),
        ("CAFE", "Café Müller reviews every grant.", "Café"),
    ],
)
def test_a_window_shows_a_phrase_or_a_word_in_any_form_search_matches(tenant, asked, ending, shown):
    memory = record_memory(
        owner=tenant, memory_type="decision", topic="Limits", content=PREAMBLE + ending
    )
    [hit] = run(tenant, asked).hits
    windowed_hit(hit, memory, shown)


def test_a_window_shows_the_first_place_the_content_holds_a_word_asked(tenant):
    content = (
        PREAMBLE
        + "The first retry waits a second. "
        + "Unrelated words fill the middle of this memory. " * 10
        + "Retries stop after five."
    )
    memory = record_memory(owner=tenant, memory_type="fact", topic="Limits", content=content)
    [hit] = run(tenant, "retries").hits
    windowed_hit(hit, memory, "first retry")
    assert "Retries stop" not in hit.excerpt


def test_a_cjk_word_near_the_end_is_shown_in_a_window(tenant):
    content = PREAMBLE + "事務所は渋谷区にある。"
    memory = record_memory(owner=tenant, memory_type="fact", topic="Office", content=content)
    [hit] = run(tenant, "渋谷区").hits
    windowed_hit(hit, memory, "渋谷区")


@pytest.mark.parametrize(
    ("asked", "topic", "content"),
    [
        # The leading excerpt shows a word asked (another, later, is not looked for).
        ("roles SpiceDB", "Authorization", PREAMBLE + "We moved to SpiceDB."),
        # Only the topic holds the word: it is shown beside the excerpt anyway.
        ("SpiceDB", "SpiceDB rollout", PREAMBLE + "It went live last week."),
    ],
)
def test_a_hit_whose_leading_excerpt_or_topic_shows_the_words_keeps_its_leading_excerpt(
    tenant, asked, topic, content
):
    memory = record_memory(owner=tenant, memory_type="fact", topic=topic, content=content)
    [hit] = run(tenant, asked).hits
    assert hit.id == memory.id and hit.truncated and hit.excerpt_start == 0
    assert hit.excerpt == content[: len(hit.excerpt) - 1] + "\u2026"


def test_a_hit_matched_by_meaning_alone_keeps_its_leading_excerpt(tenant, monkeypatch):
    # A long memory's vector is near the question's, not near enough to clear the floor of an
    # account of one memory: what is looked at here is the excerpt, whatever the floor.
    patch_search(monkeypatch, "relevance_floor", lambda competing: 0.0)
    content = "My favourite colour is blue. " * 25
    colour = record_memory(owner=tenant, memory_type="preference", topic="Taste", content=content)
    [hit] = run(tenant, "favorite color").hits
    assert (hit.id, hit.matched_by) == (colour.id, ("meaning",))
    assert hit.excerpt_start == 0 and hit.excerpt == content[:599].rstrip() + "\u2026"


def test_cursor_pages_through_every_hit_once_in_order(tenant):
    now = timezone.now()
    for n in range(23):
        MemoryFactory(
            owner=tenant,
            topic=f"entry {n}",
            content=f"shared keyword {'extra ' * (n % 4)}{n}",
            recorded_at=now - timedelta(minutes=n),
        )
    first = run(tenant, "shared keyword", limit=25)
    seen, cursor, pages = [], None, 0
    while True:
        page = run(tenant, "shared keyword", limit=5, cursor=cursor)
        seen += [hit.id for hit in page.hits]
        pages += 1
        if page.next_cursor is None:
            break
        # A memory written mid-walk does not shift or repeat what follows.
        MemoryFactory(owner=tenant, topic="late", content=f"shared keyword late {pages}")
        cursor = page.next_cursor
    assert pages == 5
    assert seen == [hit.id for hit in first.hits][:23]
    assert len(set(seen)) == 23


# --- why nothing came back -------------------------------------------------------------------

# A user's question in their own words: "meetings" finds the preference below, this does not (it
# lacks two of the question's three most distinctive words, and scores under the floor).
MEETINGS_QUESTION = "when can I book meetings with the user?"


def calendar_preference(owner):
    return record_memory(
        owner=owner,
        memory_type="preference",
        topic="Calendar",
        content="Prefers meetings in the afternoon, after lunch.",
    )


def archived_quote(owner):
    quote = record_memory(
        owner=owner,
        memory_type="fact",
        topic="Fivetran quote",
        content="Fivetran quoted 1,200 USD a month for the connectors.",
    )
    archive_memory(owner=owner, memory_id=quote.id)
    return quote


@pytest.mark.parametrize(
    ("query", "exclusions_only"),
    [
        ("the which of and", False),
        ("?!", False),
        ('"of the"', False),
        ("-snowflake", True),
        ('which -"snowflake warehouse"', True),
    ],
)
def test_a_query_with_nothing_to_search_by_says_so(tenant, corpus, query, exclusions_only):
    page = run(tenant, query)
    assert page.hits == []
    assert page.empty_because == EmptyBecause(NOTHING_TO_SEARCH_BY, exclusions_only=exclusions_only)


def test_an_empty_page_names_the_status_it_did_not_search(tenant, corpus):
    """The only memory about the Fivetran quote is archived: the empty page says that archived
    memories were not searched (not whether one would match: that would take a second search),
    and status 'any' finds it."""
    quote = archived_quote(tenant)
    page = run(tenant, "Fivetran quote")
    assert page.hits == []
    assert page.empty_because.unsearched == "archived"
    assert [hit.id for hit in run(tenant, "Fivetran quote", status="any").hits] == [quote.id]
    # Asked for archived ones, the active ones were not searched; asked for any, none is left out.
    assert run(tenant, "xylophone", status="archived").empty_because == EmptyBecause(
        NO_MATCH, filters=("status",), unsearched="active"
    )
    assert run(tenant, "xylophone", status="any").empty_because == EmptyBecause(NO_MATCH)


def test_matches_under_the_relevance_floor_are_counted(tenant, corpus):
    calendar = calendar_preference(tenant)
    assert [hit.id for hit in run(tenant, "meetings").hits] == [calendar.id]
    page = run(tenant, MEETINGS_QUESTION)
    assert page.hits == []
    assert page.empty_because == EmptyBecause(UNDER_FLOOR, count=1, unsearched="archived")


def test_a_query_no_memory_shares_a_word_with_names_the_filters_given(tenant, corpus):
    record_memory(owner=tenant, memory_type="note", topic="Atlas", content="x", project="atlas")
    assert run(tenant, "xylophone quasar").empty_because == EmptyBecause(
        NO_MATCH, unsearched="archived"
    )
    page = run(
        tenant,
        "xylophone quasar",
        memory_types=["note", "decision"],
        project="atlas",
        recorded_after="2020-01-01T00:00:00Z",
    )
    assert page.hits == []
    assert page.empty_because == EmptyBecause(
        NO_MATCH, filters=("memoryTypes", "project", "recordedAfter"), unsearched="archived"
    )
    # resolvedAfter alone is named alone: the state it implies was not sent.
    resolved = run(tenant, "xylophone quasar", resolved_after="2020-01-01T00:00:00Z")
    assert resolved.empty_because.filters == ("resolvedAfter",)


def test_an_empty_page_names_the_types_and_states_its_query_asks_for(tenant, corpus):
    """A type or a commitment's state is not among a memory's words: the words of a query that
    name one are told apart, with the filters that select what they name."""
    assert run(tenant, "Overdue todos?").empty_because.kind == KindAsked(
        words=("Overdue", "todos"), commitment_states=("open", "waiting")
    )
    assert run(tenant, "decisions and facts?").empty_because.kind == KindAsked(
        words=("decisions", "facts"), memory_types=("decision", "fact")
    )
    assert run(tenant, "xylophone quasar").empty_because.kind is None
    # A query with any other significant word is about that word, not a kind.
    assert run(tenant, "when does the xylophone shop open").empty_because.kind is None
    assert run(tenant, "xylophone release notes").empty_because.kind is None


def test_an_empty_page_names_a_type_asked_for_among_other_words(tenant, corpus):
    """ "open blockers in atlas" matched nothing closely enough: the blocker word is told apart
    with the type filter, as on a page whose first hit is of another type."""
    calendar_preference(tenant)
    blockers = KindAsked(("blockers",), ("blocker",), among_other_words=True)
    assert run(tenant, "when can I book meetings with the user about blockers?").empty_because == (
        EmptyBecause(UNDER_FLOOR, count=1, unsearched="archived", kind=blockers)
    )
    assert run(tenant, "xylophone blockers").empty_because == EmptyBecause(
        NO_MATCH, unsearched="archived", kind=blockers
    )
    # A type or state filter given makes it moot.
    for narrowed in ({"memory_types": ["note"]}, {"commitment_status": ["open"]}):
        assert run(tenant, "xylophone blockers", **narrowed).empty_because.kind is None


def test_a_commitment_state_named_among_other_words_names_its_filter(tenant):
    """'overdue', 'pending' and 'unresolved' are seldom a memory's own words: beside others, an
    empty page or a first hit that is not a commitment in those states names the states; 'open',
    'waiting' and 'resolved' are words of a text as a rule, and name nothing."""
    record_memory(owner=tenant, memory_type="note", topic="Infra", content="The infra budget.")
    waiting = KindAsked(("overdue",), (), ("open", "waiting"), among_other_words=True)
    assert run(tenant, "what is overdue in infra").kind_asked == waiting
    assert run(tenant, "what is overdue in xylophone").empty_because.kind == waiting
    assert run(tenant, "pending commitments for atlas xylophone").empty_because.kind == KindAsked(
        ("pending", "commitments"), (), ("open", "waiting"), among_other_words=True
    )
    # Beside a type that has no state, the type alone.
    assert run(tenant, "unresolved blockers in xylophone").empty_because.kind == KindAsked(
        ("blockers",), ("blocker",), among_other_words=True
    )
    for query in ("open items in xylophone", "waiting on xylophone", "resolved xylophone"):
        assert run(tenant, query).empty_because.kind is None, query
    # A first hit that is a commitment in the state asked for, or a state filter, makes it moot.
    record_memory(
        owner=tenant, memory_type="commitment", topic="Infra", content="Renew the infra certs."
    )
    assert run(tenant, "pending infra certs").kind_asked is None
    assert run(tenant, "what is overdue in infra", commitment_status=["open"]).kind_asked is None


def test_an_empty_page_says_when_nothing_could_have_matched(tenant, other_tenant):
    """An account holding no memory, or none yet at asOf, is told so rather than to ask
    otherwise; another account's memories count for nothing, and an archived one is a memory."""
    MemoryFactory(
        owner=other_tenant, content="xylophone", recorded_at=timezone.now() - timedelta(days=9)
    )
    for query in ("xylophone", "the", None):
        assert run(tenant, query).empty_because == EmptyBecause(NOTHING_STORED), query
    first = MemoryFactory(
        owner=tenant, content="quasar", recorded_at=timezone.now() - timedelta(days=2)
    )
    before = first.recorded_at - timedelta(microseconds=1)
    for query in ("xylophone", None):
        assert run(tenant, query, as_of=before.isoformat()).empty_because == EmptyBecause(
            NOTHING_RECORDED_BY, as_of=before
        )
    # At the instant of the first memory, it was recorded: the usual reason.
    assert run(tenant, "xylophone", as_of=first.recorded_at.isoformat()).empty_because == (
        EmptyBecause(NO_MATCH, filters=("asOf",))
    )
    archive_memory(owner=tenant, memory_id=first.id)
    assert run(tenant, "xylophone").empty_because == EmptyBecause(NO_MATCH, unsearched="archived")


def test_only_an_empty_first_page_says_why(tenant, corpus):
    assert run(tenant, "postgresql").empty_because is None  # hits
    listed = run(tenant, None, memory_types=["event"])  # no query: a listing, of no memory
    assert (listed.hits, listed.next_cursor) == ([], None)
    assert listed.empty_because == EmptyBecause(
        NOTHING_LISTED, filters=("memoryTypes",), unsearched="archived"
    )
    assert run(tenant, None, status="any").empty_because is None  # hits
    retros = [
        record_memory(owner=tenant, memory_type="note", topic="retro", content=f"sprint retro {n}")
        for n in range(2)
    ]
    first = run(tenant, "sprint retro", limit=1)
    [rest] = [memory for memory in retros if memory.id != first.hits[0].id]
    archive_memory(owner=tenant, memory_id=rest.id)
    later = run(tenant, "sprint retro", limit=1, cursor=first.next_cursor)
    assert (later.hits, later.next_cursor, later.empty_because) == ([], None, None)


def test_another_tenants_matches_never_explain_an_empty_page(tenant, other_tenant, corpus):
    calendar_preference(other_tenant)
    # Theirs would explain it, in their account.
    assert run(other_tenant, MEETINGS_QUESTION).empty_because.reason == UNDER_FLOOR
    assert run(tenant, MEETINGS_QUESTION).empty_because == EmptyBecause(
        NO_MATCH, unsearched="archived"
    )


# --- without a query: what the filters select, newest first ------------------------------------


def test_without_a_query_the_filters_list_the_current_memories_newest_first(
    tenant, other_tenant, corpus
):
    now = timezone.now()
    old, new = (
        MemoryFactory(owner=tenant, memory_type="decision", project="atlas", recorded_at=now - age)
        for age in (timedelta(days=40), timedelta(days=1))
    )
    revised = MemoryFactory(owner=tenant, memory_type="decision", project="atlas")
    successor = revise_memory(owner=tenant, predecessor_id=revised.id, content="Second thoughts.")
    archived = MemoryFactory(owner=tenant, memory_type="decision", project="atlas")
    archive_memory(owner=tenant, memory_id=archived.id)
    MemoryFactory(owner=tenant, memory_type="note", project="atlas")
    MemoryFactory(owner=other_tenant, memory_type="decision", project="atlas")

    page = run(tenant, None, memory_types=["decision"], project="atlas")

    assert [h.id for h in page.hits] == [successor.id, new.id, old.id]
    assert {(h.score, h.matched_by) for h in page.hits} == {(None, ())}
    assert page.next_cursor is None
    assert [h.id for h in run(tenant, None, project="atlas", status="archived").hits] == [
        archived.id
    ]
    assert len(run(tenant, None, limit=25).hits) == len(corpus) + 4  # old, new, successor, note


def test_a_listing_pages_through_every_memory_once_even_with_one_instant(tenant):
    """Memories recorded at the same instant are told apart by id, as the order is."""
    same_instant = timezone.now() - timedelta(hours=1)
    made = [MemoryFactory(owner=tenant, recorded_at=same_instant) for _ in range(7)]
    made += [MemoryFactory(owner=tenant) for _ in range(4)]
    first = run(tenant, None, limit=3)
    seen = [hit.id for hit in first.hits]
    cursor = first.next_cursor
    while cursor:
        # A memory written mid-listing waits for the next listing, as with a query.
        MemoryFactory(owner=tenant)
        page = run(tenant, None, limit=3, cursor=cursor)
        seen += [hit.id for hit in page.hits]
        cursor = page.next_cursor
    assert sorted(seen) == sorted(m.id for m in made) and len(seen) == len(made)
    recorded = [(m.recorded_at, m.id) for m in made]
    assert seen == [memory_id for _, memory_id in sorted(recorded, reverse=True)]


def test_a_listing_revised_between_pages_shows_the_version_its_first_page_saw(tenant):
    """Listing every blocker must reach every blocker: one revised after the first page is
    listed on a later page as it stood then (its successor, recorded later, is not), rather than
    dropped with its successor left out too."""
    now = timezone.now()
    older, oldest = (
        MemoryFactory(owner=tenant, memory_type="blocker", recorded_at=now - timedelta(days=d))
        for d in (2, 3)
    )
    newest = MemoryFactory(owner=tenant, memory_type="blocker", recorded_at=now - timedelta(days=1))
    first = run(tenant, None, memory_types=["blocker"], limit=1)
    successor = revise_memory(owner=tenant, predecessor_id=older.id, content="Still blocked.")

    rest = run(tenant, None, memory_types=["blocker"], limit=5, cursor=first.next_cursor)

    assert [hit.id for hit in first.hits + rest.hits] == [newest.id, older.id, oldest.id]
    assert rest.hits[0].valid_to == successor.recorded_at
    assert [hit.id for hit in run(tenant, None, memory_types=["blocker"]).hits] == [
        successor.id,
        newest.id,
        oldest.id,
    ]


def test_a_listing_reads_a_window_a_page_and_its_cursor_goes_on_past_it(tenant, monkeypatch):
    """A filter few memories pass costs one window of the account a page, not the whole account;
    a page may then hold fewer hits than asked (even none), and its cursor goes on from the last
    memory it read until every match is found."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 3)
    now = timezone.now()
    wanted = [
        MemoryFactory(owner=tenant, status="archived", recorded_at=now - timedelta(days=d))
        for d in (9, 10)
    ]
    for n in range(5):
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=n))
    pages = [run(tenant, None, status="archived", limit=5)]
    while pages[-1].next_cursor:
        pages.append(run(tenant, None, status="archived", limit=5, cursor=pages[-1].next_cursor))
    # Windows of 3: the 3 newest (none passes), 2 more and the first match, the second match.
    assert [[hit.id for hit in page.hits] for page in pages] == [[], [wanted[0].id], [wanted[1].id]]
    # Each page cut short by its window says how many memories it read; the last one does not,
    # nor does an empty first page explain itself as if nothing passed.
    assert [(page.window_read, page.empty_because) for page in pages] == [
        (3, None),
        (3, None),
        (None, None),
    ]
    # A page short of its limit because its window ended goes on; one whose window read the
    # account's last memory ends the listing.
    assert len(run(tenant, None, limit=5).hits) == 3 and run(tenant, None, limit=5).next_cursor
    full = run(tenant, None, limit=3)  # its window ended it, but it is full: nothing to explain
    assert (len(full.hits), bool(full.next_cursor), full.window_read) == (3, True, None)
    monkeypatch.setattr(listing, "LISTED_WINDOW", 7)
    assert [len(run(tenant, None, status="archived", limit=5).hits)] == [2]
    assert run(tenant, None, status="archived", limit=5).next_cursor is None


def test_a_listing_of_types_few_memories_have_fills_its_page(tenant, other_tenant, monkeypatch):
    """My preferences and blockers, in an account whose newest memories are all notes: the page
    lists them, newest first, rather than coming back empty with hasMore for the agent to page
    blindly through windows of notes."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 5)
    now = timezone.now()
    asked = [
        MemoryFactory(
            owner=tenant,
            memory_type=("preference", "blocker")[n % 2],
            recorded_at=now - timedelta(days=30 + n),
        )
        for n in range(5)
    ]
    for n in range(10):
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=n))
    MemoryFactory(owner=other_tenant, memory_type="preference")

    page = run(tenant, None, memory_types=["blocker", "preference"], limit=5)

    assert [hit.id for hit in page.hits] == [memory.id for memory in asked]
    assert page.next_cursor is None
    first = run(tenant, None, memory_types=["preference"], limit=2)
    assert [hit.id for hit in first.hits] == [asked[0].id, asked[2].id]
    rest = run(tenant, None, memory_types=["preference"], limit=2, cursor=first.next_cursor)
    assert [hit.id for hit in rest.hits] == [asked[4].id] and rest.next_cursor is None


@pytest.mark.parametrize("facet", ["project", "scope"])
def test_a_listing_of_a_project_or_scope_few_memories_have_fills_its_page(
    tenant, other_tenant, monkeypatch, facet
):
    """My memories of project (or scope) hangar, in an account whose newest memories are of
    others: the page lists them, newest first, rather than coming back empty with hasMore for
    the agent to page blindly through windows of other memories; one revised between pages is
    listed in the version the first page saw."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 3)
    now = timezone.now()
    asked = [
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=30 + n), **{facet: "hangar"})
        for n in range(4)
    ]
    for n in range(10):
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=n), **{facet: "payroll"})
    MemoryFactory(owner=other_tenant, **{facet: "hangar"})

    first = run(tenant, None, limit=2, **{facet: "hangar"})
    assert [hit.id for hit in first.hits] == [asked[0].id, asked[1].id]
    revise_memory(owner=tenant, predecessor_id=asked[2].id, content="Revised since.")
    rest = run(tenant, None, limit=2, cursor=first.next_cursor, **{facet: "hangar"})
    assert [(hit.id, hit.current) for hit in rest.hits] == [
        (asked[2].id, False),
        (asked[3].id, True),
    ]
    assert rest.next_cursor is None


def test_a_listing_of_commitments_pages_through_each_once_as_its_first_page_saw_it(
    tenant, monkeypatch
):
    """Open commitments of project atlas at work, among many newer notes and commitments that
    another filter leaves out: every page is full, each commitment is listed once, one revised
    between pages (or retyped) in the version the first page saw, a successor not at all."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 6)
    now = timezone.now()
    wanted = []
    for n in range(7):
        at = now - timedelta(days=10 + n)
        wanted.append(
            MemoryFactory(
                owner=tenant,
                memory_type="commitment",
                scope="work",
                project="atlas",
                recorded_at=at,
            )
        )
        if n in (1, 4):
            other = {"scope": "home"} if n == 1 else {"project": "zephyr"}
            MemoryFactory(
                owner=tenant,
                memory_type="commitment",
                **({"scope": "work", "project": "atlas"} | other),
                recorded_at=at - timedelta(hours=1),
            )
    MemoryFactory(
        owner=tenant,
        memory_type="commitment",
        commitment_status="resolved",
        scope="work",
        project="atlas",
        recorded_at=now - timedelta(days=12, hours=2),
    )
    for n in range(20):
        MemoryFactory(owner=tenant, scope="work", project="atlas", recorded_at=now - timedelta(n))
    note = MemoryFactory(owner=tenant, scope="work", project="atlas", recorded_at=now)
    asked = {"commitment_status": ["open"], "scope": "work", "project": "atlas", "limit": 2}

    pages = [run(tenant, None, **asked)]
    # Between pages: one listed already and two not yet are revised (one into a note), and a
    # note into a commitment of the kind asked for.
    revise_memory(owner=tenant, predecessor_id=wanted[0].id, content="Call the bank, twice.")
    revise_memory(owner=tenant, predecessor_id=wanted[3].id, content="Send the lease back.")
    revise_memory(owner=tenant, predecessor_id=wanted[5].id, memory_type="note")
    revise_memory(owner=tenant, predecessor_id=note.id, memory_type="commitment")
    while pages[-1].next_cursor:
        pages.append(run(tenant, None, **asked, cursor=pages[-1].next_cursor))

    assert [[hit.id for hit in page.hits] for page in pages] == [
        [wanted[0].id, wanted[1].id],
        [wanted[2].id, wanted[3].id],
        [wanted[4].id, wanted[5].id],
        [wanted[6].id],
    ]
    assert [hit.current for hit in pages[1].hits + pages[2].hits] == [True, False, True, False]


def test_a_listing_of_a_type_resumes_exactly_after_a_window_of_writes(tenant, monkeypatch):
    """More memories written since the first page than a page may read of them: the next page
    reads the account's window instead, and still lists each blocker once, as the first page
    saw it."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 3)
    now = timezone.now()
    blockers = [
        MemoryFactory(owner=tenant, memory_type="blocker", recorded_at=now - timedelta(days=n))
        for n in range(1, 6)
    ]
    pages = [run(tenant, None, memory_types=["blocker"], limit=2)]
    revise_memory(owner=tenant, predecessor_id=blockers[3].id, content="Still blocked.")
    for _ in range(4):
        MemoryFactory(owner=tenant, memory_type="blocker")
    while pages[-1].next_cursor:
        pages.append(
            run(tenant, None, memory_types=["blocker"], limit=2, cursor=pages[-1].next_cursor)
        )

    listed = [hit.id for page in pages for hit in page.hits]
    assert listed == [blocker.id for blocker in blockers]


def test_a_listing_cursor_ending_at_a_window_of_other_memories_goes_on(tenant, monkeypatch):
    """A cursor that ended a short page at the last memory of the account's window (as a
    listing of a type read the whole account's memories a page, whatever their type) resumes
    right after that memory."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 3)
    now = timezone.now()
    blockers = [
        MemoryFactory(owner=tenant, memory_type="blocker", recorded_at=now - timedelta(days=9 + n))
        for n in range(3)
    ]
    notes = [MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=n)) for n in range(5)]
    filters = clean_filters(memory_types=["blocker"])
    window_end = Position(
        mode="listed",
        score=0.0,
        recorded_at=notes[2].recorded_at,
        id=notes[2].id,
        snapshot=now,
        statistics=None,
    ).encode(filters.fingerprint(tenant.pk, None, thread_id=None))

    page = run(tenant, None, memory_types=["blocker"], limit=5, cursor=window_end)

    assert [hit.id for hit in page.hits] == [blocker.id for blocker in blockers]
    assert page.next_cursor is None


def test_a_listing_cursor_is_not_a_search_cursor(tenant):
    for n in range(3):
        MemoryFactory(owner=tenant, content=f"bound cursor {n}")
    listing = run(tenant, None, limit=1).next_cursor
    searching = run(tenant, "bound cursor", limit=1).next_cursor
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(tenant, "bound cursor", limit=1, cursor=listing)
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(tenant, None, limit=1, cursor=searching)


def test_a_listing_of_a_project_no_memory_has_names_near_ones(tenant):
    MemoryFactory(owner=tenant, project="atlas")
    with pytest.raises(NotFound, match="did you mean 'atlas'"):
        run(tenant, None, project="atlass")


def test_a_project_in_another_case_is_the_accounts_on_every_page(tenant, other_tenant):
    """An agent that typed 'Atlas' for the account's 'atlas' had an empty page (and a
    not_found naming 'atlas'), though a write of 'Atlas' joins 'atlas'. Now it reads atlas's
    memories; its cursor goes on whichever case the next page is asked in; another tenant's
    'Atlas' is never the spelling taken."""
    ours = [
        MemoryFactory(owner=tenant, project="atlas", content=f"atlas deploy note {n}")
        for n in range(3)
    ]
    MemoryFactory(owner=other_tenant, project="Atlas", content="atlas deploy note theirs")

    first = run(tenant, "deploy note", project="Atlas", limit=2)
    rest = run(tenant, "deploy note", project="ATLAS", limit=2, cursor=first.next_cursor)
    listing = run(tenant, None, project="aTlAs", limit=5)

    ids = {memory.id for memory in ours}
    assert {hit.id for hit in first.hits + rest.hits} == ids
    assert len(first.hits + rest.hits) == 3 and rest.next_cursor is None
    assert {hit.id for hit in listing.hits} == ids


def test_a_project_as_of_an_instant_is_spelt_as_it_was_then(tenant):
    """The account spells it 'atlas' now, 'Atlas' then: asOf reads the memory as it was, in
    that instant's spelling (today's would find nothing)."""
    then = record_memory(
        owner=tenant,
        memory_type="fact",
        topic="ships",
        content="Atlas ships on Fridays.",
        project="Atlas",
    )
    instant = timezone.now()
    revise_memory(owner=tenant, predecessor_id=then.id, project="atlas")

    listed = run(tenant, None, project="Atlas", as_of=instant)
    found = run(tenant, "ships Fridays", project="Atlas", as_of=instant)

    assert [hit.id for hit in listed.hits] == [then.id]
    assert [hit.id for hit in found.hits] == [then.id]


def page_through(owner, query: str, first, *, limit: int) -> list:
    """The ids of `first`'s hits and of every later page's, in order."""
    seen, cursor = [hit.id for hit in first.hits], first.next_cursor
    while cursor:
        page = run(owner, query, limit=limit, cursor=cursor)
        seen += [hit.id for hit in page.hits]
        cursor = page.next_cursor
    return seen


@pytest.fixture
def rare_and_common(tenant, settings):
    """3 memories holding a rare word, then 12 holding a common one, and 200 others."""
    settings.SEARCH_EMBEDDER = "none"  # words only: scores depend on the word statistics
    now = timezone.now()
    rare = [
        MemoryFactory(
            owner=tenant, content=f"beta note {n}", recorded_at=now - timedelta(minutes=n)
        )
        for n in range(3)
    ]
    common = [
        MemoryFactory(
            owner=tenant, content=f"alpha note {n}", recorded_at=now - timedelta(minutes=10 + n)
        )
        for n in range(12)
    ]
    others = [
        MemoryFactory(
            owner=tenant, content=f"unrelated {n}", recorded_at=now - timedelta(hours=1 + n)
        )
        for n in range(200)
    ]
    return rare, common, others


def test_a_revision_between_pages_does_not_shift_the_later_pages(tenant, rare_and_common):
    rare, common, others = rare_and_common
    first = run(tenant, "alpha beta", limit=5)
    # The account's size, and so every term's weight, changes: not the later pages' scores.
    revise_memory(owner=tenant, predecessor_id=others[0].id, content="still unrelated")
    seen = page_through(tenant, "alpha beta", first, limit=5)
    assert len(seen) == len(set(seen)) == 15
    assert set(seen) == {memory.id for memory in rare + common}


def test_archiving_a_hit_between_pages_repeats_and_skips_nothing(tenant, rare_and_common):
    rare, common, _ = rare_and_common
    first = run(tenant, "alpha beta", limit=5)
    assert [hit.id for hit in first.hits][:3] == [memory.id for memory in rare]
    # The hits' word statistics change (one fewer holds "beta"): not the later pages' scores.
    archive_memory(owner=tenant, memory_id=rare[0].id)
    seen = page_through(tenant, "alpha beta", first, limit=5)
    assert len(seen) == len(set(seen)) == 15
    assert set(seen) == {memory.id for memory in rare + common}


def test_an_archive_between_pages_does_not_drop_the_matches_of_a_rare_word(
    tenant, settings, monkeypatch
):
    """The walk stops at its most recent matches (5 here, 300 in production); a word few of them
    hold is looked up again for older matches. An archive between pages lets an older match into
    the walk: the word it holds must not turn common there and lose its older matches."""
    settings.SEARCH_EMBEDDER = "none"
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 5)
    now = timezone.now()

    def recorded(minutes_ago: int, content: str):
        return MemoryFactory(
            owner=tenant, content=content, recorded_at=now - timedelta(minutes=minutes_ago)
        )

    newest = recorded(1, "alpha note one")
    recorded(2, "alpha note two")
    for n in range(3):
        recorded(3 + n, f"alpha zulu note {n}")  # 3 of the walk's 5 hold "zulu": rare
    recorded(10, "alpha zulu four")  # the walk's sixth match
    zulu_only = [recorded(100 + n, f"zulu record {n}") for n in range(3)]
    for n in range(20):
        recorded(1000 + n, f"unrelated {n}")
    everything = [hit.id for hit in run(tenant, "alpha zulu", limit=25).hits]
    assert {memory.id for memory in zulu_only} <= set(everything)
    first = run(tenant, "alpha zulu", limit=3)
    archive_memory(owner=tenant, memory_id=newest.id)  # the sixth match joins the walk
    seen = page_through(tenant, "alpha zulu", first, limit=3)
    assert seen == [memory_id for memory_id in everything if memory_id != newest.id]


@pytest.mark.parametrize("joins", ["archived", "thread"])
def test_a_memory_joining_the_filter_between_pages_pushes_no_match_out(
    tenant, settings, monkeypatch, joins
):
    """A `status: archived` or thread search walks that set's most recent matches (5 here); a
    memory archived or added to the thread between pages is a newer match: the later pages still
    rank the first page's oldest match."""
    settings.SEARCH_EMBEDDER = "none"
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 5)
    now = timezone.now()
    newer, *older = [
        MemoryFactory(
            owner=tenant, content=f"alpha entry {n}", recorded_at=now - timedelta(minutes=n)
        )
        for n in range(6)
    ]
    filters = {"status": "archived"} if joins == "archived" else {"thread": "entries"}
    if joins == "thread":
        create_thread(owner=tenant, name="entries")
        add_thread_members(owner=tenant, name="entries", memory_ids=[m.id for m in older])
    else:
        for memory in older:
            archive_memory(owner=tenant, memory_id=memory.id)
    first = run(tenant, "alpha entry", limit=2, **filters)
    if joins == "thread":
        add_thread_members(owner=tenant, name="entries", memory_ids=[newer.id])
    else:
        archive_memory(owner=tenant, memory_id=newer.id)
    seen, cursor = [hit.id for hit in first.hits], first.next_cursor
    while cursor:
        page = run(tenant, "alpha entry", limit=2, cursor=cursor, **filters)
        seen += [hit.id for hit in page.hits]
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert {memory.id for memory in older} <= set(seen)


def test_a_memory_archived_between_pages_pushes_no_match_of_a_rare_word_out(
    tenant, settings, monkeypatch
):
    """A rare word's own walk stops at its most recent matches too (2 here, 20 in production):
    a memory archived between pages that holds the word is a newer match of a `status:
    archived` search, and the later pages still rank the first page's oldest one."""
    settings.SEARCH_EMBEDDER = "none"
    patch_search(monkeypatch, "LEXICAL_CANDIDATES", 5)
    patch_search(monkeypatch, "RARE_TERM_CANDIDATES", 2)
    now = timezone.now()

    def recorded(minutes_ago: int, content: str):
        return MemoryFactory(
            owner=tenant, content=content, recorded_at=now - timedelta(minutes=minutes_ago)
        )

    notes = [recorded(n, f"alpha note {n}") for n in range(6)]  # the walk's 5, none with zulu
    newest_zulu, joining, oldest_zulu = (recorded(100 + n, f"zulu record {n}") for n in range(3))
    for memory in [*notes, newest_zulu, oldest_zulu]:
        archive_memory(owner=tenant, memory_id=memory.id)
    first = run(tenant, "alpha zulu", limit=1, status="archived")
    assert [hit.id for hit in first.hits] == [newest_zulu.id]
    archive_memory(owner=tenant, memory_id=joining.id)  # between the two zulu matches
    seen, cursor = [hit.id for hit in first.hits], first.next_cursor
    while cursor:
        page = run(tenant, "alpha zulu", limit=1, cursor=cursor, status="archived")
        seen += [hit.id for hit in page.hits]
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert oldest_zulu.id in seen


def test_a_memory_stamped_by_a_clock_ahead_of_ours_is_found_at_once(tenant):
    # Another server process, whose clock runs ahead of this one's, recorded it.
    ahead = MemoryFactory(
        owner=tenant,
        topic="Zeppelin hangar lease",
        content="We renew the zeppelin hangar lease in March.",
        recorded_at=timezone.now() + timedelta(seconds=30),
    )
    assert [hit.id for hit in run(tenant, "zeppelin hangar").hits] == [ahead.id]
    # Its revision is stamped no earlier than it was: found at once too, in its place.
    successor = revise_memory(
        owner=tenant, predecessor_id=ahead.id, content="We renew the zeppelin hangar lease in May."
    )
    assert [hit.id for hit in run(tenant, "zeppelin hangar").hits] == [successor.id]


def test_the_pages_of_a_search_that_saw_a_memory_stamped_ahead_repeat_and_skip_nothing(
    tenant, rare_and_common
):
    rare, common, _ = rare_and_common
    ahead = MemoryFactory(
        owner=tenant, content="alpha beta ahead", recorded_at=timezone.now() + timedelta(seconds=30)
    )
    first = run(tenant, "alpha beta", limit=5)
    assert first.hits[0].id == ahead.id
    seen = page_through(tenant, "alpha beta", first, limit=5)
    assert len(seen) == len(set(seen)) == 16
    assert set(seen) == {memory.id for memory in [ahead, *rare, *common]}


def test_a_cursor_of_the_longest_query_fits_its_bound(tenant, settings):
    settings.SEARCH_EMBEDDER = "none"
    words = [f"{a}{b}" for a in "bcdfghjklmnpqrstvwxz" for b in "aeiou"][:166]
    for n in range(40):
        MemoryFactory(owner=tenant, content=" ".join(words[n % 7 :: 3]) + f" entry {n}")
    query = " ".join(words)[:QUERY_MAX]
    first = run(tenant, query, limit=1)
    assert first.next_cursor and len(first.next_cursor) <= CURSOR_MAX
    assert len(page_through(tenant, query, first, limit=1)) == 40


def test_cursor_is_bound_to_its_account_query_and_filters(tenant, other_tenant):
    for owner in (tenant, other_tenant):
        for n in range(3):
            MemoryFactory(owner=owner, content=f"bound cursor {n}")
    cursor = run(tenant, "bound cursor", limit=1).next_cursor
    assert cursor
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(tenant, "bound", limit=1, cursor=cursor)
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(tenant, "bound cursor", limit=1, cursor=cursor, scope="work")
    # Another account's: its instant and word statistics are not this one's.
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(other_tenant, "bound cursor", limit=1, cursor=cursor)
    with pytest.raises(InvalidInput, match="cursor: is not a cursor this server issued"):
        run(tenant, "bound cursor", limit=1, cursor=cursor[:-2] + "xx")


def test_a_cursor_is_bound_to_the_status_searched_given_or_by_default(tenant):
    """status 'active' is what a search without status searches ('any' as of an instant): a
    cursor of either continues the other; another status is another search."""
    for n in range(3):
        MemoryFactory(owner=tenant, content=f"status cursor {n}")
    as_of = timezone.now().isoformat()
    for default, others in (({}, ("archived", "any")), ({"as_of": as_of}, ("active", "archived"))):
        given = {"status": "any" if default else "active"}
        for issued, continued in (({}, given), (given, {})):
            cursor = run(tenant, "status cursor", limit=1, **default, **issued).next_cursor
            assert run(tenant, "status cursor", limit=1, cursor=cursor, **default, **continued).hits
            for other in others:
                with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
                    run(tenant, "status cursor", limit=1, cursor=cursor, **default, status=other)


def resealed(payload: dict, issued_at: float) -> str:
    """A cursor carrying `payload`, sealed as search seals one, at the instant `issued_at`."""
    return _sealed(payload, int(issued_at))


def opened(cursor: str) -> dict:
    """What `cursor` carries, as the server reads it."""
    return _opened(cursor)[0]


def test_a_cursor_older_than_its_lifetime_is_refused(tenant):
    for n in range(3):
        MemoryFactory(owner=tenant, content=f"aging cursor {n}")
    payload = opened(run(tenant, "aging cursor", limit=1).next_cursor)
    young = resealed(payload, time.time() - CURSOR_MAX_AGE + 60)
    assert len(run(tenant, "aging cursor", limit=1, cursor=young).hits) == 1
    old = resealed(payload, time.time() - CURSOR_MAX_AGE - 60)
    with pytest.raises(InvalidInput) as refused:
        run(tenant, "aging cursor", limit=1, cursor=old)
    assert str(refused.value) == (
        "invalid_input: cursor: has expired (a cursor lasts 24 hours); omit it to start a new"
        " search"
    )


def test_a_cursor_of_another_shape_is_refused(tenant):
    for n in range(3):
        MemoryFactory(owner=tenant, content=f"shaped cursor {n}")
    payload = opened(run(tenant, "shaped cursor", limit=1).next_cursor)
    assert len(payload["w"]) == 7
    for words in (payload["w"][:3], payload["w"][:6], [*payload["w"], 1]):
        cursor = resealed({**payload, "w": words}, time.time())
        with pytest.raises(InvalidInput, match="cursor: is not a cursor this server issued"):
            run(tenant, "shaped cursor", limit=1, cursor=cursor)
    # An instant without its offset cannot be compared with the memories' (a server issues
    # none); each such field is refused as the others are, not failed on.
    for field in ("r", "t"):
        naive = {**payload, field: payload[field].replace("+00:00", "")}
        with pytest.raises(InvalidInput, match="cursor: is not a cursor this server issued"):
            run(tenant, "shaped cursor", limit=1, cursor=resealed(naive, time.time()))


def test_a_cursor_counting_other_terms_than_its_query_has_is_refused(tenant):
    """A cursor issued before an upgrade that reads a query's terms otherwise (another count of
    them) is refused by name, not scored against the wrong terms."""
    for n in range(3):
        MemoryFactory(owner=tenant, content=f"counted cursor {n}")
    payload = opened(run(tenant, "counted cursor", limit=1).next_cursor)
    total, held_by, *rest = payload["w"]
    for counts in (held_by[:1], [*held_by, 1]):
        cursor = resealed({**payload, "w": [total, counts, *rest]}, time.time())
        with pytest.raises(InvalidInput) as refused:
            run(tenant, "counted cursor", limit=1, cursor=cursor)
        assert str(refused.value) == (
            "invalid_input: cursor: was issued by an earlier version of this server; omit it to"
            " start a new search"
        )


def test_a_cursor_is_bound_to_its_thread_as_thread_names_compare(tenant):
    # Names compare case-folded: "STRASSE" names the thread "Straße"; "Strand" is another.
    memories = [MemoryFactory(owner=tenant, content=f"street works {n}") for n in range(3)]
    for name in ("Straße", "Strand"):
        create_thread(owner=tenant, name=name)
        add_thread_members(owner=tenant, name=name, memory_ids=[m.id for m in memories])
    cursor = run(tenant, "street works", limit=1, thread="Straße").next_cursor
    assert run(tenant, "street works", limit=1, thread="STRASSE", cursor=cursor).hits
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(tenant, "street works", limit=1, thread="strand", cursor=cursor)


def test_the_next_page_of_a_deleted_threads_search_is_not_found(tenant):
    memories = [MemoryFactory(owner=tenant, content=f"street works {n}") for n in range(3)]
    create_thread(owner=tenant, name="works")
    add_thread_members(owner=tenant, name="works", memory_ids=[m.id for m in memories])
    cursor = run(tenant, "street works", limit=1, thread="works").next_cursor
    assert cursor
    delete_thread(owner=tenant, name="works")
    with pytest.raises(NotFound, match="thread 'works'"):
        run(tenant, "street works", limit=1, thread="works", cursor=cursor)


def test_a_long_question_that_matches_nothing_gets_no_topic_lookalikes(tenant, settings):
    # The topic fallback is for a misspelt topic name. A question of more words that matched
    # neither by words nor by meaning gets no hits, even from a topic sharing its trigrams.
    settings.SEARCH_EMBEDDER = "none"  # words only: the typos below match no word
    topic = "Analytics warehouse capacity review"
    MemoryFactory(owner=tenant, topic=topic, content="entry")
    question = "what was the anlytics wearhouse capcity reveiw about"
    assert len(question.split()) > TOPIC_FALLBACK_WORDS_MAX
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity(%s, %s)", [topic, question])
        assert cursor.fetchone()[0] >= TOPIC_SIMILARITY_MIN  # a lookalike by trigrams
    assert run(tenant, question).hits == []
    # Misspelt as the name it is, it is found.
    assert [hit.topic for hit in run(tenant, "anlytics wearhouse capcity reveiw").hits] == [topic]


@pytest.mark.parametrize("query", ["the", "what is it", '"the"'])
def test_a_query_of_stop_words_only_gets_no_topic_lookalikes(tenant, settings, query):
    settings.SEARCH_EMBEDDER = "none"
    MemoryFactory(owner=tenant, topic="Theme", content="Dark colours.")
    MemoryFactory(owner=tenant, topic="What is it", content="A mystery box.")
    assert run(tenant, query).hits == []


def test_the_topic_fallback_stops_at_its_word_limit(tenant, settings):
    settings.SEARCH_EMBEDDER = "none"
    MemoryFactory(owner=tenant, topic="Quarterly zeppelin hangar lease review", content="entry")
    name = "Quartrely zepelin hangr leese reveiw"  # 5 words, misspelt: no word matches
    padded = [f"{name} xq", f"{name} xq zv"]  # 6 and 7 words
    assert [len(query.split()) for query in padded] == [6, TOPIC_FALLBACK_WORDS_MAX + 1]
    with connection.cursor() as cursor:  # both are trigram lookalikes of the topic
        cursor.execute("SELECT similarity(topic, %s) FROM memories_memory", [padded[1]])
        assert cursor.fetchone()[0] >= TOPIC_SIMILARITY_MIN
    assert len(run(tenant, padded[0]).hits) == 1
    assert run(tenant, padded[1]).hits == []


def test_the_topic_fallback_bound_counts_memories_of_every_type(
    buried_decision, tenant, monkeypatch, settings
):
    settings.SEARCH_EMBEDDER = "none"
    misspelt = "Zepelin hangr leese"  # no word matches: only the fallback finds it
    patch_search(monkeypatch, "TOPIC_FALLBACK_RECENT", 4)
    assert run(tenant, misspelt, memory_types=["decision"]).hits == []
    patch_search(monkeypatch, "TOPIC_FALLBACK_RECENT", 5)
    assert [hit.id for hit in run(tenant, misspelt, memory_types=["decision"]).hits] == [
        buried_decision.id
    ]


def test_the_topic_fallback_reads_a_small_thread_whole(
    buried_decision, tenant, monkeypatch, settings
):
    """A misspelt topic of a small thread's old member is found among the thread's members, not
    among the account's most recent memories only."""
    settings.SEARCH_EMBEDDER = "none"
    create_thread(owner=tenant, name="hangar")
    add_thread_members(owner=tenant, name="hangar", memory_ids=[buried_decision.id])
    misspelt = "Zepelin hangr leese"  # no word matches: only the fallback finds it
    patch_search(monkeypatch, "TOPIC_FALLBACK_RECENT", 1)
    assert run(tenant, misspelt).hits == []
    assert [hit.id for hit in run(tenant, misspelt, thread="hangar").hits] == [buried_decision.id]
    patch_search(
        monkeypatch, "THREAD_READ_BY_MEMBER_MAX", 0
    )  # a larger thread: its recent memories
    assert run(tenant, misspelt, thread="hangar").hits == []


def test_the_topic_fallback_pages_too(tenant):
    for n in range(5):
        MemoryFactory(owner=tenant, topic=f"Kubernetes cluster {n}", content=f"node pool {n}")
    MemoryFactory(owner=tenant, topic="Lunch", content="kubernetes is not lunch")
    first = run(tenant, "Kubernets clustr", limit=3)  # typos: no word matches
    assert len(first.hits) == 3 and first.next_cursor
    second = run(tenant, "Kubernets clustr", limit=3, cursor=first.next_cursor)
    topics = [hit.topic for hit in first.hits + second.hits]
    assert sorted(topics) == [f"Kubernetes cluster {n}" for n in range(5)]
    assert second.next_cursor is None


# --- plans that do not depend on table statistics ------------------------------------------


def bulk_load_notes(owner, count: int, project: str | None = None) -> None:
    """`count` short notes for `owner` in one statement, each older than the last ("note 1 about
    billing", "note 2 about backups", ...), of `project`, with one vector for all."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memory (id, owner_id, content, content_length, memory_type,
                topic, scope, tags, recorded_at, status, embedding, project)
            SELECT gen_random_uuid(), %(owner)s, c, length(c), 'note', 'topic ' || n, 'general',
                   '{}', now() - n * interval '1 second', 'active',
                   array_fill(0.0625::real, ARRAY[256])::vector, %(project)s
            FROM generate_series(1, %(count)s) n,
                 LATERAL (SELECT 'note ' || n || ' about ' || (ARRAY['deploys', 'billing',
                          'backups', 'latency'])[1 + n %% 4] AS c) body
            """,
            {"owner": owner.pk, "count": count, "project": project},
        )


def test_a_larger_account_needs_a_closer_match(tenant, settings, monkeypatch):
    """The relevance floor rises with each tenfold growth of the account past
    RELEVANCE_FLOOR_SIZE memories (here steeply, so that even a full match falls under it)."""
    settings.SEARCH_EMBEDDER = "none"
    release = MemoryFactory(
        owner=tenant, topic="Release train", content="Mobile releases ship every second Tuesday."
    )
    question = "how often do mobile releases ship?"
    patch_search(monkeypatch, "RELEVANCE_FLOOR_PER_DECADE", 1.0)
    assert [hit.id for hit in run(tenant, question).hits] == [release.id]
    bulk_load_notes(tenant, 10 * scoring.RELEVANCE_FLOOR_SIZE - 1)
    assert run(tenant, question).hits == []
    patch_search(monkeypatch, "RELEVANCE_FLOOR_PER_DECADE", 0.0)
    assert [hit.id for hit in run(tenant, question).hits] == [release.id]


@pytest.mark.parametrize(
    "narrowing",
    [
        {"project": "mobile"},
        {"scope": "work"},
        {"commitment_status": ["waiting"]},
        {"thread": "Releases"},
    ],
    ids=lambda narrowing: next(iter(narrowing)),
)
def test_a_question_filtered_to_few_memories_needs_no_closer_match_than_in_a_small_account(
    tenant, settings, monkeypatch, narrowing
):
    """The floor rises with how many memories compete for the best score: those of the project,
    the scope, the commitment states or the small thread that choose what a search reads, not
    the account's. An agent asked for one project's blockers in an account of 7,000 memories
    and got nothing: its two blockers scored under the floor of the whole account."""
    settings.SEARCH_EMBEDDER = "none"
    release = MemoryFactory(
        owner=tenant,
        memory_type="commitment",
        topic="Release train",
        content="Mobile releases ship every second Tuesday.",
        project="mobile",
        scope="work",
    )
    resolve_commitment(owner=tenant, memory_id=release.id, status="waiting")
    create_thread(owner=tenant, name="Releases")
    add_thread_members(owner=tenant, name="Releases", memory_ids=[release.id])
    question = "how often do mobile releases ship?"
    patch_search(monkeypatch, "RELEVANCE_FLOOR_PER_DECADE", 1.0)
    bulk_load_notes(tenant, 10 * scoring.RELEVANCE_FLOOR_SIZE - 1)
    assert run(tenant, question).hits == []
    assert [hit.id for hit in run(tenant, question, **narrowing).hits] == [release.id]


def test_a_project_holding_all_of_a_large_account_is_held_to_the_accounts_floor(
    tenant, settings, monkeypatch
):
    """The floor follows how many memories compete: a project that holds every one of the
    account's 10,000 memories competes as the account does. Its count stops one past
    COMPARED_EXACTLY_MAX (5,001), which is no size: the search must not be held to the floor of
    5,001 memories."""
    settings.SEARCH_EMBEDDER = "none"
    MemoryFactory(
        owner=tenant,
        topic="Release train",
        content="Mobile releases ship every second Tuesday.",
        project="mobile",
    )
    bulk_load_notes(tenant, scoring.TENANT_SIZE_COUNTED_MAX - 1, project="mobile")
    competing = []
    floor = candidates.relevance_floor

    def spy(size):
        competing.append(size)
        return floor(size)

    monkeypatch.setattr(candidates, "relevance_floor", spy)
    question = "how often do mobile releases ship?"
    run(tenant, question)
    run(tenant, question, project="mobile")
    assert competing[0] == scoring.TENANT_SIZE_COUNTED_MAX
    assert competing[1] == competing[0]


def test_a_memory_holding_every_rare_term_asked_for_answers_in_a_large_account(tenant, settings):
    """A memory three times as long as the others holding both words a query asks for is no
    partial match: it answers in an account of 2,000 memories, where the floor has risen."""
    settings.SEARCH_EMBEDDER = "none"
    lease = MemoryFactory(
        owner=tenant,
        topic="Lease terms",
        content="The zeppelin hangar lease renews every March; the landlord wants notice by June.",
    )
    for n in range(10):
        MemoryFactory(owner=tenant, topic=f"Door {n}", content=f"Hangar door {n} repainted.")
    bulk_load_notes(tenant, 10 * scoring.RELEVANCE_FLOOR_SIZE)
    hits = run(tenant, "zeppelin hangar").hits
    assert hits[0].id == lease.id
    assert hits[0].score >= scoring.relevance_floor(2_000)


def test_a_full_match_in_the_content_alone_scores_above_the_highest_floor():
    """Whatever its length, a memory whose content holds every one of the query's rarest terms
    (the weakest full match: no term in its topic or tags) scores above the floor of the
    largest account: a full match is never taken for no answer."""
    longest = 1 - scoring.BM25_B + scoring.BM25_B * scoring.LENGTH_RATIO_MAX
    weakest = (1 / longest) / (scoring.BM25_K1 + 1 / longest)
    assert weakest > scoring.relevance_floor(scoring.TENANT_SIZE_COUNTED_MAX)


def test_the_relevance_floor_by_account_size():
    floor, per_decade = scoring.RELEVANCE_FLOOR, scoring.RELEVANCE_FLOOR_PER_DECADE
    size = scoring.RELEVANCE_FLOOR_SIZE
    assert scoring.relevance_floor(1) == scoring.relevance_floor(size) == floor
    assert scoring.relevance_floor(10 * size) == pytest.approx(floor + per_decade)
    # The account counts up to TENANT_SIZE_COUNTED_MAX memories, as for the IDF.
    counted = scoring.TENANT_SIZE_COUNTED_MAX
    assert scoring.relevance_floor(10**6) == scoring.relevance_floor(counted) > floor + per_decade


@pytest.fixture
def bulk_loaded_tenant(account_indexes_dropped, tenant):
    """A large tenant written in one statement, its indexes built, and tables whose statistics
    were never gathered (as right after a bulk load, before autovacuum's ANALYZE): the memories'
    and the memberships' sizes and their columns' (which an ANALYZE of earlier tests' rows may
    have left)."""
    bulk_load_notes(tenant, account_indexes.LARGE_ACCOUNT_MIN + 500)
    for kind in account_indexes.KINDS:
        kind.sync()
    with connection.cursor() as cursor:
        as_never_analyzed(cursor, "memories_memory", "memories_threadmembership")
    return tenant


@contextmanager
def explaining(
    plans: list[dict], starting: str | tuple[str, ...] = "(SELECT m.id"
) -> Iterator[None]:
    """The plan of each search statement `starting` so (by default the walk's and the nearest
    scan's) in `plans`, as the statement is sent: before any other wrapper of the connection
    (row-level security's) adds to it."""

    def explain(execute, sql, params, many, context):
        if search_statement(sql)[1].lstrip().startswith(starting):
            plans.append(explain_as_sent(execute, sql, params, many, context))
        return execute(sql, params, many, context)

    connection.ensure_connection()
    connection.execute_wrappers.insert(0, explain)
    try:
        yield
    finally:
        connection.execute_wrappers.remove(explain)


@pytest.fixture(params=["as the owner", "as the app role under RLS"])
def acting_as(request) -> Callable[[int], AbstractContextManager]:
    """Searches as the table's owner, or as a server process does: as the app role, under
    row-level security, whose policy adds its own condition to every plan."""
    if request.param == "as the owner":
        return lambda tenant_id: nullcontext()
    request.getfixturevalue("orm_as_app_role")
    return tenancy.acting_for


def test_a_large_tenant_is_searched_with_bounded_plans_before_any_analyze(
    bulk_loaded_tenant, acting_as
):
    plans = []
    question = "what does note 5017 say about billing, and where are the backups?"
    for narrowing in ({}, {"memory_types": ["decision", "fact"]}):
        plans.clear()
        with acting_as(bulk_loaded_tenant.pk), explaining(plans):
            hits = run(bulk_loaded_tenant, question, **narrowing).hits
        assert bool(hits) == (not narrowing)  # every memory is a note
        words, meaning = plans
        # Words: the tenant's memories newest first until enough match, never a sort of all;
        # with a type filter, those of each type, newest first, merged.
        if narrowing:
            assert "memory_owner_type_current" in json.dumps(words)
            assert '"Merge Append"' in json.dumps(words)
        else:
            assert "memory_owner_recent" in json.dumps(words)
        assert '"Sort"' not in json.dumps(words)
        # Meaning: the account's own HNSW index, not a sort of its vectors.
        assert account_indexes.NEAREST.index_name(bulk_loaded_tenant.pk) in json.dumps(meaning)
        assert '"Sort"' not in json.dumps(meaning)


def test_a_listing_of_a_type_in_a_large_tenant_reads_its_index_before_any_analyze(
    bulk_loaded_tenant, acting_as
):
    """Its pages read the newest memories of the type through the index on owner, type and
    recency, and a later page the memories revised since the first by key: never the account's
    recency index whole, nor a scan of its rows."""
    plans = []
    notes = {"memory_types": ["note"], "limit": 3}
    with acting_as(bulk_loaded_tenant.pk):
        first = run(bulk_loaded_tenant, None, **notes)
        fifth = run(bulk_loaded_tenant, None, **notes | {"limit": 5}).hits[4]
        revise_memory(owner=bulk_loaded_tenant, predecessor_id=fifth.id, content="Revised.")
        with explaining(plans, starting=("SELECT count(*)", "SELECT l.id")):
            second = run(bulk_loaded_tenant, None, **notes, cursor=first.next_cursor)
    assert [(hit.id, hit.current) for hit in second.hits][1] == (fifth.id, False)
    since, page = map(json.dumps, plans)
    # The memories recorded since the first page, and those they revised.
    assert "memory_owner_recent" in since and '"Seq Scan"' not in since
    assert "memory_owner_type_current" in page and '"Merge Append"' in page
    assert "(id = ANY (" in page  # the revised memory, by key
    assert "memory_owner_recent" not in page and '"Seq Scan"' not in page


LEDGER_QUESTION = "where does the ledger live, and is it replicated?"


def ledger_fact(owner, **facets):
    """The memory that answers LEDGER_QUESTION, in the scope or project `facets` name."""
    return record_memory(
        owner=owner,
        memory_type="fact",
        topic="Ledger store",
        content="The ledger lives in PostgreSQL 16, replicated to a standby in Frankfurt.",
        **facets,
    )


@pytest.mark.parametrize("facet", ["project", "scope"])
def test_a_question_about_a_project_or_scope_in_a_large_tenant_reads_it_alone_before_any_analyze(
    bulk_loaded_tenant, acting_as, facet
):
    """A question filtered to a project or a scope of few memories walks those memories for its
    words, newest first through the index on owner, project or scope, and recency, and compares
    each of them with the question by meaning: never the account's newest memories, nor its
    HNSW index narrowed to the few that pass, nor a scan of its rows."""
    owner = bulk_loaded_tenant
    plans = []
    with acting_as(owner.pk):
        ledger = ledger_fact(owner, **{facet: "atlas"})
        record_memory(
            owner=owner, memory_type="fact", topic="Release", content="Fridays.", **{facet: "atlas"}
        )
        with explaining(plans):
            hits = run(owner, LEDGER_QUESTION, **{facet: "atlas"}).hits
    assert [hit.id for hit in hits] == [ledger.id]
    words, meaning = map(json.dumps, plans)
    index = f"memory_owner_{facet}_recent"
    assert index in words and "memory_owner_recent" not in words and '"Sort"' not in words
    assert index in meaning
    assert account_indexes.NEAREST.index_name(owner.pk) not in meaning
    assert '"Seq Scan"' not in meaning


def test_a_thread_in_a_large_tenant_is_read_alone_before_any_analyze(bulk_loaded_tenant, acting_as):
    """A question or a listing filtered to a small thread reads the thread's members by key,
    once for the question's words and its meaning (walked for the one, each compared with it
    for the other): never the
    account's newest memories, nor its HNSW index narrowed to the few that pass, nor a scan of
    its rows; nor the memberships again for each member, whose table has no statistics
    either."""
    owner = bulk_loaded_tenant
    plans = []
    with acting_as(owner.pk):
        ledger = ledger_fact(owner)
        oldest = Memory.objects.filter(owner=owner).earliest("recorded_at")
        create_thread(owner=owner, name="atlas")
        add_thread_members(owner=owner, name="atlas", memory_ids=[ledger.id, oldest.id])
        with explaining(plans):
            hits = run(owner, LEDGER_QUESTION, thread="atlas").hits
        with explaining(plans, starting="SELECT m.id, m.recorded_at, m.content_length\nFROM"):
            listed = run(owner, None, thread="atlas").hits
    assert [hit.id for hit in hits] == [ledger.id]
    assert [hit.id for hit in listed] == [ledger.id, oldest.id]
    for plan in map(json.dumps, plans):
        assert "memories_memory_pkey" in plan and '"Seq Scan"' not in plan
        assert "memory_owner_recent" not in plan and "memory_owner_type_current" not in plan
        assert account_indexes.NEAREST.index_name(owner.pk) not in plan
        # Its members' ids, once: not a probe of the memberships for each memory read, and
        # through the index that leads to the thread, not every member row of the account's.
        assert plan.count("memories_threadmembership") == 1
        assert "membership_unique" in plan and "membership_recent_members" not in plan
    assert len(plans) == 2  # the words' walk with the nearest by meaning, the listing


def test_a_question_about_open_commitments_in_a_large_tenant_reads_them_alone_before_any_analyze(
    bulk_loaded_tenant, acting_as
):
    """A question filtered to commitment states walks the commitments in those states for its
    words, each state's newest first through the index on owner, state and recency, merged,
    and compares each with the question by meaning (few of them): never every commitment, nor
    the account's HNSW index narrowed to the few that pass, nor a scan of its rows."""
    owner = bulk_loaded_tenant
    plans = []
    with acting_as(owner.pk):
        invoices = record_memory(
            owner=owner,
            memory_type="commitment",
            topic="Invoices",
            content="I will send the March invoices to the accountant by Friday.",
        )
        waiting = record_memory(
            owner=owner, memory_type="commitment", topic="Audit", content="The audit report."
        )
        resolve_commitment(owner=owner, memory_id=waiting.id, status="waiting")
        with explaining(plans):
            hits = run(
                owner,
                "when do the March invoices go to the accountant?",
                commitment_status=["open", "waiting"],
            ).hits
    assert [hit.id for hit in hits][:1] == [invoices.id]
    words, meaning = map(json.dumps, plans)
    assert "memory_owner_state_recent" in words and '"Merge Append"' in words
    assert "memory_owner_type_current" not in words and '"Sort"' not in words
    assert "memory_owner_state_recent" in meaning
    assert account_indexes.NEAREST.index_name(owner.pk) not in meaning
    assert '"Seq Scan"' not in meaning


def test_a_scope_few_memories_have_is_counted_and_checked_through_its_index_before_any_analyze(
    bulk_loaded_tenant, acting_as
):
    """Every search filtered to a scope counts the scope's memories (to choose how it finds
    them by meaning), and an empty one checks that the scope exists: both through the index on
    owner, scope and recency, never by reading the account's entries of the index of types,
    which holds the scope too and which the planner may take for it without statistics."""
    owner = bulk_loaded_tenant
    plans = []
    with acting_as(owner.pk):
        for n in range(3):
            record_memory(
                owner=owner, memory_type="fact", topic=f"Fact {n}", content=f"{n}.", scope="rare"
            )
        with explaining(plans, starting="WITH instant"):
            run(owner, "where does the ledger live?", scope="rare")
        with explaining(plans, starting="SELECT m.id\n    FROM"), pytest.raises(NotFound):
            run(owner, "where does the ledger live?", scope="nope")
    count, check = map(json.dumps, plans)
    assert "memory_owner_scope_recent" in count
    assert "memory_owner_scope_recent" in check and "memory_owner_type_current" not in check


def test_a_project_too_large_to_compare_exactly_is_searched_through_the_hnsw_index(
    bulk_loaded_tenant, monkeypatch
):
    owner = bulk_loaded_tenant
    record_memory(
        owner=owner,
        memory_type="fact",
        project="atlas",
        topic="Ledger",
        content="The ledger lives in Postgres.",
    )
    plans = []
    patch_search(monkeypatch, "COMPARED_EXACTLY_MAX", 0)
    with explaining(plans):
        assert run(owner, "where does the ledger live?", project="atlas").hits
    meaning = json.dumps(plans[1])
    assert account_indexes.NEAREST.index_name(owner.pk) in meaning
    assert "memory_owner_project_recent" not in meaning


@pytest.mark.parametrize("facet", ["project", "scope"])
def test_a_listing_of_a_project_or_scope_in_a_large_tenant_reads_its_index_before_any_analyze(
    bulk_loaded_tenant, acting_as, facet
):
    """Its page reads the project's or scope's memories newest first through the index on
    owner, project or scope, and recency: never the account's recency index, nor its rows."""
    owner = bulk_loaded_tenant
    plans = []
    with acting_as(owner.pk):
        for n in range(3):
            record_memory(
                owner=owner,
                memory_type="fact",
                topic=f"Fact {n}",
                content=f"Fact {n}.",
                **{facet: "atlas"},
            )
        with explaining(plans, starting="SELECT l.id"):
            page = run(owner, None, limit=2, **{facet: "atlas"})
    assert len(page.hits) == 2 and page.next_cursor
    [plan] = map(json.dumps, plans)
    assert f"memory_owner_{facet}_recent" in plan
    assert "memory_owner_recent" not in plan and '"Seq Scan"' not in plan


def index_scans(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", [name])
        return cursor.fetchone()[0]


def test_a_few_words_in_a_large_tenant_are_looked_up_in_its_words_index(bulk_loaded_tenant):
    words_index = account_indexes.WORDS.index_name(bulk_loaded_tenant.pk)
    before = index_scans(words_index)
    # One memory holds "5017".
    hits = run(bulk_loaded_tenant, "5017", memory_types=["note"]).hits
    assert [hit.excerpt for hit in hits] == ["note 5017 about billing"]
    assert index_scans(words_index) == before + 1
    # A quarter of them hold "backups": the most recent memories are walked for it instead,
    # rather than the index reading all of those.
    hits = run(bulk_loaded_tenant, "backups", memory_types=["note"]).hits
    assert hits and all("backups" in hit.excerpt for hit in hits)
    assert index_scans(words_index) == before + 1


def test_the_walk_stops_after_the_most_recent_memories(tenant, monkeypatch, settings):
    """A question whose words only old memories hold reads a bounded number of memories: past
    WALK_RECENT_MAX of the most recent ones, a memory is not found by words."""
    settings.SEARCH_EMBEDDER = "none"
    old = MemoryFactory(
        owner=tenant,
        topic="Zeppelin hangar lease",
        content="The zeppelin hangar lease renews in March.",
        recorded_at=timezone.now() - timedelta(days=30),
    )
    for n in range(4):
        MemoryFactory(owner=tenant, topic=f"Recent note {n}", content=f"Unrelated note {n}.")
    question = (
        "when does the zeppelin lease renew, who signs it, and what did the landlord say about "
        "raising the rent next year?"
    )
    assert [hit.id for hit in run(tenant, question).hits] == [old.id]
    patch_search(monkeypatch, "WALK_RECENT_MAX", 4)
    assert all(hit.id != old.id for hit in run(tenant, question).hits)
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    assert [hit.id for hit in run(tenant, question).hits] == [old.id]


def test_the_walk_bound_counts_memories_of_the_types_asked_for(
    buried_decision, tenant, monkeypatch, settings
):
    """With a type filter the walk reads the most recent memories of those types only (through
    the index on owner, type and recency), merged by recency: the bound counts those, and
    memories of other types cost it nothing."""
    settings.SEARCH_EMBEDDER = "none"
    old = buried_decision
    question = "what did we decide about the zeppelin hangar, and who negotiates the lease terms?"
    patch_search(monkeypatch, "WALK_RECENT_MAX", 1)
    assert run(tenant, question).hits == []  # the most recent memory is a note
    assert [hit.id for hit in run(tenant, question, memory_types=["decision"]).hits] == [old.id]
    assert run(tenant, question, memory_types=["decision", "note"]).hits == []
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    hits = run(tenant, question, memory_types=["decision", "note"]).hits
    assert [hit.id for hit in hits] == [old.id]


@pytest.mark.parametrize("facet", ["project", "scope"])
def test_the_walk_bound_counts_memories_of_the_project_or_scope_asked_for(
    tenant, monkeypatch, settings, facet
):
    """With a project or scope filter the walk reads that project's or scope's most recent
    memories only (through the index on owner, project or scope, and recency): the bound counts
    those, and memories of others cost it nothing. As of an instant (which that index, of
    current memories, does not hold) the filter narrows what the walk read of the account's."""
    settings.SEARCH_EMBEDDER = "none"
    old = MemoryFactory(
        owner=tenant,
        topic="Zeppelin hangar lease",
        content="We renew the zeppelin hangar lease in March.",
        recorded_at=timezone.now() - timedelta(days=30),
        **{facet: "hangar"},
    )
    for n in range(4):
        MemoryFactory(
            owner=tenant, topic=f"Recent note {n}", content=f"Unrelated {n}.", **{facet: "payroll"}
        )
    question = "what did we decide about the zeppelin hangar, and who negotiates the lease terms?"
    now = timezone.now().isoformat()
    patch_search(monkeypatch, "WALK_RECENT_MAX", 1)
    assert run(tenant, question).hits == []
    assert [hit.id for hit in run(tenant, question, **{facet: "hangar"}).hits] == [old.id]
    assert run(tenant, question, **{facet: "hangar"}, as_of=now).hits == []
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    hits = run(tenant, question, **{facet: "hangar"}, as_of=now).hits
    assert [hit.id for hit in hits] == [old.id]


def test_the_walk_bound_counts_commitments_of_the_states_asked_for(tenant, monkeypatch, settings):
    """With a commitment state filter the walk reads the most recent commitments in those states
    only (through the index on owner, state and recency; each state's merged by recency):
    commitments in other states cost its bound nothing."""
    settings.SEARCH_EMBEDDER = "none"
    old = MemoryFactory(
        owner=tenant,
        memory_type="commitment",
        topic="Zeppelin hangar lease",
        content="We will renew the zeppelin hangar lease in March.",
        recorded_at=timezone.now() - timedelta(days=30),
    )
    for n in range(4):
        done = MemoryFactory(
            owner=tenant, memory_type="commitment", topic=f"Chore {n}", content=f"Chore {n}."
        )
        resolve_commitment(owner=tenant, memory_id=done.id, status="resolved")
    question = "what did we promise about the zeppelin hangar, and who negotiates the lease?"
    patch_search(monkeypatch, "WALK_RECENT_MAX", 1)
    assert run(tenant, question, memory_types=["commitment"]).hits == []
    for states in (["open"], ["open", "waiting"]):
        hits = run(tenant, question, commitment_status=states).hits
        assert [hit.id for hit in hits] == [old.id]
    assert run(tenant, question, commitment_status=["resolved", "open"]).hits == []
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    hits = run(tenant, question, commitment_status=["resolved", "open"]).hits
    assert [hit.id for hit in hits] == [old.id]


def test_the_walk_bound_counts_memories_of_every_large_thread_and_status(
    buried_decision, tenant, monkeypatch, settings
):
    """A status filter, or a thread of more than THREAD_READ_BY_MEMBER_MAX members, narrows what the
    walk has read; it does not make the walk read further back to find WALK_RECENT_MAX memories
    that pass it (a thread of many old members would otherwise walk the whole account)."""
    settings.SEARCH_EMBEDDER = "none"
    old = buried_decision
    newest = Memory.objects.filter(owner=tenant).latest("recorded_at")
    thread = create_thread(owner=tenant, name="hangar")
    add_thread_members(owner=tenant, name=thread.name, memory_ids=[old.id, newest.id])
    patch_search(monkeypatch, "THREAD_READ_BY_MEMBER_MAX", 1)
    question = "what did we decide about the zeppelin hangar, and who negotiates the lease terms?"
    patch_search(monkeypatch, "WALK_RECENT_MAX", 4)
    assert run(tenant, question, thread="hangar").hits == []
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    assert [hit.id for hit in run(tenant, question, thread="hangar").hits] == [old.id]
    archive_memory(owner=tenant, memory_id=old.id)
    patch_search(monkeypatch, "WALK_RECENT_MAX", 4)
    assert run(tenant, question, status="archived").hits == []
    patch_search(monkeypatch, "WALK_RECENT_MAX", 5)
    assert [hit.id for hit in run(tenant, question, status="archived").hits] == [old.id]


def test_a_small_thread_is_searched_whole_however_old_its_members(
    buried_decision, tenant, monkeypatch, settings
):
    """A thread of at most THREAD_READ_BY_MEMBER_MAX members is what a search filtered to it
    walks: its oldest member is found by its words however many newer memories the account
    has, now and as of an instant, where the account's walk stops before it."""
    settings.SEARCH_EMBEDDER = "none"
    old = buried_decision
    create_thread(owner=tenant, name="hangar")
    add_thread_members(owner=tenant, name="hangar", memory_ids=[old.id])
    patch_search(monkeypatch, "WALK_RECENT_MAX", 1)
    question = "what did we decide about the zeppelin hangar lease?"

    assert [hit.id for hit in run(tenant, question, thread="hangar").hits] == [old.id]
    then = timezone.now().isoformat()
    assert [hit.id for hit in run(tenant, question, thread="hangar", as_of=then).hits] == [old.id]
    assert run(tenant, question).hits == []


def test_a_question_to_a_thread_finds_its_members_by_words_and_by_meaning(tenant):
    """Its members are read once for both: one holding the question's words, one that only
    means what it asks (no word in common), on the first page and the next; a memory outside
    the thread that means it too is not found."""
    colour = record_memory(
        owner=tenant,
        memory_type="preference",
        topic="Favourite colour",
        content="My favourite colour is blue.",
    )
    paint = record_memory(
        owner=tenant, memory_type="decision", topic="Hall", content="The hall gets matte paint."
    )
    record_memory(
        owner=tenant,
        memory_type="preference",
        topic="Favourite colour of the car",
        content="The car's favourite colour is red.",
    )
    create_thread(owner=tenant, name="hall")
    add_thread_members(owner=tenant, name="hall", memory_ids=[colour.id, paint.id])

    first = run(tenant, "favorite color paint", thread="hall", limit=1)
    second = run(tenant, "favorite color paint", thread="hall", limit=1, cursor=first.next_cursor)
    hits = {hit.id: hit.matched_by for hit in [*first.hits, *second.hits]}
    assert hits.keys() == {colour.id, paint.id} and second.next_cursor is None
    assert hits[colour.id] == ("meaning",) and "words" in hits[paint.id]


def test_a_listing_of_a_thread_fills_its_pages(tenant, other_tenant, monkeypatch):
    """The memories of my thread hangar, in an account whose newest memories are not in it:
    every page is full, newest first, rather than empty with hasMore for the agent to page
    blindly through windows of other memories; one revised between pages is listed in the
    version the first page saw, its successor not at all."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 3)
    now = timezone.now()
    members = [
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=30 + n)) for n in range(5)
    ]
    for n in range(10):
        MemoryFactory(owner=tenant, recorded_at=now - timedelta(days=n))
    create_thread(owner=tenant, name="hangar")
    add_thread_members(owner=tenant, name="hangar", memory_ids=[m.id for m in members])
    foreign = MemoryFactory(owner=other_tenant)
    create_thread(owner=other_tenant, name="hangar")
    add_thread_members(owner=other_tenant, name="hangar", memory_ids=[foreign.id])

    first = run(tenant, None, thread="hangar", limit=2)
    assert [hit.id for hit in first.hits] == [members[0].id, members[1].id]
    revise_memory(owner=tenant, predecessor_id=members[2].id, content="Revised since.")
    pages = [first]
    while pages[-1].next_cursor:
        pages.append(run(tenant, None, thread="hangar", limit=2, cursor=pages[-1].next_cursor))

    listed = [(hit.id, hit.current) for page in pages for hit in page.hits]
    assert listed == [(m.id, m is not members[2]) for m in members]
    assert [len(page.hits) for page in pages] == [2, 2, 1]
    as_of = (now - timedelta(days=31, hours=12)).isoformat()
    assert [hit.id for hit in run(tenant, None, thread="hangar", as_of=as_of).hits] == [
        m.id for m in members[2:]
    ]


def test_a_revision_committing_mid_search_never_shows_both_versions(transactional_db, monkeypatch):
    """The search's statements share one snapshot: a revision that commits after the words walk
    and before the nearest-by-meaning statement does not put the predecessor (found by words
    while current) and the successor (found by meaning) on one page."""
    import threading

    from django.db import connections

    from tests.factories import UserFactory

    owner = UserFactory()
    old = record_memory(
        owner=owner,
        memory_type="decision",
        topic="Database",
        content="We chose PostgreSQL for the memory store.",
    )
    walked = []
    real_rows = sql.fetch_rows

    def revise_elsewhere() -> None:
        try:
            revise_memory(
                owner=owner,
                predecessor_id=old.id,
                content="We chose PostgreSQL 18 for the memory store.",
            )
        finally:
            connections.close_all()

    def revise_after_the_walk(*args, **kwargs):
        rows = real_rows(*args, **kwargs)
        if not walked:
            walked.append(rows)
            worker = threading.Thread(target=revise_elsewhere)
            worker.start()
            worker.join()
        return rows

    patch_search(monkeypatch, "fetch_rows", revise_after_the_walk)
    page = search_memories(
        owner_id=owner.pk, query="postgresql memory store", filters=clean_filters(), limit=5
    )
    assert walked
    assert [(hit.id, hit.valid_to) for hit in page.hits] == [(old.id, None)]


# Pieces of query text the parse treats specially (dotted names, hyphens, apostrophes, phrases,
# exclusions, tsquery syntax, other scripts and CJK, format-string syntax), joined in any order.
QUERY_PIECES = [
    *("next.js", "Next.JS", "e.g.", "a.b.c.d", "v1.2", "1.2.js", "x.y-z", "stand-up", ".js", "js."),
    *("a..b", "socket.io", "api.example.com", "foo@bar.com", "http://x.y/z", "é.ü", "日本.語"),
    *("🙂.js", "a.🙂", "x" * 60 + ".js", '"', "-", "'", "\u2019", "\\", "&", "|", "!", ":*"),
    *("(", ")", "<->", ".", "..", "-.", '-"', "%", "%s", "%(x)s", "{}", "$1", "\u200b", "\t"),
    *("책", "東", "東京", "佐々木", "、", "ｶﾀ", "서울에서"),
]


@pytest.fixture
def searched_corpus(tenant):
    for n, content in enumerate(
        [
            "Next.js and socket.io",
            "stand-up notes, e.g. daily",
            "api.example.com is down",
            "日本.語",
        ]
    ):
        for copy in range(2):  # two of each, so that a page of one has a next page
            record_memory(
                owner=tenant, memory_type="note", topic=f"Piece {n}", content=f"{content} {copy}"
            )
    return tenant


# The fixture's memories are only read: the same for every example.
@examples(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.sampled_from(QUERY_PIECES), st.sampled_from(["", " ", "."])),
        min_size=1,
        max_size=12,
    )
)
def test_any_query_text_answers_a_page_or_a_clear_refusal(searched_corpus, pieces):
    """Every query of such pieces answers a page, and its cursor the next page, or an
    invalid_input naming the query: never another error."""
    tenant = searched_corpus
    text = "".join(piece + joiner for piece, joiner in pieces)[:QUERY_MAX]
    try:
        page = run(tenant, text, limit=1)
        if page.next_cursor:
            run(tenant, text, limit=1, cursor=page.next_cursor)
    except InvalidInput as refused:
        assert str(refused).startswith("invalid_input: query:")
