"""MCP tools: the catalogue and the one entry point. Contract with the server module
(mcp_gateway/server.py):

    tool_definitions() -> list[mcp_types.Tool]
    async call_tool(principal, name, arguments) -> mcp_types.CallToolResult

`call_tool` checks the scope, reads and validates the arguments against the published input
schema (mcp_gateway.arguments, which also words the refusal), then hands them to the tool's
handler (mcp_gateway.handlers: thin calls of `memories` services, shaped by
mcp_gateway.serializers), and returns the result as `structuredContent` plus the same
JSON as a text block (for clients that predate structured output, MCP 2025-06-18 "Structured
Content"). Failures the caller can act on are tool errors (`isError: true`, MCP "Error Handling":
tool errors are reported in the result so the model can see and correct them) whose text starts
with a stable reason prefix; a token without the tool's scope is the one exception, a JSON-RPC
error of the same form (its reply is HTTP 403, whose body clients read only as one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mcp_types as types
from django.conf import settings
from mcp.shared.exceptions import MCPError

from infra import dbfaults
from mcp_gateway import auth, handlers, schemas
from mcp_gateway.arguments import as_clients_mean, schema_error
from mcp_gateway.handlers import InvalidArguments
from mcp_gateway.names import unknown_name
from mcp_gateway.principal import Principal
from mcp_gateway.thread_actions import THREAD_ACTION_HANDLERS
from memories import briefing, handoff
from memories.bounds import text_problem_in
from memories.errors import DomainError
from memories.excerpts import EXCERPT_MAX

logger = logging.getLogger(__name__)


Handler = Callable[[Principal, dict], Awaitable[dict]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict
    output_schema: dict
    scope: str  # "read" or "write": the settings scope it needs
    destructive: bool
    idempotent: bool
    handler: Handler
    # Values of the `action` argument that only read: they need the read scope alone.
    reading_actions: frozenset[str] = frozenset()

    @property
    def read_only(self) -> bool:
        # A tool that needs only the read scope cannot write: the hint follows from the scope.
        return self.scope == "read"


def _describe_environment(principal: Principal, args: dict) -> Awaitable[dict]:
    # The handler lists this catalogue, which it cannot import (the catalogue imports it).
    return handlers.describe_environment(principal, args, tool_names=_TOOL_NAMES)


# --- catalogue -----------------------------------------------------------------------------

TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="remember",
        title="Remember",
        description=(
            "Save, store or record something new worth keeping for later sessions as one "
            "memory: what was "
            "decided, a promise or to-do (commitment, optional dueAt deadline), what blocks the "
            "work, a fact, a preference, a pattern, a note or an event. Returns the new id and "
            "its threengram://memory/{id} URI, plus any thread proposals. To change an existing "
            "memory use revise; to mark a to-do done use resolve."
        ),
        input_schema=schemas.REMEMBER_IN,
        output_schema=schemas.REMEMBER_OUT,
        scope="write",
        destructive=False,
        idempotent=False,
        handler=handlers.remember,
    ),
    ToolSpec(
        name="search",
        title="Search memories",
        description=(
            "Find and look up stored memories about some words or a topic, to answer "
            "questions like 'what did we decide about X' or 'anything about Y'. Ask in natural "
            "language, in your own words: memories matching any of the words or close in "
            'meaning rank first ("quoted phrase" and -exclude narrow; fuzzy topic matching '
            "catches typos). No hits comes with a note saying why (only stop words, none "
            "matched well enough, archived ones not searched) and how to ask again. Each hit "
            "says how it matched (matchedBy). A memory's type is not among its words: for "
            "'what blocks X' filter memoryTypes to blocker (briefing lists what is open). "
            "Filters: memoryTypes, commitmentStatus, scope, project, thread, status, "
            "recordedAfter, recordedBefore, asOf (each memory's version as it stood at a past "
            "date). Without a query, lists what the filters select, newest first (a page "
            "may be short: follow nextCursor while hasMore). Hits are short excerpts; page with "
            "nextCursor."
        ),
        input_schema=schemas.SEARCH_IN,
        output_schema=schemas.SEARCH_OUT,
        scope="read",
        destructive=False,
        idempotent=True,
        handler=handlers.search_memories,
    ),
    ToolSpec(
        name="get_memories",
        title="Get memories by id",
        description=(
            "Read the complete, whole text of memories by id (1-20 ids you already have, e.g. "
            "from hits whose excerpt was cut off), with lifecycle state: status (active or "
            "archived), current, validTo, commitmentStatus, tags, predecessor and successor ids "
            "(current false: it was revised, its successor is in force). Ids unknown or not yours "
            "come back in "
            "notFound; bodies share a maxChars budget per call."
        ),
        input_schema=schemas.GET_MEMORIES_IN,
        output_schema=schemas.GET_MEMORIES_OUT,
        scope="read",
        destructive=False,
        idempotent=True,
        handler=handlers.get_memories,
    ),
    ToolSpec(
        name="revise",
        title="Revise a memory",
        description=(
            "Correct or update an existing memory that is wrong or outdated (amend, fix, "
            "replace its text): writes a successor with a new id and closes the old one, so "
            "history is kept. Omitted (or null) fields carry over, content too (send only what "
            "changes); to drop a deadline, project or tags, name them in clear. Returns the new "
            "id, plus thread proposals when the topic or project changed."
        ),
        input_schema=schemas.REVISE_IN,
        output_schema=schemas.REVISE_OUT,
        scope="write",
        destructive=False,
        idempotent=False,
        handler=handlers.revise,
    ),
    ToolSpec(
        name="archive",
        title="Archive a memory",
        description=(
            "Retire a memory that is obsolete, stale or irrelevant now, with nothing to replace "
            "it. It stays readable by id but is hidden from default search and briefing. "
            "Archiving twice is harmless."
        ),
        input_schema=schemas.ARCHIVE_IN,
        output_schema=schemas.ARCHIVE_OUT,
        scope="write",
        destructive=False,
        idempotent=True,
        handler=handlers.archive,
    ),
    ToolSpec(
        name="resolve",
        title="Resolve a commitment",
        description=(
            "Mark a commitment (promise, to-do, task) done or change its state: finished -> "
            "resolved, blocked waiting on someone -> waiting, no longer needed -> expired, not "
            "finished after all -> open. An illegal move is an invalid_transition error."
        ),
        input_schema=schemas.RESOLVE_IN,
        output_schema=schemas.RESOLVE_OUT,
        scope="write",
        destructive=False,
        idempotent=True,
        handler=handlers.resolve,
    ),
    ToolSpec(
        name="briefing",
        title="Session briefing",
        description=(
            "Orient at the start of a session or day, before working: an overview that catches "
            "you up on open and overdue commitments, blockers, recent decisions, preferences and "
            "pinned threads, with exact counts and short excerpts. For everything or one scope, "
            f"project or thread; mode brief ({briefing.ITEMS['brief']} per section) or full "
            f"({briefing.ITEMS['full']})."
        ),
        input_schema=schemas.BRIEFING_IN,
        output_schema=schemas.BRIEFING_OUT,
        scope="read",
        destructive=False,
        idempotent=True,
        handler=handlers.briefing,
    ),
    ToolSpec(
        name="handoff",
        title="Handoff package",
        description=(
            "Wrap up when you stop or delegate: bundle a handover package to pass on to "
            "another agent, a colleague or whoever continues tomorrow, with decisions, open "
            f"commitments and those resolved in the last {handoff.RECENTLY_RESOLVED_DAYS} days, "
            f"blockers, preferences and current facts as {EXCERPT_MAX}-character "
            "excerpts and a truncated "
            "flag per section, and the pinned threads."
        ),
        input_schema=schemas.HANDOFF_IN,
        output_schema=schemas.HANDOFF_OUT,
        scope="read",
        destructive=False,
        idempotent=True,
        handler=handlers.handoff,
    ),
    ToolSpec(
        name="configure_thread",
        title="Configure threads",
        description=(
            "Organise threads, named groups of related memories: list threads and pending "
            "proposals, create, rename, pin or unpin (pinned threads show in briefing and "
            "handoff), delete (the group goes, its memories stay), add memories to a group or "
            "take them out, and accept or reject a proposal. The server only proposes; nothing "
            "joins a thread until you add or accept it."
        ),
        input_schema=schemas.CONFIGURE_THREAD_IN,
        output_schema=schemas.CONFIGURE_THREAD_OUT,
        scope="write",
        destructive=True,  # delete and remove_members undo curation
        idempotent=False,
        handler=handlers.configure_thread,
        reading_actions=frozenset(
            action for action, how in THREAD_ACTION_HANDLERS.items() if how.reads_only
        ),
    ),
    ToolSpec(
        name="describe_environment",
        title="Describe environment",
        description=(
            "Describe this server and your account: which tools are available and the server "
            "version, what permissions your token has (can you write?), how many memories you "
            "have of each type and status, and lists of your projects, scopes and threads. "
            "Reads no memory content."
        ),
        input_schema=schemas.DESCRIBE_IN,
        output_schema=schemas.DESCRIBE_OUT,
        scope="read",
        destructive=False,
        idempotent=True,
        handler=_describe_environment,
    ),
]
_BY_NAME = {spec.name: spec for spec in TOOLS}
TOOL_NAMES = frozenset(_BY_NAME)
_TOOL_NAMES = tuple(_BY_NAME)


def _definition(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


# Built once: the server asks for the catalogue (and each tool's input schema) on every call.
_DEFINITIONS = tuple(_definition(spec) for spec in TOOLS)


def tool_definitions() -> list[types.Tool]:
    return list(_DEFINITIONS)


def _result(data: dict) -> types.CallToolResult:
    # Without the default separators' spaces: many clients put this text, not the structured
    # copy, before their model, whose context every character costs.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=data,
        is_error=False,
    )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


async def call_tool(
    principal: Principal, name: str, arguments: dict | None
) -> types.CallToolResult:
    spec = _BY_NAME.get(name)
    if spec is None:
        # A protocol error, not a tool result (MCP tools, "Error Handling": an unknown tool is
        # Invalid Params): there is no tool whose input the model could correct.
        raise MCPError(code=types.INVALID_PARAMS, message=unknown_name("tool", name, _TOOL_NAMES))
    scope = settings.MEMORY_READ_SCOPE if spec.scope == "read" else settings.MEMORY_WRITE_SCOPE
    action = arguments.get("action") if isinstance(arguments, dict) else None
    if isinstance(action, str) and action in spec.reading_actions:
        scope = settings.MEMORY_READ_SCOPE
    if not principal.can(scope):
        auth.note_insufficient_scope(scope)
        # A JSON-RPC error, not a tool result: the reply is HTTP 403 (the step-up challenge), and
        # MCP clients read the body of a non-2xx reply only as a JSON-RPC error (the Python SDK
        # answers any other body "Server returned an error response", naming no scope).
        raise MCPError(
            code=types.INVALID_REQUEST,
            message=f"insufficient_scope: this tool needs the {scope} scope",
        )
    arguments = arguments if arguments is not None else {}
    if not isinstance(arguments, dict):
        return _error("invalid_input: arguments: must be an object")
    arguments = as_clients_mean(spec, arguments)
    # One walk over every string, however deeply nested, before any handler: PostgreSQL refuses
    # NUL and lone surrogates anywhere in a statement, whichever field carries them (a list sent
    # as JSON text may carry them escaped, so after decoding it).
    problem = text_problem_in(arguments) or schema_error(spec, arguments)
    if problem is not None:
        return _error(f"invalid_input: {problem}")
    try:
        return _result(await spec.handler(principal, arguments))
    except DomainError as error:
        return _error(str(error))
    except InvalidArguments as error:
        return _error(f"invalid_input: {error}")
    except Exception as error:
        if dbfaults.is_unavailable(error):
            raise  # a retryable protocol error (503), not a tool failure: mcp_gateway.server
        # Type only: an exception's message can quote stored content (e.g. a constraint DETAIL).
        logger.error("tool %s failed: %s", spec.name, type(error).__name__)
        return _error("internal_error: the server could not complete this call; try again")
