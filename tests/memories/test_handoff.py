"""The handoff package (memories.handoff): its facts and recently resolved sections and the pinned
threads beside it."""

from datetime import timedelta

from django.utils import timezone

from memories.briefing import Selector, build_briefing
from memories.handoff import build_handoff
from memories.models import Memory
from memories.services import (
    archive_memory,
    record_memory,
    resolve_commitment,
    revise_memory,
)
from memories.threads import add_thread_members, create_thread
from tests.factories import MemoryFactory, ThreadFactory, ThreadMembershipFactory


def fact(owner, content: str, **fields):
    return record_memory(
        owner=owner, memory_type="fact", topic=content.split()[0], content=content, **fields
    )


def test_facts_are_the_current_active_ones_newest_first(tenant, other_tenant):
    moved = fact(tenant, "staging DB moved to host db-7")
    runners = fact(tenant, "CI runs on the east runner pool")
    # Recorded earlier than the others, though stored last: it comes last.
    older = MemoryFactory(
        owner=tenant,
        memory_type="fact",
        content="the VPN endpoint is vpn.example.com",
        recorded_at=timezone.now() - timedelta(days=2),
    )
    stale = fact(tenant, "the build cache lives on nfs-1")
    revised = revise_memory(
        owner=tenant, predecessor_id=stale.id, content="the build cache lives on nfs-2"
    )
    archived = fact(tenant, "the old wiki is at wiki.example.com")
    archive_memory(owner=tenant, memory_id=archived.id)
    record_memory(owner=tenant, memory_type="note", topic="n", content="a note is not a fact")
    fact(other_tenant, "their staging DB is on host db-9")

    facts = build_handoff(owner_id=tenant.pk, selector=Selector()).sections["facts"]

    assert [item.id for item in facts.items] == [revised.id, runners.id, moved.id, older.id]
    assert (facts.count, facts.truncated) == (4, False)
    assert facts.items[0].excerpt == "the build cache lives on nfs-2"


def test_facts_are_counted_exactly_beyond_the_section_limit_and_narrowed_by_the_selector(
    tenant,
):
    for n in range(3):
        fact(tenant, f"service {n} listens on port 80{n}", project="atlas")
    fact(tenant, "the apollo bucket is in eu-west-1", project="apollo")

    facts = build_handoff(
        owner_id=tenant.pk, selector=Selector("project", "atlas"), section_limit=2
    ).sections["facts"]

    assert [item.excerpt for item in facts.items] == [
        "service 2 listens on port 802",
        "service 1 listens on port 801",
    ]
    assert (facts.count, facts.truncated) == (3, True)


def test_pinned_threads_with_their_counts_as_briefing_lists_them(tenant, other_tenant):
    infra = create_thread(owner=tenant, name="infra", pinned=True)
    members = [fact(tenant, "staging DB moved to host db-7"), fact(tenant, "DNS is on route53")]
    add_thread_members(owner=tenant, name="infra", memory_ids=[m.id for m in members])
    ThreadMembershipFactory(thread=infra, state="proposed")
    create_thread(owner=tenant, name="billing", pinned=True)
    create_thread(owner=tenant, name="someday")  # not pinned
    theirs = ThreadFactory(owner=other_tenant, name="theirs", pinned=True)
    ThreadMembershipFactory(thread=theirs)

    for selector in (Selector(), Selector("thread", "infra"), Selector("project", "x")):
        if selector.kind == "project":
            fact(tenant, "the x project has its own cluster", project="x")
        pinned = build_handoff(owner_id=tenant.pk, selector=selector).pinned_threads
        assert [(t.name, t.member_count, t.proposal_count) for t in pinned.items] == [
            ("billing", 0, 0),
            ("infra", 2, 1),
        ], selector
        assert (pinned.count, pinned.truncated) == (2, False)
        # The selector narrows the sections, not the pinned threads: as the briefing's.
        assert pinned == build_briefing(owner_id=tenant.pk, selector=selector).pinned_threads


def commitment(owner, content: str, **fields):
    return record_memory(
        owner=owner, memory_type="commitment", topic=content.split()[0], content=content, **fields
    )


def resolved(owner, content: str, *, days_ago: float = 0, **fields):
    """A commitment resolved `days_ago` (the time the service noted, moved back)."""
    memory = commitment(owner, content, **fields)
    resolve_commitment(owner=owner, memory_id=memory.id, status="resolved")
    if days_ago:
        Memory.objects.filter(pk=memory.pk).update(
            resolved_at=timezone.now() - timedelta(days=days_ago)
        )
    memory.refresh_from_db()
    return memory


def test_commitments_resolved_in_the_last_week_are_handed_on_last_resolved_first(
    tenant, other_tenant
):
    """A next session wants what was just finished, not only what is open."""
    invoice = resolved(tenant, "invoice sent to ACME", days_ago=2)
    pentest = resolved(tenant, "pentest booked for March")
    resolved(tenant, "old migration finished", days_ago=8)
    commitment(tenant, "rotate the keys")  # open: listed among the commitments
    gone = commitment(tenant, "call the vendor back")
    resolve_commitment(owner=tenant, memory_id=gone.id, status="expired")
    # Lapsed, then done after all: resolved now, so among the recently resolved, first.
    lapsed = commitment(tenant, "renew the certificate")
    resolve_commitment(owner=tenant, memory_id=lapsed.id, status="expired")
    reopened = resolved(tenant, "fix the login bug")
    resolve_commitment(owner=tenant, memory_id=reopened.id, status="open")
    reworded = resolved(tenant, "docs published", days_ago=1)
    successor = revise_memory(
        owner=tenant, predecessor_id=reworded.id, content="docs published on the wiki"
    )
    shelved = resolved(tenant, "survey closed")
    archive_memory(owner=tenant, memory_id=shelved.id)
    resolved(other_tenant, "their launch done")
    resolve_commitment(owner=tenant, memory_id=lapsed.id, status="resolved")

    handoff = build_handoff(owner_id=tenant.pk, selector=Selector())
    done = handoff.sections["recentlyResolved"]

    assert [item.id for item in done.items] == [lapsed.id, pentest.id, successor.id, invoice.id]
    assert (done.count, done.truncated) == (4, False)
    assert done.items[2].resolved_at == reworded.resolved_at
    assert [item.id for item in handoff.sections["commitments"].items] == [
        reopened.id,
        Memory.objects.get(content="rotate the keys").id,
    ]
    assert list(handoff.sections)[:3] == ["decisions", "commitments", "recentlyResolved"]


def test_recently_resolved_is_bounded_to_a_few_short_excerpts_and_counted_exactly(tenant):
    """The handoff is long already: at most 5, of 200 characters, whatever the section limit;
    the count says how many more there are, the selector narrows them as the other sections."""
    for n in range(7):
        resolved(tenant, f"task {n} done. " + "detail " * 100, project="atlas")
    resolved(tenant, "apollo task done", project="apollo")

    done = build_handoff(
        owner_id=tenant.pk, selector=Selector("project", "atlas"), section_limit=25
    ).sections["recentlyResolved"]
    assert (len(done.items), done.count, done.truncated) == (5, 7, True)
    assert all(len(item.excerpt) <= 200 and item.truncated for item in done.items)
    assert [item.excerpt.split(".")[0] for item in done.items] == [
        f"task {n} done" for n in (6, 5, 4, 3, 2)
    ]

    small = build_handoff(owner_id=tenant.pk, selector=Selector(), section_limit=2)
    assert [len(section.items) for section in small.sections.values()] == [0, 0, 2, 0, 0, 0]
    assert small.sections["recentlyResolved"].count == 8


def memory(owner, memory_type: str, content: str, **fields):
    return record_memory(
        owner=owner, memory_type=memory_type, topic=content.split()[0], content=content, **fields
    )


def test_a_projects_handoff_hands_on_the_account_wide_preferences_after_its_own(
    tenant, other_tenant
):
    """A handoff of project pixel-web listed only pixel-web's preferences: "rebase, never
    merge", kept with no project because it holds in every repository, was not handed on to the
    agent continuing there. Every other section stays the project's own."""
    rebase = memory(tenant, "preference", "rebase, never merge")
    tests_first = memory(tenant, "preference", "write the failing test first", scope="work")
    own = memory(tenant, "preference", "pixel-web: tabs, not spaces", project="pixel-web")
    memory(tenant, "preference", "apollo: black with 79 columns", project="apollo")
    shelved = memory(tenant, "preference", "no meetings on Fridays")
    archive_memory(owner=tenant, memory_id=shelved.id)
    memory(other_tenant, "preference", "their preference, of no project")
    # What is not a preference stays the project's: none of no project or of another one.
    for memory_type in ("decision", "blocker", "fact", "commitment"):
        memory(tenant, memory_type, f"{memory_type} of the account")
        memory(tenant, memory_type, f"{memory_type} of apollo", project="apollo")
    resolved(tenant, "release tagged")
    pixel_fact = fact(tenant, "pixel-web deploys to Netlify", project="pixel-web")

    handoff = build_handoff(owner_id=tenant.pk, selector=Selector("project", "pixel-web"))

    preferences = handoff.sections["preferences"]
    assert [item.id for item in preferences.items] == [own.id, tests_first.id, rebase.id]
    assert [item.project for item in preferences.items] == ["pixel-web", None, None]
    assert (preferences.count, preferences.truncated) == (3, False)
    assert [item.id for item in handoff.sections["facts"].items] == [pixel_fact.id]
    assert all(
        section.count == 0
        for name, section in handoff.sections.items()
        if name not in ("preferences", "facts")
    )
    # The count covers both, beyond the items shown.
    short = build_handoff(
        owner_id=tenant.pk, selector=Selector("project", "pixel-web"), section_limit=2
    )
    assert [item.id for item in short.sections["preferences"].items] == [own.id, tests_first.id]
    assert (short.sections["preferences"].count, short.sections["preferences"].truncated) == (
        3,
        True,
    )
