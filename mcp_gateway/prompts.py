"""MCP prompts. Contract with the server module (mcp_gateway/server.py):

    prompt_definitions() -> list[mcp_types.Prompt]
    async get_prompt(principal, name, arguments) -> mcp_types.GetPromptResult
    async complete_prompt_argument(principal, prompt, argument, prefix) -> list[str]
        at most COMPLETION_MAX + 1 (memories.environment): one past the most a response lists,
        so that server.complete, which trims to COMPLETION_MAX, can tell hasMore

Prompts are user-chosen templates (MCP "Prompts": user-controlled), so they only render text that
steers the agent to the right tools; they read no memories. Completion of their scope, project
and thread arguments does read the tenant's own live data, so it needs memory:read and returns
nothing without it.
"""

from __future__ import annotations

import json

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.shared.exceptions import MCPError

from mcp_gateway import completion
from mcp_gateway.names import unknown_name
from mcp_gateway.principal import Principal
from memories import bounds
from memories.briefing import MODES, Selector
from memories.environment import FACETS, facet_values
from memories.errors import InvalidInput

_FOCUS = [
    types.PromptArgument(
        name="scope", description="Limit to one scope (kebab-case).", required=False
    ),
    types.PromptArgument(name="project", description="Limit to one project.", required=False),
    types.PromptArgument(name="thread", description="Limit to one thread.", required=False),
]
PROMPTS = [
    types.Prompt(
        name="briefing",
        title="Session briefing",
        description=(
            "Start a session oriented: the agent calls the briefing tool (optionally for one "
            "scope, project or thread) and summarises overdue and open commitments, blockers, "
            "recent decisions and preferences."
        ),
        arguments=[
            *_FOCUS,
            types.PromptArgument(
                name="mode", description="brief (default) or full.", required=False
            ),
        ],
    ),
    types.Prompt(
        name="debrief",
        title="Session debrief",
        description=(
            "End a session cleanly: the agent stores what was decided, promised, learned or "
            "blocked, revises outdated memories and resolves finished commitments."
        ),
        arguments=list(_FOCUS),
    ),
]
_ARGUMENTS = {prompt.name: {arg.name for arg in prompt.arguments or []} for prompt in PROMPTS}


def prompt_definitions() -> list[types.Prompt]:
    return list(PROMPTS)


def _given(arguments: dict[str, str], name: str) -> str | None:
    """The argument `name` as sent, or None when it is left out or blank. A prompt's arguments
    are all strings, and a client's form sends a field left unfilled (or holding a space) as
    text: for a prompt that is what null is for a tool, the argument left out."""
    value = arguments.get(name)
    if isinstance(value, str) and not bounds.trimmed(value):
        return None
    return value


def _focus(arguments: dict[str, str]) -> tuple[str, str | None]:
    """The (selector, value) the arguments name: at most one of scope, project, thread."""
    given = [(kind, value) for kind in FACETS if (value := _given(arguments, kind)) is not None]
    if len(given) > 1:
        raise InvalidInput(given[1][0], "give at most one of scope, project and thread")
    if not given:
        return "all", None
    kind, value = given[0]
    selector = Selector.clean(kind, value, field=kind)
    return selector.kind, selector.value


def _as_json(value: dict) -> str:
    """As JSON, with names as the person wrote them (not as \\u escapes): the text is read."""
    return json.dumps(value, ensure_ascii=False)


def _briefing_text(arguments: dict[str, str]) -> str:
    selector, value = _focus(arguments)
    mode = _given(arguments, "mode") or "brief"
    if mode not in MODES:
        raise InvalidInput("mode", f"must be one of: {', '.join(MODES)}")
    call = _as_json({"selector": selector, "mode": mode} | ({"value": value} if value else {}))
    focus = f" for {selector} '{value}'" if value else ""
    members = ""
    if selector == "thread":
        # A thread often gathers an investigation's notes, which no briefing section lists.
        listing = _as_json({"thread": value, "limit": 25})
        members = (
            " If the briefing has a `note`, the thread holds memories no section lists (facts, "
            f"patterns, notes, events): list them with `search` and {listing}, and say where "
            "the work they record stands."
        )
    return (
        f"Start this session by calling the `briefing` tool with {call}{focus}.\n"
        "Then tell me, briefly: overdue and open commitments (with due dates), current blockers, "
        "recent decisions I should keep in mind, and preferences that affect how you work."
        f"{members} "
        "Use `get_memories` only when an excerpt is marked truncated and you need the full text."
    )


def _debrief_text(arguments: dict[str, str]) -> str:
    selector, value = _focus(arguments)
    where = ""
    if selector in ("scope", "project"):
        # As JSON, so that a value holding quotes still reads as one argument.
        where = f" Pass {_as_json({selector: value})[1:-1]} to every `remember` call."
    elif selector == "thread":
        arguments = _as_json({"action": "add_members", "name": value})[1:-1]
        where = f" Then add the new memories to the thread with `configure_thread` ({arguments})."
    return (
        "Before we stop, save what this session produced so the next one can pick it up.\n"
        "1. `search` first, so you do not store what is already there.\n"
        "2. `remember` each new decision, commitment (with dueAt when there is a deadline), "
        "blocker, fact, preference, pattern, note or event as its own short memory with a clear "
        "topic."
        f"{where}\n"
        "3. `revise` memories this session made outdated; `archive` ones that no longer matter.\n"
        "4. `resolve` commitments that were finished (resolved) or are waiting on someone.\n"
        "5. Accept or reject thread proposals returned by `remember` and `revise` with "
        "`configure_thread`."
    )


_RENDER = {"briefing": _briefing_text, "debrief": _debrief_text}


async def get_prompt(
    principal: Principal, name: str, arguments: dict | None
) -> types.GetPromptResult:
    render = _RENDER.get(name)
    if render is None:
        raise MCPError(code=types.INVALID_PARAMS, message=unknown_name("prompt", name, _RENDER))
    arguments = arguments or {}
    unknown = sorted(set(arguments) - _ARGUMENTS[name])
    if unknown:
        shown = bounds.shown_field_name(unknown[0])
        raise MCPError(
            code=types.INVALID_PARAMS, message=f"invalid_input: {shown}: unknown argument"
        )
    try:
        text = render(arguments)
    except InvalidInput as error:
        raise MCPError(code=types.INVALID_PARAMS, message=str(error)) from None
    prompt = next(p for p in PROMPTS if p.name == name)
    return types.GetPromptResult(
        description=prompt.description,
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
    )


async def complete_prompt_argument(
    principal: Principal, prompt: str, argument: str, prefix: str
) -> list[str]:
    """Values for a prompt argument from the tenant's own live data, prefix-matched (at most
    COMPLETION_MAX + 1, see facet_values). An unknown prompt or argument, and a value no text
    could be or longer than any completed, are -32602 naming it, as on prompts/get."""
    completion.refuse_unreadable({"ref.name": prompt}, argument, prefix)
    if prompt not in _RENDER:
        raise completion.invalid_params(unknown_name("prompt", prompt, _RENDER))
    if argument not in _ARGUMENTS[prompt]:
        completion.refuse_unknown_argument(argument)
    if not principal.can(settings.MEMORY_READ_SCOPE):
        return []
    prefix = prefix or ""
    if argument == "mode":
        return [mode for mode in MODES if mode.startswith(prefix.casefold())]
    return await sync_to_async(facet_values, thread_sensitive=True)(
        owner_id=principal.user_id, facet=argument, prefix=prefix
    )
