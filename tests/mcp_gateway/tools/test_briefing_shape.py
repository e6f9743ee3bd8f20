"""What briefing and handoff cost an agent to read, on an account such as three days of work
leave: about thirty memories over two projects, of every type, some revised, archived or
resolved, two threads (one pinned). The compact shape (the default) tells what the full one does
in far fewer characters: nothing null, false or the same for every item of a section."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_gateway.tools import call_tool
from tests.mcp_gateway.tools.conftest import ok

pytestmark = pytest.mark.anyio

ATLAS, BILLING = "atlas", "billing-api"


WORK = {"scope": "work"}
PREFS = {"scope": "user-prefs"}
# The memories given no scope are in the default one, 'personal'.
# name: (type, topic, content, other fields); dueAt in days from now.
MEMORIES = {
    "orm": ("decision", "ORM for atlas", "Use Django's ORM with raw SQL only for the search "
            "query; SQLAlchemy was considered and dropped because the admin and migrations come "
            "with Django.", {"project": ATLAS, "tags": ["db"]} | WORK),
    "queue": ("decision", "Task queue", "Celery with Redis as the broker for atlas background "
              "jobs (exports, reindexing). Dramatiq was faster in the benchmark but nobody on "
              "the team knows it.", {"project": ATLAS} | WORK),
    "auth": ("decision", "Auth provider", "OAuth 2.1 with PKCE through django-oauth-toolkit; no "
             "password grant. Tokens live one hour, refresh tokens thirty days, rotated on use.",
             {"project": ATLAS} | WORK),
    "deploy": ("decision", "Deploy target", "Deploy atlas on Fly.io in the ams region, two "
               "machines behind their proxy; the database stays on the managed Postgres in the "
               "same region.", {"project": ATLAS} | WORK),
    "currency": ("decision", "Money as integer cents", "Store every amount as integer minor "
                 "units with an ISO 4217 currency code beside it; never floats. Rounding happens "
                 "once, at invoice time, half-even.", {"project": BILLING} | WORK),
    "webhooks": ("decision", "Stripe webhooks idempotent", "Every Stripe webhook is stored by "
                 "event id before processing, and processing is idempotent on that id; retries "
                 "from Stripe are expected and harmless.", {"project": BILLING} | WORK),
    "invoices": ("decision", "Invoice numbering", "Invoice numbers are per-year sequences "
                 "(2026-000123) generated in the database with a sequence per year, never in "
                 "Python, so two workers cannot collide.", {"project": BILLING} | WORK),
    "review": ("commitment", "Review Ana's migration PR", "Review Ana's PR adding the tenant_id "
               "column and backfill to the exports table; she needs it merged before the "
               "Thursday release.", {"project": ATLAS, "dueAt": -1} | WORK),
    "changelog": ("commitment", "Write the release notes", "Write the 1.4 release notes: "
                  "exports, the new auth flow, the removed v1 endpoints.",
                  {"project": ATLAS, "dueAt": 2} | WORK),
    "loadtest": ("commitment", "Load test exports", "Run the export load test at 50 concurrent "
                 "users against staging and record p95.", {"project": ATLAS, "dueAt": 5} | WORK),
    "refunds": ("commitment", "Partial refunds endpoint", "Implement POST /refunds with partial "
                "amounts, validated against what was captured; Marc from support is waiting on "
                "it.", {"project": BILLING, "dueAt": 3} | WORK),
    "tax": ("commitment", "Ask accounting about VAT", "Ask accounting whether reverse-charge VAT "
            "applies to the Swiss customers.", {"project": BILLING} | WORK),
    "dunning": ("commitment", "Dunning emails", "Send the three dunning emails on days 3, 7 and "
                "14 after a failed charge.", {"project": BILLING, "dueAt": -2} | WORK),
    "done": ("commitment", "Rotate the Stripe key", "Rotate the restricted Stripe key after the "
             "contractor left.", {"project": BILLING, "dueAt": -3} | WORK),
    "disk": ("blocker", "Staging database full", "Staging Postgres is at 98% disk; migrations "
             "fail with 'could not extend file'. Ops ticket OPS-412 is open, nothing to do until "
             "they resize it.", {"project": ATLAS} | WORK),
    "sandbox": ("blocker", "Stripe sandbox rate limit", "The Stripe test account hits its rate "
                "limit in CI; the refunds tests are skipped until support raises it.",
                {"project": BILLING} | WORK),
    "flaky": ("blocker", "Flaky export test", "test_export_large times out on CI one run in "
              "five.", {"project": ATLAS} | WORK),
    "style": ("preference", "Code style", "Ruff format, 99 columns, double quotes; type hints on "
              "public functions; no print statements left in commits.", PREFS),
    "commits": ("preference", "Commit messages", "Small commits, imperative subject under 72 "
                "characters, the why in the body.", {}),
    "tests": ("preference", "Tests against real Postgres", "Tests run against a real "
              "PostgreSQL, never SQLite and never mocks of our own code.", PREFS),
    "checklist": ("preference", "Review checklist", "Before asking for review: run the whole "
                  "test suite locally, not only the files you touched; check the migration is "
                  "reversible and says what it does to existing rows; look at the query plan of "
                  "any new query on the memories table at a million rows; keep the diff under "
                  "four hundred lines or split it; write the commit message for someone who "
                  "reads it in a year and does not know the ticket; name what was measured and "
                  "how, with the command, and what was not; never leave a TODO without an "
                  "issue; and when a test had to change, say in the message why the old "
                  "assertion was wrong rather than only that it now passes, because a reviewer "
                  "reads the tests first and trusts them.", PREFS),
    "tz": ("fact", "Timezone", "The user works from Lisbon (Europe/Lisbon) and prefers meetings "
           "after 10:00.", {}),
    "staging": ("fact", "Staging URL", "Atlas staging runs at https://atlas-staging.fly.dev, "
                "basic auth in the team vault.", {"project": ATLAS} | WORK),
    "python": ("fact", "Python version", "Atlas runs Python 3.12 and Django 5.2 in production.",
               {"project": ATLAS} | WORK),
    "stripe": ("fact", "Stripe account", "Billing uses the EU Stripe account; payouts go to the "
               "Lisbon bank account weekly.", {"project": BILLING} | WORK),
    "owners": ("fact", "Billing owner", "Marc owns the billing-api roadmap; Ana owns atlas.",
               {"project": BILLING} | WORK),
    "standup": ("note", "Standup", "Standup moved to 09:45 from next week.", WORK),
}  # fmt: skip


async def build_working_account(agent) -> dict[str, dict]:
    """The memories by name, as remember (or revise) returned them."""
    now = timezone.now().replace(microsecond=0)  # due dates as an agent gives them

    def due(days: int) -> str:
        return (now + timedelta(days=days)).isoformat()

    m: dict[str, dict] = {}
    for name, (memory_type, topic, content, fields) in MEMORIES.items():
        arguments = {"memoryType": memory_type, "topic": topic, "content": content} | fields
        if "dueAt" in fields:
            arguments["dueAt"] = due(fields["dueAt"])
        m[name] = (await ok(agent, "remember", arguments))["memory"]
    # Revisions, archives, resolutions, as three days of work leave them.
    m["deploy"] = (
        await ok(
            agent,
            "revise",
            {
                "predecessorId": m["deploy"]["id"],
                "content": "Deploy atlas on Fly.io in the fra region (ams had no capacity), "
                "two machines behind their proxy; the database moves to Frankfurt too.",
            },
        )
    )["memory"]
    m["python"] = (
        await ok(
            agent,
            "revise",
            {
                "predecessorId": m["python"]["id"],
                "content": "Atlas runs Python 3.12 and Django 6.0 in production since Tuesday.",
            },
        )
    )["memory"]
    m["changelog"] = (
        await ok(agent, "revise", {"predecessorId": m["changelog"]["id"], "dueAt": due(4)})
    )["memory"]
    await ok(agent, "resolve", {"memoryId": m["done"]["id"], "status": "resolved"})
    await ok(agent, "resolve", {"memoryId": m["tax"]["id"], "status": "waiting"})
    await ok(agent, "archive", {"memoryId": m["flaky"]["id"]})
    await ok(agent, "archive", {"memoryId": m["standup"]["id"]})
    # Threads: one pinned with members, one not.
    await ok(agent, "configure_thread", {"action": "create", "name": "Release 1.4"})
    await ok(
        agent,
        "configure_thread",
        {
            "action": "add_members",
            "name": "Release 1.4",
            "memoryIds": [m["changelog"]["id"], m["loadtest"]["id"], m["review"]["id"]],
        },
    )
    await ok(agent, "configure_thread", {"action": "pin", "name": "Release 1.4"})
    await ok(agent, "configure_thread", {"action": "create", "name": "payments"})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "payments", "memoryIds": [m["refunds"]["id"]]},
    )
    return m


SECTION_TYPES = {
    "overdue": "commitment",
    "openCommitments": "commitment",
    "blockers": "blocker",
    "recentDecisions": "decision",
    "preferences": "preference",
    "decisions": "decision",
    "commitments": "commitment",
    "facts": "fact",
}


def restored(item: dict, *, memory_type: str, selector: dict) -> dict:
    """A compact item as the full shape gives it, from what the compact one and its section and
    selector say: what compact leaves out is the same for every item, derived, or a default."""
    truncated = item.get("truncated", False)
    return {
        "id": item["id"],
        "uri": f"threengram://memory/{item['id']}",
        "memoryType": memory_type,
        "topic": item["topic"],
        "excerpt": item["excerpt"],
        "truncated": truncated,
        "contentLength": item["contentLength"] if truncated else len(item["excerpt"]),
        "scope": item.get(
            "scope", selector["value"] if selector["kind"] == "scope" else "personal"
        ),
        "project": item.get(
            "project",
            selector["value"]
            if selector["kind"] == "project" and not item.get("accountWide")
            else None,
        ),
        "recordedAt": item["recordedAt"],
        "commitmentStatus": item.get(
            "commitmentStatus", "open" if memory_type == "commitment" else None
        ),
        "dueAt": item.get("dueAt"),
        "overdue": item.get("overdue", False),
    }


def restored_resolved(item: dict, *, selector: dict) -> dict:
    """A compact recently resolved commitment as the full shape gives it."""
    return {
        "id": item["id"],
        "topic": item["topic"],
        "scope": item.get(
            "scope", selector["value"] if selector["kind"] == "scope" else "personal"
        ),
        "project": item.get(
            "project", selector["value"] if selector["kind"] == "project" else None
        ),
        "excerpt": item["excerpt"],
        "truncated": item.get("truncated", False),
        "resolvedAt": item["resolvedAt"],
    }


def nulls_and_falses(value: object, path: str = "") -> list[str]:
    if value is None or value is False:
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nulls_and_falses(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for n, v in enumerate(value) for p in nulls_and_falses(v, f"{path}[{n}]")]
    return []


@pytest.fixture
async def working_account(agent) -> dict[str, dict]:
    return await build_working_account(agent)


CALLS = [
    ("briefing", {}),
    ("briefing", {"mode": "full"}),
    ("handoff", {}),
    ("briefing", {"selector": "project", "value": ATLAS}),
    ("handoff", {"selector": "scope", "value": "work", "generatedFor": "tomorrow"}),
    ("handoff", {"selector": "thread", "value": "release 1.4"}),
]


@pytest.mark.parametrize(("tool", "arguments"), CALLS)
async def test_the_compact_shape_tells_what_the_full_one_does(
    agent, working_account, tool, arguments
):
    """Every briefing and handoff item repeated its type, its URI, nulls and falses for what did
    not apply, and its recording time to the microsecond: most of what an agent read at the
    start of a session was not its memories' topics and excerpts. The compact shape, the
    default, leaves them out; the full one, still there with detail 'full', is rebuilt from it
    field for field."""
    compact = await ok(agent, tool, arguments)
    full = await ok(agent, tool, arguments | {"detail": "full"})
    assert nulls_and_falses(compact) == []
    assert full["selector"] == compact["selector"] | {"value": compact["selector"].get("value")}
    assert full.get("generatedFor") == compact.get("generatedFor") == arguments.get("generatedFor")
    assert list(compact["sections"]) == list(full["sections"])
    for name, section in compact["sections"].items():
        assert (section["count"], section.get("truncated", False)) == (
            full["sections"][name]["count"],
            full["sections"][name]["truncated"],
        )
        if name == "recentlyResolved":
            rebuilt = [restored_resolved(i, selector=full["selector"]) for i in section["items"]]
        else:
            memory_type = SECTION_TYPES[name]
            rebuilt = [
                restored(i, memory_type=memory_type, selector=full["selector"])
                for i in section["items"]
            ]
        assert rebuilt == full["sections"][name]["items"]
    pinned = full["pinnedThreads"]
    assert compact["pinnedThreads"] == {
        "count": pinned["count"],
        "items": [{k: v for k, v in t.items() if k != "pinned"} for t in pinned["items"]],
    }


async def test_the_working_accounts_briefing_and_handoff_read_short(agent, working_account):
    """Measured on the text block a client puts before its model (the same JSON as
    structuredContent): the compact shapes, the default, read well under two thirds of the full
    ones."""
    sizes = {}
    for tool in ("briefing", "handoff"):
        for detail in ("compact", "full"):
            arguments = {"detail": "full"} if detail == "full" else {}
            sizes[tool, detail] = len((await call_tool(agent, tool, arguments)).content[0].text)
    assert sizes["briefing", "compact"] <= 4_600
    assert sizes["handoff", "compact"] <= 8_000
    assert all(sizes[tool, "compact"] * 3 < sizes[tool, "full"] * 2 for tool, _ in sizes)
    # Left out: only what the full shape repeats, never what an agent acts on.
    brief = await ok(agent, "briefing")
    overdue = brief["sections"]["overdue"]["items"]
    assert [i["id"] for i in overdue] == [working_account[n]["id"] for n in ("dunning", "review")]
    assert all(i["overdue"] is True and i["dueAt"] for i in overdue)
    assert {i["project"] for i in overdue} == {ATLAS, BILLING}
    [checklist] = [i for i in brief["sections"]["preferences"]["items"] if "truncated" in i]
    assert (checklist["id"], len(checklist["excerpt"])) == (working_account["checklist"]["id"], 200)
    assert checklist["contentLength"] > 600
    handed = await ok(agent, "handoff")
    [waiting] = [i for i in handed["sections"]["commitments"]["items"] if "commitmentStatus" in i]
    assert (waiting["id"], waiting["commitmentStatus"]) == (working_account["tax"]["id"], "waiting")
    items = [i for s in handed["sections"].values() for i in s["items"]]
    assert not any("uri" in i or "memoryType" in i for i in items)


@pytest.mark.parametrize("tool", ["briefing", "handoff"])
async def test_compact_items_leave_the_default_scope_out(agent, working_account, tool):
    """Every compact item of an account that never names a scope said "scope":"personal", the
    scope remember gives a memory sent without one: 13 times in a briefing of 4,000 characters.
    It is left out, as what an item without a scope is in; another scope is still named, of the
    handoff's recently resolved commitments too (they had named none, in either shape)."""
    arguments = {"mode": "full"} if tool == "briefing" else {}
    compact = await ok(agent, tool, arguments)
    full = await ok(agent, tool, arguments | {"detail": "full"})
    scope_of = {i["id"]: i["scope"] for s in full["sections"].values() for i in s["items"]}
    named = {i["id"]: i.get("scope") for s in compact["sections"].values() for i in s["items"]}
    assert named[working_account["commits"]["id"]] is None
    assert scope_of[working_account["commits"]["id"]] == "personal"
    assert named[working_account["style"]["id"]] == "user-prefs"
    if tool == "handoff":
        assert named[working_account["done"]["id"]] == "work"
    assert named == {
        memory_id: None if scope_of[memory_id] == "personal" else scope_of[memory_id]
        for memory_id in named
    }


@pytest.mark.parametrize("tool", ["briefing", "handoff"])
async def test_a_projects_preferences_are_its_own_then_the_account_wide_ones(
    agent, working_account, tool
):
    """An agent starting a session in the atlas repository asked for atlas's briefing (or
    handoff) and read none of the user's preferences kept with no project (code style, commit
    messages, tests against real Postgres, the review checklist), which hold in every
    repository. Now they follow atlas's own, marked as account-wide in the compact shape (which
    leaves out the project the selector names), and every other section stays atlas's."""
    own = (
        await ok(
            agent,
            "remember",
            {
                "memoryType": "preference",
                "topic": "Atlas line length",
                "content": "Atlas keeps 79 columns: its CI lints with flake8's defaults.",
                "project": ATLAS,
                "scope": "work",
            },
        )
    )["memory"]
    selected = {"selector": "project", "value": ATLAS} | (
        {"mode": "full"} if tool == "briefing" else {}
    )
    compact = await ok(agent, tool, selected)
    full = await ok(agent, tool, selected | {"detail": "full"})

    newest_first = [working_account[n]["id"] for n in ("checklist", "tests", "commits", "style")]
    preferences = compact["sections"]["preferences"]
    assert [i["id"] for i in preferences["items"]] == [own["id"], *newest_first]
    assert (preferences["count"], "truncated" in preferences) == (5, False)
    assert [i.get("accountWide", False) for i in preferences["items"]] == [False] + [True] * 4
    assert [i["project"] for i in full["sections"]["preferences"]["items"]] == [ATLAS] + [None] * 4
    for name, section in full["sections"].items():
        if name != "preferences":
            assert {i["project"] for i in section["items"]} <= {ATLAS}, name
            assert not any("accountWide" in i for i in compact["sections"][name]["items"])


@pytest.mark.parametrize("tool", ["briefing", "handoff"])
async def test_a_thread_of_notes_is_said_to_hold_what_no_section_lists(agent, tool):
    """A multi-day investigation kept as notes in a pinned thread: its briefing and handoff had
    every section empty and said nothing, as if the thread held nothing to hand over."""
    notes = [
        (await ok(agent, "remember", {"memoryType": memory_type, "topic": topic, "content": text}))[
            "memory"
        ]["id"]
        for memory_type, topic, text in [
            ("note", "leak: symptoms", "Dispatcher pods grow to 2 GB RSS and are OOM-killed."),
            ("note", "leak: tracemalloc", "Growth is in httpx clients built per delivery."),
            ("pattern", "leak: shared client", "One httpx client per worker, closed on exit."),
            ("decision", "leak: fix", "Ship the shared client in the next release."),
        ]
    ]
    await ok(agent, "configure_thread", {"action": "create", "name": "Dispatcher leak"})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "Dispatcher leak", "memoryIds": notes},
    )
    selected = {"selector": "thread", "value": "dispatcher leak"}
    compact = await ok(agent, tool, selected)
    full = await ok(agent, tool, selected | {"detail": "full"})
    listed = sum(section["count"] for section in compact["sections"].values())
    assert listed == 1  # the decision
    assert compact["note"] == full["note"]
    assert compact["note"].startswith("3 of this thread's current memories are in no section")
    assert "thread filter and no query lists every member" in compact["note"]
    # What the note points to lists them.
    page = await ok(agent, "search", {"thread": "Dispatcher leak", "limit": 25})
    assert {hit["id"] for hit in page["hits"]} == set(notes)


async def test_a_thread_whose_members_are_all_listed_carries_no_note(agent, working_account):
    for tool in ("briefing", "handoff"):
        selected = {"selector": "thread", "value": "Release 1.4"}
        assert "note" not in await ok(agent, tool, selected)
        assert (await ok(agent, tool, selected | {"detail": "full"}))["note"] is None
        assert "note" not in await ok(agent, tool, {})
