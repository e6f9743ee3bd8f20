"""The session briefing (memories.briefing): which memories each selector's sections hold."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories import briefing
from memories.briefing import BRIEFING_SECTIONS, Selector, build_briefing, read_sections
from memories.errors import NotFound
from memories.handoff import build_handoff
from memories.services import archive_memory, record_memory, resolve_commitment
from memories.threads import add_thread_members, create_thread, revise_memory_with_proposals
from tests.memories.conftest import as_reindexed_and_never_analyzed


def memory(owner, memory_type: str, content: str, **fields):
    return record_memory(
        owner=owner, memory_type=memory_type, topic=content.split()[0], content=content, **fields
    )


def listed(briefing) -> dict[str, list[str]]:
    return {
        name: [item.excerpt for item in section.items]
        for name, section in briefing.sections.items()
    }


def test_a_projects_briefing_lists_the_account_wide_preferences_after_its_own(tenant, other_tenant):
    """An agent starting a session in the pixel-web repository asked for that project's
    briefing and read none of the user's preferences kept with no project ("rebase, never
    merge", "write the failing test first"), which hold in every repository. They follow the
    project's own, the more specific; the count covers both; no other section takes anything
    of no project or of another one."""
    memory(tenant, "preference", "rebase, never merge")
    memory(tenant, "preference", "write the failing test first", scope="work")
    memory(tenant, "preference", "pixel-web: tabs, not spaces", project="pixel-web")
    memory(tenant, "preference", "apollo: black with 79 columns", project="apollo")
    memory(other_tenant, "preference", "their preference, of no project")
    for memory_type in ("decision", "blocker", "commitment"):
        memory(tenant, memory_type, f"{memory_type} of the account")
        memory(tenant, memory_type, f"{memory_type} of apollo", project="apollo")
    memory(tenant, "decision", "pixel-web: Vite, not webpack", project="pixel-web")

    full = build_briefing(
        owner_id=tenant.pk, selector=Selector("project", "pixel-web"), mode="full"
    )

    assert listed(full) == {
        "overdue": [],
        "openCommitments": [],
        "blockers": [],
        "recentDecisions": ["pixel-web: Vite, not webpack"],
        "preferences": [
            "pixel-web: tabs, not spaces",
            "write the failing test first",
            "rebase, never merge",
        ],
    }
    assert full.sections["preferences"].count == 3
    brief = build_briefing(owner_id=tenant.pk, selector=Selector("project", "pixel-web"))
    assert brief.sections["preferences"].count == 3


def test_account_wide_preferences_stay_out_of_a_scope_or_a_threads_briefing(tenant):
    """A scope is a part of the account every memory is in (one scope each, 'personal' unless
    given): a preference of 'work' does not hold in 'personal'. A thread lists its members."""
    memory(tenant, "preference", "rebase, never merge", scope="work")
    kept = memory(tenant, "preference", "pixel-web: tabs, not spaces", project="pixel-web")
    memory(tenant, "decision", "home: paint the hallway green")
    create_thread(owner=tenant, name="style")
    add_thread_members(owner=tenant, name="style", memory_ids=[kept.id])

    personal = build_briefing(owner_id=tenant.pk, selector=Selector("scope", "personal"))
    assert listed(personal)["preferences"] == ["pixel-web: tabs, not spaces"]
    work = build_briefing(owner_id=tenant.pk, selector=Selector("scope", "work"))
    assert listed(work)["preferences"] == ["rebase, never merge"]
    thread = build_briefing(owner_id=tenant.pk, selector=Selector("thread", "style"))
    assert listed(thread)["preferences"] == ["pixel-web: tabs, not spaces"]
    assert thread.unlisted == 0


def test_pinned_threads_are_listed_by_name_in_any_case(tenant):
    for name in ("Zeta", "alpha", "Beta"):
        create_thread(owner=tenant, name=name, pinned=True)
    create_thread(owner=tenant, name="also", pinned=False)
    pinned = briefing.read_pinned_threads(tenant.pk)
    assert [thread.name for thread in pinned.items] == ["alpha", "Beta", "Zeta"]


def test_a_misspelt_project_is_not_found_though_account_wide_preferences_would_list(tenant):
    """The account-wide preferences are listed for any project: they must not make a
    misspelt one read as a project whose only memories are those."""
    memory(tenant, "preference", "rebase, never merge")
    memory(tenant, "decision", "pixel-web: Vite, not webpack", project="pixel-web")

    with pytest.raises(NotFound, match="project 'pixel-wbe': no current memory has it"):
        build_briefing(owner_id=tenant.pk, selector=Selector("project", "pixel-wbe"))
    # In another case, it is the account's project, named as the account spells it.
    typed = build_briefing(owner_id=tenant.pk, selector=Selector("project", "Pixel-Web"))
    assert typed.selector == Selector("project", "pixel-web")
    assert listed(typed)["recentDecisions"] == ["pixel-web: Vite, not webpack"]
    # Known, with nothing but a note of its own: its briefing is the account-wide preferences.
    memory(tenant, "note", "pixel-web: the logo is in assets/", project="pixel-web-docs")
    docs = build_briefing(owner_id=tenant.pk, selector=Selector("project", "pixel-web-docs"))
    assert listed(docs)["preferences"] == ["rebase, never merge"]


def selector_tests(plan: dict, column: str) -> list[tuple[str, str | None]]:
    """(node type, index) of each scan of the memories table in an EXPLAIN (FORMAT JSON) plan
    that tests `column`."""
    found = []
    tested = " ".join(plan.get(key, "") for key in ("Index Cond", "Filter"))
    if plan.get("Relation Name") == "memories_memory" and f"{column})" in tested:
        found.append((plan["Node Type"], plan.get("Index Name")))
    for child in plan.get("Plans", []):
        found.extend(selector_tests(child, column))
    return found


@pytest.mark.parametrize(
    "selector", [Selector("project", "pixel-web"), Selector("scope", "work")], ids=str
)
def test_a_selected_briefing_counts_and_picks_its_sections_from_the_index_alone(tenant, selector):
    """A briefing of a project or a scope tested each memory's project or scope on its table
    row, so every section read the row of every current memory of its type, many times the
    work of an unselected briefing in a large account. The index the sections are counted and
    picked through holds both: the selector is tested there, and only the chosen items' rows
    are read, for their content."""
    now = timezone.now()
    for memory_type in ("decision", "blocker", "preference", "commitment"):
        for project, scope in (("pixel-web", "work"), ("apollo", "personal"), (None, "work")):
            memory(
                tenant,
                memory_type,
                f"{memory_type} {project} {scope}",
                project=project,
                scope=scope,
            )
    memory(
        tenant,
        "commitment",
        "ship it",
        project="pixel-web",
        scope="work",
        due_at=now - timedelta(days=1),
    )
    statements = []

    def keep(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        read_sections(
            owner_id=tenant.pk,
            selector=selector,
            specs=BRIEFING_SECTIONS,
            items=3,
            excerpt_max=100,
            now=now,
        )
    [(sql, params)] = [(sql, params) for sql, params in statements if "AS section" in sql]
    with connection.cursor() as cursor:
        # As in a large account, where reading the table is what costs: the planner may not
        # fall back on it, and then uses whatever index lets it. The table's statistics as
        # none were gathered: an ANALYZE while earlier tests' rows were rolled back leaves those
        # of an empty table, under which a plan of a few rows may read any index. Its indexes
        # as built from its rows alone, which earlier tests' rolled-back rows would have grown.
        as_reindexed_and_never_analyzed(cursor, "memories_memory")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        explained = cursor.fetchone()[0]
    if isinstance(explained, str):
        explained = json.loads(explained)
    tests = selector_tests(explained[0]["Plan"], selector.kind)
    # Each section's count and each walk for its first items (the project's preferences and
    # the account-wide ones apart).
    assert len(tests) >= 2 * len(BRIEFING_SECTIONS), tests
    assert set(tests) == {("Index Only Scan", "memory_owner_type_current")}, tests


@pytest.fixture
def investigation(tenant, other_tenant):
    """A thread "checkout outage" of current, archived, revised and resolved members of every
    section's kinds, in an account (and beside another) whose other memories of those kinds
    are in no thread."""
    now = timezone.now()
    members = [
        memory(tenant, "commitment", "outage: page the payments team", due_at=now - timedelta(1)),
        memory(tenant, "commitment", "outage: write the postmortem", due_at=now + timedelta(2)),
        memory(tenant, "commitment", "outage: ask the provider for logs"),
        memory(tenant, "blocker", "outage: no access to the load balancer logs"),
        memory(tenant, "decision", "outage: roll back the 4.2 release"),
        memory(tenant, "preference", "outage: one channel, #inc-checkout"),
        memory(tenant, "fact", "outage: began 09:12 UTC"),
        memory(tenant, "note", "outage: error rate 30 % at peak"),
        archived := memory(tenant, "blocker", "outage: staging down too"),
        resolved := memory(tenant, "commitment", "outage: status page updated"),
        revised := memory(tenant, "decision", "outage: freeze deploys"),
    ]
    archive_memory(owner=tenant, memory_id=archived.id)
    resolve_commitment(owner=tenant, memory_id=resolved.id, status="resolved")
    create_thread(owner=tenant, name="Checkout outage")
    add_thread_members(owner=tenant, name="Checkout outage", memory_ids=[m.id for m in members])
    # A revision joins its predecessor's threads.
    revise_memory_with_proposals(
        owner=tenant, predecessor_id=revised.id, content="outage: freeze deploys 2 days"
    )
    for owner in (tenant, other_tenant):
        memory(owner, "commitment", "commitment of no thread", due_at=now - timedelta(1))
        for memory_type in ("blocker", "decision", "preference", "fact"):
            memory(owner, memory_type, f"{memory_type} of no thread")
    return tenant


def test_a_threads_briefing_and_handoff_hold_its_current_members_by_section(
    investigation, monkeypatch
):
    """Read member by member (a thread of at most THREAD_READ_BY_MEMBER_MAX) or through the
    sections' index, each member tested (a larger one), a thread's sections are the same: its
    current, active members of each, counted exactly; the rest counted as unlisted."""
    selector = Selector.clean("thread", "checkout OUTAGE")
    read = {}
    for bound in (briefing.THREAD_READ_BY_MEMBER_MAX, 0):
        monkeypatch.setattr(briefing, "THREAD_READ_BY_MEMBER_MAX", bound)
        brief = build_briefing(owner_id=investigation.pk, selector=selector, mode="full")
        handoff = build_handoff(owner_id=investigation.pk, selector=selector)
        read[bound] = (brief, handoff)
        assert brief.selector == handoff.selector == Selector("thread", "Checkout outage")
        assert listed(brief) == {
            "overdue": ["outage: page the payments team"],
            "openCommitments": [
                "outage: write the postmortem",
                "outage: ask the provider for logs",
            ],
            "blockers": ["outage: no access to the load balancer logs"],
            "recentDecisions": [
                "outage: freeze deploys 2 days",
                "outage: roll back the 4.2 release",
            ],
            "preferences": ["outage: one channel, #inc-checkout"],
        }
        assert brief.unlisted == 3  # the fact, the note and the resolved commitment
        assert listed(handoff) == {
            "decisions": ["outage: freeze deploys 2 days", "outage: roll back the 4.2 release"],
            "commitments": [
                "outage: page the payments team",
                "outage: write the postmortem",
                "outage: ask the provider for logs",
            ],
            "recentlyResolved": ["outage: status page updated"],
            "blockers": ["outage: no access to the load balancer logs"],
            "preferences": ["outage: one channel, #inc-checkout"],
            "facts": ["outage: began 09:12 UTC"],
        }
        assert handoff.unlisted == 1  # the note
        counts = {name: section.count for name, section in handoff.sections.items()}
        assert counts == {name: len(items) for name, items in listed(handoff).items()}
    assert read[0] == read[briefing.THREAD_READ_BY_MEMBER_MAX]


def test_a_small_threads_sections_read_its_members_alone_before_any_analyze(investigation):
    """A briefing of a thread tested each memory of every section's kind for membership: in a
    large account, most of its memories. A small thread's memberships are read once, and its
    members by key; no section reads the account's memories of its kind."""
    statements = []

    def keep(execute, sql, params, many, context):
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        build_briefing(owner_id=investigation.pk, selector=Selector("thread", "Checkout outage"))
    [(sql, params)] = [(sql, params) for sql, params in statements if "AS section" in sql]
    with connection.cursor() as cursor:
        as_reindexed_and_never_analyzed(cursor, "memories_memory", "memories_threadmembership")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = json.dumps(cursor.fetchone()[0])
    assert "memory_owner_type_current" not in plan and "memory_owner_resolved" not in plan
    assert "memories_memory_pkey" in plan
    assert plan.count('"memories_threadmembership"') == 1
    assert "membership_unique" in plan and "membership_recent_members" not in plan


def test_a_small_thread_of_notes_alone_is_counted_from_its_members_read_by_key(tenant):
    """A thread gathers an investigation's notes, which no briefing section lists: its sections
    are then empty, and its current members must still be counted from the one read by key,
    not by a second statement joining its memberships to the account's memories, which without
    statistics (right after a bulk load or a restore) nests a loop over the account's current
    memories per member (EXPLAIN ANALYZE: 24.7 s for a thread of 1,000 notes among 60,000)."""
    notes = [memory(tenant, "note", f"outage: reading {n}") for n in range(3)]
    for memory_type in ("blocker", "decision", "preference", "fact"):
        memory(tenant, memory_type, f"{memory_type} of no thread")
    create_thread(owner=tenant, name="Checkout outage")
    add_thread_members(owner=tenant, name="Checkout outage", memory_ids=[m.id for m in notes])
    statements = []

    def keep(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        brief = build_briefing(owner_id=tenant.pk, selector=Selector("thread", "Checkout outage"))
    assert brief.unlisted == 3
    joins = [
        sql for sql in statements if "JOIN memories_memory m ON m.owner_id = ms.owner_id" in sql
    ]
    assert joins == [], joins
