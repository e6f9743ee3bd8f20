"""A tool's arguments as the client meant them, and a refusal that says how to fix them.

mcp_gateway.tools.call_tool reads each call's arguments with `as_clients_mean` (the ways
widespread clients write them otherwise than the schema) and checks them with `schema_error`,
which words the first violation as '<field>: <what is wrong, with the limit>' and adds what to
send instead: the field meant, the value meant, the tool that does it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jsonschema import Draft202012Validator

from mcp_gateway import schemas
from mcp_gateway.names import slipped_from
from memories import bounds, handoff, search
from memories.briefing import SELECTOR_KINDS
from memories.errors import did_you_mean

if TYPE_CHECKING:
    from mcp_gateway.tools import ToolSpec


@dataclass(frozen=True)
class _Reading:
    """What reading one tool's arguments needs of its input schema, built once."""

    validator: Draft202012Validator
    types: dict[str, object]
    # The item limit (maxItems) of each list argument, checked before the schema is: the
    # validator looks at every item of a list, and compares every pair of one that must be unique
    # and cannot be sorted, so a list of a million wrong items would hold the event loop (every
    # tenant's requests) for seconds before the one error that matters.
    item_limits: dict[str, int]


_READINGS: dict[str, _Reading] = {}


def _reading(spec: ToolSpec) -> _Reading:
    reading = _READINGS.get(spec.name)
    if reading is None:
        properties = spec.input_schema.get("properties", {})
        reading = _READINGS[spec.name] = _Reading(
            validator=Draft202012Validator(spec.input_schema),
            types={name: schema.get("type") for name, schema in properties.items()},
            item_limits={
                name: schema["maxItems"]
                for name, schema in properties.items()
                if "maxItems" in schema
            },
        )
    return reading


# ASCII whitespace only: Unicode's \s also takes the separators U+001C..U+001F, which int() refuses.
# Any number of digits: one past an integer field's range is refused by the range, as the same
# number sent as a JSON number is, not as no number at all. Leading zeros apart, at most as many
# as int() reads (sys.int_info.default_max_str_digits), which no JSON number here exceeds either.
_WHOLE_NUMBER = re.compile(r"[ \t\r\n]*(?P<sign>[-+]?)0*(?P<digits>[0-9]+)[ \t\r\n]*")
_WHOLE_NUMBER_DIGITS_MAX = 4300
# Past 2**53 a float no longer stands for one integer; the schema's limit names it as sent.
_WHOLE_FLOAT_MAX = 2**53


def as_clients_mean(spec: ToolSpec, arguments: dict) -> dict:
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
    declared = _reading(spec).types
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


def _too_many_items(spec: ToolSpec, arguments: dict) -> str | None:
    """The first list argument longer than its schema allows, phrased as the schema's error."""
    for name, most in _reading(spec).item_limits.items():
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


def schema_error(spec: ToolSpec, arguments: dict) -> str | None:
    """The first schema violation, phrased as '<field>: <what is wrong, with the limit>'."""
    too_many = _too_many_items(spec, arguments)
    if too_many is not None:
        return too_many
    errors = sorted(
        _reading(spec).validator.iter_errors(arguments), key=lambda e: (len(e.path), list(e.path))
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
