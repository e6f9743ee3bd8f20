"""The tool surface, called the way the MCP server calls it: call_tool(principal, name, args)."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import mcp_types as types
import pytest
from django.utils import timezone
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from infra.observability import VERSION
from mcp_gateway.arguments import schema_error as _schema_error
from mcp_gateway.schemas import CONFIGURE_THREAD_IN
from mcp_gateway.thread_actions import THREAD_ACTION_HANDLERS
from mcp_gateway.tools import TOOLS, call_tool, tool_definitions
from memories import environment
from memories.models import Memory, MemoryType
from memories.search import listing
from tests.mcp_gateway.conftest import IN_PROCESS_URL, asgi_transport, mcp_client
from tests.mcp_gateway.tools.conftest import fails, ok, principal_for
from tests.memories.made_up_credentials import CREDENTIALS

pytestmark = pytest.mark.anyio

READ_TOOLS = {"search", "get_memories", "briefing", "handoff", "describe_environment"}
WRITE_TOOLS = {"remember", "revise", "archive", "resolve", "configure_thread"}
THREAD_ACTIONS = CONFIGURE_THREAD_IN["properties"]["action"]["enum"]


async def remember(agent, **fields) -> dict:
    arguments = {"memoryType": "note", "topic": "topic", "content": "content"} | fields
    return (await ok(agent, "remember", arguments))["memory"]


async def thread_of(agent, name: str, memory_ids: list[str]) -> None:
    """A new thread `name` holding the memories `memory_ids`."""
    await ok(agent, "configure_thread", {"action": "create", "name": name})
    arguments = {"action": "add_members", "name": name, "memoryIds": memory_ids}
    await ok(agent, "configure_thread", arguments)


# --- catalogue ---------------------------------------------------------------------------


def test_every_tool_is_described_strict_and_annotated():
    tools = tool_definitions()
    assert {tool.name for tool in tools} == READ_TOOLS | WRITE_TOOLS
    for tool in tools:
        assert tool.title and len(tool.description) > 120
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema["additionalProperties"] is False
        for name, prop in tool.input_schema["properties"].items():
            if prop["type"] == "string":
                assert "maxLength" in prop or "enum" in prop, (tool.name, name)
            if prop["type"] == "array":
                assert "maxItems" in prop, (tool.name, name)
            if prop["type"] == "integer":
                assert "maximum" in prop and "minimum" in prop, (tool.name, name)
        hints = tool.annotations
        assert hints.open_world_hint is False
        assert hints.read_only_hint is (tool.name in READ_TOOLS)


def test_a_scope_left_out_is_described_as_each_tool_reads_it():
    """remember files a memory without a scope under the default one; search without one looks
    in every scope, and revise keeps the predecessor's: a model told otherwise passes a scope
    it does not mean, or fears that leaving it out moves the memory."""
    scope = {
        tool.name: tool.input_schema["properties"]["scope"]["description"]
        for tool in tool_definitions()
        if tool.name in ("remember", "search", "revise")
    }
    assert "default 'personal'" in scope["remember"]
    assert "every scope" in scope["search"] and "default" not in scope["search"]
    assert "predecessor's" in scope["revise"] and "default" not in scope["revise"]


def test_every_instant_is_described_with_the_form_it_takes():
    """asOf's own description replaced the form an instant takes: a model wrote a date alone
    ("2026-12-01") and was refused, where recordedAfter and recordedBefore said what to write."""
    for tool in tool_definitions():
        for name, field in tool.input_schema["properties"].items():
            if field.get("format") == "date-time":
                assert "RFC 3339 date-time with an offset" in field["description"], (
                    tool.name,
                    name,
                )
                assert "2026-12-31T17:00:00Z" in field["description"], (tool.name, name)


def test_a_listing_by_commitment_state_is_described_in_its_order():
    """Open commitments listed by search come newest recorded first: with the default limit the
    one due next was on the second page, beside hasMore, and an agent took the first for all."""
    [definition] = [t for t in tool_definitions() if t.name == "search"]
    states = definition.input_schema["properties"]["commitmentStatus"]["description"]
    assert "the newest recorded come first, not the next due" in states
    assert "briefing or handoff, which list open ones next due first" in states


def test_a_search_count_is_described_as_the_pages_not_a_total():
    """A count left undescribed was reported as how many memories match."""
    [definition] = [t for t in tool_definitions() if t.name == "search"]
    count = definition.output_schema["properties"]["count"]["description"]
    assert "How many hits this page holds, not how many memories match" in count
    assert "hasMore" in count


def test_briefings_mode_says_how_much_it_gives_beside_detail():
    """Both mode and detail take 'full': mode said nothing of which is which."""
    [definition] = [t for t in tool_definitions() if t.name == "briefing"]
    mode = definition.input_schema["properties"]["mode"]["description"]
    assert "'brief', 3 items per section and 200-character excerpts" in mode
    assert "'full', 10 and 600" in mode
    assert "detail" in mode


@pytest.mark.parametrize("tool", ["briefing", "handoff"])
@pytest.mark.parametrize(("selector", "limit"), [("scope", 64), ("project", 256), ("thread", 100)])
async def test_a_selector_values_limit_is_told_before_the_call_and_by_its_refusal(
    agent, tool, selector, limit
):
    [definition] = [t for t in tool_definitions() if t.name == tool]
    value = definition.input_schema["properties"]["value"]
    assert f"{limit} " in value["description"] and selector in value["description"]
    refused = await fails(agent, tool, {"selector": selector, "value": "a" * (limit + 1)})
    assert refused.startswith(f"invalid_input: value: must be at most {limit}")


async def test_the_text_block_is_the_structured_content_without_spaces(agent):
    """Many clients put the text block, not structuredContent, before their model: it is the
    same JSON with no space after each comma and colon, characters no reader needs."""
    await remember(agent, topic="spaces, colons: commas", content="a, b: c")
    result = await call_tool(agent, "search", {"query": "spaces colons commas"})
    compact = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    assert result.content[0].text == compact
    assert '"a, b: c"' in compact  # the content keeps its own spaces


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("drop_tables", "Unknown tool: 'drop_tables'"),
        # A slip of one of ours names it: the model's next call is the right one.
        ("get_memory", "Unknown tool: 'get_memory'; did you mean 'get_memories'?"),
        ("Search", "Unknown tool: 'Search'; did you mean 'search'?"),
        ("configure", "Unknown tool: 'configure'; did you mean 'configure_thread'?"),
        ("x" * 900, f"Unknown tool: '{'x' * 64}…'"),
    ],
)
async def test_an_unknown_tool_is_a_protocol_error_naming_it(agent, name, message):
    """MCP tools, "Error Handling": an unknown tool is Invalid Params (-32602), not a tool
    result; the name is echoed cut as every name a caller made up, with the tool it slips
    from."""
    with pytest.raises(MCPError) as refused:
        await call_tool(agent, name, {})
    assert refused.value.code == types.INVALID_PARAMS
    assert refused.value.message == message


async def test_a_known_tools_invalid_input_stays_a_tool_result(agent):
    """The model corrects its call from a tool result; only the unknown tool is refused."""
    assert (await fails(agent, "search", {"limit": "many"})).startswith("invalid_input: limit:")


# --- scope, fail-closed --------------------------------------------------------------------


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
async def test_each_tool_refuses_a_token_without_its_scope(spec, owner):
    needed = "memory:read" if spec.name in READ_TOOLS else "memory:write"
    other = {"memory:read", "memory:write"} - {needed}
    for scopes in (set(), other):
        # A JSON-RPC error: the reply is HTTP 403, whose body clients read only as one.
        with pytest.raises(MCPError) as refused:
            await call_tool(principal_for(owner, scopes), spec.name, {})
        assert refused.value.code == types.INVALID_REQUEST
        assert refused.value.message == f"insufficient_scope: this tool needs the {needed} scope"
    assert await Memory.objects.acount() == 0


async def test_read_only_token_cannot_write_but_can_list_threads(owner):
    reader = principal_for(owner, {"memory:read"})
    with pytest.raises(MCPError, match=r"^insufficient_scope: "):
        await call_tool(reader, "configure_thread", {"action": "create", "name": "x"})
    assert (await ok(reader, "configure_thread", {"action": "list"}))["threads"] == []


# --- strict input, bounds ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "describe_environment",
            {"verbose": True},
            "invalid_input: verbose: unknown field; this tool takes no arguments",
        ),
        # An unknown field is answered with what the tool takes, or the field it misspells.
        (
            "search",
            {"query": "x", "limit": 5, "sort": "asc"},
            "invalid_input: sort: unknown field; this tool takes: query, limit, memoryTypes, "
            "scope, project, thread, status, recordedAfter, recordedBefore, asOf, "
            "commitmentStatus, resolvedAfter, cursor, projection",
        ),
        (
            "remember",
            {"memory_type": "note", "topic": "t", "content": "c"},
            "invalid_input: memory_type: unknown field; did you mean 'memoryType'?",
        ),
        (
            "get_memories",
            {"ids": ["a"], "MaxChars": 3000},
            "invalid_input: MaxChars: unknown field; did you mean 'maxChars'?",
        ),
        # A part of one field's name is taken for that field.
        (
            "remember",
            {"memoryType": "commitment", "topic": "t", "content": "c", "due": "2026-12-10"},
            "invalid_input: due: unknown field; did you mean 'dueAt'?",
        ),
        (
            "remember",
            {"type": "note", "topic": "t", "content": "c"},
            "invalid_input: type: unknown field; did you mean 'memoryType'?",
        ),
        ("get_memories", {"id": "a"}, "invalid_input: id: unknown field; did you mean 'ids'?"),
        (
            "search",
            {"query": "x", "tags": ["perf"]},
            "invalid_input: tags: unknown field; search has no tags filter: a memory's tags are "
            "among the words it matches, so put the tag in the query",
        ),
        (
            "revise",
            {"predecessorId": "x", "content": "c", "thread_id": "launch"},
            "invalid_input: thread_id: unknown field; a memory joins a thread through "
            "configure_thread (action add_members, name, memoryIds: the id this call returns); "
            "the answer's proposals name the threads the server found it fits",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "thread": "launch"},
            "invalid_input: thread: unknown field; a memory joins a thread through "
            "configure_thread (action add_members, name, memoryIds: the id this call returns); "
            "the answer's proposals name the threads the server found it fits",
        ),
        # In the singular or the plural of a field's name too.
        (
            "search",
            {"query": "x", "type": "decision"},
            "invalid_input: type: unknown field; did you mean 'memoryTypes'?",
        ),
        (
            "search",
            {"projects": ["atlas"]},
            "invalid_input: projects: unknown field; did you mean 'project'?",
        ),
        (
            "search",
            {"query": "x", "statuses": ["active"]},
            "invalid_input: statuses: unknown field; this tool takes: query, limit, memoryTypes, "
            "scope, project, thread, status, recordedAfter, recordedBefore, asOf, "
            "commitmentStatus, resolvedAfter, cursor, projection",
        ),
        (
            "resolve",
            {"memory": "a", "status": "resolved"},
            "invalid_input: memory: unknown field; did you mean 'memoryId'?",
        ),
        # A field another tool takes for it says what to do instead: a commitment is marked
        # done by resolve, not by revising it with a status.
        (
            "revise",
            {"predecessorId": "a", "status": "resolved"},
            "invalid_input: status: unknown field; revise writes a new version of the memory's "
            "text and fields; a commitment's state is moved by resolve (memoryId, status: open, "
            "waiting, resolved, expired), and archive retires a memory",
        ),
        (
            "revise",
            {"memoryId": "a", "content": "c"},
            "invalid_input: memoryId: unknown field; did you mean 'predecessorId'? (the memory "
            "to revise)",
        ),
        (
            "archive",
            {"memoryIds": ["a", "b"]},
            "invalid_input: memoryIds: unknown field; did you mean 'memoryId'? (one memory per "
            "call)",
        ),
        (
            "remember",
            {"memoryType": "commitment", "topic": "t", "content": "c", "commitmentStatus": "open"},
            "invalid_input: commitmentStatus: unknown field; a commitment starts open; resolve "
            "moves it on",
        ),
        (
            "get_memories",
            {"memoryIds": ["a"]},
            "invalid_input: memoryIds: unknown field; did you mean 'ids'?",
        ),
        (
            "resolve",
            {"memoryId": "a", "commitmentStatus": "resolved"},
            "invalid_input: commitmentStatus: unknown field; did you mean 'status'?",
        ),
        # briefing and handoff take the part they cover as a selector, where search takes a
        # project field: the call is shown as they take it.
        (
            "briefing",
            {"project": "atlas"},
            "invalid_input: project: unknown field; a project is chosen with selector and value: "
            '{"selector": "project", "value": "atlas"}',
        ),
        (
            "handoff",
            {"thread": "Atlas launch", "sectionLimit": 5},
            "invalid_input: thread: unknown field; a thread is chosen with selector and value: "
            '{"selector": "thread", "value": "Atlas launch"}',
        ),
        (
            "briefing",
            {"Project": "atlas"},
            "invalid_input: Project: unknown field; a project is chosen with selector and value: "
            '{"selector": "project", "value": "atlas"}',
        ),
        (
            "handoff",
            {"scope": 7},
            "invalid_input: scope: unknown field; a scope is chosen with selector and value: "
            '{"selector": "scope", "value": "…"}',
        ),
        # A field one of the overviews takes is answered by the other with its own.
        (
            "handoff",
            {"mode": "full"},
            "invalid_input: mode: unknown field; handoff has no mode: sectionLimit (1-25, "
            "default 10) is how many items a section shows",
        ),
        (
            "briefing",
            {"sectionLimit": 10},
            "invalid_input: sectionLimit: unknown field; briefing has no sectionLimit: mode "
            "'brief' or 'full' is how many items a section shows",
        ),
        (
            "configure_thread",
            {"action": "add_members", "thread": "launch", "memoryIds": ["a"]},
            "invalid_input: thread: unknown field; did you mean 'name'? (the thread's name)",
        ),
        # An empty query meant "everything": a listing is asked for without one.
        (
            "search",
            {"query": "", "memoryTypes": ["blocker"]},
            "invalid_input: query: must be at least 1 character(s); omit query to list the "
            "memories the filters select, newest first",
        ),
        # A part of several fields' names is no guess: every field is listed.
        (
            "search",
            {"record": "x"},
            "invalid_input: record: unknown field; this tool takes: query, limit,",
        ),
        # A made-up name is shown in part only; a list item is named as the domain names it.
        ("search", {"query": "x", "k" * 100_000: 1}, f"invalid_input: {'k' * 64}…: unknown field"),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "tags": ["ok", ""]},
            "invalid_input: tags[1]: must be at least 1 character(s)",
        ),
        ("remember", {"memoryType": "note", "topic": "t"}, "invalid_input: content: is required"),
        # Null for a field the tool does not take is still an unknown field.
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "memory_type": None},
            "invalid_input: memory_type: unknown field; did you mean 'memoryType'?",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": None},
            "invalid_input: content: must be of type string, not null",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "x" * 2001},
            "invalid_input: content: must be at most 2000 characters; got 2001",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t" * 257, "content": "c"},
            "invalid_input: topic: must be at most 256 characters; got 257",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "tags": ["a"] * 257},
            "invalid_input: tags: at most 256 items; got 257",
        ),
        (
            "remember",
            {
                "memoryType": "note",
                "topic": "t",
                "content": "c",
                "tags": [f"t{i}" for i in range(33)],
            },
            "invalid_input: tags: at most 32 distinct tags (a tag repeated in any case counts "
            "once); got 33",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "scope": "Work Notes"},
            "invalid_input: scope: must be kebab-case: lowercase letters and digits separated by "
            "single hyphens, e.g. 'work-notes'",
        ),
        # The kebab-case form is shown only when there is one.
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "scope": "Équipe_Paris "},
            "invalid_input: scope: must be kebab-case: lowercase letters and digits separated by "
            "single hyphens, e.g. 'equipe-paris'",
        ),
        # The schema's pattern in the words briefing's scope value is refused in, not a regex.
        ("search", {"query": "x", "scope": "Personal"}, "invalid_input: scope: must be kebab-case"),
        (
            "remember",
            {"memoryType": "idea", "topic": "t", "content": "c"},
            "invalid_input: memoryType: must be one of: decision, commitment",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "dueAt": "2027-01-01T00:00:00Z"},
            "invalid_input: dueAt: only a commitment can have a due date",
        ),
        (
            "remember",
            {"memoryType": "commitment", "topic": "t", "content": "c", "dueAt": "tomorrow"},
            "invalid_input: dueAt: must be an RFC 3339 date-time, YYYY-MM-DDTHH:MM:SS, a fraction "
            "of the second after '.' if any, and Z or an offset ±HH:MM, e.g. "
            "2026-12-31T17:00:00Z, or a date alone, YYYY-MM-DD (due by the end of that day, UTC)",
        ),
        (
            "remember",
            {
                "memoryType": "commitment",
                "topic": "t",
                "content": "c",
                "dueAt": "9999-12-31T23:59:59-14:00",
            },
            "invalid_input: dueAt: must be within 1970-01-01T00:00:00Z..9999-12-31T23:59:59",
        ),
        (
            "search",
            {"query": "x", "asOf": "1969-12-31T23:59:59Z"},
            "invalid_input: asOf: must be within 1970-01-01T00:00:00Z..",
        ),
        (
            "search",
            {"query": "x", "recordedAfter": "2026-01-01T00:00:00+14:30"},
            "invalid_input: recordedAfter: UTC offset must be whole minutes within -14:00..+14:00",
        ),
        (
            "search",
            {"query": "x", "recordedBefore": "9999-12-31T23:59:59.999999-00:01"},
            "invalid_input: recordedBefore: must be within 1970-01-01T00:00:00Z..",
        ),
        ("search", {"query": "x", "limit": 26}, "invalid_input: limit: must be at most 25; got 26"),
        (
            "search",
            {"query": "x", "projection": "brief"},
            "invalid_input: projection: must be one of: full, compact",
        ),
        ("search", {"query": "x", "limit": 0}, "invalid_input: limit: must be at least 1; got 0"),
        ("search", {"query": "q" * 501}, "invalid_input: query: must be at most 500 characters"),
        (
            "search",
            {"query": "   "},
            "invalid_input: query: must be at least 1 character(s) after trimming; omit query "
            "to list the memories the filters select, newest first",
        ),
        (
            "search",
            {
                "query": "x",
                "recordedAfter": "2026-02-01T00:00:00Z",
                "recordedBefore": "2026-01-01T00:00:00Z",
            },
            "invalid_input: recordedAfter: must not be later than recordedBefore",
        ),
        ("get_memories", {"ids": []}, "invalid_input: ids: at least 1 item(s)"),
        ("get_memories", {"ids": ["a"] * 21}, "invalid_input: ids: at most 20 items; got 21"),
        (
            "get_memories",
            {"ids": ["a"], "maxChars": 100},
            "invalid_input: maxChars: must be at least 2000; got 100",
        ),
        ("briefing", {"mode": "long"}, "invalid_input: mode: must be one of: brief, full"),
        (
            "search",
            {"query": "x", "thread": ["launch", "beta"]},
            "invalid_input: thread: must be of type string, not array; it takes one value, not "
            "a list",
        ),
        # A slip of a value, or its start, is told the value it slips from.
        (
            "configure_thread",
            {"action": "add_member", "name": "t", "memoryIds": ["x"]},
            "invalid_input: action: must be one of: list, create, rename, pin, unpin, delete, "
            "add_members, remove_members, accept_proposal, reject_proposal; did you mean "
            "'add_members'?",
        ),
        (
            "configure_thread",
            {"action": "accept", "proposalId": "x"},
            "invalid_input: action: must be one of: list, create, rename, pin, unpin, delete, "
            "add_members, remove_members, accept_proposal, reject_proposal; did you mean "
            "'accept_proposal'?",
        ),
        (
            "briefing",
            {"selector": "scope"},
            "invalid_input: value: is required when selector is 'scope'",
        ),
        (
            "handoff",
            {"selector": "scope", "value": "a" * 65},
            "invalid_input: value: must be at most 64 characters",
        ),
        ("briefing", {"selector": "scope", "value": "erased"}, "invalid_input: value: 'erased'"),
        # Worded as the scope of a memory and the briefing prompt's scope argument are.
        (
            "briefing",
            {"selector": "scope", "value": "Work Notes"},
            "invalid_input: value: must be kebab-case: lowercase letters and digits separated by "
            "single hyphens, e.g. 'work-notes'",
        ),
        # A filter left blank narrows nothing: refused, not taken for no filter.
        ("search", {"query": "x", "project": "   "}, "invalid_input: project: must be at least"),
        ("search", {"query": "x", "recordedAfter": ""}, "invalid_input: recordedAfter: must be"),
        ("search", {"query": "x", "recordedBefore": ""}, "invalid_input: recordedBefore: must"),
        (
            "handoff",
            {"sectionLimit": 26},
            "invalid_input: sectionLimit: must be at most 25; got 26",
        ),
        (
            "configure_thread",
            {"action": "create", "name": "n" * 101},
            "invalid_input: name: must be at most 100 characters; got 101",
        ),
        (
            "configure_thread",
            {"action": "rename", "name": "a"},
            "invalid_input: newName: is required",
        ),
        (
            "configure_thread",
            {"action": "add_members", "name": "a", "memoryIds": ["x"] * 21},
            "invalid_input: memoryIds: at most 20 items; got 21",
        ),
        ("resolve", {"memoryId": "x", "status": "done"}, "invalid_input: status: must be one of"),
    ],
)
async def test_bad_input_is_refused_naming_field_and_limit(agent, tool, arguments, expected):
    assert (await fails(agent, tool, arguments)).startswith(expected)
    assert await Memory.objects.acount() == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "told"),
    [
        # status is the archive state: the agent learns which argument filters a commitment's.
        ("search", {"status": "resolved"}, "state is filtered by commitmentStatus, a list of"),
        ("search", {"query": "x", "status": "open"}, "filtered by commitmentStatus"),
        ("search", {"commitmentStatus": ["done"]}, "a commitment that is done is 'resolved'"),
        ("search", {"commitmentStatus": ["open", "todo"]}, "one still to do is 'open' or"),
        ("search", {"status": "superseded"}, "found with asOf"),
        # Two fields of briefing and handoff both take 'full': the other values are told apart.
        ("briefing", {"mode": "compact"}, "'compact' is a detail (which fields)"),
        ("briefing", {"detail": "brief"}, "'brief' is a mode (how many items)"),
        ("handoff", {"detail": "brief"}, "'brief' is a mode (how many items)"),
        ("resolve", {"memoryId": "x", "status": "done"}, "a commitment that is done is 'resolved'"),
        ("resolve", {"memoryId": "x", "status": "cancelled"}, "no longer needed is 'expired'"),
        ("resolve", {"memoryId": "x", "status": "Done"}, "a commitment that is done is 'resolved'"),
        # A memory's type in another case, the plural, or a tracker's word for it.
        (
            "remember",
            {"memoryType": "todo", "topic": "t", "content": "c"},
            "a to-do, task or promise is a 'commitment' (with dueAt for its deadline)",
        ),
        (
            "remember",
            {"memoryType": "Decision", "topic": "t", "content": "c"},
            "types are lower case: 'decision'",
        ),
        ("revise", {"predecessorId": "x", "memoryType": "Task"}, "is a 'commitment'"),
        ("search", {"memoryTypes": ["decision", "blockers"]}, "types are singular: 'blocker'"),
        ("search", {"memoryTypes": ["issue"]}, "what blocks the work is a 'blocker'"),
        # Any value in another case: the value to send.
        ("search", {"status": "Active"}, "values are lower case: 'active'"),
        ("search", {"commitmentStatus": ["Open"]}, "values are lower case: 'open'"),
        ("handoff", {"detail": "FULL"}, "values are lower case: 'full'"),
    ],
)
async def test_a_value_of_another_field_or_meaning_is_refused_saying_what_to_send(
    agent, tool, arguments, told
):
    text = await fails(agent, tool, arguments)
    assert text.startswith("invalid_input: ")
    assert "must be one of: " in text
    assert told in text


@pytest.mark.parametrize("scope", ["仕事", "--", "Erased"])
async def test_a_scope_without_a_kebab_case_form_is_refused_with_the_rule_alone(agent, scope):
    arguments = {"memoryType": "note", "topic": "t", "content": "c", "scope": scope}
    assert await fails(agent, "remember", arguments) == (
        "invalid_input: scope: must be kebab-case: lowercase letters and digits separated by "
        "single hyphens"
    )


async def test_an_unrelated_enum_value_is_refused_with_the_values_alone(agent):
    text = await fails(agent, "search", {"status": "purple"})
    assert text == "invalid_input: status: must be one of: active, archived, any"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "a\ud800b"},
            "invalid_input: content: must not contain lone surrogates",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t\x00", "content": "text"},
            "invalid_input: topic: must not contain NUL",
        ),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "x", "tags": ["ok", "b\udfff"]},
            "invalid_input: tags[1]: must not contain lone surrogates",
        ),
        ("search", {"query": "\udc00"}, "invalid_input: query: must not contain lone surrogates"),
        # The stand-in for a lone surrogate on the 2025 wire (mcp_gateway.wire), named as itself.
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "a\ufffeb"},
            "invalid_input: content: must not contain lone surrogates (invalid Unicode) or U+FFFE",
        ),
        (
            "search",
            {"query": "x", "\x00" + "k" * 100_000: 1},
            f"invalid_input: object key '\\x00{'k' * 63}…':",
        ),
        ("search", {"query": "x", "project": "p\x00"}, "invalid_input: project: must not"),
        (
            "configure_thread",
            {"action": "add_members", "name": "a", "memoryIds": ["\x00"]},
            "invalid_input: memoryIds[0]: must not contain NUL",
        ),
        # Unknown fields too: the walk runs before the schema, over every string.
        ("search", {"query": "x", "\ud800": 1}, "invalid_input: object key"),
        # Deeper than any argument nests, and than a recursive walk could go.
        (
            "search",
            {"query": "x", "memoryTypes": json.loads("[" * 1200 + "]" * 1200)},
            "invalid_input: memoryTypes" + "[0]" * 31 + ": nested more than 32 levels deep",
        ),
    ],
)
async def test_text_postgresql_cannot_store_is_refused_naming_the_field(
    agent, tool, arguments, expected
):
    assert (await fails(agent, tool, arguments)).startswith(expected)
    assert await Memory.objects.acount() == 0


async def test_a_made_up_name_on_the_way_to_unstorable_text_is_shown_in_part(agent):
    """A value PostgreSQL cannot store under a made-up key: the refusal names the place, and
    repeats the key as it repeats any made-up name (in part), not the whole of it."""
    message = await fails(agent, "search", {"query": "x", "k" * 100_000: ["\x00"]})
    assert message == f"invalid_input: {'k' * 64}…[0]: must not contain NUL characters"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"memoryId": "m", "": 1}, 'invalid_input: "": unknown field; this tool takes: memoryId'),
        ({"memoryId": "m", " ": 1}, 'invalid_input: " ": unknown field; this tool takes'),
        ({"memoryId": "m", "\u200b": 1}, 'invalid_input: "\\u200b": unknown field; this tool'),
        ({"memoryId": "m", "x\t": 1}, 'invalid_input: "x\\t": unknown field; this tool'),
        ({" ": ["\x00"]}, 'invalid_input: " "[0]: must not contain NUL characters'),
        ({"a": {"": "\x00"}}, 'invalid_input: a."": must not contain NUL characters'),
    ],
)
async def test_a_field_name_that_would_not_show_is_named_quoted(agent, arguments, expected):
    """A blank field name, or one with white space or an invisible character at an end, is
    quoted (and its invisible characters escaped) where a refusal names it: bare, it would
    read `invalid_input: : unknown field` and name nothing."""
    assert (await fails(agent, "archive", arguments)).startswith(expected)


async def test_integer_arguments_written_as_whole_floats_work_as_integers(agent):
    """JSON Schema counts 5.0 as an integer, and some clients' JSON encoders write it so."""
    stored = await remember(agent, memoryType="fact", topic="cache", content="Redis 7.2")
    assert (await ok(agent, "search", {"query": "redis", "limit": 1.0}))["count"] == 1
    read = await ok(agent, "get_memories", {"ids": [stored["id"]], "maxChars": 2000.0})
    assert read["memories"][0]["content"] == "Redis 7.2"
    await ok(agent, "handoff", {"sectionLimit": 3.0})
    assert (await fails(agent, "search", {"query": "redis", "limit": 1.5})).startswith(
        "invalid_input: limit:"
    )


async def test_null_for_an_optional_field_means_the_field_is_left_out(agent):
    """As clients send it for every optional field a model leaves unused (strict function
    calling makes each field required and nullable): every tool answers as without them."""
    unused = {"scope": None, "tags": None, "dueAt": None}
    stored = await remember(agent, memoryType="commitment", project="shop", **unused)
    assert "dueAt" not in stored
    searched = await ok(
        agent,
        "search",
        {"query": "content", "limit": None, "cursor": None, "project": None, "asOf": None},
    )
    assert [hit["id"] for hit in searched["hits"]] == [stored["id"]]
    revised = await ok(
        agent,
        "revise",
        {"predecessorId": stored["id"], "content": "new content"}
        | unused
        | {"project": None, "topic": None},
    )
    read = await ok(agent, "get_memories", {"ids": [revised["memory"]["id"]], "maxChars": None})
    assert (read["memories"][0]["project"], read["memories"][0]["topic"]) == ("shop", "topic")
    briefing = await ok(agent, "briefing", {"selector": None, "value": None, "mode": None})
    assert briefing["mode"] == "brief"
    thread = {"action": "create", "name": "orders", "memoryIds": None, "newName": None}
    assert (await ok(agent, "configure_thread", thread))["thread"]["name"] == "orders"
    # A field the action needs is still needed, null or not.
    text = await fails(agent, "configure_thread", {"action": "accept_proposal", "proposalId": None})
    assert text == "invalid_input: proposalId: is required for action 'accept_proposal'"


@pytest.mark.parametrize("sent", [33, 256])
async def test_repeated_tags_are_counted_once_against_the_tag_limit(agent, sent):
    """As the tool's description says: a tag repeated in any case is counted once, so a list
    longer than the limit that folds to fewer tags is kept, on remember and on revise."""
    tags = [f"t{i % 2}" if i % 4 < 2 else f"T{i % 2}" for i in range(sent)]
    stored = await remember(agent, tags=tags)
    retagged = (["T1", "t0"] * sent)[:sent]
    revised = await ok(agent, "revise", {"predecessorId": stored["id"], "tags": retagged})
    ids = [stored["id"], revised["memory"]["id"]]
    read = await ok(agent, "get_memories", {"ids": ids})
    assert [memory["tags"] for memory in read["memories"]] == [["t0", "t1"], ["T1", "t0"]]


async def test_a_list_sent_as_its_json_text_and_a_number_as_a_string_work(agent):
    """As some desktop clients send every list, and models often write numbers."""
    tags = json.dumps(["infra", "db"])
    stored = await remember(agent, memoryType="decision", topic="database", tags=tags)
    read = await ok(agent, "get_memories", {"ids": json.dumps([stored["id"]]), "maxChars": "2000"})
    assert read["memories"][0]["tags"] == ["infra", "db"]
    found = await ok(
        agent, "search", {"query": "database", "memoryTypes": '["decision"]', "limit": " 3 "}
    )
    assert [hit["id"] for hit in found["hits"]] == [stored["id"]]
    thread = {"action": "create", "name": "db", "memoryIds": f'["{stored["id"]}"]'}
    await ok(agent, "configure_thread", thread | {"memoryIds": None})
    added = await ok(agent, "configure_thread", thread | {"action": "add_members"})
    assert added["thread"]["memberCount"] == 1


ONE_IN_A_LIST = "send a list, even of one: [...]"
NOT_A_LIST = f"must be of type array, not string; {ONE_IN_A_LIST}"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        # Text that is not a list's JSON stays text, which a list field refuses, saying what
        # to send: one value where a list is asked for is a model's commonest slip.
        ("search", {"query": "x", "memoryTypes": "decision"}, f"memoryTypes: {NOT_A_LIST}"),
        ("search", {"query": "x", "memoryTypes": '{"a": 1}'}, f"memoryTypes: {NOT_A_LIST}"),
        ("get_memories", {"ids": 7}, "ids: must be of type array, not integer; " + ONE_IN_A_LIST),
        ("search", {"query": "x", "memoryTypes": {"a": 1}}, "memoryTypes: must be of type array"),
        # The decoded list is held to the same limits, its items too.
        ("search", {"query": "x", "limit": "1000"}, "limit: must be at most 25; got 1000"),
        ("search", {"query": "x", "limit": "5.5"}, "limit: must be of type integer, 1..25"),
        ("search", {"query": "x", "limit": "ten"}, "limit: must be of type integer, 1..25"),
        # A separator control character is whitespace to a regular expression but not to int().
        ("search", {"query": "x", "limit": "5\x1c"}, "limit: must be of type integer, 1..25"),
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "tags": '["a\\u0000b"]'},
            "tags[0]: must not contain NUL characters",
        ),
        (
            "get_memories",
            {"ids": json.dumps(["x"] * 21)},
            "ids: at most 20 items; got 21",
        ),
    ],
)
async def test_a_decoded_value_is_held_to_the_schema(agent, tool, arguments, expected):
    assert await fails(agent, tool, arguments) == f"invalid_input: {expected}"


# Every bounded number the tools take, with the least else its tool needs, and its range.
BOUNDED_NUMBERS = [
    ("search", "limit", {}, "1..25"),
    ("get_memories", "maxChars", {"ids": ["x"]}, "2000..40000"),
    ("handoff", "sectionLimit", {}, "1..25"),
]


def test_every_bounded_number_the_tools_take_is_listed():
    bounded = {
        (spec.name, name)
        for spec in TOOLS
        for name, schema in spec.input_schema["properties"].items()
        if schema.get("type") in ("integer", "number")
        and ("minimum" in schema or "maximum" in schema)
    }
    assert bounded == {(tool, field) for tool, field, _, _ in BOUNDED_NUMBERS}


@pytest.mark.parametrize("sent", [True, "ten", 2.5, [3], {"n": 3}], ids=repr)
@pytest.mark.parametrize(("tool", "field", "needed", "bounds"), BOUNDED_NUMBERS)
async def test_a_bounded_number_sent_as_another_type_is_told_its_range(
    agent, tool, field, needed, bounds, sent
):
    """A limit sent as "ten" or a list says nothing of which numbers are taken: whatever was
    sent, the refusal names them."""
    refusal = await fails(agent, tool, needed | {field: sent})
    assert refusal == f"invalid_input: {field}: must be of type integer, {bounds}"


@pytest.mark.parametrize(("tool", "field", "needed", "bounds"), BOUNDED_NUMBERS)
def test_a_null_for_a_bounded_number_is_told_its_range(tool, field, needed, bounds):
    """A null for an optional argument is left out before the schema check (above); the check
    itself, which a null meets where it is not left out (a required or nested number), names
    the range as for any other type."""
    spec = next(spec for spec in TOOLS if spec.name == tool)
    refusal = _schema_error(spec, needed | {field: None})
    assert refusal == f"{field}: must be of type integer, {bounds}, not null"


@pytest.mark.parametrize(
    ("number", "bound"),
    [
        (2**71, "at most"),
        (-(2**71), "at least"),
        (10**18, "at most"),
        (-(10**4299), "at least"),
    ],
    ids=["2**71", "-2**71", "10**18", "-10**4299"],
)
@pytest.mark.parametrize(("tool", "field", "needed", "bounds"), BOUNDED_NUMBERS)
async def test_a_number_past_the_range_is_refused_alike_as_a_number_and_as_a_string(
    agent, tool, field, needed, bounds, number, bound
):
    """A whole number written as a string is read as the number (models often write them so),
    however many its digits: past the range, both are told the range, the number cut as every
    made-up value a refusal repeats."""
    low, high = bounds.split("..")
    shown = str(number) if len(str(number)) <= 64 else f"{str(number)[:64]}…"
    expected = (
        f"invalid_input: {field}: must be {bound} {high if bound == 'at most' else low}; "
        f"got {shown}"
    )
    for sent in (number, str(number), f" +{number} " if number > 0 else f" {number} "):
        assert await fails(agent, tool, needed | {field: sent}) == expected, sent
    padded = f"{'0' * 5000}{number}" if number > 0 else f"-{'0' * 5000}{-number}"
    assert await fails(agent, tool, needed | {field: padded}) == expected


# --- remember, revise, archive, resolve ----------------------------------------------------


async def test_remember_returns_id_and_resource_uri(agent, owner):
    memory = await remember(agent, memoryType="commitment", topic="Report", content="Send it")
    assert memory["uri"] == f"threengram://memory/{memory['id']}"
    assert memory["commitmentStatus"] == "open"
    stored = await Memory.objects.aget(id=memory["id"])
    assert stored.owner_id == owner.pk and stored.content == "Send it"


async def test_remember_refuses_duplicate_content(agent):
    first = await remember(agent, content="the same words")
    text = await fails(
        agent, "remember", {"memoryType": "fact", "topic": "x", "content": "the same words"}
    )
    assert text == (
        f"duplicate_memory: the same content is already stored as memory {first['id']}; revise "
        "it to change its type, topic, scope, project or tags"
    )


@pytest.mark.parametrize(("kind", "credential"), CREDENTIALS.items(), ids=list(CREDENTIALS))
async def test_remember_and_revise_refuse_a_credential_saying_where_it_is(agent, kind, credential):
    """Memories go to every connected app, caches and exports: a key pasted into one is refused
    with where it is and what to store instead, and is neither stored nor repeated."""
    content = f"Prod deploy uses {credential} for now"
    refusals = [
        await fails(agent, "remember", {"memoryType": "fact", "topic": "t", "content": content})
    ]
    first = await remember(agent, content="prod deploy credentials: in the team vault")
    refusals.append(
        await fails(agent, "revise", {"predecessorId": first["id"], "content": content})
    )
    for refusal in refusals:
        assert refusal.startswith(
            f"invalid_input: content: holds what looks like {kind} at character 17 "
        )
        assert "store where the secret lives instead" in refusal
        assert credential not in refusal and credential[-12:] not in refusal
    stored = [memory async for memory in Memory.objects.values("id", "valid_to")]
    assert stored == [{"id": uuid.UUID(first["id"]), "valid_to": None}]


async def test_remember_refuses_a_credential_in_a_tag_by_its_index(agent):
    key = CREDENTIALS["a GitHub token"]
    arguments = {"memoryType": "note", "topic": "t", "content": "c", "tags": ["ci", key]}
    refusal = await fails(agent, "remember", arguments)
    assert refusal.startswith("invalid_input: tags[1]: holds what looks like a GitHub token at")
    assert key not in refusal
    assert await Memory.objects.acount() == 0


async def test_revise_supersedes_and_a_second_revise_conflicts(agent):
    first = await remember(agent, content="v1", topic="plan")
    result = await ok(agent, "revise", {"predecessorId": first["id"], "content": "v2"})
    assert result["predecessorId"] == first["id"] and result["memory"]["id"] != first["id"]
    assert result["memory"]["topic"] == "plan"  # carried over
    text = await fails(agent, "revise", {"predecessorId": first["id"], "content": "v3"})
    assert text.startswith("conflict: ")


async def test_a_write_past_the_accounts_cap_on_versions_is_a_conflict_naming_it(agent, settings):
    settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX = 2
    first = await remember(agent, content="v1", topic="plan")
    second = await ok(agent, "revise", {"predecessorId": first["id"], "content": "v2"})
    for tool, arguments in (
        ("remember", {"memoryType": "note", "topic": "plan", "content": "another"}),
        ("revise", {"predecessorId": second["memory"]["id"], "content": "v3"}),
    ):
        text = await fails(agent, tool, arguments)
        assert text.startswith("conflict: at most 2 memory versions per account"), tool
        assert "MEMORY_VERSIONS_PER_ACCOUNT_MAX" in text
    assert await Memory.objects.acount() == 2


async def test_a_written_commitment_answers_its_due_date_as_stored(agent):
    """In UTC whatever offset it was given in, and carried over by a revision unasked."""
    due = "2026-12-31T17:00:00+01:00"
    written = await remember(agent, memoryType="commitment", content="ship v3", dueAt=due)
    assert written["dueAt"] == "2026-12-31T16:00:00Z"
    revised = await ok(agent, "revise", {"predecessorId": written["id"], "content": "ship v3.1"})
    assert revised["memory"]["dueAt"] == "2026-12-31T16:00:00Z"
    resolved = await ok(
        agent, "resolve", {"memoryId": revised["memory"]["id"], "status": "resolved"}
    )
    assert resolved["memory"]["dueAt"] == "2026-12-31T16:00:00Z"
    assert "dueAt" not in (await remember(agent, content="a note"))


async def test_a_due_date_alone_is_due_by_the_end_of_that_day_and_answered_as_stored(agent):
    """An agent told "due on the 10th" sent dueAt "2026-12-10" and was refused. A date alone is
    due until that day is over in UTC; the answer is the instant stored, on remember and revise."""
    written = await remember(agent, memoryType="commitment", content="ship v3", dueAt="2026-12-10")
    assert written["dueAt"] == "2026-12-10T23:59:59.999999Z"
    arguments = {"predecessorId": written["id"], "dueAt": "2026-12-17"}
    moved = (await ok(agent, "revise", arguments))["memory"]
    assert moved["dueAt"] == "2026-12-17T23:59:59.999999Z"
    [read] = (await ok(agent, "get_memories", {"ids": [moved["id"]]}))["memories"]
    assert read["dueAt"] == "2026-12-17T23:59:59.999999Z"
    for bad in ("2026-02-30", "2026-13-01", "tomorrow"):
        text = await fails(agent, "revise", {"predecessorId": moved["id"], "dueAt": bad})
        assert text.startswith("invalid_input: dueAt: "), text
        assert "e.g. 2026-12-31T17:00:00Z, or a date alone, YYYY-MM-DD" in text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_sdk_client_sends_a_due_date_alone_and_reads_it_back(
    asgi_app, seeded, mode
):
    """Through the SDK's client, which checks each result against the tool's output schema: the
    date alone passes the input schema, and the stored instant the output schema."""
    arguments = {"memoryType": "commitment", "topic": "t", "content": "ship", "dueAt": "2026-12-10"}
    async with mcp_client(
        IN_PROCESS_URL, seeded.token, mode=mode, transport=asgi_transport(asgi_app)
    ) as client:
        written = await client.call_tool("remember", arguments)
        assert not written.is_error, written.content[0].text
        memory = written.structured_content["memory"]
        moved = await client.call_tool(
            "revise", {"predecessorId": memory["id"], "dueAt": "2027-01-04"}
        )
    assert not moved.is_error, moved.content[0].text
    assert memory["dueAt"] == "2026-12-10T23:59:59.999999Z"
    assert moved.structured_content["memory"]["dueAt"] == "2027-01-04T23:59:59.999999Z"


async def test_a_commitment_due_today_is_not_overdue_and_one_due_yesterday_is(agent):
    today = timezone.now().astimezone(UTC).date()
    due_today = await remember(
        agent, memoryType="commitment", content="send the report", dueAt=today.isoformat()
    )
    yesterday = (today - timedelta(days=1)).isoformat()
    late = await remember(agent, memoryType="commitment", content="book the venue", dueAt=yesterday)
    assert "overdue" not in due_today and late["overdue"] is True
    sections = (await ok(agent, "briefing", {}))["sections"]
    assert [item["id"] for item in sections["overdue"]["items"]] == [late["id"]]
    assert [item["id"] for item in sections["openCommitments"]["items"]] == [due_today["id"]]
    [hit] = (await ok(agent, "search", {"query": "report"}))["hits"]
    assert hit["id"] == due_today["id"] and "overdue" not in hit


async def test_revise_without_content_keeps_the_whole_text_and_changes_only_what_is_given(agent):
    """Moving a deadline took resending the whole content: an agent holding only a briefing's
    200-character excerpt of it would have cut the memory short. Left out (or null), content
    carries over like every other field; a revision that then changes nothing is refused."""
    text = "Book the external penetration test before go-live. " * 10
    booked = await remember(agent, memoryType="commitment", content=text, dueAt=None)
    later = "2027-01-08T17:00:00Z"
    moved = await ok(agent, "revise", {"predecessorId": booked["id"], "dueAt": later})
    assert moved["memory"]["dueAt"] == later and moved["memory"]["commitmentStatus"] == "open"
    nulled = {"predecessorId": moved["memory"]["id"], "content": None, "topic": "pentest"}
    renamed = (await ok(agent, "revise", nulled))["memory"]
    [read] = (await ok(agent, "get_memories", {"ids": [renamed["id"]]}))["memories"]
    assert (read["content"], read["topic"], read["dueAt"]) == (text.strip(), "pentest", later)
    same = {"predecessorId": renamed["id"], "topic": "pentest"}
    assert await fails(agent, "revise", same) == (
        f"invalid_input: predecessorId: memory {renamed['id']} already holds every field given; "
        "nothing to revise"
    )


async def test_revise_clears_the_fields_named_in_clear_and_carries_over_nulls(agent):
    """Told "the deadline was dropped", an agent had no way to say so: dueAt took only a date,
    and an omitted or null one carried the old date over, overdue in every briefing. `clear`
    empties a due date, a project or tags; a null still carries over, as the clients that send
    null for every unused field mean it."""
    past = (timezone.now() - timedelta(days=1)).isoformat()
    late = await remember(
        agent,
        memoryType="commitment",
        content="pay invoice",
        dueAt=past,
        project="shop",
        tags=["money"],
    )
    unused = {"dueAt": None, "project": None, "tags": None, "clear": None}
    kept = await ok(agent, "revise", {"predecessorId": late["id"], "content": "pay it"} | unused)
    assert kept["memory"]["dueAt"] == late["dueAt"]

    arguments = {"predecessorId": kept["memory"]["id"], "content": "pay it", "clear": ["dueAt"]}
    undated = (await ok(agent, "revise", arguments))["memory"]
    assert "dueAt" not in undated and undated["commitmentStatus"] == "open"
    assert (await ok(agent, "briefing", {}))["sections"]["overdue"]["count"] == 0

    arguments = {"predecessorId": undated["id"], "content": "pay", "clear": ["project", "tags"]}
    bare = (await ok(agent, "revise", arguments))["memory"]
    [read] = (await ok(agent, "get_memories", {"ids": [bare["id"]]}))["memories"]
    assert (read["project"], read["tags"], read["topic"]) == (None, [], "topic")

    both = {"predecessorId": bare["id"], "content": "x", "dueAt": past, "clear": ["dueAt"]}
    assert await fails(agent, "revise", both) == (
        "invalid_input: clear: names dueAt, which this call also gives; give it or clear it, "
        "not both"
    )
    held = {"predecessorId": bare["id"], "content": "x", "clear": ["topic"]}
    assert await fails(agent, "revise", held) == (
        "invalid_input: clear[0]: must be one of: project, tags, dueAt"
    )


async def test_a_due_date_goes_with_the_commitment_type_and_only_comes_with_it(agent):
    """Revised into another type, a commitment's due date and state go (the write result says
    so); a due date for a memory that is not (or no longer) a commitment is refused by name."""
    future = (timezone.now() + timedelta(days=2)).isoformat()
    dated = await remember(agent, memoryType="commitment", content="ship it", dueAt=future)
    arguments = {"predecessorId": dated["id"], "content": "shipped", "memoryType": "event"}
    event = (await ok(agent, "revise", arguments))["memory"]
    assert "dueAt" not in event and "commitmentStatus" not in event
    other = await remember(agent, memoryType="commitment", content="file taxes")
    for arguments in (
        {"predecessorId": event["id"], "content": "x", "dueAt": future},
        {"predecessorId": other["id"], "content": "x", "memoryType": "note", "dueAt": future},
    ):
        assert await fails(agent, "revise", arguments) == (
            "invalid_input: dueAt: only a commitment can have a due date"
        )
    arguments = {"predecessorId": event["id"], "content": "ship v2", "memoryType": "commitment"}
    again = (await ok(agent, "revise", arguments | {"dueAt": future}))["memory"]
    assert (again["commitmentStatus"], again["dueAt"] is not None) == ("open", True)


async def test_a_write_result_names_where_the_memory_is_filed_and_leaves_out_the_rest(agent):
    """A write that named a project in another case than the account's learns the spelling it
    was filed under; a note's result carries no commitment fields, nulls or falses."""
    await remember(agent, content="the api is versioned by date", project="atlas")
    filed = await remember(agent, content="freeze on fridays", project="Atlas", scope="work")
    assert (filed["project"], filed["scope"]) == ("atlas", "work")
    note = await remember(agent, content="a plain note")
    assert set(note) == {"id", "uri", "memoryType", "topic", "status"}


async def test_a_write_result_says_whether_the_commitment_is_overdue_as_search_does(agent):
    """An agent that revised a commitment to a due date already past, or resolved a late one,
    learnt whether it was overdue only from another search or get_memories call."""
    past = (timezone.now() - timedelta(days=1)).isoformat()
    future = (timezone.now() + timedelta(days=1)).isoformat()
    dated = await remember(agent, memoryType="commitment", content="pay invoice", dueAt=future)
    assert "overdue" not in dated
    arguments = {"predecessorId": dated["id"], "content": "pay invoice", "dueAt": past}
    late = (await ok(agent, "revise", arguments))["memory"]
    [hit] = (await ok(agent, "search", {"query": "invoice"}))["hits"]
    assert late["overdue"] is hit["overdue"] is True
    resolved = await ok(agent, "resolve", {"memoryId": late["id"], "status": "resolved"})
    assert "overdue" not in resolved["memory"]
    lapsed = await remember(agent, memoryType="commitment", content="renew the domain", dueAt=past)
    assert lapsed["overdue"] is True
    archived = (await ok(agent, "archive", {"memoryId": lapsed["id"]}))["memory"]
    [read] = (await ok(agent, "get_memories", {"ids": [lapsed["id"]]}))["memories"]
    assert (archived.get("overdue"), read["overdue"]) == (None, False)  # set aside
    assert "overdue" not in (await remember(agent, content="a note"))


async def test_archive_is_idempotent(agent):
    memory = await remember(agent)
    for _ in range(2):
        archived = await ok(agent, "archive", {"memoryId": memory["id"]})
        assert archived["memory"]["status"] == "archived"


async def test_resolve_moves_a_commitment_and_refuses_illegal_moves(agent):
    commitment = await remember(agent, memoryType="commitment", content="ship it")
    done = await ok(agent, "resolve", {"memoryId": commitment["id"], "status": "resolved"})
    assert done["memory"]["commitmentStatus"] == "resolved"
    text = await fails(agent, "resolve", {"memoryId": commitment["id"], "status": "waiting"})
    assert text == (
        "invalid_transition: a commitment cannot move from 'resolved' to 'waiting'; "
        "from 'resolved' it can move to 'open'"
    )
    note = await remember(agent, content="not a commitment")
    text = await fails(agent, "resolve", {"memoryId": note["id"], "status": "resolved"})
    assert text.startswith("invalid_input: memoryId: ")


async def test_resolving_an_archived_commitment_names_the_revision_that_brings_it_back(agent):
    """The way the refusal names works through the tools: revise with predecessorId alone."""
    commitment = await remember(agent, memoryType="commitment", content="ship it")
    await ok(agent, "archive", {"memoryId": commitment["id"]})
    text = await fails(agent, "resolve", {"memoryId": commitment["id"], "status": "resolved"})
    assert text.startswith(f"invalid_input: memoryId: memory {commitment['id']} is archived")
    [read] = (await ok(agent, "get_memories", {"ids": [commitment["id"]]}))["memories"]
    assert (read["status"], read["commitmentStatus"]) == ("archived", "open")

    back = (await ok(agent, "revise", {"predecessorId": commitment["id"]}))["memory"]
    assert (back["status"], back["commitmentStatus"]) == ("active", "open")
    done = await ok(agent, "resolve", {"memoryId": back["id"], "status": "resolved"})
    assert done["memory"]["commitmentStatus"] == "resolved"


async def test_a_resolved_commitment_says_when_it_was_resolved_wherever_it_is_read(agent):
    """Only handoff's recently resolved said when a commitment was resolved: the resolve
    result and get_memories did not, so an agent asked "when did we finish this?" had to find
    it in a handoff, and not at all past its 7 days. Reopened, it has no resolution time."""
    commitment = await remember(agent, memoryType="commitment", content="ship the release")
    before = timezone.now()
    done = await ok(agent, "resolve", {"memoryId": commitment["id"], "status": "resolved"})
    resolved_at = datetime.fromisoformat(done["memory"]["resolvedAt"])
    assert before <= resolved_at <= timezone.now()
    [read] = (await ok(agent, "get_memories", {"ids": [commitment["id"]]}))["memories"]
    assert read["resolvedAt"] == done["memory"]["resolvedAt"]

    reopened = await ok(agent, "resolve", {"memoryId": commitment["id"], "status": "open"})
    assert "resolvedAt" not in reopened["memory"]
    [read] = (await ok(agent, "get_memories", {"ids": [commitment["id"]]}))["memories"]
    assert read["resolvedAt"] is None


# --- unknown and foreign ids are indistinguishable ------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("revise", lambda i: {"predecessorId": i, "content": "taken over"}),
        ("archive", lambda i: {"memoryId": i}),
        ("resolve", lambda i: {"memoryId": i, "status": "resolved"}),
    ],
)
async def test_foreign_and_unknown_ids_fail_alike(agent, other_agent, tool, arguments):
    foreign = await remember(other_agent, memoryType="commitment", content="theirs")
    unknown = str(uuid.uuid4())
    foreign_text = await fails(agent, tool, arguments(foreign["id"]))
    unknown_text = await fails(agent, tool, arguments(unknown))
    assert foreign_text == f"not_found: memory {foreign['id']}"
    assert unknown_text == f"not_found: memory {unknown}"
    assert (await fails(agent, tool, arguments("not-a-uuid"))) == "not_found: memory not-a-uuid"
    theirs = await Memory.objects.aget(id=foreign["id"])
    assert (theirs.status, theirs.commitment_status, theirs.valid_to) == ("active", "open", None)


async def test_get_memories_puts_foreign_unknown_and_malformed_ids_in_not_found(agent, other_agent):
    mine = await remember(agent, content="mine")
    foreign = await remember(other_agent, content="theirs")
    unknown = str(uuid.uuid4())
    result = await ok(agent, "get_memories", {"ids": [mine["id"], foreign["id"], unknown, "zzz"]})
    assert [m["id"] for m in result["memories"]] == [mine["id"]]
    assert result["notFound"] == [foreign["id"], unknown, "zzz"]
    assert "theirs" not in json.dumps(result)


async def test_a_memory_is_named_by_its_uri_wherever_an_id_is_asked_for(agent, other_agent):
    """Results carry a memory's `id` and its `uri`; an agent that passes the URI back gets the
    memory, not a `not_found` for a memory it just saw. Another tenant's URI is still unknown."""
    mine = await remember(agent, content="mine")
    theirs = await remember(other_agent, content="theirs")
    result = await ok(agent, "get_memories", {"ids": [mine["uri"], theirs["uri"]]})
    assert ([m["id"] for m in result["memories"]], result["notFound"]) == (
        [mine["id"]],
        [theirs["uri"]],
    )
    await thread_of(agent, "uris", [mine["uri"]])
    [hit] = (await ok(agent, "search", {"thread": "uris"}))["hits"]
    assert hit["id"] == mine["id"]
    revised = await ok(agent, "revise", {"predecessorId": mine["uri"], "content": "mine, again"})
    archived = await ok(agent, "archive", {"memoryId": revised["memory"]["uri"]})
    assert archived["memory"]["status"] == "archived"
    assert await fails(agent, "archive", {"memoryId": theirs["uri"]}) == (
        f"not_found: memory {theirs['uri']}"
    )


async def test_thread_membership_refuses_foreign_memories(agent, other_agent):
    foreign = await remember(other_agent, content="theirs")
    await ok(agent, "configure_thread", {"action": "create", "name": "mine"})
    text = await fails(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "mine", "memoryIds": [foreign["id"]]},
    )
    assert text == f"not_found: memory {foreign['id']}"
    # Their thread names are not reachable either.
    await ok(other_agent, "configure_thread", {"action": "create", "name": "secret"})
    text = await fails(agent, "configure_thread", {"action": "pin", "name": "secret"})
    assert text == "not_found: thread 'secret'; describe_environment lists your threads"


# --- get_memories --------------------------------------------------------------------------


async def test_get_memories_returns_bodies_lifecycle_and_links(agent):
    first = await remember(agent, content="old text", tags=["a", "b"])
    successor = (await ok(agent, "revise", {"predecessorId": first["id"], "content": "new text"}))[
        "memory"
    ]
    result = await ok(agent, "get_memories", {"ids": [first["id"], successor["id"], first["id"]]})
    old, new = result["memories"]
    assert result["count"] == 2 and result["notFound"] == []
    assert (old["content"], old["successorId"], old["tags"]) == (
        "old text",
        successor["id"],
        ["a", "b"],
    )
    assert old["validTo"] is not None and new["validTo"] is None
    assert new["predecessorId"] == first["id"] and new["successorId"] is None
    # Both rows carry a vector (remember and revise write one): it is never served.
    assert not any("embedding" in memory for memory in result["memories"])


async def test_a_version_since_revised_says_it_is_no_longer_current(agent):
    """get_memories of an id from an earlier session answered a revised memory with
    "status": "active" beside its validTo and successorId, which a model may read as the text
    in force. status stays the archive state (the status filter reads it so);
    `current` says whether the version is in force, in get_memories and search hits alike."""
    note = await remember(agent, topic="office", content="office on Main Street")
    before_revision = timezone.now()
    arguments = {"predecessorId": note["id"], "content": "office on Harbour Road"}
    successor = (await ok(agent, "revise", arguments))["memory"]
    read = (await ok(agent, "get_memories", {"ids": [note["id"], successor["id"]]}))["memories"]
    assert [(m["status"], m["current"]) for m in read] == [("active", False), ("active", True)]
    assert read[0]["successorId"] == successor["id"]

    query = {"query": "office", "asOf": before_revision.isoformat()}
    [old_hit] = (await ok(agent, "search", query))["hits"]
    [new_hit] = (await ok(agent, "search", {"query": "office"}))["hits"]
    assert (old_hit["id"], old_hit["current"]) == (note["id"], False) and "status" not in old_hit
    assert new_hit["id"] == successor["id"] and "current" not in new_hit


async def test_get_memories_says_whether_a_commitment_is_overdue_as_search_does(agent):
    """The whole memory tells what its excerpt in search and briefing tells: a late commitment
    is overdue; once resolved, or superseded by a revision that moved its date, it is not."""
    past = (timezone.now() - timedelta(days=1)).isoformat()
    late = await remember(agent, memoryType="commitment", content="pay invoice", dueAt=past)
    note = await remember(agent, content="a note")
    [hit] = (await ok(agent, "search", {"query": "invoice"}))["hits"]
    read = (await ok(agent, "get_memories", {"ids": [late["id"], note["id"]]}))["memories"]
    assert [memory["overdue"] for memory in read] == [hit["overdue"], False] == [True, False]

    later = (timezone.now() + timedelta(days=1)).isoformat()
    arguments = {"predecessorId": late["id"], "content": "pay invoice", "dueAt": later}
    moved = (await ok(agent, "revise", arguments))["memory"]
    read = (await ok(agent, "get_memories", {"ids": [late["id"], moved["id"]]}))["memories"]
    assert [memory["overdue"] for memory in read] == [False, False]

    again = await remember(agent, memoryType="commitment", content="file taxes", dueAt=past)
    await ok(agent, "resolve", {"memoryId": again["id"], "status": "resolved"})
    [read] = (await ok(agent, "get_memories", {"ids": [again["id"]]}))["memories"]
    assert (read["commitmentStatus"], read["overdue"]) == ("resolved", False)


async def long_notes(owner, count: int) -> list[str]:
    """The ids of `count` new notes of 2,000 characters each."""
    return [
        str(
            (
                await Memory.objects.acreate(
                    owner=owner,
                    memory_type="note",
                    topic=f"long {n}",
                    content=f"{n:02}" + "x" * 1998,
                    content_length=2000,
                    recorded_at=timezone.now(),
                )
            ).id
        )
        for n in range(count)
    ]


async def test_get_memories_withholds_bodies_beyond_the_budget(agent, owner):
    ids = await long_notes(owner, 3)
    result = await ok(agent, "get_memories", {"ids": ids, "maxChars": 5000})
    assert [m["contentWithheld"] for m in result["memories"]] == [False, False, True]
    assert result["memories"][2]["content"] is None
    assert result["memories"][2]["contentLength"] == 2000
    assert result["withheldForBudget"] == [ids[2]]
    assert "budget" in result["note"]


# --- briefing and handoff ------------------------------------------------------------------


async def test_briefing_counts_exactly_and_bounds_items(agent, owner):
    now = timezone.now()
    for n in range(5):
        await remember(agent, memoryType="decision", topic=f"decision {n}", content=f"we chose {n}")
    await remember(
        agent,
        memoryType="commitment",
        topic="late",
        content="overdue thing",
        dueAt=(now - timedelta(days=1)).isoformat(),
    )
    await remember(
        agent,
        memoryType="commitment",
        topic="later",
        content="future thing",
        dueAt=(now + timedelta(days=3)).isoformat(),
    )
    await remember(agent, memoryType="blocker", topic="ci", content="CI is red", scope="work")
    await remember(agent, memoryType="preference", topic="style", content="x" * 900)
    done = await remember(agent, memoryType="commitment", topic="done", content="done thing")
    await ok(agent, "resolve", {"memoryId": done["id"], "status": "resolved"})

    brief = await ok(agent, "briefing", {})
    sections = brief["sections"]
    assert sections["recentDecisions"]["count"] == 5
    assert (
        len(sections["recentDecisions"]["items"]) == 3 and sections["recentDecisions"]["truncated"]
    )
    assert sections["openCommitments"]["count"] == 1  # "later"; "late" is overdue alone
    assert [i["topic"] for i in sections["overdue"]["items"]] == ["late"]
    assert sections["overdue"]["items"][0]["overdue"] is True
    preference = sections["preferences"]["items"][0]
    assert preference["truncated"] and len(preference["excerpt"]) == 200
    assert preference["contentLength"] == 900

    full = await ok(agent, "briefing", {"mode": "full"})
    assert len(full["sections"]["recentDecisions"]["items"]) == 5
    assert len(full["sections"]["preferences"]["items"][0]["excerpt"]) == 600

    scoped = await ok(agent, "briefing", {"selector": "scope", "value": "work"})
    assert scoped["sections"]["blockers"]["count"] == 1
    assert scoped["sections"]["recentDecisions"]["count"] == 0


async def test_a_brief_briefing_shows_overdue_first_and_the_next_due_beside_them(agent):
    """Three overdue commitments filled the brief mode's three openCommitments slots: the agent
    read the same three twice and never saw what falls due next. The sections are disjoint, and
    overdue, what needs acting on first, comes first."""
    now = timezone.now()
    for days in (-5, -3, -1, 2, 9):
        topic = f"due {days:+d}"
        due = (now + timedelta(days=days)).isoformat()
        await remember(agent, memoryType="commitment", topic=topic, content=topic, dueAt=due)
    await remember(agent, memoryType="commitment", topic="undated", content="some day")

    sections = (await ok(agent, "briefing", {}))["sections"]
    assert list(sections)[:2] == ["overdue", "openCommitments"]
    overdue, upcoming = sections["overdue"], sections["openCommitments"]
    assert [i["topic"] for i in overdue["items"]] == ["due -5", "due -3", "due -1"]
    assert (overdue["count"], "truncated" in overdue) == (3, False)
    assert [i["topic"] for i in upcoming["items"]] == ["due +2", "due +9", "undated"]
    assert (upcoming["count"], "truncated" in upcoming) == (3, False)
    assert not any("overdue" in i for i in upcoming["items"])


async def test_a_project_or_scope_no_memory_has_is_not_found_with_a_suggestion(agent):
    """A briefing for project 'Atlas' (the project is 'atlas') answered every section with 0,
    and the agent reported nothing open; an unknown thread was already not_found. Now a project
    in another case is the account's (as a write of it joins it), and an unknown project or
    scope is not_found, naming a near one, for briefing and handoff alike."""
    await remember(agent, memoryType="commitment", topic="ship", content="ship it", project="atlas")
    await remember(agent, memoryType="fact", topic="tz", content="Lisbon", scope="user-prefs")
    # Listed in every project's briefing, it tells nothing of whether a project exists.
    await remember(agent, memoryType="preference", topic="git", content="rebase, never merge")

    for tool in ("briefing", "handoff"):
        typed = await ok(agent, tool, {"selector": "project", "value": "ATLAS", "detail": "full"})
        assert typed["selector"] == {"kind": "project", "value": "atlas"}
        section = "openCommitments" if tool == "briefing" else "commitments"
        assert [i["topic"] for i in typed["sections"][section]["items"]] == ["ship"]
        assert await fails(agent, tool, {"selector": "project", "value": "Atlass"}) == (
            "not_found: project 'Atlass': no current memory has it; did you mean 'atlas'?"
        )
        assert await fails(agent, tool, {"selector": "scope", "value": "user-pref"}) == (
            "not_found: scope 'user-pref': no current memory has it; did you mean 'user-prefs'?"
        )
        assert await fails(agent, tool, {"selector": "project", "value": "gamma"}) == (
            "not_found: project 'gamma': no current memory has it; describe_environment lists "
            "your projects and scopes"
        )
    # Known, with nothing for a section to show (a fact only): an empty briefing, no error.
    facts_only = await ok(agent, "briefing", {"selector": "scope", "value": "user-prefs"})
    assert all(s["count"] == 0 for s in facts_only["sections"].values())
    atlas = await ok(agent, "handoff", {"selector": "project", "value": "atlas"})
    assert atlas["sections"]["commitments"]["count"] == 1


async def test_briefing_lists_pinned_threads_and_selects_by_thread(agent):
    member = await remember(agent, memoryType="decision", topic="api", content="REST it is")
    await remember(agent, memoryType="decision", topic="ui", content="dark mode")
    await ok(agent, "configure_thread", {"action": "create", "name": "API"})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "api", "memoryIds": [member["id"]]},
    )
    await ok(agent, "configure_thread", {"action": "pin", "name": "API"})
    brief = await ok(agent, "briefing", {"selector": "thread", "value": "api"})
    assert brief["pinnedThreads"]["items"] == [
        {"name": "API", "memberCount": 1, "proposalCount": 0}
    ]
    # The thread it selected by its name as stored, as pinnedThreads and the thread list name it.
    assert brief["selector"] == {"kind": "thread", "value": "API"}
    handed_over = await ok(agent, "handoff", {"selector": "thread", "value": "api"})
    assert handed_over["selector"] == brief["selector"]
    assert [i["id"] for i in brief["sections"]["recentDecisions"]["items"]] == [member["id"]]
    assert (await fails(agent, "briefing", {"selector": "thread", "value": "nope"})) == (
        "not_found: thread 'nope'; describe_environment lists your threads"
    )
    # A memory like its member is proposed to it: briefing counts it as the thread list does.
    proposed = await ok(
        agent, "remember", {"memoryType": "decision", "topic": "api", "content": "over HTTP/2"}
    )
    assert [p["thread"] for p in proposed["proposals"]] == ["API"]
    listed = await ok(agent, "configure_thread", {"action": "list"})
    brief = await ok(agent, "briefing", {"detail": "full"})
    assert (
        brief["pinnedThreads"]["items"]
        == listed["threads"]
        == [{"name": "API", "pinned": True, "memberCount": 1, "proposalCount": 1}]
    )


async def test_handoff_flags_truncated_sections_and_excerpts(agent, other_agent):
    for n in range(4):
        await remember(
            agent, memoryType="decision", topic=f"d{n}", content=f"decided {n} " + "y" * 700
        )
    await remember(agent, memoryType="commitment", topic="todo", content="write docs")
    await remember(other_agent, memoryType="decision", topic="theirs", content="not yours")
    result = await ok(agent, "handoff", {"sectionLimit": 2, "generatedFor": "night shift"})
    decisions = result["sections"]["decisions"]
    assert (decisions["count"], len(decisions["items"]), decisions["truncated"]) == (4, 2, True)
    assert all(len(i["excerpt"]) == 600 and i["truncated"] for i in decisions["items"])
    assert "truncated" not in result["sections"]["commitments"]
    assert result["generatedFor"] == "night shift"
    assert "not yours" not in json.dumps(result)


async def test_handoff_hands_over_current_facts_and_the_pinned_threads(agent, other_agent):
    """The next session learns what the last one established and which threads it worked in:
    facts newest first (current and active only), and every pinned thread with its counts, as
    briefing lists them, whatever the selector."""
    moved = await remember(agent, memoryType="fact", topic="db", content="staging DB on db-7")
    cache = await remember(agent, memoryType="fact", topic="cache", content="cache on nfs-1")
    wiki = await remember(agent, memoryType="fact", topic="wiki", content="wiki at w.example")
    revised = (
        await ok(agent, "revise", {"predecessorId": cache["id"], "content": "cache on nfs-2"})
    )["memory"]
    await ok(agent, "archive", {"memoryId": wiki["id"]})
    await remember(other_agent, memoryType="fact", topic="db", content="their DB on dbhost-q")
    await ok(other_agent, "configure_thread", {"action": "create", "name": "theirs"})
    await ok(other_agent, "configure_thread", {"action": "pin", "name": "theirs"})
    for name in ("infra", "billing", "someday"):
        await ok(agent, "configure_thread", {"action": "create", "name": name})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "infra", "memoryIds": [moved["id"]]},
    )
    for name in ("infra", "billing"):
        await ok(agent, "configure_thread", {"action": "pin", "name": name})

    result = await ok(agent, "handoff")
    facts = result["sections"]["facts"]
    assert [i["id"] for i in facts["items"]] == [revised["id"], moved["id"]]
    assert (facts["count"], "truncated" in facts) == (2, False)
    assert [i["excerpt"] for i in facts["items"]] == ["cache on nfs-2", "staging DB on db-7"]
    pinned = {
        "count": 2,
        "items": [
            {"name": "billing", "memberCount": 0, "proposalCount": 0},
            {"name": "infra", "memberCount": 1, "proposalCount": 0},
        ],
    }
    assert result["pinnedThreads"] == pinned
    # (Words no id holds: an id's hexadecimal digits hold "db-9" at times.)
    assert "dbhost-q" not in json.dumps(result) and "theirs" not in json.dumps(result)

    by_thread = {"selector": "thread", "value": "infra"}
    narrowed = await ok(agent, "handoff", by_thread)
    assert [i["id"] for i in narrowed["sections"]["facts"]["items"]] == [moved["id"]]
    assert (
        narrowed["pinnedThreads"]
        == (await ok(agent, "briefing", by_thread))["pinnedThreads"]
        == pinned
    )


async def test_handoff_hands_over_what_was_just_resolved_in_a_few_compact_items(agent):
    """A next session wants what was just finished too: the commitments resolved in the last
    7 days, each its id, topic, scope, project, a short excerpt and when it was resolved."""
    done = await remember(
        agent, memoryType="commitment", topic="invoice", content="send ACME the invoice " * 20
    )
    await ok(agent, "resolve", {"memoryId": done["id"], "status": "resolved"})
    await remember(agent, memoryType="commitment", topic="keys", content="rotate the keys")

    result = await ok(agent, "handoff", {"detail": "full"})
    section = result["sections"]["recentlyResolved"]
    [item] = section["items"]
    assert (section["count"], section["truncated"]) == (1, False)
    assert set(item) == {"id", "topic", "scope", "project", "excerpt", "truncated", "resolvedAt"}
    assert (item["id"], item["topic"], item["project"]) == (done["id"], "invoice", None)
    assert item["scope"] == "personal"
    # Compact, the default: no default scope nor null project; the resolution time as stored.
    [compact] = (await ok(agent, "handoff"))["sections"]["recentlyResolved"]["items"]
    assert set(compact) == {"id", "topic", "excerpt", "truncated", "resolvedAt"}
    assert compact["resolvedAt"] == item["resolvedAt"]
    assert len(item["excerpt"]) <= 200 and item["truncated"] is True
    resolved_at = datetime.fromisoformat(item["resolvedAt"])
    assert timezone.now() - timedelta(minutes=1) < resolved_at <= timezone.now()
    assert [i["topic"] for i in result["sections"]["commitments"]["items"]] == ["keys"]

    await ok(agent, "resolve", {"memoryId": done["id"], "status": "open"})
    assert (await ok(agent, "handoff"))["sections"]["recentlyResolved"]["count"] == 0


async def test_compact_overviews_give_instants_as_stored_to_be_sent_back(agent, monkeypatch):
    """An instant read from a compact handoff or briefing is one search can be given back: the
    resolution time, as resolvedAfter, selects the commitment resolved then and not one resolved
    earlier in the same second; the instant the overview was made is the one it read."""
    second = (timezone.now() - timedelta(hours=1)).replace(microsecond=0)
    earlier, later = [
        await remember(agent, memoryType="commitment", topic=topic, content=f"finish {topic}")
        for topic in ("slides", "budget")
    ]
    for made, microsecond in ((earlier, 250_000), (later, 750_000)):
        await ok(agent, "resolve", {"memoryId": made["id"], "status": "resolved"})
        resolved_at = second.replace(microsecond=microsecond)
        await Memory.objects.filter(id=made["id"]).aupdate(resolved_at=resolved_at)
    made_at = timezone.now().replace(microsecond=125_000)
    monkeypatch.setattr(timezone, "now", lambda: made_at)

    handoff = await ok(agent, "handoff")
    last_resolved = handoff["sections"]["recentlyResolved"]["items"][0]
    assert last_resolved["id"] == later["id"]
    since = await ok(agent, "search", {"resolvedAfter": last_resolved["resolvedAt"]})
    assert [hit["id"] for hit in since["hits"]] == [later["id"]]
    briefing = await ok(agent, "briefing")
    assert handoff["generatedAt"] == briefing["generatedAt"]
    assert datetime.fromisoformat(briefing["generatedAt"]) == made_at


# --- threads -------------------------------------------------------------------------------


async def test_thread_lifecycle(agent):
    created = await ok(agent, "configure_thread", {"action": "create", "name": "Launch"})
    assert created["thread"] == {
        "name": "Launch",
        "pinned": False,
        "memberCount": 0,
        "proposalCount": 0,
    }
    # Names compare regardless of case: the refusal names the thread as it is spelt.
    text = await fails(agent, "configure_thread", {"action": "create", "name": "launch"})
    assert text == "conflict: a thread named 'Launch' already exists"
    await ok(
        agent, "configure_thread", {"action": "rename", "name": "launch", "newName": "Go-live"}
    )
    memory = await remember(agent, content="date is May 1")
    added = await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "go-live", "memoryIds": [memory["id"]]},
    )
    assert added["thread"]["memberCount"] == 1  # what the thread holds after the action
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"] == [
        {"name": "Go-live", "pinned": False, "memberCount": 1, "proposalCount": 0}
    ]
    await ok(
        agent,
        "configure_thread",
        {"action": "remove_members", "name": "Go-live", "memoryIds": [memory["id"]]},
    )
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"][0]["memberCount"] == 0
    deleted = await ok(agent, "configure_thread", {"action": "delete", "name": "GO-LIVE"})
    assert deleted == {
        "action": "delete",
        "thread": {"name": "Go-live", "pinned": False, "memberCount": 0, "proposalCount": 0},
    }
    assert (await ok(agent, "configure_thread", {"action": "list"}))["threads"] == []
    text = await fails(agent, "configure_thread", {"action": "delete", "name": "Go-live"})
    assert text == "not_found: thread 'Go-live'; describe_environment lists your threads"
    # The memory stays, and searching by the deleted thread says it is gone.
    fetched = await ok(agent, "get_memories", {"ids": [memory["id"]]})
    assert [m["id"] for m in fetched["memories"]] == [memory["id"]]
    text = await fails(agent, "search", {"query": "May", "thread": "Go-live"})
    assert text == "not_found: thread 'Go-live'; describe_environment lists your threads"


async def test_adding_or_removing_members_names_the_ids_it_changed_nothing_for(agent):
    """A retry, or a removal of what is not in the thread, succeeds as before, but the answer
    says which of the ids changed nothing rather than leaving the counts to be compared."""
    member, outsider = [await remember(agent, content=f"step {n}") for n in range(2)]
    await thread_of(agent, "launch", [member["id"]])
    both = {"name": "launch", "memoryIds": [member["id"], outsider["id"]]}
    added = await ok(agent, "configure_thread", both | {"action": "add_members"})
    assert added == {
        "action": "add_members",
        "thread": {"name": "launch", "pinned": False, "memberCount": 2, "proposalCount": 0},
        "unchanged": [member["id"]],
    }
    removed = await ok(
        agent,
        "configure_thread",
        {"action": "remove_members", "name": "launch", "memoryIds": [member["id"]]},
    )
    assert removed["unchanged"] == [] and removed["thread"]["memberCount"] == 1
    # The memory's URI names it too; the answer gives its id.
    uri = f"threengram://memory/{member['id']}"
    again = await ok(
        agent,
        "configure_thread",
        {"action": "remove_members", "name": "launch", "memoryIds": [uri]},
    )
    assert again["unchanged"] == [member["id"]] and again["thread"]["memberCount"] == 1


async def test_deleting_a_thread_with_members_reports_what_it_held(agent, other_agent):
    memories = [await remember(agent, content=f"step {n}") for n in range(2)]
    await thread_of(agent, "launch", [m["id"] for m in memories])
    await ok(agent, "configure_thread", {"action": "pin", "name": "launch"})
    # Another tenant's thread of the same name is neither reached nor touched.
    await ok(other_agent, "configure_thread", {"action": "create", "name": "launch"})
    deleted = await ok(agent, "configure_thread", {"action": "delete", "name": "launch"})
    assert deleted["thread"] == {
        "name": "launch",
        "pinned": True,
        "memberCount": 2,
        "proposalCount": 0,
    }
    briefing = await ok(agent, "briefing", {})
    assert briefing["pinnedThreads"] == {"count": 0, "items": []}
    theirs = await ok(other_agent, "configure_thread", {"action": "list"})
    assert [t["name"] for t in theirs["threads"]] == ["launch"]


async def test_an_unknown_thread_is_not_found_naming_the_accounts_near_ones(agent, other_agent):
    await ok(agent, "configure_thread", {"action": "create", "name": "launch"})
    await ok(other_agent, "configure_thread", {"action": "create", "name": "lunch"})
    text = await fails(agent, "configure_thread", {"action": "pin", "name": "lanch"})
    assert text == "not_found: thread 'lanch'; did you mean 'launch'?"
    text = await fails(agent, "search", {"query": "date", "thread": "lanch"})
    assert text == "not_found: thread 'lanch'; did you mean 'launch'?"
    text = await fails(agent, "configure_thread", {"action": "delete", "name": "zzz"})
    assert text == "not_found: thread 'zzz'; describe_environment lists your threads"


async def test_a_thread_is_addressed_by_its_own_name_not_a_case_alias(agent):
    # Names are unique by lower(): a dotless i and an i name two threads (their UPPER() is one).
    await ok(agent, "configure_thread", {"action": "create", "name": "\u0131"})
    await ok(agent, "configure_thread", {"action": "create", "name": "I"})
    pinned = await ok(agent, "configure_thread", {"action": "pin", "name": "i"})
    assert pinned["thread"]["name"] == "I"
    await ok(agent, "configure_thread", {"action": "rename", "name": "i", "newName": "x"})
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert {thread["name"] for thread in listed["threads"]} == {"\u0131", "x"}


# Each action's missing argument, with the arguments that leave it out: the schema cannot say
# which fields an action needs (one object for all ten), so the handler does.
MISSING_FOR_ACTION = [
    ("create", {}, "name"),
    ("rename", {}, "name"),
    ("rename", {"name": "t"}, "newName"),
    ("pin", {}, "name"),
    ("unpin", {}, "name"),
    ("delete", {}, "name"),
    ("add_members", {}, "name"),
    ("add_members", {"name": "t"}, "memoryIds"),
    ("remove_members", {}, "name"),
    ("remove_members", {"name": "t"}, "memoryIds"),
    ("accept_proposal", {}, "proposalId"),
    ("reject_proposal", {}, "proposalId"),
]


def test_every_thread_action_but_list_names_what_it_needs():
    assert {action for action, _, _ in MISSING_FOR_ACTION} | {"list"} == set(THREAD_ACTIONS)


def test_every_thread_action_the_schema_offers_has_a_handler_and_no_other():
    # One offered without a handler would pass the schema and fail as internal_error.
    assert set(THREAD_ACTION_HANDLERS) == set(THREAD_ACTIONS)


@pytest.mark.parametrize(
    ("action", "arguments", "missing"),
    MISSING_FOR_ACTION,
    ids=[f"{action}-{missing}" for action, _, missing in MISSING_FOR_ACTION],
)
async def test_thread_action_without_its_argument_is_invalid_input(
    agent, action, arguments, missing
):
    text = await fails(agent, "configure_thread", {"action": action} | arguments)
    assert text == f"invalid_input: {missing}: is required for action '{action}'"


UNUSED_BY_ACTION = [
    ("list", {"name": "payments"}, "name"),
    ("create", {"name": "holidays", "memoryIds": [str(uuid.uuid4())]}, "memoryIds"),
    ("pin", {"name": "holidays", "newName": "trips"}, "newName"),
    ("accept_proposal", {"proposalId": str(uuid.uuid4()), "name": "holidays"}, "name"),
    ("reject_proposal", {"proposalId": str(uuid.uuid4()), "memoryIds": ["x"]}, "memoryIds"),
]


@pytest.mark.parametrize(
    ("action", "arguments", "unused"),
    UNUSED_BY_ACTION,
    ids=[f"{action}-{unused}" for action, _, unused in UNUSED_BY_ACTION],
)
async def test_a_thread_action_refuses_a_field_it_would_ignore(agent, action, arguments, unused):
    # An accept naming a thread would accept into the proposal's own; a create with members
    # would make an empty thread: both answered as success, were the field ignored.
    text = await fails(agent, "configure_thread", {"action": action} | arguments)
    assert text.startswith(f"invalid_input: {unused}: not used by action '{action}'; omit it (it")
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"] == []


async def test_server_proposes_membership_and_applies_it_only_on_acceptance(agent):
    seed = await remember(
        agent, topic="payment gateway retries", content="retry 3 times", project="shop"
    )
    await thread_of(agent, "payments", [seed["id"]])

    unrelated = await ok(
        agent,
        "remember",
        {"memoryType": "note", "topic": "holiday plans", "content": "Alps", "project": "shop"},
    )
    other_project = await ok(
        agent,
        "remember",
        {"memoryType": "note", "topic": "payment gateway retry", "content": "x", "project": "blog"},
    )
    assert unrelated["proposals"] == [] and other_project["proposals"] == []

    # Moved to the project and topic of the thread, a revision is proposed for it as a new
    # memory would be.
    moved = await ok(
        agent,
        "revise",
        {"predecessorId": other_project["memory"]["id"], "project": "shop", "topic": "gateway"},
    )
    assert moved["proposals"] == []  # "gateway" is not like the member's topic
    moved = await ok(
        agent,
        "revise",
        {"predecessorId": moved["memory"]["id"], "topic": "payment gateway retry"},
    )
    [proposal] = moved["proposals"]
    assert (proposal["thread"], proposal["memoryId"]) == ("payments", moved["memory"]["id"])
    await ok(
        agent,
        "configure_thread",
        {"action": "reject_proposal", "proposalId": proposal["proposalId"]},
    )

    related = await ok(
        agent,
        "remember",
        {
            "memoryType": "note",
            "topic": "payment gateway retry limits",
            "content": "cap at 5",
            "project": "shop",
        },
    )
    [proposal] = related["proposals"]
    assert proposal["thread"] == "payments" and proposal["memoryId"] == related["memory"]["id"]
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"][0]["memberCount"] == 1  # not applied yet
    assert [p["proposalId"] for p in listed["proposals"]] == [proposal["proposalId"]]
    # A later session decides from the list alone: each proposal names its memory's topic.
    assert listed["proposals"][0]["memoryTopic"] == "payment gateway retry limits"
    assert proposal["memoryTopic"] == "payment gateway retry limits"
    # The same similarity wherever the proposal is shown, to three decimals (a 4-byte float
    # column reads back as 0.8947368264198303).
    assert listed["proposals"][0]["similarity"] == proposal["similarity"]
    assert proposal["similarity"] == round(proposal["similarity"], 3)

    accepted = await ok(
        agent,
        "configure_thread",
        {"action": "accept_proposal", "proposalId": proposal["proposalId"]},
    )
    assert accepted["proposal"]["state"] == "member"
    assert accepted["proposal"]["similarity"] == proposal["similarity"]
    assert accepted["proposal"]["memoryTopic"] == "payment gateway retry limits"
    # A retry after a lost answer gets the same answer, and changes nothing.
    again = await ok(
        agent,
        "configure_thread",
        {"action": "accept_proposal", "proposalId": proposal["proposalId"]},
    )
    assert again == accepted
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"][0]["memberCount"] == 2 and listed["proposals"] == []
    reversed_ = await fails(
        agent,
        "configure_thread",
        {"action": "reject_proposal", "proposalId": proposal["proposalId"]},
    )
    assert reversed_ == (
        f"conflict: memory {proposal['memoryId']} is a member of thread 'payments' already; "
        "remove_members takes it out"
    )


async def test_rejected_proposal_is_not_applied(agent, other_agent):
    seed = await remember(agent, topic="release checklist", content="tag, build, ship")
    await ok(agent, "configure_thread", {"action": "create", "name": "release"})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "release", "memoryIds": [seed["id"]]},
    )
    related = await ok(
        agent,
        "remember",
        {"memoryType": "note", "topic": "release checklist v2", "content": "sign too"},
    )
    proposal_id = related["proposals"][0]["proposalId"]
    assert (
        await fails(
            other_agent,
            "configure_thread",
            {"action": "reject_proposal", "proposalId": proposal_id},
        )
    ) == (f"not_found: open proposal {proposal_id}")
    rejected = await ok(
        agent, "configure_thread", {"action": "reject_proposal", "proposalId": proposal_id}
    )
    assert rejected["proposal"]["state"] == "rejected"
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"][0]["memberCount"] == 1
    arguments = {"action": "reject_proposal", "proposalId": proposal_id}
    assert await ok(agent, "configure_thread", arguments) == rejected
    assert await fails(other_agent, "configure_thread", arguments) == (
        f"not_found: open proposal {proposal_id}"
    )
    accepted = await fails(agent, "configure_thread", arguments | {"action": "accept_proposal"})
    assert accepted == (
        f"conflict: proposal {proposal_id} was rejected; add_members makes memory "
        f"{related['memory']['id']} a member of thread 'release'"
    )


async def test_a_revised_member_stays_in_its_thread(agent):
    memory = await remember(agent, content="v1")
    await ok(agent, "configure_thread", {"action": "create", "name": "t"})
    await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "t", "memoryIds": [memory["id"]]},
    )
    await ok(agent, "revise", {"predecessorId": memory["id"], "content": "v2"})
    listed = await ok(agent, "configure_thread", {"action": "list"})
    assert listed["threads"][0]["memberCount"] == 1  # the current version, not the closed one
    hits = await ok(agent, "search", {"query": "v2", "thread": "t"})
    assert [h["excerpt"] for h in hits["hits"]] == ["v2"]


async def test_a_threads_member_count_is_what_a_listing_of_it_shows(agent):
    """An archived member is counted by neither: a search of the thread lists it only with
    status 'archived' or 'any'."""
    kept, archived = [await remember(agent, content=text) for text in ("kept", "set aside")]
    await thread_of(agent, "t", [kept["id"], archived["id"]])
    await ok(agent, "archive", {"memoryId": archived["id"]})
    listed = await ok(agent, "configure_thread", {"action": "list"})
    shown = await ok(agent, "search", {"thread": "t"})
    assert listed["threads"][0]["memberCount"] == len(shown["hits"]) == 1
    every = await ok(agent, "search", {"thread": "t", "status": "any"})
    assert len(every["hits"]) == 2
    # Added to another thread, an archived memory joins it, and the answer says why the count
    # did not move.
    await ok(agent, "configure_thread", {"action": "create", "name": "t2"})
    added = await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "t2", "memoryIds": [archived["id"], kept["id"]]},
    )
    assert added["thread"]["memberCount"] == 1
    assert (added["unchanged"], added["archived"]) == ([], [archived["id"]])
    again = await ok(
        agent,
        "configure_thread",
        {"action": "add_members", "name": "t2", "memoryIds": [kept["id"]]},
    )
    assert again["unchanged"] == [kept["id"]] and "archived" not in again


# --- describe_environment ------------------------------------------------------------------


async def test_describe_environment_reports_own_data_and_no_secrets(agent, other_agent, settings):
    await remember(agent, memoryType="commitment", content="c1", project="alpha", scope="work")
    first = await remember(agent, content="n1")
    await ok(agent, "revise", {"predecessorId": first["id"], "content": "n2"})
    await remember(other_agent, content="x", project="their-project")
    await ok(agent, "configure_thread", {"action": "create", "name": "ideas"})
    env = await ok(agent, "describe_environment")
    assert env["tools"] == [spec.name for spec in TOOLS]
    assert env["server"] == {"name": "threengram", "version": VERSION}
    assert env["scopes"] == ["memory:read", "memory:write"]
    assert env["projects"] == {"count": 1, "names": ["alpha"]}
    assert env["memoryScopes"] == ["personal", "work"]
    # Every type and state is counted, 0 included: a missing key would leave an agent guessing.
    assert {t: n for t, n in env["memoriesByType"].items() if n} == {"commitment": 1, "note": 1}
    assert set(env["memoriesByType"]) == set(MemoryType.values)
    assert env["memoriesByStatus"] == {"active": 2, "archived": 0, "superseded": 1}
    assert env["commitmentsByStatus"] == {"open": 1, "waiting": 0, "resolved": 0, "expired": 0}
    # The cap counts every version: an agent sees how near it is before a write is refused.
    assert env["memoryVersions"] == {"count": 3, "max": settings.MEMORY_VERSIONS_PER_ACCOUNT_MAX}
    assert [t["name"] for t in env["threads"]] == ["ideas"]
    text = json.dumps(env)
    assert settings.SECRET_KEY not in text and "postgres" not in text.lower()


async def test_describe_environment_lists_100_projects_with_the_exact_count(agent, owner):
    for n in range(101):
        await Memory.objects.acreate(
            owner=owner,
            memory_type="note",
            topic="t",
            content=f"note {n}",
            content_length=len(f"note {n}"),
            project=f"project {n:03}",
            recorded_at=timezone.now(),
        )
    env = await ok(agent, "describe_environment")
    assert env["projects"]["count"] == 101
    assert env["projects"]["names"] == [f"project {n:03}" for n in range(100)]


# --- defaults the tool docs state (docs/tools.md) ------------------------------------------


async def test_search_gives_5_hits_unless_told_otherwise(agent):
    for n in range(6):
        await remember(agent, topic=f"retro {n}", content=f"sprint retro notes number {n}")
    result = await ok(agent, "search", {"query": "sprint retro"})
    assert (result["count"], result["hasMore"]) == (5, True)


async def test_handoff_gives_10_items_a_section_unless_told_otherwise(agent, owner):
    for n in range(11):
        await Memory.objects.acreate(
            owner=owner,
            memory_type="decision",
            topic=f"decision {n}",
            content=f"we chose {n}",
            content_length=len(f"we chose {n}"),
            recorded_at=timezone.now(),
        )
    decisions = (await ok(agent, "handoff"))["sections"]["decisions"]
    assert (decisions["count"], len(decisions["items"]), decisions["truncated"]) == (11, 10, True)


async def test_get_memories_spends_20000_characters_unless_told_otherwise(agent, owner):
    ids = await long_notes(owner, 11)
    result = await ok(agent, "get_memories", {"ids": ids})
    assert [m["contentWithheld"] for m in result["memories"]] == [False] * 10 + [True]
    assert result["withheldForBudget"] == ids[10:]


async def test_briefing_lists_10_pinned_threads_and_counts_them_all(agent):
    for n in range(11):
        await ok(agent, "configure_thread", {"action": "create", "name": f"thread {n:02}"})
        await ok(agent, "configure_thread", {"action": "pin", "name": f"thread {n:02}"})
    pinned = (await ok(agent, "briefing"))["pinnedThreads"]
    assert (pinned["count"], pinned["truncated"]) == (11, True)
    assert [t["name"] for t in pinned["items"]] == [f"thread {n:02}" for n in range(10)]


# --- unexpected failures -------------------------------------------------------------------


async def test_unexpected_error_is_generic_and_logs_no_content(agent, monkeypatch, caplog):
    from memories import threads

    def explode(**kwargs):
        raise RuntimeError(f"boom with {kwargs['content']}")

    monkeypatch.setattr(threads, "record_memory_with_proposals", explode)
    text = await fails(
        agent, "remember", {"memoryType": "note", "topic": "t", "content": "TOP SECRET"}
    )
    assert text.startswith("internal_error:")
    assert "TOP SECRET" not in caplog.text and "RuntimeError" in caplog.text


async def test_search_never_returns_another_tenants_memory(agent, stranger):
    await Memory.objects.acreate(
        owner=stranger,
        memory_type="note",
        topic="theirs",
        content="zebra crossing",
        content_length=14,
        recorded_at=timezone.now(),
    )
    assert (await ok(agent, "search", {"query": "zebra"}))["hits"] == []


async def test_search_filtered_by_a_project_no_memory_has_is_not_found(agent, other_agent):
    """`search` for 'storage' in project 'Beacon' (stored as 'beacon') had no hits, and the
    description told the agent to ask again in other words: it could never find it so. A project
    in another case is the account's; an empty first page with a scope or project no current
    memory has is not_found, naming a near one, never another tenant's."""
    await remember(agent, topic="storage", content="Delta Lake on S3", project="beacon")
    await remember(other_agent, topic="storage", content="theirs", project="Beacon")
    [typed] = (await ok(agent, "search", {"query": "storage", "project": "Beacon"}))["hits"]
    assert (typed["excerpt"], typed["project"]) == ("Delta Lake on S3", "beacon")
    assert await fails(agent, "search", {"query": "storage", "project": "Beakon"}) == (
        "not_found: project 'Beakon': no current memory has it; did you mean 'beacon'?"
    )
    assert await fails(agent, "search", {"query": "storage", "scope": "work"}) == (
        "not_found: scope 'work': no current memory has it; describe_environment lists your "
        "projects and scopes"
    )
    # Known, with nothing matching: no hits, as before.
    assert (await ok(agent, "search", {"query": "kubernetes", "project": "beacon"}))["hits"] == []
    [hit] = (await ok(agent, "search", {"query": "storage", "project": "beacon"}))["hits"]
    assert hit["excerpt"] == "Delta Lake on S3"


async def test_an_unknown_scope_or_project_is_not_found_in_an_account_of_any_size(
    agent, monkeypatch
):
    """Whether a current memory has a scope or project is one probe of an index, however large
    the account: not_found is certain, and names a near one when one of the account's most
    recent memories has it (an answer must not cost a read of a large account's every memory)."""
    monkeypatch.setattr(environment, "FACET_CHECK_MEMORIES_MAX", 2)
    await remember(
        agent, topic="storage", content="Delta Lake on S3", project="beacon", scope="work"
    )
    for n in range(2):
        await remember(agent, topic=f"later {n}", content=f"newer note {n}")
    assert (await ok(agent, "search", {"query": "kubernetes", "project": "beacon"}))["hits"] == []
    assert (await ok(agent, "search", {"query": "kubernetes", "scope": "work"}))["hits"] == []
    for facet, value in (("project", "Beakon"), ("scope", "works")):
        assert await fails(agent, "search", {"query": "storage", facet: value}) == (
            f"not_found: {facet} '{value}': no current memory has it; describe_environment "
            "lists your projects and scopes"
        )
    monkeypatch.setattr(environment, "FACET_CHECK_MEMORIES_MAX", 3)
    assert await fails(agent, "search", {"query": "storage", "project": "Beakon"}) == (
        "not_found: project 'Beakon': no current memory has it; did you mean 'beacon'?"
    )
    assert await fails(agent, "search", {"query": "storage", "scope": "works"}) == (
        "not_found: scope 'works': no current memory has it; did you mean 'work'?"
    )


async def test_search_pages_with_next_cursor_bound_to_the_query(agent):
    for n in range(7):
        await remember(agent, topic=f"retro {n}", content=f"sprint retro notes number {n}")
    first = await ok(agent, "search", {"query": "sprint retro", "limit": 4})
    assert (first["count"], first["hasMore"]) == (4, True)
    second = await ok(
        agent, "search", {"query": "sprint retro", "limit": 4, "cursor": first["nextCursor"]}
    )
    assert (second["count"], second["hasMore"], second["nextCursor"]) == (3, False, None)
    ids = [h["id"] for h in first["hits"] + second["hits"]]
    assert len(set(ids)) == 7
    text = await fails(agent, "search", {"query": "retro", "cursor": first["nextCursor"]})
    assert text.startswith("invalid_input: cursor: was issued for a different query")


async def test_search_without_a_query_lists_what_the_filters_select(agent, other_agent):
    """'All the notes of project atlas': no words to rank by, so no query; the filters list
    them newest first, paged like any search."""
    ids = [
        (await remember(agent, topic=f"blocker {n}", content=f"on {n}", project="atlas"))["id"]
        for n in range(3)
    ]
    await remember(agent, topic="decision", content="go", project="atlas", memoryType="decision")
    await remember(other_agent, topic="theirs", content="x", project="atlas")
    arguments = {"memoryTypes": ["note"], "project": "atlas", "limit": 2}
    first = await ok(agent, "search", arguments)
    second = await ok(agent, "search", arguments | {"cursor": first["nextCursor"]})
    assert [h["id"] for h in first["hits"] + second["hits"]] == ids[::-1]
    assert (first["hasMore"], second["hasMore"]) == (True, False)
    assert not any("score" in h or "matchedBy" in h for h in first["hits"])


async def test_a_thread_searchs_cursor_is_refused_once_its_name_names_a_new_thread(agent):
    """A cursor pages through one thread's members: after a delete and a create of the same
    name it is refused, as for other filters, not continued on the new thread's members."""
    ids = [(await remember(agent, content=f"street works {n}"))["id"] for n in range(6)]
    await thread_of(agent, "launch", ids[:3])
    first = await ok(agent, "search", {"query": "street works", "thread": "launch", "limit": 1})
    await ok(agent, "configure_thread", {"action": "delete", "name": "launch"})
    await thread_of(agent, "Launch", ids[3:])
    text = await fails(
        agent,
        "search",
        {"query": "street works", "thread": "launch", "limit": 1, "cursor": first["nextCursor"]},
    )
    assert text.startswith("invalid_input: cursor: was issued for a different query or filters")


async def test_a_thread_searchs_cursor_follows_its_thread_through_a_rename(agent):
    ids = [(await remember(agent, content=f"street works {n}"))["id"] for n in range(3)]
    await thread_of(agent, "launch", ids)
    first = await ok(agent, "search", {"query": "street works", "thread": "launch", "limit": 2})
    await ok(agent, "configure_thread", {"action": "rename", "name": "launch", "newName": "go"})
    rest = await ok(
        agent,
        "search",
        {"query": "street works", "thread": "go", "limit": 2, "cursor": first["nextCursor"]},
    )
    assert sorted(h["id"] for h in first["hits"] + rest["hits"]) == sorted(ids)
    text = await fails(
        agent,
        "search",
        {"query": "street works", "thread": "launch", "limit": 2, "cursor": first["nextCursor"]},
    )
    assert text == "not_found: thread 'launch'; describe_environment lists your threads"


async def test_search_in_the_compact_projection_gives_only_what_tells_hits_apart(agent):
    """An agent scanning many hits pays for excerpts it does not read: `projection: compact`
    gives each hit's id, type, topic, date, status and score, in the order of the full page,
    for a fraction of its size; the cursor pages on in either projection."""
    for n in range(5):
        await remember(
            agent, topic=f"retro {n}", content=f"sprint retro notes {n}: " + "went well " * 40
        )
    arguments = {"query": "sprint retro", "limit": 2}
    full = await ok(agent, "search", arguments)
    compact = await ok(agent, "search", arguments | {"projection": "compact"})
    shown = ("id", "memoryType", "topic", "recordedAt", "score")
    assert compact["hits"] == [{key: hit[key] for key in shown} for hit in full["hits"]]
    assert (compact["count"], compact["hasMore"]) == (2, True)
    assert len(json.dumps(compact["hits"])) * 3 < len(json.dumps(full["hits"]))

    whole_next = await ok(agent, "search", arguments | {"cursor": compact["nextCursor"]})
    assert whole_next["hits"][0]["excerpt"].startswith("sprint retro notes")
    compact_next = await ok(
        agent, "search", arguments | {"projection": "compact", "cursor": full["nextCursor"]}
    )
    assert [hit["id"] for hit in compact_next["hits"]] == [hit["id"] for hit in whole_next["hits"]]
    seen = [hit["id"] for page in (full, whole_next) for hit in page["hits"]]
    assert len(set(seen)) == 4


async def test_a_hit_found_by_a_word_its_start_does_not_show_says_where_its_window_starts(agent):
    """The excerpt of a long memory found by a word near its end is a window around the word,
    marked as not the start (a leading '…', excerptStart), within the same bound; a compact
    hit has no excerpt, nor its start."""
    content = "The role tables grew with each feature and checks took joins. " * 15
    content += "Decision: move authorization to SpiceDB."
    memory = await remember(agent, memoryType="decision", topic="Authorization", content=content)
    [hit] = (await ok(agent, "search", {"query": "spicedb"}))["hits"]
    assert (hit["id"], hit["truncated"], hit["contentLength"]) == (memory["id"], True, len(content))
    assert hit["excerpt"].startswith("\u2026") and hit["excerpt"].endswith("SpiceDB.")
    assert content[hit["excerptStart"] :] == hit["excerpt"][1:]
    compact = {"query": "spicedb", "projection": "compact"}
    [compact_hit] = (await ok(agent, "search", compact))["hits"]
    assert "excerptStart" not in compact_hit
    [leading] = (await ok(agent, "search", {"query": "role tables"}))["hits"]
    assert "excerptStart" not in leading and leading["excerpt"].startswith("The role tables")


async def test_a_hit_leaves_out_what_does_not_apply_and_names_what_differs(agent):
    """Search is the call an agent makes most: a hit carries its excerpt and how it matched, and
    a field only where it tells something (the URI is threengram://memory/{id}; a memory is in
    force and active unless its hit says otherwise)."""
    plain = await remember(agent, topic="standup time", content="standup moves to 9:30")
    past = (timezone.now() - timedelta(days=1)).isoformat()
    late = await remember(
        agent,
        memoryType="commitment",
        topic="standup notes",
        content="write up the standup notes " + "in detail " * 100,
        scope="work",
        project="atlas",
        dueAt=past,
    )
    await ok(agent, "archive", {"memoryId": late["id"]})
    found = await ok(agent, "search", {"query": "standup", "status": "any"})
    hits = {hit["id"]: hit for hit in found["hits"]}

    assert set(hits[plain["id"]]) == {"id", "memoryType", "topic", "excerpt", "recordedAt"} | {
        "score",
        "matchedBy",
    }
    # As stored: asOf that instant reads this version (to the second, it could read none).
    [read] = (await ok(agent, "get_memories", {"ids": [plain["id"]]}))["memories"]
    assert hits[plain["id"]]["recordedAt"] == read["recordedAt"]
    then = {"query": "standup", "asOf": hits[plain["id"]]["recordedAt"]}
    assert [hit["id"] for hit in (await ok(agent, "search", then))["hits"]] == [plain["id"]]
    archived = hits[late["id"]]
    assert {key: archived[key] for key in ("truncated", "scope", "project", "status")} == {
        "truncated": True,
        "scope": "work",
        "project": "atlas",
        "status": "archived",
    }
    # Past due, but set aside: not overdue.
    assert (archived["commitmentStatus"], archived.get("overdue")) == ("open", None)
    assert archived["contentLength"] > len(archived["excerpt"])
    assert "current" not in archived and "validTo" not in archived


async def test_compact_hits_tell_open_commitments_from_closed_and_late_ones(agent):
    """ "Which of my commitments are still open" is answered without the excerpts."""
    past = (timezone.now() - timedelta(days=1)).isoformat()
    late = await remember(agent, memoryType="commitment", topic="send invoice", dueAt=past)
    done = await remember(agent, memoryType="commitment", topic="send report", content="done")
    await ok(agent, "resolve", {"memoryId": done["id"], "status": "resolved"})
    note = await remember(agent, topic="send notes", content="a note")
    arguments = {"query": "send", "projection": "compact", "limit": 5}
    hits = {hit["id"]: hit for hit in (await ok(agent, "search", arguments))["hits"]}

    assert (hits[late["id"]]["commitmentStatus"], hits[late["id"]]["overdue"]) == ("open", True)
    assert hits[done["id"]]["commitmentStatus"] == "resolved" and "overdue" not in hits[done["id"]]
    assert "commitmentStatus" not in hits[note["id"]] and "validTo" not in hits[note["id"]]

    before_revision = timezone.now()
    await ok(agent, "revise", {"predecessorId": note["id"], "content": "a longer note"})
    as_it_was = await ok(agent, "search", arguments | {"asOf": before_revision.isoformat()})
    [old_note] = [hit for hit in as_it_was["hits"] if hit["id"] == note["id"]]
    assert datetime.fromisoformat(old_note["validTo"]) > before_revision


async def test_compact_hits_name_their_project(agent):
    """A compact listing of open commitments across projects named none: an agent could not
    tell which project each was for without reading every one."""
    atlas = await remember(
        agent, memoryType="commitment", topic="send invoice", content="invoice", project="atlas"
    )
    loose = await remember(agent, memoryType="commitment", topic="send report", content="report")
    arguments = {"commitmentStatus": ["open"], "projection": "compact"}
    hits = {hit["id"]: hit for hit in (await ok(agent, "search", arguments))["hits"]}

    assert hits[atlas["id"]]["project"] == "atlas"
    assert "project" not in hits[loose["id"]]
    assert list(hits[atlas["id"]])[:5] == ["id", "memoryType", "topic", "project", "recordedAt"]


async def test_search_lists_and_finds_commitments_by_their_state(agent, other_agent):
    """'Which tasks have I finished this week?' and 'what am I still waiting on?' answered by
    search: the commitments in those states, not the blocker that says "finish", nor another
    account's; in the compact projection too, paged."""
    made = {}
    for state in ("open", "waiting", "resolved", "expired"):
        made[state] = await remember(
            agent, memoryType="commitment", topic=f"finish the {state} slides", content=state
        )
        if state != "open":
            await ok(agent, "resolve", {"memoryId": made[state]["id"], "status": state})
    await remember(agent, memoryType="blocker", topic="cannot finish the slides", content="x")
    theirs = await remember(other_agent, memoryType="commitment", topic="finish their slides")
    await ok(other_agent, "resolve", {"memoryId": theirs["id"], "status": "resolved"})
    week = (timezone.now() - timedelta(days=7)).isoformat()

    resolved_at = (await ok(agent, "get_memories", {"ids": [made["resolved"]["id"]]}))["memories"][
        0
    ]["resolvedAt"]
    for arguments in (
        {"commitmentStatus": ["resolved"]},
        {"query": "finish slides", "commitmentStatus": ["resolved"]},
        {"query": "what did I finish", "resolvedAfter": week, "projection": "compact"},
    ):
        [hit] = (await ok(agent, "search", arguments))["hits"]
        assert (hit["id"], hit["commitmentStatus"]) == (made["resolved"]["id"], "resolved")
        # When, without reading the memory: "what did I finish this week".
        assert hit["resolvedAt"] == resolved_at is not None
    unresolved = (await ok(agent, "search", {"commitmentStatus": ["open", "expired"]}))["hits"]
    assert [("resolvedAt" in hit) for hit in unresolved] == [False, False]

    arguments = {"commitmentStatus": ["open", "waiting"], "limit": 1, "projection": "compact"}
    first = await ok(agent, "search", arguments)
    second = await ok(agent, "search", arguments | {"cursor": first["nextCursor"]})
    assert [hit["commitmentStatus"] for hit in first["hits"] + second["hits"]] == [
        "waiting",
        "open",
    ]
    assert not second["hasMore"]
    text = await fails(
        agent, "search", {"commitmentStatus": ["open"], "cursor": first["nextCursor"]}
    )
    assert text.startswith("invalid_input: cursor: was issued for a different query or filters")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"commitmentStatus": ["open"], "memoryTypes": ["blocker"]},
            "invalid_input: commitmentStatus: selects commitments, which memoryTypes ['blocker'] "
            "leaves out; add 'commitment' to memoryTypes or omit memoryTypes",
        ),
        (
            {"query": "x", "commitmentStatus": ["open"], "asOf": "2026-12-01T00:00:00Z"},
            "invalid_input: commitmentStatus: cannot be combined with asOf",
        ),
        (
            {"resolvedAfter": "2026-12-01T00:00:00Z", "commitmentStatus": ["waiting"]},
            "invalid_input: resolvedAfter: selects resolved commitments only",
        ),
        ({"commitmentStatus": []}, "invalid_input: commitmentStatus: at least 1 item(s)"),
        (
            {"commitmentStatus": ["open"] * 5},
            "invalid_input: commitmentStatus: at most 4 items; got 5",
        ),
        (
            {"commitmentStatus": ["open", "open"]},
            "invalid_input: commitmentStatus: items must be unique",
        ),
        ({"resolvedAfter": "2026-12-01"}, "invalid_input: resolvedAfter: must"),
    ],
)
async def test_commitment_filters_that_cannot_be_answered_are_refused_by_name(
    agent, arguments, expected
):
    assert (await fails(agent, "search", arguments)).startswith(expected)


async def test_search_hits_carry_due_dates_and_the_overdue_flag(agent):
    past = (timezone.now() - timedelta(hours=1)).isoformat()
    late = await remember(
        agent, memoryType="commitment", topic="invoice", content="pay invoice", dueAt=past
    )
    [hit] = (await ok(agent, "search", {"query": "invoice"}))["hits"]
    assert (hit["id"], hit["overdue"], hit["commitmentStatus"]) == (late["id"], True, "open")
    await ok(agent, "resolve", {"memoryId": late["id"], "status": "resolved"})
    [hit] = (await ok(agent, "search", {"query": "invoice"}))["hits"]
    assert "overdue" not in hit and hit["dueAt"] is not None


async def test_an_archived_commitment_is_not_overdue(agent):
    """Set aside, it is no longer to do: no answer calls it overdue (briefing lists none)."""
    late = await remember(
        agent, memoryType="commitment", topic="invoice", content="pay invoice", dueAt="2020-01-01"
    )
    assert late["overdue"] is True
    archived = (await ok(agent, "archive", {"memoryId": late["id"]}))["memory"]
    assert (archived["status"], archived.get("overdue")) == ("archived", None)
    [hit] = (await ok(agent, "search", {"query": "invoice", "status": "archived"}))["hits"]
    assert "overdue" not in hit and hit["dueAt"] is not None
    [read] = (await ok(agent, "get_memories", {"ids": [late["id"]]}))["memories"]
    assert read["overdue"] is False


async def test_an_empty_search_says_why_and_how_to_ask_instead(agent, other_agent):
    """A model told only `"hits": []` cannot tell "nothing stored" from "ask otherwise": an empty
    first page of a query carries a note with the likeliest reason, naming no memory's words."""
    await remember(
        agent,
        memoryType="preference",
        topic="Calendar",
        content="Prefers meetings in the afternoon, after lunch.",
    )
    quote = await remember(
        agent, topic="Fivetran quote", content="Fivetran quoted 1,200 USD a month for connectors."
    )
    await ok(agent, "archive", {"memoryId": quote["id"]})

    async def note(arguments: dict, principal=agent) -> str:
        result = await ok(principal, "search", arguments)
        assert (result["hits"], result["count"], result["hasMore"]) == ([], 0, False)
        assert result["nextCursor"] is None
        return result["note"]

    notes = {
        "stop words": await note({"query": "the which of and"}),
        "exclusions": await note({"query": "-snowflake"}),
        "archived": await note({"query": "Fivetran quote"}),
        "under the floor": await note({"query": "when can I book meetings with the user?"}),
        "no word": await note({"query": "xylophone quasar"}),
        "no word, filtered": await note(
            {"query": "xylophone", "memoryTypes": ["decision"], "scope": "personal"}
        ),
    }
    assert notes["stop words"].startswith(
        "Nothing was searched: the query holds only stop words, punctuation or symbols"
    )
    assert (await note({"query": "🙂🚀"})) == notes["stop words"]
    # A model that meant "everything" with a wildcard is told how a listing is asked for.
    assert (await note({"query": "*", "memoryTypes": ["decision"]})).endswith(
        "or omit the query to list the memories the filters select, newest first ('*' is no "
        "wildcard)."
    )
    assert notes["exclusions"].startswith("Nothing was searched: the query holds only exclusions")
    # The archived quote was not searched: the note says so, not whether it would match.
    assert notes["archived"].endswith(
        "Archived memories were not searched: status 'any' includes them."
    )
    # A question in other words than the memory's is seldom found by meaning alone: the note
    # does not call the memory not stored.
    no_word = await note({"query": "xylophone", "status": "any"})
    assert "may not be stored, or be stored in other words" in no_word
    assert no_word.endswith(
        "can make sure. Only current versions were searched: asOf (an instant when an earlier "
        "version was current) searches versions since revised."
    )
    assert notes["under the floor"].startswith(
        "1 active memory shares words or meaning with the query, but none closely enough to "
        "answer it."
    )
    assert notes["no word"].startswith("No active memory shares a word with the query")
    assert notes["no word, filtered"].startswith(
        "No active memory under the filters given (memoryTypes, scope) shares a word with the query"
    )
    stored = ("calendar", "prefers", "afternoon", "lunch", "fivetran", "1,200", "usd", "connect")
    for reason, text in notes.items():
        assert not [word for word in stored if word in text.lower()], reason
    # What the notes advise finds them.
    assert (await ok(agent, "search", {"query": "Fivetran quote", "status": "any"}))["count"] == 1
    assert (await ok(agent, "search", {"query": "meetings"}))["count"] == 1
    # Another account's memories explain nothing of this one's empty page, nor make it hold any.
    assert (await note({"query": "Fivetran quote"}, other_agent)).startswith(
        "This account holds no memories yet"
    )
    await remember(other_agent, topic="Plants", content="Water the ficus on Mondays.")
    assert (await note({"query": "Fivetran quote"}, other_agent)).startswith(
        "No active memory shares a word with the query"
    )
    assert (
        await note({"query": "when can I book meetings with the user?"}, other_agent)
    ).startswith("No active memory shares a word with the query")
    # Searching every status, none is left out, and none is named.
    assert (await note({"query": "xylophone", "status": "any"})).startswith(
        "No memory shares a word with the query"
    )


async def test_an_empty_search_with_a_phrase_or_an_exclusion_says_what_it_required(agent):
    """A memory sharing the query's words but not its quoted phrase as written, or holding an
    excluded word, was never looked at: the note says what the query required and how to look
    further, not that the memory may not be stored."""
    await remember(
        agent,
        topic="Message broker",
        content="We run RabbitMQ as the broker for the order queues; deltaversion pinned.",
    )

    async def note(query: str) -> str:
        result = await ok(agent, "search", {"query": query})
        assert result["hits"] == []
        assert "may not be stored" not in result["note"]
        return result["note"]

    assert await note("RabbitMQ -deltaversion") == (
        "No active memory without the query's excluded words shares a word with the query or is "
        "close to it in meaning. Memories that share its words otherwise were not looked at: drop "
        "the exclusions to look for them. Only current versions were searched: asOf (an instant "
        "when an earlier version was current) searches versions since revised. Archived memories "
        "were not searched: status 'any' includes them."
    )
    assert (await note('"queues broker"')).startswith(
        "No active memory holds what the query quotes (the quoted words together, in that "
        "order). Memories that share its words otherwise were not looked at: drop the quotes "
        "to look for them."
    )
    assert (await note('"queues broker" -deltaversion')).startswith(
        "No active memory holds what the query quotes (the quoted words together, in that "
        "order) and none of its excluded words. Memories that share its words otherwise "
        "were not looked at: drop the quotes or the exclusions to look for them."
    )
    # What the notes advise finds it.
    assert (await ok(agent, "search", {"query": "queues broker RabbitMQ"}))["count"] == 1


async def test_an_empty_search_names_what_its_filters_leave_out(agent):
    """An earlier version holding the words is found with asOf, not with status 'any'; a
    project filter leaves out the account-wide memories: the notes say so."""
    first = await remember(agent, topic="Codename", content="The release is called alphaversion.")
    await ok(agent, "revise", {"predecessorId": first["id"], "content": "Renamed to beta."})
    await remember(agent, topic="Merges", content="Rebase, never merge.", project="atlas")
    await remember(agent, topic="Reviews", content="Two approvals on every pull request.")

    superseded = await ok(agent, "search", {"query": "alphaversion", "status": "any"})
    assert superseded["hits"] == []
    assert "asOf (an instant when an earlier version was current)" in superseded["note"]
    [read] = (await ok(agent, "get_memories", {"ids": [first["id"]]}))["memories"]
    then = {"query": "alphaversion", "asOf": read["recordedAt"]}
    assert [hit["id"] for hit in (await ok(agent, "search", then))["hits"]] == [first["id"]]

    in_project = await ok(agent, "search", {"query": "approvals", "project": "atlas"})
    assert in_project["hits"] == []
    account_wide = "Account-wide memories (of no project) are not searched with project."
    assert account_wide in in_project["note"]


async def test_an_empty_search_for_a_type_or_state_names_the_filters_that_list_it(agent):
    """'what is overdue' shares no word with the overdue commitment it asks for (a type and a
    state are not among a memory's words): the note names the filters that list it, rather than
    leaving the model to believe nothing is stored."""
    overdue = await remember(
        agent,
        memoryType="commitment",
        topic="invoices",
        content="Send the November invoice numbers to finance.",
        dueAt="2020-01-01",
    )
    await remember(agent, memoryType="decision", topic="db", content="Keep PostgreSQL.")

    async def note(arguments: dict) -> str:
        result = await ok(agent, "search", arguments)
        assert result["hits"] == []
        return result["note"]

    assert await note({"query": "overdue commitments"}) == (
        "No active memory shares a word with the query or is close to it in meaning. 'overdue', "
        "'commitments' name a type or a commitment's state, and a memory's type and state are "
        "not among the words search matches: to list those memories, omit the query and filter "
        'with commitmentStatus ["open", "waiting"] (each hit says whether it is overdue); '
        "briefing lists overdue and open ones. Archived memories were not searched: status "
        "'any' includes them."
    )
    # Not told to drop the type filter that was right, nor that the memory may not be stored.
    filtered = await note({"query": "what's overdue", "memoryTypes": ["commitment"]})
    assert filtered.startswith(
        "No active memory under the filters given (memoryTypes) shares a word with the query or "
        "is close to it in meaning. 'overdue' names a type"
    )
    assert "widen or drop" not in filtered and "may not be stored" not in filtered
    blockers = await note({"query": "what Blockers?", "memoryTypes": ["blocker", "fact"]})
    assert 'filter with memoryTypes ["blocker"].' in blockers and "overdue" not in blockers
    assert "filter with memoryTypes" not in await note({"query": "xylophone quasar"})
    # A question about something else that holds such a word keeps the usual advice.
    assert "may not be stored" in await note({"query": "when does the xylophone shop open"})
    # What the note advises finds it.
    listed = await ok(agent, "search", {"commitmentStatus": ["open", "waiting"]})
    assert [(hit["id"], hit["overdue"]) for hit in listed["hits"]] == [(overdue["id"], True)]


async def test_hits_for_a_type_or_state_alone_name_the_filters_that_list_it(agent):
    """'open blockers' matches a memory that says "opening" and "blockers" in its text, not the
    blockers asked for: the hits come with the note naming the filters that list them."""
    await remember(
        agent,
        memoryType="preference",
        topic="Git workflow",
        content="Rebase before opening a PR; no merge commits, and call out blockers early.",
    )
    await remember(agent, memoryType="blocker", topic="PCI audit", content="Waiting on Coalfire.")

    result = await ok(agent, "search", {"query": "open blockers"})
    assert [hit["topic"] for hit in result["hits"]] == ["Git workflow"]
    assert result["note"] == (
        "These hits hold the query's words in their text, which may not be what was asked for: "
        "'open', 'blockers' name a type or a commitment's state, and a memory's type and state "
        "are not among the words search matches: to list those memories, omit the query and "
        'filter with memoryTypes ["blocker"].'
    )
    listed = await ok(agent, "search", {"memoryTypes": ["blocker"]})  # as the note advises
    assert [hit["topic"] for hit in listed["hits"]] == ["PCI audit"]
    # A type named among other words, and a first hit of another type: the filter that keeps
    # the words and selects the type (which memoryTypes, or a first hit of the type, make moot).
    assert (await ok(agent, "search", {"query": "git workflow blockers"}))["note"] == (
        "These hits hold the query's words in their text, which may not be what was asked for: "
        "'blockers' names a type, and a memory's type is not among the words search matches: "
        'to search only memories of that type, keep the query and add memoryTypes ["blocker"].'
    )
    for narrowed in (
        {"query": "Coalfire blockers"},
        {"query": "git blockers", "memoryTypes": ["preference"]},
    ):
        assert (await ok(agent, "search", narrowed))["note"] is None
    # Plurals that name other things as often are no type asked for.
    await remember(agent, topic="Release notes", content="Release notes go out on Fridays.")
    assert (await ok(agent, "search", {"query": "friday release notes"}))["note"] is None


async def test_an_empty_search_naming_a_type_or_state_among_other_words_names_its_filter(agent):
    """'open blockers in atlas' or 'what is overdue in infra' that found nothing: the type or
    state word is no word of the memory asked for, and the note names the filter that selects
    it, beside the query's other words or in a listing."""
    await remember(agent, memoryType="blocker", topic="CI", content="The runners are down.")
    await remember(
        agent,
        memoryType="commitment",
        topic="Certs",
        content="Renew the TLS certificates.",
        dueAt="2020-01-01",
    )

    async def note(query: str) -> str:
        result = await ok(agent, "search", {"query": query})
        assert result["hits"] == []
        return result["note"]

    blockers = await note("open blockers in xylophone")
    assert blockers.startswith("No active memory shares a word with the query")
    assert blockers.endswith(
        "'blockers' names a type, and a memory's type is not among the words search matches: "
        "to search only memories of that type, ask with the query's other words and add "
        'memoryTypes ["blocker"], or omit the query to list them.'
    )
    assert (await note("what is overdue in xylophone")).endswith(
        "'overdue' names a commitment's state, and a memory's state is not among the words "
        "search matches: to search only commitments in that state, ask with the query's other "
        'words and add commitmentStatus ["open", "waiting"], or omit the query to list them '
        "(each hit says whether it is overdue); briefing lists the overdue ones in its overdue "
        "section (selector 'project' and value a project's name for one project)."
    )
    pending = await note("pending commitments for xylophone")
    assert "'pending', 'commitments' name a commitment's state" in pending
    assert "briefing" not in pending
    # What the notes advise finds them.
    for filters in ({"memoryTypes": ["blocker"]}, {"commitmentStatus": ["open", "waiting"]}):
        assert (await ok(agent, "search", filters))["count"] == 1


async def test_hits_for_a_state_among_other_words_name_its_filter(agent):
    """'what is overdue in infra' matches a note about the infra, not the overdue commitment."""
    await remember(agent, memoryType="note", topic="Infra", content="The infra budget is set.")
    result = await ok(agent, "search", {"query": "what is overdue in infra"})
    assert [hit["topic"] for hit in result["hits"]] == ["Infra"]
    assert result["note"] == (
        "These hits hold the query's words in their text, which may not be what was asked for: "
        "'overdue' names a commitment's state, and a memory's state is not among the words "
        "search matches: to search only commitments in that state, keep the query and add "
        'commitmentStatus ["open", "waiting"] (each hit says whether it is overdue); briefing '
        "lists the overdue ones in its overdue section (selector 'project' and value a "
        "project's name for one project)."
    )
    # 'open', 'waiting' and 'resolved' are words of a text as a rule.
    assert (await ok(agent, "search", {"query": "open infra budget"}))["note"] is None


async def test_an_empty_search_where_nothing_could_match_says_so_plainly(agent):
    """An empty account, or an asOf before its first memory: no advice about status 'any' or
    asOf, which would lead to more empty pages."""
    for arguments in ({"query": "deploy"}, {}):
        assert (await ok(agent, "search", arguments))["note"] == (
            "This account holds no memories yet: nothing is stored to find (remember stores one)."
        )
    await remember(agent, topic="Deploys", content="Deploys go out on Tuesdays.")
    result = await ok(agent, "search", {"query": "deploy", "asOf": "2020-01-01T00:00:00Z"})
    assert (result["hits"], result["note"]) == (
        [],
        "No memory had been recorded in this account by asOf 2020-01-01T00:00:00Z: nothing "
        "could match. A later asOf, or none (current versions), reads what was recorded since.",
    )
    assert (await ok(agent, "search", {"query": "deploy"}))["count"] == 1


async def test_only_an_empty_first_page_carries_a_note(agent):
    for n in range(2):
        await remember(agent, topic="retro", content=f"sprint retro notes {n}")
    first = await ok(agent, "search", {"query": "sprint retro", "limit": 1})
    assert (first["count"], first["note"]) == (1, None)
    [rest] = [
        hit["id"]
        for hit in (await ok(agent, "search", {"query": "sprint retro"}))["hits"]
        if hit["id"] != first["hits"][0]["id"]
    ]
    await ok(agent, "archive", {"memoryId": rest})
    arguments = {"query": "sprint retro", "limit": 1, "cursor": first["nextCursor"]}
    later = await ok(agent, "search", arguments)
    assert (later["hits"], later["note"]) == ([], None)
    listed = await ok(agent, "search", {"memoryTypes": ["event"]})
    assert (listed["hits"], listed["hasMore"], listed["note"]) == (
        [],
        False,
        "No active memory passes the filters given (memoryTypes): widen or drop them to list "
        "more. Archived memories were not listed: status 'any' includes them.",
    )
    assert (await ok(agent, "search", {}))["note"] is None


async def test_a_listing_page_cut_short_by_its_window_says_more_follow(agent, monkeypatch):
    """An empty or short listing page with hasMore says why, so that a model does not take it
    for all there is."""
    monkeypatch.setattr(listing, "LISTED_WINDOW", 2)
    archived = await remember(agent, topic="old plan", content="The plan we dropped.")
    await ok(agent, "archive", {"memoryId": archived["id"]})
    for n in range(3):
        await remember(agent, topic=f"note {n}", content=f"A newer note {n}.")

    first = await ok(agent, "search", {"status": "archived", "limit": 5})
    assert (first["hits"], first["hasMore"]) == ([], True)
    assert first["note"] == (
        "This page read the 2 memories that follow the previous page (newest first), and 0 of "
        "them pass the filters; older memories remain: continue with nextCursor until hasMore "
        "is false."
    )
    rest = await ok(
        agent, "search", {"status": "archived", "limit": 5, "cursor": first["nextCursor"]}
    )
    assert ([hit["topic"] for hit in rest["hits"]], rest["hasMore"], rest["note"]) == (
        ["old plan"],
        False,
        None,
    )


async def test_an_empty_search_for_a_quoted_type_names_the_filters_that_list_it(agent):
    """A query whose every word names a type is answered by the type's note, quoted too: dropping
    the quotes would only lead to another empty page."""
    await remember(
        agent, memoryType="blocker", topic="CI", content="The runners are down.", project="atlas"
    )
    result = await ok(agent, "search", {"query": '"open blockers"', "project": "atlas"})
    assert result["hits"] == []
    assert 'memoryTypes ["blocker"]' in result["note"] and "quotes" not in result["note"]
    # Under project, whichever note: the account-wide memories were not searched.
    assert "Account-wide memories (of no project) are not searched" in result["note"]


async def test_an_empty_search_under_a_commitment_filter_advises_no_refused_asof(agent):
    """A commitment's state is not versioned, so commitmentStatus and resolvedAfter refuse asOf:
    under them the note does not advise it."""
    await remember(agent, memoryType="commitment", topic="invoice", content="Pay the invoice.")
    arguments = {"query": "zebra", "commitmentStatus": ["open"]}
    result = await ok(agent, "search", arguments)
    assert result["hits"] == []
    await fails(agent, "search", arguments | {"asOf": "2030-01-01T00:00:00Z"})
    assert "asOf" not in result["note"]


async def test_a_due_date_already_past_is_pointed_out(agent):
    """A model that takes its training year for today's writes a due date already past without
    knowing: the write says so, with today's instant, and how to change it; a due date ahead,
    or a revision that gives none, gets no note."""
    result = await ok(
        agent,
        "remember",
        {
            "memoryType": "commitment",
            "topic": "t",
            "content": "Renew the domain",
            "dueAt": "2024-12-31",
        },
    )
    assert result["memory"]["overdue"] is True
    # The due date as the memory's dueAt gives it, as stored.
    assert result["memory"]["dueAt"] == "2024-12-31T23:59:59.999999Z"
    assert result["note"].startswith(f"dueAt {result['memory']['dueAt']} is already past (it is ")
    assert result["note"].endswith("If another date was meant, revise its dueAt.")
    ahead = (timezone.now() + timedelta(days=30)).date().isoformat()
    revised = await ok(agent, "revise", {"predecessorId": result["memory"]["id"], "dueAt": ahead})
    assert "note" not in revised
    again = await ok(
        agent, "revise", {"predecessorId": revised["memory"]["id"], "dueAt": "2024-12-31"}
    )
    assert again["note"].startswith("dueAt 2024-12-31T23:59:59.999999Z is already past")
    kept = await ok(
        agent, "revise", {"predecessorId": again["memory"]["id"], "content": "Renew it"}
    )
    assert "note" not in kept and kept["memory"]["overdue"] is True


async def test_ids_and_instants_are_read_past_surrounding_white_space(agent):
    """As topics and projects are: an id with a space pasted around it, or its URI with the
    scheme in capitals (schemes are case-insensitive, RFC 3986 §3.1), names the memory; a due
    date padded is still a date alone."""
    memory = await remember(agent, memoryType="commitment", content="Renew", dueAt=" 2031-12-10 ")
    assert memory["dueAt"] == "2031-12-10T23:59:59.999999Z"
    for named in (f" {memory['id']} ", f"THREENGRAM://memory/{memory['id']}"):
        read = await ok(agent, "get_memories", {"ids": [named]})
        assert [m["id"] for m in read["memories"]] == [memory["id"]], named
    later = {"query": "renew", "recordedAfter": " 2020-01-01T00:00:00Z "}
    assert (await ok(agent, "search", later))["count"] == 1


@pytest.mark.parametrize(
    "other_form", ["20311210", "2031-W50", "2031-W50-1T10:00:00Z", "2031-12-10T10:00:00+05"]
)
async def test_a_due_date_in_another_iso_form_is_refused_naming_the_ones_taken(agent, other_form):
    """'20311210' reads as its midnight: told only to add an offset, a model would make the due
    date the start of the day, not its end. Every form not taken is told the two that are."""
    text = await fails(
        agent,
        "remember",
        {"memoryType": "commitment", "topic": "t", "content": "c", "dueAt": other_form},
    )
    assert text == (
        "invalid_input: dueAt: must be an RFC 3339 date-time, YYYY-MM-DDTHH:MM:SS, a fraction of "
        "the second after '.' if any, and Z or an offset ±HH:MM, e.g. 2026-12-31T17:00:00Z, or a "
        "date alone, YYYY-MM-DD (due by the end of that day, UTC)"
    )


async def test_refusals_name_the_fix(agent):
    text = await fails(agent, "briefing", {"value": "atlas"})
    assert text == (
        "invalid_input: value: must be omitted when selector is 'all' (the default); to select "
        "by it, give selector 'scope', 'project' or 'thread' with it"
    )
    memory = await remember(agent, project="atlas")
    text = await fails(agent, "revise", {"predecessorId": memory["id"], "project": ""})
    assert text.endswith('to remove the project, send clear: ["project"]')
