"""Prompts `briefing` and `debrief`, and completion of their arguments from the tenant's data."""

import re
import unicodedata

import pytest
from mcp.shared.exceptions import MCPError

from mcp_gateway import prompts
from mcp_gateway.prompts import complete_prompt_argument, get_prompt, prompt_definitions
from mcp_gateway.tools import TOOLS
from memories.models import MemoryType
from tests.mcp_gateway.tools.conftest import ok, principal_for

pytestmark = pytest.mark.anyio


def test_two_prompts_with_documented_arguments():
    prompts = {prompt.name: prompt for prompt in prompt_definitions()}
    assert set(prompts) == {"briefing", "debrief"}
    assert [a.name for a in prompts["briefing"].arguments] == ["scope", "project", "thread", "mode"]
    assert all(not a.required for p in prompts.values() for a in p.arguments)


async def test_briefing_prompt_names_the_tool_call(agent):
    result = await get_prompt(agent, "briefing", {"project": "atlas", "mode": "full"})
    text = result.messages[0].content.text
    assert '{"selector": "project", "mode": "full", "value": "atlas"}' in text
    assert "`briefing`" in text
    plain = (await get_prompt(agent, "briefing", None)).messages[0].content.text
    assert '{"selector": "all", "mode": "brief"}' in plain


async def test_a_threads_briefing_prompt_says_how_to_list_what_no_section_lists(agent):
    """A thread's notes are in no briefing section: the prompt steered the agent to summarise
    commitments, blockers, decisions and preferences only, and an investigation's notes went
    unread."""
    text = (await get_prompt(agent, "briefing", {"thread": "leak"})).messages[0].content.text
    assert "If the briefing has a `note`" in text
    assert '`search` and {"thread": "leak", "limit": 25}' in text
    plain = (await get_prompt(agent, "briefing", {"project": "atlas"})).messages[0].content.text
    assert "`note`" not in plain and "`search`" not in plain


async def test_debrief_prompt_mentions_only_real_tools(agent):
    text = (await get_prompt(agent, "debrief", {"thread": "launch"})).messages[0].content.text
    mentioned = set(re.findall(r"`(\w+)`", text))
    assert len(mentioned) >= 5 and mentioned <= {spec.name for spec in TOOLS}
    assert '"action": "add_members", "name": "launch"' in text


# A memory type named in a prompt's text, singular or plural; a `code span` (the briefing's
# `note` field) names none.
_TYPE_WORD = re.compile(rf"\b({'|'.join(MemoryType.values)})s?\b")


def _types_named(text: str) -> set[str]:
    return set(_TYPE_WORD.findall(re.sub(r"`[^`]*`", "", text)))


async def test_every_prompt_naming_memory_types_names_them_all_or_what_briefing_lists(agent):
    """debrief steers what is remembered: every type, or a session's notes and events go
    unsaved. briefing asks for a summary of what its sections list, and for a thread names the
    other types as the ones its `note` counts: between them, every type, each in its place."""
    await ok(agent, "configure_thread", {"action": "create", "name": "all"})
    ids = []
    for memory_type in MemoryType.values:
        memory = {"memoryType": memory_type, "topic": memory_type, "content": f"a {memory_type}"}
        ids.append((await ok(agent, "remember", memory))["memory"]["id"])
    await ok(agent, "configure_thread", {"action": "add_members", "name": "all", "memoryIds": ids})
    arguments = {"selector": "thread", "value": "all", "detail": "full"}
    sections = (await ok(agent, "briefing", arguments))["sections"].values()
    listed = {item["memoryType"] for section in sections for item in section["items"]}
    assert listed and listed < set(MemoryType.values)

    debrief = (await get_prompt(agent, "debrief", None)).messages[0].content.text
    assert _types_named(debrief) == set(MemoryType.values)
    briefing = (await get_prompt(agent, "briefing", None)).messages[0].content.text
    assert _types_named(briefing) == listed
    of_thread = (await get_prompt(agent, "briefing", {"thread": "all"})).messages[0].content.text
    [unlisted] = re.findall(r"no section lists \(([^)]*)\)", of_thread)
    assert _types_named(unlisted) == set(MemoryType.values) - listed


async def test_debrief_prompt_quotes_a_project_as_json(agent):
    project = 'the "big" one'
    text = (await get_prompt(agent, "debrief", {"project": project})).messages[0].content.text
    assert 'Pass "project": "the \\"big\\" one" to every `remember` call.' in text


async def test_debrief_prompt_quotes_a_thread_as_json(agent):
    # Quoted by hand, "launch' and 'ops" would read as two threads.
    thread = "launch' and 'ops"
    await ok(agent, "configure_thread", {"action": "create", "name": thread})
    text = (await get_prompt(agent, "debrief", {"thread": thread})).messages[0].content.text
    assert '"name": "launch\' and \'ops"' in text


async def test_completion_takes_a_prefix_typed_decomposed(agent):
    project = "Caf\u00e9 Lumi\u00e8re"
    memory = {"memoryType": "note", "topic": "t", "content": "c", "project": project}
    await ok(agent, "remember", memory)
    for prefix in ("caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")):
        assert await complete_prompt_argument(agent, "briefing", "project", prefix) == [project]


@pytest.mark.parametrize("blank", ["", " ", "\t\n", "\u200b"], ids=repr)
@pytest.mark.parametrize(
    ("name", "argument"),
    [
        ("briefing", "scope"),
        ("briefing", "project"),
        ("briefing", "thread"),
        ("briefing", "mode"),
        ("debrief", "scope"),
        ("debrief", "project"),
        ("debrief", "thread"),
    ],
)
async def test_a_blank_prompt_argument_is_one_left_out(agent, name, argument, blank):
    """A prompt's arguments are strings, and a client's form sends a field left unfilled as
    one: empty or blank alike, the prompt reads as without it (as a tool reads a null), also
    beside the one focus given."""
    alone = await get_prompt(agent, name, {argument: blank})
    assert alone.messages == (await get_prompt(agent, name, {})).messages
    focus = "project" if argument != "project" else "thread"
    beside = await get_prompt(agent, name, {focus: "atlas", argument: blank})
    assert beside.messages == (await get_prompt(agent, name, {focus: "atlas"})).messages


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "debrief",
            {"scope": "Work Notes"},
            "invalid_input: scope: must be kebab-case: lowercase letters and digits separated by "
            "single hyphens",
        ),
        ("debrief", {"colour": "red"}, "invalid_input: colour: unknown argument"),
        # Named as the tools name an unknown field: cut with …, quoted when it would not show.
        ("debrief", {"c" * 65: "red"}, f"invalid_input: {'c' * 64}…: unknown argument"),
        ("debrief", {" ": "red"}, 'invalid_input: " ": unknown argument'),
        ("briefing", {"mode": "long"}, "invalid_input: mode: must be one of: brief, full"),
        ("briefing", {"scope": "a", "project": "b"}, "invalid_input: project: give at most one"),
        ("debrief", {"thread": "t" * 101}, "invalid_input: thread: must be at most 100"),
    ],
)
async def test_bad_prompt_arguments_are_invalid_params(agent, name, arguments, message):
    with pytest.raises(MCPError) as raised:
        await get_prompt(agent, name, arguments)
    assert raised.value.error.code == -32602
    assert raised.value.error.message.startswith(message)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "Unknown prompt: 'nope'"),
        ("brefing", "Unknown prompt: 'brefing'; did you mean 'briefing'?"),
        ("Debrief", "Unknown prompt: 'Debrief'; did you mean 'debrief'?"),
        ("p" * 65, f"Unknown prompt: '{'p' * 64}…'"),
    ],
)
async def test_an_unknown_prompt_is_named_as_an_unknown_tool_is(agent, name, message):
    """Quoted, cut at 64 characters, and with the prompt it slips from when one is near."""
    with pytest.raises(MCPError) as raised:
        await get_prompt(agent, name, {})
    assert raised.value.error.code == -32602
    assert raised.value.error.message == message


async def test_completion_offers_own_live_values_by_prefix(agent, other_agent):
    for scope, project in [("work", "atlas"), ("web", "apollo"), ("home", None)]:
        await ok(
            agent,
            "remember",
            {"memoryType": "note", "topic": "t", "content": f"{scope} note", "scope": scope}
            | ({"project": project} if project else {}),
        )
    await ok(
        other_agent,
        "remember",
        {
            "memoryType": "note",
            "topic": "t",
            "content": "x",
            "scope": "wonder",
            "project": "aardvark",
        },
    )
    await ok(agent, "configure_thread", {"action": "create", "name": "Launch"})
    await ok(agent, "configure_thread", {"action": "create", "name": "legal"})
    assert await complete_prompt_argument(agent, "debrief", "scope", "w") == ["web", "work"]
    assert await complete_prompt_argument(agent, "briefing", "scope", "") == ["home", "web", "work"]
    assert await complete_prompt_argument(agent, "briefing", "project", "A") == ["apollo", "atlas"]
    assert await complete_prompt_argument(agent, "debrief", "thread", "l") == ["Launch", "legal"]
    # In the order every thread listing has: by name in any case.
    for name in ("Zeta", "alpha"):
        await ok(agent, "configure_thread", {"action": "create", "name": name})
    assert await complete_prompt_argument(agent, "debrief", "thread", "") == [
        "alpha",
        "Launch",
        "legal",
        "Zeta",
    ]
    assert await complete_prompt_argument(agent, "briefing", "mode", "f") == ["full"]
    assert await complete_prompt_argument(agent, "briefing", "mode", "B") == ["brief"]


@pytest.mark.parametrize(
    ("prompt", "argument", "value", "message"),
    [
        # As prompts/get names them: an unknown prompt with the one it slips from, an argument
        # the prompt does not take.
        ("brefing", "scope", "", "Unknown prompt: 'brefing'; did you mean 'briefing'?"),
        ("nope", "scope", "", "Unknown prompt: 'nope'"),
        ("debrief", "mode", "", "invalid_input: mode: unknown argument"),
        ("briefing", "topic", "a", "invalid_input: topic: unknown argument"),
        # Text no value could be, and a value longer than any completed, named with the limit.
        (
            "briefing",
            "project",
            "a\ud800",
            "invalid_input: argument.value: must not contain lone surrogates (invalid Unicode) "
            "or U+FFFE",
        ),
        (
            "briefing",
            "project",
            "p" * 100_000,
            "invalid_input: argument.value: must be at most 256 characters (no value completed "
            "is longer); got 100000",
        ),
    ],
)
async def test_a_completion_no_value_could_answer_is_refused_naming_why(
    agent, prompt, argument, value, message
):
    with pytest.raises(MCPError) as raised:
        await complete_prompt_argument(agent, prompt, argument, value)
    assert (raised.value.error.code, raised.value.error.message) == (-32602, message)


async def test_completion_reads_one_past_the_100_sent_so_that_more_can_be_told(agent, owner):
    from asgiref.sync import sync_to_async

    from memories.models import Thread

    await sync_to_async(Thread.objects.bulk_create)(
        [Thread(owner=owner, name=f"thread {n:03}") for n in range(150)]
    )
    values = await complete_prompt_argument(agent, "debrief", "thread", "thr")
    assert len(values) == 101 and values[0] == "thread 000"


def test_the_modules_contract_says_completion_gives_one_past_the_most_sent():
    """The server module trims to COMPLETION_MAX and reads the one past it as hasMore: the
    contract it is written against says so, not that 100 is the most it gets."""
    contract = prompts.__doc__.split("complete_prompt_argument(", 1)[1].split("\n\n", 1)[0]
    assert "COMPLETION_MAX + 1" in contract
    assert "<= 100" not in contract


async def test_completion_matches_the_whole_prefix_however_long(agent):
    await ok(agent, "configure_thread", {"action": "create", "name": "x" * 100})
    project = "p" * 100 + "-alpha"
    await ok(
        agent,
        "remember",
        {"memoryType": "note", "topic": "t", "content": "c", "project": project},
    )
    assert await complete_prompt_argument(agent, "debrief", "thread", "x" * 100 + "y") == []
    assert await complete_prompt_argument(agent, "briefing", "project", "p" * 100 + "-b") == []
    assert await complete_prompt_argument(agent, "briefing", "project", "p" * 100) == [project]
    assert await complete_prompt_argument(agent, "briefing", "project", "p" * 256) == []


@pytest.mark.parametrize(
    ("prompt", "arguments", "name"),
    [
        ("debrief", {"project": "日本語プロジェクト"}, "日本語プロジェクト"),
        ("briefing", {"thread": "Ärger"}, "Ärger"),
        ("briefing", {"project": "café"}, "café"),
    ],
)
async def test_a_prompt_names_its_focus_as_written(agent, prompt, arguments, name):
    text = (await get_prompt(agent, prompt, arguments)).messages[0].content.text
    assert f'"{name}"' in text and "\\u" not in text


async def test_completion_gives_nothing_without_read_scope(owner):
    writer = principal_for(owner, {"memory:write"})
    await ok(
        writer, "remember", {"memoryType": "note", "topic": "t", "content": "c", "scope": "work"}
    )
    assert await complete_prompt_argument(writer, "debrief", "scope", "") == []
