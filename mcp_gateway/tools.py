"""MCP tools. Contract with the server module (mcp_gateway/server.py):

    tool_definitions() -> list[mcp_types.Tool]
    async call_tool(principal, name, arguments) -> mcp_types.CallToolResult

Each tool is a thin adapter: check the scope, validate the arguments against the published input
schema, call one `memories` service, and shape its result as `structuredContent` plus the same
JSON as a text block (for clients that predate structured output, MCP 2025-06-18 "Structured
Content"). Failures the caller can act on are tool errors (`isError: true`, MCP "Error Handling":
tool errors are reported in the result so the model can see and correct them) whose text starts
with a stable reason prefix.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from jsonschema import Draft202012Validator

from infra import dbfaults
from infra.observability import VERSION
from mcp_gateway import auth, schemas
from mcp_gateway.principal import Principal
from mcp_gateway.schemas import utc_datetime as _iso
from memories import environment, reading, replica, search, threads
from memories.bounds import text_problem_in
from memories.briefing import Briefing, Section, Selector
from memories.briefing import briefing as build_briefing
from memories.errors import DomainError
from memories.handoff import DEFAULT_ITEMS as HANDOFF_DEFAULT_ITEMS
from memories.handoff import handoff as build_handoff
from memories.models import Memory
from memories.services import archive_memory, resolve_commitment

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
    read_only: bool
    destructive: bool
    idempotent: bool
    handler: Handler


def _owner(principal: Principal):
    """The tenant as a reference by primary key, from the verified token only. Write services
    lock the account row and refuse a deactivated one themselves."""
    return get_user_model()(pk=principal.user_id)


def _memory_ref(memory: Memory) -> dict:
    return {
        "id": str(memory.id),
        "uri": memory.resource_uri,
        "memoryType": memory.memory_type,
        "topic": memory.topic,
        "status": str(memory.status),
        "commitmentStatus": memory.commitment_status and str(memory.commitment_status),
        "validTo": _iso(memory.valid_to),
    }


def _proposal(proposal: threads.Proposal) -> dict:
    return {
        "proposalId": str(proposal.id),
        "thread": proposal.thread,
        "memoryId": str(proposal.memory_id),
        "similarity": proposal.similarity,
    }


def _excerpt_item(item) -> dict:
    return {
        "id": str(item.id),
        "uri": item.resource_uri,
        "memoryType": item.memory_type,
        "topic": item.topic,
        "excerpt": item.excerpt,
        "truncated": item.truncated,
        "contentLength": item.content_length,
        "scope": item.scope,
        "project": item.project,
        "recordedAt": _iso(item.recorded_at),
        "commitmentStatus": item.commitment_status,
        "dueAt": _iso(item.due_at),
        "overdue": item.overdue,
    }


def _section(section: Section) -> dict:
    return {
        "count": section.count,
        "truncated": section.truncated,
        "items": [_excerpt_item(item) for item in section.items],
    }


def _selector(selector: Selector) -> dict:
    return {"kind": selector.kind, "value": selector.value}


def _thread(thread) -> dict:
    data = {"name": thread.name, "pinned": thread.pinned}
    if hasattr(thread, "member_count"):
        data |= {"memberCount": thread.member_count, "proposalCount": thread.proposal_count}
    return data


# --- handlers ------------------------------------------------------------------------------
# Sync services run in the request's thread-sensitive executor (asgiref): the gateway runs each
# MCP request in a ThreadSensitiveContext, so each call gets one DB connection thread.
_db = sync_to_async(lambda function, **kwargs: function(**kwargs), thread_sensitive=True)
# The same, for read-only services whose results may lag the client's own writes a little: on the
# read replica when one is configured (memories/replica.py).
_lag_tolerant_db = sync_to_async(
    lambda function, **kwargs: replica.tolerant_read(function, **kwargs), thread_sensitive=True
)


async def _remember(principal: Principal, args: dict) -> dict:
    memory, proposals = await _db(
        threads.remember_and_propose,
        owner=_owner(principal),
        memory_type=args["memoryType"],
        topic=args["topic"],
        content=args["content"],
        scope=args.get("scope"),
        project=args.get("project"),
        tags=args.get("tags"),
        due_at=args.get("dueAt"),
    )
    return {"memory": _memory_ref(memory), "proposals": [_proposal(p) for p in proposals]}


def _search_page(owner_id: int, args: dict) -> search.SearchPage:
    filters = search.clean_filters(
        memory_types=args.get("memoryTypes"),
        scope=args.get("scope"),
        project=args.get("project"),
        thread=args.get("thread"),
        status=args.get("status"),
        recorded_after=args.get("recordedAfter"),
        recorded_before=args.get("recordedBefore"),
        as_of=args.get("asOf"),
    )
    return search.search(
        owner_id=owner_id,
        query=args["query"],
        filters=filters,
        limit=args.get("limit", search.DEFAULT_LIMIT),
        cursor=args.get("cursor"),
    )


async def _search(principal: Principal, args: dict) -> dict:
    page = await _lag_tolerant_db(_search_page, owner_id=principal.user_id, args=args)
    hits = [
        _excerpt_item(hit)
        | {
            "score": hit.score,
            "matchedBy": list(hit.matched_by),
            "status": hit.status,
            "validTo": _iso(hit.valid_to),
        }
        for hit in page.hits
    ]
    return {
        "hits": hits,
        "count": len(hits),
        "hasMore": page.next_cursor is not None,
        "nextCursor": page.next_cursor,
    }


async def _get_memories(principal: Principal, args: dict) -> dict:
    batch = await reading.read_memories(
        owner_id=principal.user_id,
        ids=args["ids"],
        budget=args.get("maxChars", reading.DEFAULT_BUDGET),
    )
    memories = [
        {
            "id": str(m.id),
            "uri": m.resource_uri,
            "memoryType": m.memory_type,
            "topic": m.topic,
            "content": m.content,
            "contentWithheld": m.content is None,
            "contentLength": m.content_length,
            "scope": m.scope,
            "project": m.project,
            "tags": m.tags,
            "recordedAt": _iso(m.recorded_at),
            "status": m.status,
            "validTo": _iso(m.valid_to),
            "commitmentStatus": m.commitment_status,
            "dueAt": _iso(m.due_at),
            "predecessorId": str(m.predecessor_id) if m.predecessor_id else None,
            "successorId": str(m.successor_id) if m.successor_id else None,
        }
        for m in batch.memories
    ]
    note = None
    if batch.withheld:
        note = (
            f"{len(batch.withheld)} bod{'y' if len(batch.withheld) == 1 else 'ies'} withheld: "
            "the maxChars budget of this call was spent. Fetch them in another get_memories "
            "call or read their threengram://memory/{id} resource."
        )
    return {
        "memories": memories,
        "count": len(memories),
        "notFound": batch.not_found,
        "withheldForBudget": [str(memory_id) for memory_id in batch.withheld],
        "note": note,
    }


async def _revise(principal: Principal, args: dict) -> dict:
    optional = {
        "memory_type": "memoryType",
        "topic": "topic",
        "scope": "scope",
        "project": "project",
        "tags": "tags",
        "due_at": "dueAt",
    }
    memory = await _db(
        threads.revise_and_inherit,
        owner=_owner(principal),
        predecessor_id=args["predecessorId"],
        content=args["content"],
        **{kwarg: args[key] for kwarg, key in optional.items() if key in args},
    )
    return {"memory": _memory_ref(memory), "predecessorId": str(memory.predecessor_id)}


async def _archive(principal: Principal, args: dict) -> dict:
    memory = await _db(archive_memory, owner=_owner(principal), memory_id=args["memoryId"])
    return {"memory": _memory_ref(memory)}


async def _resolve(principal: Principal, args: dict) -> dict:
    memory = await _db(
        resolve_commitment,
        owner=_owner(principal),
        memory_id=args["memoryId"],
        status=args["status"],
    )
    return {"memory": _memory_ref(memory)}


async def _briefing(principal: Principal, args: dict) -> dict:
    result: Briefing = await _lag_tolerant_db(
        build_briefing,
        owner_id=principal.user_id,
        selector=Selector.clean(args.get("selector"), args.get("value")),
        mode=args.get("mode", "brief"),
    )
    return {
        "selector": _selector(result.selector),
        "mode": result.mode,
        "generatedAt": _iso(result.generated_at),
        "sections": {name: _section(section) for name, section in result.sections.items()},
        "pinnedThreads": {
            "count": result.pinned_thread_count,
            "truncated": result.pinned_thread_count > len(result.pinned_threads),
            "items": [
                {"name": t.name, "pinned": True, "memberCount": t.member_count, "proposalCount": 0}
                for t in result.pinned_threads
            ],
        },
    }


async def _handoff(principal: Principal, args: dict) -> dict:
    result = await _lag_tolerant_db(
        build_handoff,
        owner_id=principal.user_id,
        selector=Selector.clean(args.get("selector"), args.get("value")),
        section_limit=args.get("sectionLimit", HANDOFF_DEFAULT_ITEMS),
        generated_for=args.get("generatedFor"),
    )
    return {
        "selector": _selector(result.selector),
        "generatedFor": result.generated_for,
        "generatedAt": _iso(result.generated_at),
        "sections": {name: _section(section) for name, section in result.sections.items()},
    }


def _configure_thread_sync(principal: Principal, args: dict) -> dict:
    owner = _owner(principal)
    action = args["action"]
    if action == "list":
        return {
            "action": action,
            "threads": [_thread(t) for t in threads.list_threads(owner=owner)],
            "proposals": [_proposal(p) for p in threads.open_proposals(owner=owner)],
        }
    if action in ("accept_proposal", "reject_proposal"):
        _require(args, action, "proposalId")
        membership = threads.decide_proposal(
            owner=owner, proposal_id=args["proposalId"], accept=action == "accept_proposal"
        )
        return {
            "action": action,
            "proposal": {
                "proposalId": str(membership.id),
                "thread": membership.thread.name,
                "memoryId": str(membership.memory_id),
                "similarity": membership.similarity,
                "state": membership.state,
            },
        }
    _require(args, action, "name")
    name = args["name"]
    if action == "create":
        thread = threads.create_thread(owner=owner, name=name)
    elif action == "rename":
        _require(args, action, "newName")
        thread = threads.rename_thread(owner=owner, name=name, new_name=args["newName"])
    elif action in ("pin", "unpin"):
        thread = threads.set_pinned(owner=owner, name=name, pinned=action == "pin")
    else:
        _require(args, action, "memoryIds")
        change = threads.add_members if action == "add_members" else threads.remove_members
        thread = change(owner=owner, name=name, memory_ids=args["memoryIds"])
    return {"action": action, "thread": _thread(thread)}


def _require(args: dict, action: str, key: str) -> None:
    if key not in args:
        raise _InvalidArguments(f"{key}: is required for action '{action}'")


async def _configure_thread(principal: Principal, args: dict) -> dict:
    return await _db(_configure_thread_sync, principal=principal, args=args)


async def _describe_environment(principal: Principal, args: dict) -> dict:
    stats = await _lag_tolerant_db(environment.environment_stats, owner_id=principal.user_id)
    thread_list = await _lag_tolerant_db(threads.list_threads, owner=_owner(principal))
    return {
        "server": {"name": "threengram", "version": VERSION},
        "tools": [spec.name for spec in TOOLS],
        "scopes": sorted(principal.scopes),
        "memoryScopes": stats.scopes,
        "projects": {"count": stats.projects_total, "names": stats.projects},
        "threads": [_thread(t) for t in thread_list],
        "memoriesByType": stats.current_by_type,
        "memoriesByStatus": stats.by_status,
        "commitmentsByStatus": stats.commitments_by_status,
    }


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
        read_only=False,
        destructive=False,
        idempotent=False,
        handler=_remember,
    ),
    ToolSpec(
        name="search",
        title="Search memories",
        description=(
            "Find and look up stored memories about some words or a topic, to answer "
            "questions like 'what did we decide about X' or 'anything about Y'. Ask in natural "
            "language, in your own words: memories matching any of the words or close in "
            'meaning rank first ("quoted phrase" and -exclude narrow; fuzzy topic matching '
            "catches typos). No hits means nothing relevant is stored. Each hit says how it "
            "matched (matchedBy). Filters: memoryTypes, scope, project, thread, status, "
            "recordedAfter, recordedBefore, asOf (as it stood at a past date). Hits are short "
            "excerpts; page with nextCursor."
        ),
        input_schema=schemas.SEARCH_IN,
        output_schema=schemas.SEARCH_OUT,
        scope="read",
        read_only=True,
        destructive=False,
        idempotent=True,
        handler=_search,
    ),
    ToolSpec(
        name="get_memories",
        title="Get memories by id",
        description=(
            "Read the complete, whole text of memories by id (1-20 ids you already have, e.g. "
            "from hits whose excerpt was cut off), with lifecycle state: status, validTo, "
            "commitmentStatus, tags, predecessor and successor ids. Ids unknown or not yours "
            "come back in notFound; bodies share a maxChars budget per call."
        ),
        input_schema=schemas.GET_MEMORIES_IN,
        output_schema=schemas.GET_MEMORIES_OUT,
        scope="read",
        read_only=True,
        destructive=False,
        idempotent=True,
        handler=_get_memories,
    ),
    ToolSpec(
        name="revise",
        title="Revise a memory",
        description=(
            "Correct or update an existing memory that is wrong or outdated (amend, fix, "
            "replace its text): writes a successor with a new id and closes the old one, so "
            "history is kept. Omitted fields carry over."
        ),
        input_schema=schemas.REVISE_IN,
        output_schema=schemas.REVISE_OUT,
        scope="write",
        read_only=False,
        destructive=False,
        idempotent=False,
        handler=_revise,
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
        read_only=False,
        destructive=False,
        idempotent=True,
        handler=_archive,
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
        read_only=False,
        destructive=False,
        idempotent=True,
        handler=_resolve,
    ),
    ToolSpec(
        name="briefing",
        title="Session briefing",
        description=(
            "Orient at the start of a session or day, before working: an overview that catches "
            "you up on open and overdue commitments, blockers, recent decisions, preferences and "
            "pinned threads, with exact counts and short excerpts. For everything or one scope, "
            "project or thread; mode brief (3 per section) or full (10)."
        ),
        input_schema=schemas.BRIEFING_IN,
        output_schema=schemas.BRIEFING_OUT,
        scope="read",
        read_only=True,
        destructive=False,
        idempotent=True,
        handler=_briefing,
    ),
    ToolSpec(
        name="handoff",
        title="Handoff package",
        description=(
            "Wrap up when you stop or delegate: bundle a handover package to pass on to "
            "another agent, a colleague or whoever continues tomorrow, with decisions, "
            "commitments, blockers and preferences as 600-character excerpts and a truncated "
            "flag per section."
        ),
        input_schema=schemas.HANDOFF_IN,
        output_schema=schemas.HANDOFF_OUT,
        scope="read",
        read_only=True,
        destructive=False,
        idempotent=True,
        handler=_handoff,
    ),
    ToolSpec(
        name="configure_thread",
        title="Configure threads",
        description=(
            "Organise threads, named groups of related memories: list threads and pending "
            "proposals, create, rename, pin or unpin (pinned threads show in briefing), add "
            "memories to a group or take them out, and accept or reject a proposal. The server "
            "only proposes; nothing joins a thread until you add or accept it."
        ),
        input_schema=schemas.CONFIGURE_THREAD_IN,
        output_schema=schemas.CONFIGURE_THREAD_OUT,
        scope="write",
        read_only=False,
        destructive=True,  # remove_members takes memories out of a curated thread
        idempotent=False,
        handler=_configure_thread,
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
        read_only=True,
        destructive=False,
        idempotent=True,
        handler=_describe_environment,
    ),
]
_BY_NAME = {spec.name: spec for spec in TOOLS}
_VALIDATORS = {spec.name: Draft202012Validator(spec.input_schema) for spec in TOOLS}


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


class _InvalidArguments(Exception):
    """Arguments that fail the published input schema."""


def _schema_error(spec: ToolSpec, arguments: dict) -> str | None:
    """The first schema violation, phrased as '<field>: <what is wrong, with the limit>'."""
    errors = sorted(
        _VALIDATORS[spec.name].iter_errors(arguments), key=lambda e: (len(e.path), list(e.path))
    )
    if not errors:
        return None
    error = errors[0]
    path = ".".join(str(part) for part in error.path)
    field = path or "arguments"
    limit = error.validator_value
    match error.validator:
        case "additionalProperties":
            allowed = set(error.schema.get("properties", {}))
            unknown = sorted(key for key in error.instance if key not in allowed)
            prefix = f"{path}." if path else ""
            return f"{prefix}{unknown[0]}: unknown field"
        case "required":
            missing = [key for key in limit if key not in error.instance]
            return f"{missing[0]}: is required"
        case "maxLength":
            return f"{field}: must be at most {limit} characters; got {len(error.instance)}"
        case "minLength":
            return f"{field}: must be at least {limit} character(s)"
        case "maxItems":
            return f"{field}: at most {limit} items; got {len(error.instance)}"
        case "minItems":
            return f"{field}: at least {limit} item(s)"
        case "maximum":
            return f"{field}: must be at most {limit}; got {error.instance}"
        case "minimum":
            return f"{field}: must be at least {limit}; got {error.instance}"
        case "enum":
            return f"{field}: must be one of: {', '.join(map(str, limit))}"
        case "pattern":
            return f"{field}: must match the pattern {limit}"
        case "type":
            return f"{field}: must be of type {limit}"
        case "uniqueItems":
            return f"{field}: items must be unique"
        case _:
            return f"{field}: {error.validator} {limit} not satisfied"


def _result(data: dict) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
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
        return _error(f"not_found: unknown tool {name[:64]!r}")
    scope = settings.MEMORY_READ_SCOPE if spec.scope == "read" else settings.MEMORY_WRITE_SCOPE
    # configure_thread's `list` only reads; every other action writes.
    if spec.name == "configure_thread" and (arguments or {}).get("action") == "list":
        scope = settings.MEMORY_READ_SCOPE
    if not principal.can(scope):
        auth.note_insufficient_scope(scope)
        return _error(f"insufficient_scope: this tool needs the {scope} scope")
    arguments = arguments if arguments is not None else {}
    if not isinstance(arguments, dict):
        return _error("invalid_input: arguments: must be an object")
    # One walk over every string, however deeply nested, before any handler: PostgreSQL refuses
    # NUL and lone surrogates anywhere in a statement, whichever field carries them.
    problem = text_problem_in(arguments) or _schema_error(spec, arguments)
    if problem is not None:
        return _error(f"invalid_input: {problem}")
    try:
        return _result(await spec.handler(principal, arguments))
    except DomainError as error:
        return _error(str(error))
    except _InvalidArguments as error:
        return _error(f"invalid_input: {error}")
    except Exception as error:
        if dbfaults.is_unavailable(error):
            raise  # a retryable protocol error (503), not a tool failure: mcp_gateway.server
        # Type only: an exception's message can quote stored content (e.g. a constraint DETAIL).
        logger.error("tool %s failed: %s", spec.name, type(error).__name__)
        return _error("internal_error: the server could not complete this call; try again")
