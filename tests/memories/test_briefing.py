"""The session briefing (memories.briefing): which memories each selector's sections hold."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories.briefing import BRIEFING_SECTIONS, Selector, build_briefing, read_sections
from memories.errors import NotFound
from memories.services import record_memory
from memories.threads import add_thread_members, create_thread


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
        # of an empty table, under which a plan of a few rows may read any index.
        cursor.execute("SELECT pg_clear_relation_stats('public', 'memories_memory')")
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
