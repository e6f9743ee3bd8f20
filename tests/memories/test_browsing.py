"""The account pages' memory browser (memories.browsing): one page of an owner's memories with
what the page says beside it, read in one snapshot; the filter box's matching (`containing`) and
the words it reads in a typed text (filter_words)."""

from datetime import timedelta

import pytest
from django.core.paginator import Paginator
from django.utils import timezone

from memories.bounds import FILTER_WORDS_MAX
from memories.browsing import (
    BrowseFilters,
    FilterText,
    browse_memories,
    containing,
    filter_words,
    read_filter_text,
)
from memories.errors import InvalidInput
from memories.models import ERASED, Memory
from tests.factories import MemoryFactory, ThreadFactory, ThreadMembershipFactory
from tests.memories.conftest import commit_elsewhere


def first_page(memories):
    return Paginator(memories, 20).page(1)


def browse(owner, show_all=False, paginate=first_page, **filters):
    return browse_memories(
        owner_id=owner.pk, filters=BrowseFilters(**filters), show_all=show_all, paginate=paginate
    )


def listed(browsed) -> list[str]:
    return [memory.content for memory in browsed.page.object_list]


@pytest.fixture
def past():
    """The fields of a memory recorded an hour ago and superseded, and of one archived."""
    an_hour_ago = timezone.now() - timedelta(hours=1)
    return {
        "superseded": {"valid_to": an_hour_ago, "recorded_at": an_hour_ago},
        "archived": {"status": "archived", "recorded_at": an_hour_ago},
    }


def test_lists_the_owners_current_memories_newest_first_and_with_show_all_every_version(
    tenant, other_tenant, past
):
    MemoryFactory(owner=tenant, content="old", **past["superseded"])
    MemoryFactory(owner=tenant, content="set aside", **past["archived"])
    MemoryFactory(owner=tenant, content="first")
    MemoryFactory(owner=tenant, content="second")
    MemoryFactory(owner=other_tenant, content="theirs")
    assert listed(browse(tenant)) == ["second", "first"]
    assert sorted(listed(browse(tenant, show_all=True))) == ["first", "old", "second", "set aside"]


def test_a_project_in_another_case_is_applied_in_the_accounts_spelling(tenant):
    MemoryFactory(owner=tenant, content="in it", project="Atlas")
    MemoryFactory(owner=tenant, content="elsewhere", project="Zeus")
    browsed = browse(tenant, project="atlas")
    assert browsed.filters.project == "Atlas"
    assert listed(browsed) == ["in it"]
    assert not browsed.project_unknown


def test_a_thread_name_in_another_case_lists_the_threads_members_by_its_stored_name(tenant):
    member = ThreadMembershipFactory(thread=ThreadFactory(owner=tenant, name="Launch"))
    ThreadMembershipFactory(thread=member.thread, state="proposed")
    MemoryFactory(owner=tenant, content="in no thread")
    browsed = browse(tenant, thread="LAUNCH")
    assert browsed.filters.thread == "Launch"
    assert [memory.id for memory in browsed.page.object_list] == [member.memory_id]
    assert not browsed.thread_unknown


def test_a_name_that_is_none_of_the_owners_threads_lists_nothing_naming_their_nearest(
    tenant, other_tenant
):
    ThreadMembershipFactory(thread=ThreadFactory(owner=tenant, name="launch"))
    ThreadFactory(owner=other_tenant, name="lunch")
    browsed = browse(tenant, thread="lanch")
    assert browsed.thread_unknown and browsed.near_threads == ["launch"]
    assert browsed.filters.thread == "lanch"
    assert listed(browsed) == [] and not browsed.hidden_exist
    assert browse(tenant, thread="zzz").near_threads == []


def test_a_project_none_of_the_owners_current_memories_has_is_named_with_their_nearest(
    tenant, other_tenant, past
):
    MemoryFactory(owner=tenant, project="atlas-web")
    MemoryFactory(owner=other_tenant, project="atlas")
    browsed = browse(tenant, project="atlas")
    assert browsed.project_unknown and browsed.near_projects == ["atlas-web"]
    assert browse(tenant, project="zebra").near_projects == []
    assert browse(tenant, project="atlas-web", memory_type="decision").near_projects is None


def test_a_project_is_looked_for_only_when_nothing_is_listed(tenant, past):
    """A project only superseded memories have is none of the current ones', yet the list of
    every version shows them: not "no current memory in project"."""
    MemoryFactory(owner=tenant, content="old", project="gone", **past["superseded"])
    assert listed(browse(tenant, show_all=True, project="gone")) == ["old"]
    assert browse(tenant, show_all=True, project="gone").near_projects is None
    assert browse(tenant, project="gone").near_projects == []


def test_hidden_memories_are_said_to_exist_only_of_an_unfiltered_list_of_current_ones(tenant, past):
    MemoryFactory(owner=tenant, content="old", **past["superseded"])
    MemoryFactory(owner=tenant, content="set aside", **past["archived"])
    assert browse(tenant).hidden_exist
    assert not browse(tenant, show_all=True).hidden_exist
    assert not browse(tenant, text="old").hidden_exist
    MemoryFactory(owner=tenant, content="current")
    assert not browse(tenant).hidden_exist


def test_offers_the_owners_projects_and_thread_names_only(tenant, other_tenant, past):
    MemoryFactory(owner=tenant, project="beta")
    MemoryFactory(owner=tenant, project="alpha")
    MemoryFactory(owner=tenant, project="superseded", **past["superseded"])
    MemoryFactory(owner=other_tenant, project="theirs")
    ThreadFactory(owner=tenant, name="Zeta")
    ThreadFactory(owner=tenant, name="alpha")
    ThreadFactory(owner=tenant, name=ERASED)
    ThreadFactory(owner=other_tenant, name="Theirs")
    browsed = browse(tenant)
    assert browsed.projects == ["alpha", "beta"]
    assert browsed.threads == ["alpha", "Zeta"]


def test_the_filters_narrow_together_and_say_whether_any_was_given(tenant):
    MemoryFactory(owner=tenant, content="Ship on Friday", memory_type="commitment")
    MemoryFactory(owner=tenant, content="Ship on Monday", memory_type="decision")
    MemoryFactory(owner=tenant, content="Lunch on Friday", memory_type="commitment")
    browsed = browse(tenant, text="ship friday", memory_type="commitment", commitment_status="open")
    assert listed(browsed) == ["Ship on Friday"] and browsed.filters.given
    assert not BrowseFilters().given


def test_pages_as_the_caller_paginates(tenant):
    for number in range(5):
        MemoryFactory(owner=tenant, content=f"entry {number}")
    browsed = browse(tenant, paginate=lambda memories: Paginator(memories, 2).page(3))
    assert listed(browsed) == ["entry 0"]
    assert (browsed.page.number, browsed.page.paginator.count) == (3, 5)


def test_reads_the_page_and_what_it_offers_in_one_snapshot(transactional_db, tenant):
    """A memory committed while the page is being read is neither in the page nor among the
    projects offered beside it: the two agree."""
    MemoryFactory(owner=tenant, content="before", project="early")

    def read_then_let_a_write_commit(memories):
        page = first_page(memories)
        list(page.object_list)
        commit_elsewhere(
            tenant.pk, lambda: MemoryFactory(owner=tenant, content="meanwhile", project="late")
        )
        return page

    browsed = browse(tenant, paginate=read_then_let_a_write_commit)
    assert Memory.objects.filter(owner=tenant, project="late").exists()  # committed
    assert listed(browsed) == ["before"] and browsed.projects == ["early"]


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("Celery.", ["Celery"]),
        ("celery,redis", ["celery", "redis"]),
        ('"weekly report"', ["weekly", "report"]),
        ("what runs our background jobs?", ["what", "runs", "our", "background", "jobs"]),
        (
            "v1.2 node.js stand-up O'Brien don\u2019t",
            ["v1.2", "node.js", "stand-up", "O'Brien", "don\u2019t"],
        ),
        ("C++, C# and F#.", ["C++", "C#", "and", "F#"]),
        ("max_connections __init__", ["max_connections", "__init__"]),
        ("-leading trailing- .dotted.", ["leading", "trailing", "dotted"]),
        ("東京 हिन्दी مرحبا Ελλάδα", ["東京", "हिन्दी", "مرحبا", "Ελλάδα"]),
        ("Valparai\u0301so", ["Valparaíso"]),  # as typed decomposed: one word, in NFC
        ("Redis redis REDIS", ["Redis"]),
        ("🚀", ["🚀"]),
        ("  ", []),
    ],
)
def test_filter_words(typed, words):
    assert filter_words(typed) == words


def test_a_filter_finds_the_owners_memories_only(tenant, other_tenant):
    mine = MemoryFactory(owner=tenant, content="Deploy to Valparaíso on Friday")
    MemoryFactory(owner=other_tenant, content="Deploy to Valparaíso on Friday")
    found = containing(Memory.objects.owned_by(tenant), "valparaiso, friday.")
    assert list(found) == [mine]


def test_a_filter_of_more_words_than_the_bound_is_invalid_input(tenant):
    words = " ".join(f"w{n}" for n in range(FILTER_WORDS_MAX + 1))
    with pytest.raises(InvalidInput, match=f"text: at most {FILTER_WORDS_MAX} words; got 17"):
        containing(Memory.objects.owned_by(tenant), words)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("typed", "words", "common"),
    [
        ("what runs our background jobs?", ["runs", "background", "jobs"], ["what", "our"]),
        ("The A to do", [], ["The", "A", "to", "do"]),
        ("Valparaíso", ["Valparaíso"], []),
        ("🚀", ["🚀"], []),
        ("", [], []),
    ],
)
def test_read_filter_text_leaves_out_the_common_words_in_order(typed, words, common):
    assert read_filter_text(typed) == FilterText(words=words, common=common)


def test_a_text_of_only_common_words_filters_nothing_and_is_not_applied(tenant):
    MemoryFactory(owner=tenant, content="Things to do before the launch")
    MemoryFactory(owner=tenant, content="Launch checklist")
    assert containing(Memory.objects.owned_by(tenant), "to do").count() == 2
    browsed = browse(tenant, text="what")
    assert browsed.filters.text is None and not browsed.filters.given
    assert browsed.text == FilterText(words=[], common=["what"])
    assert len(listed(browsed)) == 2
    browsed = browse(tenant, text="the launch")
    assert browsed.filters.text == "the launch" and browsed.text.common == ["the"]
    assert len(listed(browsed)) == 2
