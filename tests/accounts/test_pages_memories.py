"""My memories (read-only browser) and the JSON export."""

import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from accounts import export
from accounts.forms import nearest_names_hint
from memories.bounds import unstorable_text
from memories.models import MembershipState, Thread, ThreadMembership
from memories.services import archive_memory, record_memory, resolve_commitment, revise_memory
from memories.threads import add_thread_members, create_thread, revise_memory_with_proposals
from tests.factories import MemoryFactory


@pytest.fixture
def history(tenant):
    """A memory revised twice (a chain of three) and an archived one."""
    first = record_memory(
        owner=tenant, memory_type="decision", topic="database", content="Use SQLite"
    )
    second = revise_memory(owner=tenant, predecessor_id=first.id, content="Use PostgreSQL 17")
    third = revise_memory(owner=tenant, predecessor_id=second.id, content="Use PostgreSQL 18")
    archived = record_memory(
        owner=tenant, memory_type="note", topic="lunch", content="Pizza on Friday"
    )
    archive_memory(owner=tenant, memory_id=archived.id)
    return first, second, third, archived


def test_shows_only_current_memories_by_default(client, tenant, history):
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    assert "Use PostgreSQL 18" in page
    assert "Use SQLite" not in page and "Pizza on Friday" not in page
    assert "1 memory" in page and "(current only)" in page


def test_toggle_shows_superseded_and_archived_with_their_state(client, tenant, history):
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories"), {"show": "all"}).text
    for content in ("Use SQLite", "Use PostgreSQL 17", "Use PostgreSQL 18", "Pizza on Friday"):
        assert content in page
    assert page.count('badge-superseded">superseded') == 2
    assert page.count('badge-archived">archived') == 1
    assert "Superseded by" in page and "Revises" in page


def test_search_matches_content_topic_and_tags(client, tenant):
    MemoryFactory(owner=tenant, topic="deploys", content="Ship on Tuesdays", tags=["ops"])
    MemoryFactory(owner=tenant, topic="food", content="Coffee, black")
    client.force_login(tenant)
    for query in ("tuesday", "DEPLOYS", "ops"):
        page = client.get(reverse("accounts:memories"), {"q": query}).text
        assert "Ship on Tuesdays" in page and "Coffee, black" not in page
    page = client.get(reverse("accounts:memories"), {"q": "nothing like this"}).text
    assert "No current memory matches “<bdi>nothing like this</bdi>”." in page


def test_a_search_of_several_words_finds_the_memories_holding_each_of_them(client, tenant):
    """Not only those holding the words together as typed: "postgres 16" finds "PostgreSQL 16",
    a word may match the topic and another a tag, and every word must match somewhere."""
    MemoryFactory(owner=tenant, topic="database", content="We chose PostgreSQL 16", tags=["ops"])
    MemoryFactory(owner=tenant, topic="cache", content="Redis 7 for sessions")
    client.force_login(tenant)
    for query in ("postgres 16", "  16   POSTGRES ", "database ops", "chose ops"):
        page = client.get(reverse("accounts:memories"), {"q": query}).text
        assert "We chose PostgreSQL 16" in page and "Redis 7" not in page, query
    page = client.get(reverse("accounts:memories"), {"q": "postgres 7"}).text
    assert "No current memory matches" in page


def _found(client, query: str) -> str:
    return client.get(reverse("accounts:memories"), {"q": query}).text


def test_punctuation_and_quotes_around_words_do_not_count(client, tenant):
    MemoryFactory(owner=tenant, topic="jobs", content="Celery runs our background jobs on Redis")
    MemoryFactory(owner=tenant, topic="reports", content="The weekly report goes out on Monday")
    client.force_login(tenant)
    for query in ("Celery.", "celery,redis", "(redis)", "“Celery”", "background jobs!"):
        page = _found(client, query)
        assert "Celery runs our background jobs" in page and "weekly report" not in page, query
    for query in ('"weekly report"', "report:", "weekly/report", "monday?"):
        page = _found(client, query)
        assert "weekly report goes out" in page and "Celery runs" not in page, query


def test_joined_words_stay_whole(client, tenant):
    """A hyphen, dot or apostrophe between letters or digits joins a word, "+" and "#" end
    one: "v1.2" is not "v1" and "2", nor "C++" "C"."""
    MemoryFactory(owner=tenant, topic="release", content="Shipped v1.2 with the node.js client")
    MemoryFactory(owner=tenant, topic="other", content="v1 of the API had 2 endpoints")
    MemoryFactory(owner=tenant, topic="lang", content="The agent is written in C++ and C#")
    MemoryFactory(owner=tenant, topic="misc", content="A cat named Clementine")
    client.force_login(tenant)
    for query in ("v1.2", "Node.js", "v1.2."):
        page = _found(client, query)
        assert "Shipped v1.2" in page and "had 2 endpoints" not in page, query
    for query in ("C++", "c#", "c++,"):
        page = _found(client, query)
        assert "written in C++" in page and "Clementine" not in page, query


def test_accents_and_case_need_not_match(client, tenant):
    MemoryFactory(owner=tenant, topic="travel", content="The offsite is in Valparaíso")
    MemoryFactory(owner=tenant, topic="food", content="Order from the cafe on Elm Street")
    MemoryFactory(owner=tenant, topic="street", content="The office moved to STRASSE 5")
    client.force_login(tenant)
    for query in ("Valparaiso", "valparaíso", "VALPARAÍSO", "Valparai\u0301so"):
        assert "offsite is in Valparaíso" in _found(client, query), query
    assert "the cafe on Elm" in _found(client, "Café")
    assert "STRASSE 5" in _found(client, "Straße")


def test_a_typed_apostrophe_or_dash_finds_the_typographic_one(client, tenant):
    MemoryFactory(owner=tenant, topic="rule", content="We don\u2019t deploy on Fridays")
    MemoryFactory(owner=tenant, topic="dates", content="Freeze 2026\u201312\u201301")
    client.force_login(tenant)
    assert "deploy on Fridays" in _found(client, "don't deploy")
    assert "Freeze 2026" in _found(client, "2026-12-01")


def test_accents_and_case_need_not_match_in_tags(client, tenant):
    MemoryFactory(owner=tenant, topic="t", content="tagged only", tags=["Déploiement"])
    client.force_login(tenant)
    assert "tagged only" in _found(client, "deploiement")


def test_a_question_is_read_for_its_words_not_its_common_words(client, tenant):
    """ "what" and "our" are in no memory: left out, the question finds the memories holding
    the rest of it, and the page names the words it left out."""
    MemoryFactory(owner=tenant, topic="jobs", content="Celery runs the background jobs")
    MemoryFactory(owner=tenant, topic="cron", content="Cron runs the nightly backup")
    client.force_login(tenant)
    page = _found(client, "what runs our background jobs?")
    assert "Celery runs the background jobs" in page and "nightly backup" not in page
    assert "Left out as common words: “<bdi>what</bdi>”, “<bdi>our</bdi>”." in page
    assert "Left out as common words" not in _found(client, "background jobs")


def test_a_text_of_only_common_words_is_not_applied_and_says_so(client, tenant):
    """Not "2 memories matching “a”" for a word the help says is left out."""
    MemoryFactory(owner=tenant, topic="list", content="Things to do before the launch")
    MemoryFactory(owner=tenant, topic="other", content="Launch checklist")
    client.force_login(tenant)
    for typed, named in (
        ("a", "“a”"),
        ("what", "“what”"),
        ("our", "“our”"),
        ("To do!", "“To”, “do”"),
    ):
        page = _found(client, typed)
        assert (
            f"The search text holds only common words ({named}), which the filter leaves out; "
            "it was not applied." in page
        ), typed
        assert "Things to do" in page and "Launch checklist" in page, typed
        assert "matching" not in page and "No current memory matches" not in page, typed
        assert "Left out as common words" not in page, typed
    # With another filter, the others still apply.
    page = client.get(reverse("accounts:memories"), {"q": "the", "type": "fact"}).text
    assert "not applied" in page and "No current memory matches with these filters." in page


def test_every_common_word_the_help_names_is_left_out(client, tenant):
    MemoryFactory(owner=tenant, topic="t", content="Celery")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    help_text = re.search(r'<p class="helptext" id="memory-search-help">(.*?)</p>', page)[1]
    named = re.findall(r"“(\w+)”", help_text)
    assert named == ["what", "our", "the"]
    for word in named:
        assert "Left out as common words: “<bdi>" + word in _found(client, f"celery {word}")


def test_no_match_of_several_words_says_each_must_be_found(client, tenant):
    MemoryFactory(owner=tenant, topic="jobs", content="Celery runs the background jobs")
    client.force_login(tenant)
    page = _found(client, "celery kubernetes")
    assert "No current memory matches" in page and "every word: try fewer words" in page
    assert "try fewer words" not in _found(client, "kubernetes")
    # Only the words looked for count.
    assert "try fewer words" not in _found(client, "the kubernetes")


def test_the_box_says_how_it_filters(client, tenant):
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    assert 'aria-describedby="memory-search-help"' in page
    help_text = re.search(r'<p class="helptext" id="memory-search-help">(.*?)</p>', page)[1]
    assert "every word" in help_text and "accents" in help_text and "ask your agent" in help_text


def test_too_many_words_are_refused_with_the_limit(client, tenant):
    MemoryFactory(owner=tenant, content="still listed")
    client.force_login(tenant)
    page = _found(client, " ".join(f"w{n}" for n in range(17)))
    assert "limited to 16 words (it has 17)" in page and "still listed" in page
    assert 'aria-invalid="true" aria-describedby="memory-search-help filter-problems"' in page
    # Repeated words count once.
    assert "limited to" not in _found(client, " ".join(["still"] * 30))


def test_a_symbol_with_no_word_is_looked_for_as_typed(client, tenant):
    MemoryFactory(owner=tenant, topic="launch", content="Launch day 🚀 went well")
    MemoryFactory(owner=tenant, topic="other", content="Nothing to see")
    client.force_login(tenant)
    page = _found(client, "🚀")
    assert "Launch day" in page and "Nothing to see" not in page


def test_underscores_and_percent_signs_are_looked_for_as_typed(client, tenant):
    """Not as the wildcards of SQL's LIKE."""
    MemoryFactory(owner=tenant, topic="config", content="Set max_connections to 200")
    MemoryFactory(owner=tenant, topic="other", content="maxXconnections is not a setting")
    MemoryFactory(owner=tenant, topic="disk", content="Disk at 90% full")
    client.force_login(tenant)
    page = _found(client, "max_connections")
    assert "Set max_connections" in page and "maxXconnections" not in page
    page = _found(client, "%")
    assert "Disk at 90% full" in page and "max_connections" not in page


def test_no_current_memory_points_to_the_superseded_and_archived_ones(client, tenant):
    """Not "No memories yet" to someone whose agents archived or replaced everything."""
    old = record_memory(owner=tenant, memory_type="note", topic="lunch", content="Pizza on Friday")
    archive_memory(owner=tenant, memory_id=old.id)
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    assert "No memories yet" not in page
    assert "every one you have is superseded or archived" in page
    assert 'href="?show=all"' in page
    # With a filter, the empty page offers the toggle, without scanning the account again to
    # see whether it would find something.
    page = client.get(reverse("accounts:memories"), {"q": "pizza"}).text
    assert "No current memory matches “<bdi>pizza</bdi>”." in page
    assert 'href="?q=pizza&amp;show=all"' in page
    page = client.get(reverse("accounts:memories"), {"q": "sushi", "show": "all"}).text
    after_the_form = page.split('role="search"')[1].split("</form>")[1]
    assert (
        "No memory matches “<bdi>sushi</bdi>”." in page
        and "Include superseded" not in after_the_form
    )


def test_an_account_without_memories_is_told_how_they_arrive(client, tenant, other_tenant):
    MemoryFactory(owner=other_tenant, content="theirs")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    assert "No memories yet. Connect an AI agent" in page


def test_an_account_without_memories_is_given_the_address_to_connect_an_agent(
    client, tenant, settings
):
    """Someone who signed up had nowhere on the site to learn what to give their agent."""
    settings.MCP_RESOURCE_URL = "https://memory.example.com/mcp"
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories")).text
    assert "give it the address <code>https://memory.example.com/mcp</code>" in page


def test_a_commitment_shows_when_it_is_due_and_whether_it_is_overdue(client, tenant):
    late = record_memory(
        owner=tenant,
        memory_type="commitment",
        topic="release",
        content="Ship v1 to staging",
        due_at="2026-01-05T09:30:00+01:00",
    )
    record_memory(
        owner=tenant,
        memory_type="commitment",
        topic="docs",
        content="Write the upgrade notes",
        due_at="2999-03-01T12:00:00Z",
    )
    client.force_login(tenant)
    listed = client.get(reverse("accounts:memories")).text
    assert "due <time" in listed and "5 Jan 2026, 08:30 UTC" in listed
    assert "1 Mar 2999, 12:00 UTC" in listed
    assert listed.count(">overdue</span>") == 1
    detail = client.get(reverse("accounts:memory_detail", args=[late.id])).text
    assert re.search(r"<dt>Due</dt><dd><time[^>]*>5 Jan 2026, 08:30 UTC</time>", detail)
    assert ">overdue</span>" in detail
    # One commitment is late once: its superseded version is not said to be late beside it.
    revise_memory(owner=tenant, predecessor_id=late.id, content="Ship v1 to production")
    listed = client.get(reverse("accounts:memories"), {"show": "all"}).text
    assert listed.count(">overdue</span>") == 1
    detail = client.get(reverse("accounts:memory_detail", args=[late.id])).text
    assert detail.count(">overdue</span>") == 1  # its successor's, in the history


def test_every_time_shown_says_it_is_utc(client, tenant, history):
    """As the memory's own page and Connected apps do: a time without its zone reads as local."""
    _first, second, _third, _archived = history
    client.force_login(tenant)
    for page in (
        client.get(reverse("accounts:memories"), {"show": "all"}).text,
        client.get(reverse("accounts:memory_detail", args=[second.id])).text,
    ):
        shown = re.findall(r"<time [^>]*>([^<]*)</time>", page)
        assert shown and all(text.endswith(" UTC") for text in shown), shown


def test_right_to_left_text_reads_in_its_own_direction(client, tenant):
    """A Hebrew or Arabic memory set in the page's left-to-right direction reads scrambled (its
    numbers, Latin words and final punctuation land on the wrong side): every piece of tenant
    text takes its direction from itself, and inline pieces are isolated from their
    neighbours."""
    topic, content = "גרסה 2.0 של המערכת!", "הוחלט: נעבור ל-PostgreSQL 18 (לא Redis)."
    memory = record_memory(
        owner=tenant,
        memory_type="decision",
        topic=topic,
        content=content,
        project="פרויקט-אטלס",
        tags=["תגית"],
    )
    create_thread(owner=tenant, name="שחרור")
    add_thread_members(owner=tenant, name="שחרור", memory_ids=[memory.id])
    client.force_login(tenant)
    listed = client.get(reverse("accounts:memories"), {"project": "פרויקט-אטלס"}).text
    assert f'<h2 dir="auto"><a href="/memories/{memory.id}/">{topic}</a></h2>' in listed
    assert f'<p class="memory-content" dir="auto">{content}</p>' in listed
    assert "· <bdi>פרויקט-אטלס</bdi> ·" in listed
    assert "Tags: <bdi>תגית</bdi>" in listed
    assert "in project <bdi>פרויקט-אטלס</bdi>" in listed
    detail = client.get(reverse("accounts:memory_detail", args=[memory.id])).text
    assert f'<h1 dir="auto">{topic}</h1>' in detail
    assert f'<p class="memory-content" dir="auto">{content}</p>' in detail
    assert "<dt>Project</dt><dd><bdi>פרויקט-אטלס</bdi></dd>" in detail
    assert "<dt>Tags</dt><dd><bdi>תגית</bdi></dd>" in detail
    assert '">שחרור</a>' in detail and '<a dir="auto" href="/memories/?thread=' in detail


def test_a_tag_matches_a_search_within_it_not_a_longer_one(client, tenant):
    """Not a longer search whose first 64 characters (the tags' length) equal it; a word of the
    tag is found in it, as a word of the content is."""
    tag = "project-" + "x" * 56
    MemoryFactory(owner=tenant, topic="t", content="unrelated", tags=[tag])
    client.force_login(tenant)
    assert "unrelated" in client.get(reverse("accounts:memories"), {"q": tag}).text
    assert "unrelated" in client.get(reverse("accounts:memories"), {"q": "Project"}).text
    page = client.get(reverse("accounts:memories"), {"q": tag + "-and-more"}).text
    assert "No current memory matches" in page


def test_an_overlong_search_is_refused_with_the_limit(client, tenant):
    MemoryFactory(owner=tenant, content="still listed")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories"), {"q": "x" * 201}).text
    assert "limited to 200 characters" in page and "still listed" in page


def test_filters_narrow_by_type_project_and_commitment_state_and_say_so(client, tenant):
    """A tenant with many memories finds "the open commitments of atlas" without reading them
    all; the page offers the account's projects, and says what it filtered on."""
    MemoryFactory(owner=tenant, memory_type="decision", project="atlas", content="Use Kafka")
    MemoryFactory(owner=tenant, memory_type="decision", project="beacon", content="Use Redis")
    for content, state in (("Ship v2", "open"), ("Write docs", "resolved")):
        MemoryFactory(
            owner=tenant,
            memory_type="commitment",
            project="atlas",
            content=content,
            commitment_status=state,
        )
    client.force_login(tenant)
    url = reverse("accounts:memories")

    page = client.get(url, {"type": "decision", "project": "atlas"}).text
    assert "Use Kafka" in page and "Use Redis" not in page and "Ship v2" not in page
    assert "1 memory of type decision in project <bdi>atlas</bdi> (current only)." in page
    assert '<option value="decision" selected>' in page
    assert '<option value="atlas">' in page and '<option value="beacon">' in page
    page = client.get(url, {"project": "atlas", "state": "open"}).text
    assert "Ship v2" in page and "Write docs" not in page and "Use Kafka" not in page
    page = client.get(url, {"project": "atlas", "type": "fact"}).text
    assert "No current memory matches with these filters." in page
    assert "commitments only" not in page


def test_a_commitment_state_beside_another_type_says_only_commitments_have_one(client, tenant):
    MemoryFactory(owner=tenant, memory_type="fact", content="The sky is blue")
    client.force_login(tenant)
    url = reverse("accounts:memories")
    page = client.get(url, {"type": "fact", "state": "open"}).text
    assert (
        "No current memory matches with these filters. "
        "A commitment state applies to commitments only: no fact has one." in page
    )
    for alone in ({"type": "commitment", "state": "open"}, {"state": "open"}):
        assert "commitments only" not in client.get(url, alone).text


def test_a_filter_that_is_not_valid_is_named_and_the_others_still_apply(client, tenant):
    MemoryFactory(owner=tenant, memory_type="decision", content="Use Kafka")
    MemoryFactory(owner=tenant, memory_type="note", content="Lunch at noon")
    client.force_login(tenant)
    page = client.get(
        reverse("accounts:memories"), {"type": "decision", "state": "done", "project": "p" * 257}
    ).text
    assert "Commitment state must be one of the listed ones; not applied." in page
    assert (
        "Show is &#x27;all&#x27; or nothing; not applied."
        in client.get(reverse("accounts:memories"), {"show": "xyz"}).text
    )
    assert "A project is at most 256 characters; it was not applied." in page
    assert "Use Kafka" in page and "Lunch at noon" not in page


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("q", "Search text {problem}; it was not applied."),
        ("project", "A project {problem}; it was not applied."),
        ("thread", "A thread name {problem}; it was not applied."),
        ("type", "Type must be one of the listed types; not applied."),
        ("state", "Commitment state must be one of the listed ones; not applied."),
        ("show", "Show is &#x27;all&#x27; or nothing; not applied."),
    ],
)
@pytest.mark.parametrize("typed", ["\x00", "atlas\x00", "\ufffe"])
def test_a_filter_the_database_cannot_store_is_named_and_the_others_still_apply(
    client, tenant, field, message, typed
):
    """As any filter that is not valid: not the whole page refused."""
    MemoryFactory(owner=tenant, memory_type="decision", content="Use Kafka")
    MemoryFactory(owner=tenant, memory_type="note", content="Lunch at noon")
    client.force_login(tenant)
    others = {"type": "decision"} if field != "type" else {"q": "kafka"}
    response = client.get(reverse("accounts:memories"), {field: typed, **others})
    assert response.status_code == 200
    page = response.text
    assert message.format(problem=unstorable_text(typed)) in page
    assert page.count('role="alert"') == 1
    assert "Use Kafka" in page and "Lunch at noon" not in page
    assert "\x00" not in page


def test_pages_keep_the_filters(client, tenant):
    for number in range(25):
        MemoryFactory(
            owner=tenant, memory_type="fact", project="atlas", content=f"fact {number:02d}"
        )
    MemoryFactory(owner=tenant, memory_type="note", project="atlas", content="a note")
    client.force_login(tenant)
    first = client.get(reverse("accounts:memories"), {"type": "fact", "project": "atlas"}).text
    [older] = re.findall(r'href="(\?[^"]*page=2[^"]*)" rel="next"', first)
    assert "type=fact" in older and "project=atlas" in older
    second = client.get(reverse("accounts:memories") + older.replace("&amp;", "&")).text
    assert "fact 00" in second and "a note" not in second and "Page 2 of 2" in second


def test_the_window_title_says_which_list_and_page_it_shows(client, tenant):
    """Tabs, bookmarks and screen readers tell pages apart by the title (WCAG 2.4.2)."""
    for number in range(25):
        MemoryFactory(owner=tenant, memory_type="fact", content=f"entry {number:02d}")
    client.force_login(tenant)
    titles = [
        re.search(r"<title>(.*)</title>", client.get(reverse("accounts:memories"), query).text)[1]
        for query in ({}, {"page": 2}, {"q": "entry", "type": "fact", "page": 2}, {"show": "all"})
    ]
    assert titles == [
        "My memories · threengram",
        "My memories, page 2 · threengram",
        "My memories matching “entry”, filtered, page 2 · threengram",
        "My memories, superseded and archived included · threengram",
    ]


def test_pagination(client, tenant):
    for number in range(25):
        MemoryFactory(owner=tenant, content=f"entry {number:02d}")
    client.force_login(tenant)
    first_page = client.get(reverse("accounts:memories")).text
    second_page = client.get(reverse("accounts:memories"), {"page": 2}).text
    assert "Page 1 of 2" in first_page and "entry 24" in first_page
    assert "entry 00" in second_page and "entry 24" not in second_page


def test_a_page_number_that_does_not_exist_is_named_with_the_pages_there_are(client, tenant):
    """A bookmarked page 7 of a list now two pages long shows the last page and says so, rather
    than passing it off as the page asked for."""
    for number in range(25):
        MemoryFactory(owner=tenant, content=f"entry {number:02d}")
    client.force_login(tenant)
    url = reverse("accounts:memories")
    page = client.get(url, {"page": 7}).text
    assert "There is no page “7”: pages run from 1 to 2. This is page 2." in page
    assert "Page 2 of 2" in page and "entry 00" in page
    page = client.get(url, {"page": "last", "q": "entry"}).text
    assert "There is no page “last”: pages run from 1 to 2. This is page 1." in page
    assert "Page 1 of 2" in page and "entry 24" in page
    for fine in ("2", "", None):
        page = client.get(url, {} if fine is None else {"page": fine}).text
        assert "There is no page" not in page, fine


@pytest.mark.parametrize("number", ["0", "-1", "-99999999999999999999"])
def test_a_page_number_below_one_shows_the_first_page_and_says_so(client, tenant, number):
    """Not the last page, the account's oldest memories, as Django's paginator picks for it."""
    for entry in range(25):
        MemoryFactory(owner=tenant, content=f"entry {entry:02d}")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories"), {"page": number}).text
    shown = number if len(number) <= 20 else number[:20] + "…"
    assert f"There is no page “{shown}”: pages run from 1 to 2. This is page 1." in page
    assert "Page 1 of 2" in page and "entry 24" in page and "entry 00" not in page


def test_a_memorys_page_names_the_threads_it_is_in(client, tenant, other_tenant):
    """The threads agents filed it in, by name; not those only proposed, nor anyone else's."""
    memory = record_memory(owner=tenant, memory_type="decision", topic="api", content="REST")
    create_thread(owner=tenant, name="Launch")
    add_thread_members(owner=tenant, name="Launch", memory_ids=[memory.id])
    ideas = create_thread(owner=tenant, name="Ideas")
    ThreadMembership.objects.create(
        owner=tenant, thread=ideas, memory=memory, state=MembershipState.PROPOSED
    )
    create_thread(owner=other_tenant, name="Theirs")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memory_detail", args=[memory.id])).text
    assert (
        '<dt>Threads</dt><dd><a dir="auto" href="/memories/?thread=Launch">Launch</a></dd>' in page
    )
    # The link lists the thread's members, by its name in any case.
    record_memory(owner=tenant, memory_type="note", topic="other", content="not in it")
    listed = client.get(reverse("accounts:memories"), {"thread": "launch"}).text
    assert (
        "REST" in listed and "not in it" not in listed and "in thread <bdi>Launch</bdi>" in listed
    )
    assert (
        "No current memory matches with these filters."
        in client.get(reverse("accounts:memories"), {"thread": "Ideas"}).text
    )
    lone = record_memory(owner=tenant, memory_type="note", topic="lone", content="alone")
    page = client.get(reverse("accounts:memory_detail", args=[lone.id])).text
    assert "<dt>Threads</dt><dd>none</dd>" in page


def test_a_thread_name_that_is_none_of_yours_is_applied_and_named_with_your_nearest_ones(
    client, tenant, other_tenant
):
    """A mistyped thread name is applied, as the tools apply it (they answer not found rather
    than search without it): nothing is listed, and the page says it is no thread of yours,
    with the names it is like, not passed off as a thread without matches (nor offered the
    superseded and archived ones). The field keeps the name to correct, and offers your thread
    names, never another tenant's."""
    memory = record_memory(owner=tenant, memory_type="decision", topic="plan", content="Ship")
    create_thread(owner=tenant, name="Release Plan")
    add_thread_members(owner=tenant, name="Release Plan", memory_ids=[memory.id])
    record_memory(owner=tenant, memory_type="note", topic="misc", content="Lunch at noon")
    create_thread(owner=other_tenant, name="Secret Project")
    client.force_login(tenant)
    url = reverse("accounts:memories")

    page = client.get(url, {"thread": "relase plan"}).text
    assert (
        'name="thread" aria-invalid="true" aria-describedby="filter-problems" '
        'value="relase plan"' in page
    )
    assert "You have no thread named “relase plan” (did you mean “Release Plan”?)." in page
    assert "not applied" not in page
    assert "Ship" not in page and "Lunch at noon" not in page
    assert "No current memory matches" not in page
    assert "Include superseded and archived</a>" not in page
    assert "No memories yet" not in page
    assert '<datalist id="memory-threads"><option value="Release Plan"></datalist>' in page
    assert 'list="memory-threads"' in page

    page = client.get(url, {"thread": "Secret Projec", "type": "note"}).text
    assert "You have no thread named “Secret Projec”." in page
    assert "Secret Project" not in page
    assert "Lunch at noon" not in page and "Ship" not in page


def test_a_thread_name_that_is_none_of_yours_lists_nothing_without_looking_for_members(
    client, tenant
):
    """The name was looked up once, and is no thread of yours: nothing is listed, without a
    second look-up of it among the memories' threads."""
    memory = record_memory(owner=tenant, memory_type="note", topic="plan", content="Ship")
    create_thread(owner=tenant, name="launch")
    add_thread_members(owner=tenant, name="launch", memory_ids=[memory.id])
    client.force_login(tenant)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("accounts:memories"), {"thread": "lanch"}).text
    assert "You have no thread named “lanch” (did you mean “launch”?)." in page
    assert "Ship" not in page
    membership = ThreadMembership._meta.db_table
    assert not [query["sql"] for query in queries if membership in query["sql"]]


def test_the_nearest_names_hint_is_the_pages_parenthesis_or_nothing():
    assert nearest_names_hint(["atlas", "atlas-web"]) == " (did you mean “atlas” or “atlas-web”?)"
    assert nearest_names_hint([]) == ""


def test_a_mistyped_thread_or_project_is_treated_alike(client, tenant):
    """Either name, mistyped, is applied (nothing listed), named in a message with the nearest
    name the account has, and kept in its field to correct."""
    memory = record_memory(
        owner=tenant, memory_type="note", topic="plan", content="Ship", project="atlas"
    )
    create_thread(owner=tenant, name="launch")
    add_thread_members(owner=tenant, name="launch", memory_ids=[memory.id])
    client.force_login(tenant)
    url = reverse("accounts:memories")
    for field, typed, message in (
        (
            "project",
            "atlaz",
            "You have no current memory in project “atlaz” (did you mean “atlas”?).",
        ),
        ("thread", "lanch", "You have no thread named “lanch” (did you mean “launch”?)."),
    ):
        page = client.get(url, {field: typed}).text
        assert message in page
        assert "Ship" not in page
        assert re.search(
            rf'name="{field}" aria-invalid="true" aria-describedby="filter-problems" '
            rf'value="{typed}"',
            page,
        )


def test_a_thread_or_project_filter_reads_a_name_as_the_tools_do(client, tenant):
    """A name pasted with an invisible mark at its end (the right-to-left mark after a Hebrew
    word) or typed decomposed (macOS) is the name its memories carry, as the tools read it: not
    "no thread named" the very name suggested."""
    memory = record_memory(
        owner=tenant, memory_type="note", topic="plan", content="Ship", project="Café"
    )
    create_thread(owner=tenant, name="שחרור")
    add_thread_members(owner=tenant, name="שחרור", memory_ids=[memory.id])
    record_memory(owner=tenant, memory_type="note", topic="misc", content="Lunch at noon")
    client.force_login(tenant)
    url = reverse("accounts:memories")

    page = client.get(url, {"thread": "שחרור\u200f"}).text
    assert "You have no thread" not in page
    assert "in thread <bdi>שחרור</bdi>" in page
    assert "Ship" in page and "Lunch at noon" not in page
    page = client.get(url, {"project": "Cafe\u0301\u200b"}).text
    assert "in project <bdi>Café</bdi>" in page
    assert "Ship" in page and "Lunch at noon" not in page
    # In another case, as the tools take a project (and an agent's write joins it).
    page = client.get(url, {"project": "CAFÉ"}).text
    assert "in project <bdi>Café</bdi>" in page and "You have no current memory" not in page
    assert "Ship" in page and "Lunch at noon" not in page
    # Nothing but an invisible mark is no filter, as a blank one is not.
    page = client.get(url, {"thread": "\u200f"}).text
    assert "You have no thread" not in page and "Lunch at noon" in page


def test_a_project_that_none_of_your_memories_has_is_named_with_your_nearest_ones(
    client, tenant, other_tenant
):
    """A mistyped project is said to be none of yours, with the projects it is like (never
    another tenant's), not passed off as a project without matches."""
    record_memory(owner=tenant, memory_type="note", topic="t", content="a", project="atlas-web")
    record_memory(owner=other_tenant, memory_type="note", topic="t", content="b", project="atlas")
    client.force_login(tenant)
    url = reverse("accounts:memories")
    page = client.get(url, {"project": "atlas"}).text
    assert "You have no current memory in project “atlas” (did you mean “atlas-web”?)." in page
    page = client.get(url, {"project": "zebra"}).text
    assert "You have no current memory in project “zebra”." in page
    # The field says so to assistive technology too, pointing at the message.
    assert re.search(
        r'name="project"[^>]*aria-invalid="true" aria-describedby="filter-problems"', page
    )
    assert 'name="thread" aria-invalid' not in page
    page = client.get(url, {"project": "atlas-web", "type": "decision"}).text
    assert "You have no current memory in project" not in page


def test_a_superseded_or_archived_memorys_thread_link_lists_it_too(client, tenant):
    """The thread link of a memory no longer current lists the thread with superseded and
    archived members, so the memory one came from is in it."""
    old = record_memory(owner=tenant, memory_type="decision", topic="api", content="Use REST")
    create_thread(owner=tenant, name="Launch")
    add_thread_members(owner=tenant, name="Launch", memory_ids=[old.id])
    new, _ = revise_memory_with_proposals(owner=tenant, predecessor_id=old.id, content="Use gRPC")
    client.force_login(tenant)
    detail = client.get(reverse("accounts:memory_detail", args=[old.id])).text
    [link] = re.findall(r'<dt>Threads</dt><dd><a dir="auto" href="([^"]*)">Launch</a>', detail)
    assert link == "/memories/?thread=Launch&amp;show=all"
    assert "Use REST" in client.get(link.replace("&amp;", "&")).text
    detail = client.get(reverse("accounts:memory_detail", args=[new.id])).text
    assert '<dt>Threads</dt><dd><a dir="auto" href="/memories/?thread=Launch">Launch</a>' in detail


def test_the_way_back_from_a_memory_returns_to_the_list_as_it_was_filtered(client, tenant):
    """From page 2 of the atlas decisions, back goes to page 2 of the atlas decisions, not to
    the whole first page; from anywhere else (another site, no referrer), to the list."""
    memory = MemoryFactory(owner=tenant, project="atlas", content="Use Kafka")
    client.force_login(tenant)
    detail = reverse("accounts:memory_detail", args=[memory.id])
    page = client.get(
        detail, HTTP_REFERER="http://testserver/memories/?project=atlas&type=decision&page=2"
    ).text
    assert (
        '<a href="/memories/?project=atlas&amp;type=decision&amp;page=2">← Back to the list</a>'
        in page
    )
    for referrer in (
        {},
        {"HTTP_REFERER": "https://elsewhere.example/memories/?project=atlas"},
        {"HTTP_REFERER": "http://testserver/apps/?project=atlas"},
        {"HTTP_REFERER": "http://testserver/memories/"},
        {"HTTP_REFERER": "http://[testserver/memories/?project=atlas"},  # not a URL at all
    ):
        page = client.get(detail, **referrer).text
        assert '<a href="/memories/">← All memories</a>' in page, referrer


def test_detail_shows_the_whole_supersession_chain(client, tenant, history):
    first, second, third, _ = history
    client.force_login(tenant)
    page = client.get(reverse("accounts:memory_detail", args=[second.id])).text
    links = re.findall(r'href="/memories/([0-9a-f-]{36})/"', page)
    assert str(first.id) in links and str(third.id) in links
    assert "<strong>Version 2: this memory</strong>" in page
    assert page.index(str(first.id)) < page.index("this memory") < page.index(str(third.id))


def test_a_memory_says_whether_it_is_current_apart_from_its_archive_status(client, tenant, history):
    """As its badge and the export do: "current" is the version in force, the archive status is
    "active" or "archived"; not a badge saying "current" over "Status: active"."""
    first, _second, third, archived = history
    client.force_login(tenant)
    for memory, version, status in (
        (first, "superseded <time", "active"),
        (third, "current</dd>", "active"),
        (archived, "current</dd>", "archived"),
    ):
        page = client.get(reverse("accounts:memory_detail", args=[memory.id])).text
        assert f"<dt>Version</dt><dd>{version}" in page
        assert f"<dt>Archive status</dt><dd>{status}</dd>" in page
        assert "<dt>Status</dt>" not in page


def test_every_link_of_the_history_reads_differently(client, tenant, history):
    """A screen reader's list of links read "database" three times."""
    first, second, third, _archived = history
    client.force_login(tenant)
    page = client.get(reverse("accounts:memory_detail", args=[third.id])).text
    history_section = page.split("<h2>History</h2>")[1]
    links = re.findall(r'<a href="/memories/([0-9a-f-]{36})/">(.*?)</a>', history_section)
    assert links == [
        (str(first.id), "Version 1: <bdi>database</bdi>"),
        (str(second.id), "Version 2: <bdi>database</bdi>"),
    ]
    assert "<strong>Version 3: this memory</strong>" in history_section


def test_each_version_in_the_history_shows_what_it_said(client, tenant, history):
    """Revisions keep their topic: links all reading "database" could not tell them apart."""
    _first, second, _third, _archived = history
    client.force_login(tenant)
    page = client.get(reverse("accounts:memory_detail", args=[second.id])).text
    history_section = page.split("<h2>History</h2>")[1]
    for content in ("Use SQLite", "Use PostgreSQL 17", "Use PostgreSQL 18"):
        assert content in history_section
    assert "<title>database · threengram</title>" in page


def test_a_long_history_is_read_in_a_few_statements_oldest_first(
    client, tenant, django_assert_max_num_queries
):
    chain = [record_memory(owner=tenant, memory_type="decision", topic="db", content="v0")]
    for version in range(1, 30):
        chain.append(
            revise_memory(owner=tenant, predecessor_id=chain[-1].id, content=f"v{version}")
        )
    client.force_login(tenant)
    with django_assert_max_num_queries(12):  # the session, the user, the memory, its history
        page = client.get(reverse("accounts:memory_detail", args=[chain[12].id])).text
    shown = re.findall(r'/memories/([0-9a-f-]{36})/"', page)
    assert shown == [str(memory.id) for memory in chain if memory != chain[12]]


def test_browser_is_read_only(client, tenant, history):
    client.force_login(tenant)
    for url in (
        reverse("accounts:memories") + "?show=all",
        reverse("accounts:memory_detail", args=[history[1].id]),
    ):
        page = client.get(url).text
        # The only POST form on the page is the log-out button.
        assert page.count('method="post"') == 1
        assert client.post(url).status_code == 405


def test_never_shows_another_tenants_memories(client, tenant, other_tenant):
    theirs = MemoryFactory(owner=other_tenant, topic="their topic", content="their secret")
    MemoryFactory(owner=tenant, content="mine")
    client.force_login(tenant)
    page = client.get(reverse("accounts:memories"), {"show": "all", "q": "their"}).text
    assert "their secret" not in page and "their topic" not in page
    for memory_id in (theirs.id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        assert client.get(reverse("accounts:memory_detail", args=[memory_id])).status_code == 404


def _collect(response) -> list[bytes]:
    async def collect():
        return [chunk async for chunk in response.streaming_content]

    return async_to_sync(collect)()


def test_export_has_every_memory_with_lifecycle_and_links(client, tenant, other_tenant, history):
    first, second, third, archived = history
    MemoryFactory(owner=other_tenant, content="not mine")
    client.force_login(tenant)
    response = client.get(reverse("accounts:export_memories"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="threengram-memories-')
    assert response["Cache-Control"] == "no-store"
    document = json.loads(b"".join(_collect(response)))
    assert document["format"] == "threengram-memories-export"
    assert document["account"] == tenant.username
    assert document["memory_count"] == 4
    by_id = {row["id"]: row for row in document["memories"]}
    assert set(by_id) == {str(m.id) for m in history}
    assert by_id[str(second.id)]["supersedes"] == str(first.id)
    assert by_id[str(second.id)]["superseded_by"] == str(third.id)
    assert by_id[str(second.id)]["valid_to"] is not None
    assert by_id[str(third.id)]["superseded_by"] is None
    assert by_id[str(archived.id)]["status"] == "archived"
    assert by_id[str(first.id)]["content"] == "Use SQLite"
    assert by_id[str(first.id)]["uri"] == f"threengram://memory/{first.id}"
    assert document["threads"] == []
    # The rows carry vectors (record_memory writes one): derived data, not the tenant's, not
    # exported.
    assert not any("embedding" in row for row in document["memories"])


def test_export_says_which_version_is_in_force_beside_its_archive_status(client, tenant, history):
    """`current` is true for the version in force alone, as the tools give it: a revised version
    keeps its archive status ("active") beside its valid_to and superseded_by, and an archived
    memory not revised is still the one in force."""
    first, second, third, archived = history
    client.force_login(tenant)
    document = json.loads(b"".join(_collect(client.get(reverse("accounts:export_memories")))))
    by_id = {row["id"]: row for row in document["memories"]}
    assert [
        (by_id[str(m.id)]["status"], by_id[str(m.id)]["current"])
        for m in (first, second, third, archived)
    ] == [("active", False), ("active", False), ("active", True), ("archived", True)]


def test_export_says_when_a_commitment_was_resolved(client, tenant):
    done = record_memory(owner=tenant, memory_type="commitment", topic="t", content="ship it")
    resolve_commitment(owner=tenant, memory_id=done.id, status="resolved")
    done.refresh_from_db()
    client.force_login(tenant)
    document = json.loads(b"".join(_collect(client.get(reverse("accounts:export_memories")))))
    [row] = document["memories"]
    expected = done.resolved_at.isoformat().replace("+00:00", "Z")
    assert (row["commitment_status"], row["resolved_at"]) == ("resolved", expected)


def test_export_includes_threads_with_their_members(client, tenant, other_tenant, history):
    first, _second, third, _archived = history
    thread = Thread.objects.create(owner=tenant, name="launch", pinned=True)
    ThreadMembership.objects.create(
        thread=thread, memory=third, state=MembershipState.MEMBER, decided_at=timezone.now()
    )
    ThreadMembership.objects.create(thread=thread, memory=first, state=MembershipState.PROPOSED)
    Thread.objects.create(owner=other_tenant, name="their thread")
    client.force_login(tenant)
    document = json.loads(b"".join(_collect(client.get(reverse("accounts:export_memories")))))
    assert [(t["name"], t["pinned"], t["members"]) for t in document["threads"]] == [
        ("launch", True, [str(third.id)])
    ]


def test_export_streams_from_an_async_iterator_in_bounded_pieces(client, tenant, monkeypatch):
    """Under ASGI Django buffers a *sync* streaming iterator whole; an async one is sent piece
    by piece. Each piece holds at most CHUNK_ROWS memories."""
    monkeypatch.setattr(export, "CHUNK_ROWS", 3)
    for number in range(10):
        MemoryFactory(owner=tenant, content=f"row {number}", recorded_at=timezone.now())
    client.force_login(tenant)
    response = client.get(reverse("accounts:export_memories"))
    assert response.streaming and response.is_async
    assert not response.has_header("Content-Length")
    chunks = _collect(response)
    assert len(chunks) == 1 + 4  # header, then 3 + 3 + 3 + 1 rows with the closing bracket
    assert all(chunk.count(b'"content": "row ') <= 3 for chunk in chunks)
    assert len(json.loads(b"".join(chunks))["memories"]) == 10


def test_export_needs_a_login(client):
    response = client.get(reverse("accounts:export_memories"))
    assert response.status_code == 302 and "/login/" in response["Location"]


def _export_reading_slowly(tenant, meanwhile=None) -> dict:
    """The export read as a client does, a piece at a time; `meanwhile` runs after the header
    and the first memory were sent."""
    from asgiref.sync import sync_to_async

    async def read() -> str:
        pieces = export.export_memories_json(
            owner_id=tenant.pk, username=tenant.username, chunk_rows=1
        )
        sent = [await pieces.__anext__(), await pieces.__anext__()]
        if meanwhile is not None:
            await sync_to_async(meanwhile)()
        return "".join(sent + [piece async for piece in pieces])

    return json.loads(async_to_sync(read)())


@pytest.mark.django_db(transaction=True)
def test_every_thread_member_of_an_export_is_among_its_memories(tenant):
    """A member revised, and a memory recorded and added, while the download is under way."""
    from memories.threads import add_thread_members, create_thread, revise_memory_with_proposals

    member = record_memory(owner=tenant, memory_type="decision", topic="db", content="SQLite")
    record_memory(owner=tenant, memory_type="note", topic="lunch", content="Pizza on Friday")
    create_thread(owner=tenant, name="launch")
    add_thread_members(owner=tenant, name="launch", memory_ids=[member.id])

    def meanwhile() -> None:
        revise_memory_with_proposals(owner=tenant, predecessor_id=member.id, content="PostgreSQL")
        newer = record_memory(owner=tenant, memory_type="fact", topic="db", content="Port 5432")
        add_thread_members(owner=tenant, name="launch", memory_ids=[newer.id])

    document = _export_reading_slowly(tenant, meanwhile)
    exported = {row["id"] for row in document["memories"]}
    [thread] = document["threads"]
    assert thread["members"] and set(thread["members"]) <= exported


def test_the_export_keeps_each_instant_to_the_microsecond(tenant):
    from datetime import datetime

    from memories.models import Memory

    first = record_memory(owner=tenant, memory_type="decision", topic="db", content="SQLite")
    revise_memory(owner=tenant, predecessor_id=first.id, content="PostgreSQL")
    rows = {str(m.id): m for m in Memory.objects.filter(owner=tenant)}
    for exported in _export_reading_slowly(tenant)["memories"]:
        row = rows[exported["id"]]
        assert exported["recorded_at"].endswith("Z")
        assert datetime.fromisoformat(exported["recorded_at"]) == row.recorded_at
        if row.valid_to is not None:
            assert datetime.fromisoformat(exported["valid_to"]) == row.valid_to


def test_an_export_while_the_database_cannot_answer_is_a_retryable_503(transactional_db, tenant):
    """Not a 200 whose body breaks off: the first memory is read before the answer starts."""
    import psycopg
    from django.db import connection
    from django.test import Client

    browser = Client(raise_request_exception=False)
    browser.force_login(tenant)
    with connection.cursor() as cursor:  # this connection waits at most half a second
        cursor.execute("SET lock_timeout = 500")
    with psycopg.connect(**connection.get_connection_params()) as blocker:
        blocker.execute("LOCK TABLE memories_memory IN ACCESS EXCLUSIVE MODE")
        response = browser.get(reverse("accounts:export_memories"))
        blocker.rollback()
    assert response.status_code == 503 and response["Retry-After"] == "1"


@pytest.mark.django_db(transaction=True)
def test_a_thread_deleted_while_the_export_reads_threads_is_exported_as_it_was(tenant):
    """A delete committing right after the export read the thread list: the thread is exported
    with the members it had then (as if the delete came after), never as an empty thread that
    never was."""
    import threading

    from django.db import connection

    from memories.threads import add_thread_members, create_thread, delete_thread

    member = record_memory(owner=tenant, memory_type="decision", topic="db", content="SQLite")
    create_thread(owner=tenant, name="launch")
    add_thread_members(owner=tenant, name="launch", memory_ids=[member.id])
    deleted = []

    def delete_elsewhere() -> None:
        try:
            deleted.append(delete_thread(owner=tenant, name="launch"))
        finally:
            connection.close()

    def delete_after_the_thread_list(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if 'FROM "memories_thread"' in sql and not deleted:
            worker = threading.Thread(target=delete_elsewhere)
            worker.start()
            worker.join(10)
        return result

    with connection.execute_wrapper(delete_after_the_thread_list):
        document = _export_reading_slowly(tenant)
    assert deleted, "the export read no thread list"
    [thread] = document["threads"]
    assert thread["members"] == [str(member.id)]


def test_each_version_in_the_history_shows_its_due_date(client, tenant):
    """A revise that moved a commitment's deadline, then dropped it: each version in the
    history says when it was due, so the page shows that the deadline changed."""
    first = record_memory(
        owner=tenant,
        memory_type="commitment",
        topic="invoice",
        content="Send the invoice",
        due_at="2027-01-05T17:00:00Z",
    )
    moved = revise_memory(
        owner=tenant,
        predecessor_id=first.id,
        content="Send the invoice, February",
        due_at="2027-02-01T09:30:00Z",
    )
    dropped = revise_memory(
        owner=tenant, predecessor_id=moved.id, content="Send the invoice, some day", due_at=None
    )
    client.force_login(tenant)
    page = client.get(reverse("accounts:memory_detail", args=[dropped.id])).text
    history_section = page.split("<h2>History</h2>")[1]
    versions = history_section.split('<li class="card">')[1:]
    due = [re.findall(r'due <time datetime="([^"]+)">([^<]*)</time>', v) for v in versions]
    assert due == [
        [("2027-01-05T17:00:00+00:00", "5 Jan 2027, 17:00 UTC")],
        [("2027-02-01T09:30:00+00:00", "1 Feb 2027, 09:30 UTC")],
        [],
    ]
