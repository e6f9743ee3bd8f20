"""MCP tools: the catalogue and the one entry point. Contract with the server module
(mcp_gateway/server.py):

    tool_definitions() -> list[mcp_types.Tool]
    async call_tool(principal, name, arguments) -> mcp_types.CallToolResult

`call_tool` checks the scope and validates the arguments against the published input schema,
then hands them to the tool's handler (mcp_gateway.handlers: thin calls of `memories` services,
shaped by mcp_gateway.serializers), and returns the result as `structuredContent` plus the same
JSON as a text block (for clients that predate structured output, MCP 2025-06-18 "Structured
Content"). Failures the caller can act on are tool errors (`isError: true`, MCP "Error Handling":
tool errors are reported in the result so the model can see and correct them) whose text starts
with a stable reason prefix; a token without the tool's scope is the one exception, a JSON-RPC
error of the same form (its reply is HTTP 403, whose body clients read only as one).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import mcp_types as types
from django.conf import settings
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from infra import dbfaults
from mcp_gateway import auth, handlers, schemas
from mcp_gateway.handlers import InvalidArguments
from mcp_gateway.names import slipped_from, unknown_name
from mcp_gateway.principal import Principal
from memories import bounds, briefing, handoff, search
from memories.bounds import text_problem_in
from memories.briefing import SELECTOR_KINDS
from memories.errors import DomainError, did_you_mean
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
    read_only: bool
    destructive: bool
    idempotent: bool
    handler: Handler
    # Values of the `action` argument that only read: they need the read scope alone.
    reading_actions: frozenset[str] = frozenset()


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
        read_only=False,
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
        read_only=True,
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
        read_only=True,
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
        read_only=False,
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
        read_only=False,
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
        read_only=False,
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
        read_only=True,
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
        read_only=True,
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
        read_only=False,
        destructive=True,  # delete and remove_members undo curation
        idempotent=False,
        handler=handlers.configure_thread,
        reading_actions=frozenset({"list"}),
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
TOOL_NAMES = frozenset(_BY_NAME)
_TOOL_NAMES = tuple(_BY_NAME)
_VALIDATORS = {spec.name: Draft202012Validator(spec.input_schema) for spec in TOOLS}
_ARGUMENT_TYPES = {
    spec.name: {
        name: schema.get("type") for name, schema in spec.input_schema["properties"].items()
    }
    for spec in TOOLS
}
# ASCII whitespace only: Unicode's \s also takes the separators U+001C..U+001F, which int() refuses.
# Any number of digits: one past an integer field's range is refused by the range, as the same
# number sent as a JSON number is, not as no number at all. Leading zeros apart, at most as many
# as int() reads (sys.int_info.default_max_str_digits), which no JSON number here exceeds either.
_WHOLE_NUMBER = re.compile(r"[ \t\r\n]*(?P<sign>[-+]?)0*(?P<digits>[0-9]+)[ \t\r\n]*")
_WHOLE_NUMBER_DIGITS_MAX = 4300
# Past 2**53 a float no longer stands for one integer; the schema's limit names it as sent.
_WHOLE_FLOAT_MAX = 2**53


def _as_clients_mean(spec: ToolSpec, arguments: dict) -> dict:
    """`arguments` read as the client meant them, in the three ways widespread clients write
    them otherwise than the schema, as the MCP SDK's own tool decorator reads them too:
    - null for an optional field the model leaves unused (SDKs that type it `T | None`, strict
      function-calling modes that make every field required and nullable): left out;
    - a list as its JSON text (`"[\"a\", \"b\"]"`), as some desktop clients send every list:
      the list;
    - a whole number as a string (`"10"`): the number; or as a float (`10.0`, which JSON Schema
      counts as an integer, 2020-12 Core §4.2.1, and JSON decodes as a float): the int.
    Anything else is left for the schema to refuse by name: null for a required field, a string
    that is not a list's JSON, a field the tool does not take."""
    declared = _ARGUMENT_TYPES[spec.name]
    required = spec.input_schema.get("required", ())
    meant = {}
    for key, value in arguments.items():
        expected = declared.get(key)
        if value is None and expected is not None and key not in required:
            continue
        if isinstance(value, str) and expected == "array":
            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):
                decoded = None
            value = decoded if isinstance(decoded, list) else value
        elif isinstance(value, str) and expected == "integer" and (number := _whole_number(value)):
            value = int(number)
        elif isinstance(value, float) and expected == "integer" and value.is_integer():
            value = int(value) if abs(value) <= _WHOLE_FLOAT_MAX else value
        meant[key] = value
    return meant


def _whole_number(value: str) -> str | None:
    """`value`, a whole number written as a string, as int() reads it (sign and digits, no
    leading zeros), or None."""
    number = _WHOLE_NUMBER.fullmatch(value)
    if number is None or len(number["digits"]) > _WHOLE_NUMBER_DIGITS_MAX:
        return None
    return number["sign"] + number["digits"]


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


# Per tool, the item limit (maxItems) of each list argument, checked before the schema is: the
# validator looks at every item of a list, and compares every pair of one that must be unique and
# cannot be sorted, so a list of a million wrong items would hold the event loop (every tenant's
# requests) for seconds before the one error that matters.
_ITEM_LIMITS = {
    spec.name: {
        name: schema["maxItems"]
        for name, schema in spec.input_schema.get("properties", {}).items()
        if "maxItems" in schema
    }
    for spec in TOOLS
}


def _too_many_items(spec: ToolSpec, arguments: dict) -> str | None:
    """The first list argument longer than its schema allows, phrased as the schema's error."""
    for name, most in _ITEM_LIMITS[spec.name].items():
        value = arguments.get(name)
        if isinstance(value, list) and len(value) > most:
            return f"{name}: at most {most} items; got {len(value)}"
    return None


# What an enum's refusal adds for a value that belongs to a neighbouring field or names a thing
# the tool has no word for: a model sent it meaning something the list of values alone does not
# show it how to ask for. Keyed by tool and field, then by the value as sent.
_COMMITMENT_STATE_NOT_A_FILTER = (
    "status is the archive state alone; a commitment's state is filtered by commitmentStatus, "
    f"a list of: {', '.join(search.COMMITMENT_STATUS_FILTERS)} (resolvedAfter: resolved since "
    "an instant)"
)
# A commitment's state in other words, as resolve's status and search's commitmentStatus take it.
_COMMITMENT_STATE_WORDS = {
    **dict.fromkeys(
        ("done", "complete", "completed", "closed", "finished", "fixed"),
        "a commitment that is done is 'resolved'",
    ),
    **dict.fromkeys(
        ("cancelled", "canceled", "dropped", "abandoned", "obsolete"),
        "one no longer needed is 'expired'",
    ),
    "blocked": "one held up by someone else is 'waiting'",
}
# A memory's type in other words: its name in another case or the plural (read case-folded,
# _enum_hint), and what a model calls a commitment or a blocker in a to-do list or a tracker.
_MEMORY_TYPE_WORDS = {
    **{name: f"types are lower case: '{name}'" for name in schemas.MEMORY_TYPES},
    **{f"{name}s": f"types are singular: '{name}'" for name in schemas.MEMORY_TYPES},
    **dict.fromkeys(
        ("todo", "to-do", "todos", "task", "tasks", "promise", "action-item", "reminder"),
        "a to-do, task or promise is a 'commitment' (with dueAt for its deadline)",
    ),
    **dict.fromkeys(
        ("issue", "problem", "impediment", "blocked"), "what blocks the work is a 'blocker'"
    ),
}
_ENUM_HINTS: dict[tuple[str, str], dict[str, str]] = {
    ("remember", "memoryType"): _MEMORY_TYPE_WORDS,
    ("revise", "memoryType"): _MEMORY_TYPE_WORDS,
    ("search", "memoryTypes"): _MEMORY_TYPE_WORDS,
    ("search", "status"): {
        **dict.fromkeys(
            (*search.COMMITMENT_STATUS_FILTERS, "done", "closed", "pending"),
            _COMMITMENT_STATE_NOT_A_FILTER,
        ),
        **dict.fromkeys(
            ("superseded", "revised", "historical"),
            "a version since revised is found with asOf, at an instant it was current",
        ),
        "current": "current memories are what every search reads; status 'any' adds archived",
    },
    **{
        (tool, "detail"): {"brief": "'brief' is a mode (how many items); detail is which fields"}
        for tool in ("briefing", "handoff")
    },
    ("briefing", "mode"): {"compact": "'compact' is a detail (which fields); mode is how many"},
    ("resolve", "status"): _COMMITMENT_STATE_WORDS,
    ("search", "commitmentStatus"): _COMMITMENT_STATE_WORDS
    | dict.fromkeys(("pending", "todo", "active"), "one still to do is 'open' or 'waiting'"),
}


def _enum_hint(tool: str, field: str, value: object, allowed: list) -> str:
    """The hint for `value` of `field`, or of the list `field` is an item of (`states[0]`);
    else, for one of the `allowed` values in another case, that value; else the allowed value
    it is a slip or the start of, if one is near."""
    if not isinstance(value, str):
        return ""
    field = re.sub(r"\[\d+\]$", "", field)
    hints = _ENUM_HINTS.get((tool, field), {})
    # As sent, else case-folded: 'Done' and 'Decision' are the slips of 'done' and 'decision'.
    hint = hints.get(value) or hints.get(value.lower())
    if hint is None and value.lower() in allowed:
        hint = f"values are lower case: '{value.lower()}'"
    if hint is None:
        hint = did_you_mean(slipped_from(value, map(str, allowed))) or None
    return f"; {hint}" if hint else ""


_LIFECYCLE_BY_OTHER_TOOLS = (
    "revise writes a new version of the memory's text and fields; a commitment's state is moved "
    f"by resolve (memoryId, status: {', '.join(search.COMMITMENT_STATUS_FILTERS)}), and archive "
    "retires a memory"
)
# Fields a model sends to the wrong tool, or by another tool's name for the same thing: what to
# do instead. The lifecycle is not a revision's (revise has no status), and each of these tools
# takes its memory by the name it has there.
_FIELDS_OF_OTHER_TOOLS: dict[tuple[str, str], str] = {
    ("revise", "status"): _LIFECYCLE_BY_OTHER_TOOLS,
    ("revise", "commitmentStatus"): _LIFECYCLE_BY_OTHER_TOOLS,
    ("revise", "memoryId"): "did you mean 'predecessorId'? (the memory to revise)",
    ("remember", "status"): "a new memory is active, a commitment open; resolve moves it on",
    ("remember", "commitmentStatus"): "a commitment starts open; resolve moves it on",
    ("resolve", "commitmentStatus"): "did you mean 'status'?",
    ("archive", "memoryIds"): "did you mean 'memoryId'? (one memory per call)",
    ("get_memories", "memoryIds"): "did you mean 'ids'?",
    # How much each of the two overviews shows is said in a field of its own.
    ("handoff", "mode"): (
        f"handoff has no mode: sectionLimit (1-{handoff.MAX_ITEMS}, default "
        f"{handoff.DEFAULT_ITEMS}) is how many items a section shows"
    ),
    ("briefing", "sectionLimit"): (
        "briefing has no sectionLimit: mode 'brief' or 'full' is how many items a section shows"
    ),
    # search filters by `thread`; configure_thread names the thread it acts on `name`.
    ("configure_thread", "thread"): "did you mean 'name'? (the thread's name)",
    # A write joins no thread by itself: the server proposes the threads it fits.
    **{
        (tool, field): (
            "a memory joins a thread through configure_thread (action add_members, name, "
            "memoryIds: the id this call returns); the answer's proposals name the threads the "
            "server found it fits"
        )
        for tool in ("remember", "revise")
        for field in ("thread", "threads", "threadname", "threadid", "threadids")
    },
    # A memory's tags are indexed with its words (with its project, weighted as its topic).
    ("search", "tags"): (
        "search has no tags filter: a memory's tags are among the words it matches, so put "
        "the tag in the query"
    ),
}


# briefing and handoff take the part they cover as a selector and its value, where search and
# the prompts of the same names take a scope, project or thread field: a model that sent
# `project: "atlas"` is shown that call as the tool takes it.
_SELECTING_TOOLS = ("briefing", "handoff")


def _as_selector(kind: str, value: object) -> str:
    shown = bounds.shown_key(value) if isinstance(value, str) else "…"
    shown = json.dumps(shown, ensure_ascii=False)
    return f'a {kind} is chosen with selector and value: {{"selector": "{kind}", "value": {shown}}}'


def _known_fields(tool: str, unknown: str, allowed: list[str], value: object = None) -> str:
    """What to send instead of an unknown field (sent with `value`): what the tool does instead
    with a field of another tool's (_FIELDS_OF_OTHER_TOOLS), a selector's kind as the selector
    (_SELECTING_TOOLS), the field it misspells in another case or separator style
    (memory_type, MemoryType for memoryType), else every field the tool takes, so a model can
    correct the call without reading the schema again."""
    key = unknown.replace("_", "").replace("-", "").lower()
    if instead := _FIELDS_OF_OTHER_TOOLS.get((tool, unknown)) or _FIELDS_OF_OTHER_TOOLS.get(
        (tool, key)
    ):
        return instead
    if tool in _SELECTING_TOOLS and unknown.lower() in SELECTOR_KINDS and unknown != "all":
        return _as_selector(unknown.lower(), value)
    # In the singular or the plural too: "projects" for project, "types" for memoryTypes.
    keys = {key, _singular(key)}
    for name in allowed:
        if {name.lower(), _singular(name.lower())} & keys:
            return f"did you mean '{name}'?"
    # A part of one field's name: "due" for dueAt, "type" for memoryType or memoryTypes, "id"
    # for ids. Only when one field alone has it at its start or end, so a guess is never a
    # choice among many.
    part_of = [
        name
        for name in allowed
        if len(key) >= 2
        and any(
            named.startswith(part) or named.endswith(part)
            for named in (name.lower(), _singular(name.lower()))
            for part in keys
        )
    ]
    if len(part_of) == 1:
        return f"did you mean '{part_of[0]}'?"
    if not allowed:
        return "this tool takes no arguments"
    return f"this tool takes: {', '.join(allowed)}"


def _singular(word: str) -> str:
    """An English plural's singular, as field names are spelt ("memorytypes", "ids"; not
    "status" nor "address")."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word


def _field_path(parts: Iterable[str | int]) -> str:
    """A schema error's place as the domain's checks name it: `tags[0]`, `filters.type`."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _schema_error(spec: ToolSpec, arguments: dict) -> str | None:
    """The first schema violation, phrased as '<field>: <what is wrong, with the limit>'."""
    too_many = _too_many_items(spec, arguments)
    if too_many is not None:
        return too_many
    errors = sorted(
        _VALIDATORS[spec.name].iter_errors(arguments), key=lambda e: (len(e.path), list(e.path))
    )
    if not errors:
        return None
    error = errors[0]
    path = _field_path(error.path)
    field = path or "arguments"
    limit = error.validator_value
    match error.validator:
        case "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            unknown = sorted(key for key in error.instance if key not in allowed)
            prefix = f"{path}." if path else ""
            hint = _known_fields(spec.name, unknown[0], allowed, error.instance[unknown[0]])
            return f"{prefix}{bounds.shown_field_name(unknown[0])}: unknown field; {hint}"
        case "required":
            missing = [key for key in limit if key not in error.instance]
            return f"{missing[0]}: is required"
        case "maxLength":
            return f"{field}: must be at most {limit} characters; got {len(error.instance)}"
        case "minLength":
            hint = _EMPTY_TEXT_HINTS.get((spec.name, field), "")
            return f"{field}: must be at least {limit} character(s){hint}"
        case "maxItems":
            return f"{field}: at most {limit} items; got {len(error.instance)}"
        case "minItems":
            return f"{field}: at least {limit} item(s)"
        case "maximum":
            return f"{field}: must be at most {limit}; got {_shown_number(error.instance)}"
        case "minimum":
            return f"{field}: must be at least {limit}; got {_shown_number(error.instance)}"
        case "enum":
            hint = _enum_hint(spec.name, field, error.instance, limit)
            return f"{field}: must be one of: {', '.join(map(str, limit))}{hint}"
        case "pattern" if limit == bounds.SCOPE_PATTERN.pattern:
            # In words, as the domain refuses it: a regular expression tells a model less than
            # the rule it encodes.
            return f"{field}: {bounds.scope_refusal(error.instance)}"
        case "pattern":
            return f"{field}: must match the pattern {limit}"
        case "type" if limit in ("integer", "number") and _range(error.schema):
            # The range too, whatever was sent instead: "ten" or null for a limit says nothing
            # of which numbers are taken.
            sent = ", not null" if error.instance is None else ""
            return f"{field}: must be of type {limit}, {_range(error.schema)}{sent}"
        case "type" if error.instance is None:
            return f"{field}: must be of type {limit}, not null"
        case "type" if limit == "array" and not isinstance(error.instance, dict | list):
            # One value where a list is asked for is a model's commonest slip (ids, tags,
            # memoryTypes): the fix is the list around it.
            sent = _JSON_TYPES.get(type(error.instance), "a value")
            return f"{field}: must be of type array, not {sent}; send a list, even of one: [...]"
        case "type" if limit == "string" and isinstance(error.instance, list):
            # The mirror slip: a list where one value is asked for (a thread, a project).
            return f"{field}: must be of type string, not array; it takes one value, not a list"
        case "type":
            return f"{field}: must be of type {limit}"
        case "uniqueItems":
            return f"{field}: items must be unique"
        case _:
            return f"{field}: {error.validator} {limit} not satisfied"


def _shown_number(number: object) -> str:
    """A number the caller sent, as a refusal repeats it: cut as every made-up name is (one of
    thousands of digits is read, but not repeated whole)."""
    return bounds.shown_key(str(number))


def _range(schema: dict) -> str:
    """A number's bounds as a refusal names them: "1..25", "1 or more", "at most 25"; "" for
    none."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{low}..{high}"
    if low is not None:
        return f"{low} or more"
    return f"at most {high}" if high is not None else ""


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
# An empty text sent meaning "none": what asks for that instead.
_EMPTY_TEXT_HINTS = {
    ("search", "query"): f"; {search.OMIT_QUERY}",
    ("revise", "project"): '; to remove the project, send clear: ["project"]',
}


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
    arguments = _as_clients_mean(spec, arguments)
    # One walk over every string, however deeply nested, before any handler: PostgreSQL refuses
    # NUL and lone surrogates anywhere in a statement, whichever field carries them (a list sent
    # as JSON text may carry them escaped, so after decoding it).
    problem = text_problem_in(arguments) or _schema_error(spec, arguments)
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
