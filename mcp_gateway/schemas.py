"""JSON Schemas of the tool inputs and outputs (JSON Schema 2020-12, the MCP default dialect).

Inputs are strict: `additionalProperties: false` and every bound declared, so a client sees the
limits before calling. The same schema validates every call on the server too
(mcp_gateway.tools), because not every transport path validates arguments. The bounds come from
the domain modules, so a schema and the service it fronts cannot disagree.
"""

from __future__ import annotations

from mcp_gateway.thread_actions import THREAD_ACTION_HANDLERS
from memories import bounds, briefing, handoff, reading, search, threads
from memories.briefing import SectionSpec
from memories.excerpts import EXCERPT_MAX
from memories.models import CommitmentStatus, MemoryType
from memories.search.scoring import WORDS_SCALE_TERMS
from memories.services import CLEARABLE_FIELDS

MEMORY_TYPES = list(MemoryType.values)
# How search shows each hit: whole (excerpt, dates, commitment state, how it matched) or only
# what tells hits apart, a fraction of the tokens when an agent scans many.
PROJECTIONS = ("full", "compact")
ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": bounds.MEMORY_ID_MAX,
    "description": "A memory id (UUID), or its threengram://memory/{id} URI.",
}
DATETIME = {
    "type": "string",
    "format": "date-time",
    "maxLength": 40,
    "description": (
        "An RFC 3339 date-time with an offset (YYYY-MM-DDTHH:MM:SS, a fraction after '.' if "
        "any, Z or ±HH:MM), e.g. 2026-12-31T17:00:00Z: from 1970-01-01 to 9999-12-31, an "
        "offset within ±14:00, no leap second."
    ),
}

# A due date may be a date alone ("due on the 10th"). No `format`: "date-time" would tell a
# client that validates formats to refuse the date, and some clients' schema converters refuse
# or drop an anyOf of the two; the server checks both forms (bounds.clean_due_at).
DUE_AT_FORMS = (
    "An RFC 3339 date-time with an offset (YYYY-MM-DDTHH:MM:SS, a fraction after '.' if any, Z "
    "or ±HH:MM within ±14:00), e.g. 2026-12-31T17:00:00Z, or a "
    "date alone, e.g. 2026-12-31: due by the end of that day in UTC (stored and shown as "
    "2026-12-31T23:59:59.999999Z). From 1970-01-01 to 9999-12-31."
)
DUE_AT = {"type": "string", "maxLength": 40}


def nullable(json_type: str, **keywords: object) -> dict:
    """A value of `json_type`, or null. As `anyOf` branches of one type each, not a type array:
    clients that map tool schemas onto a single-type dialect (e.g. OpenAPI-style function
    declarations) refuse or drop type arrays; MCP Inspector's `--strict` reports them."""
    return {"anyOf": [{"type": json_type, **keywords}, {"type": "null"}]}


NULLABLE_DATETIME = nullable("string", format="date-time")


# status is the archive state alone: a version since revised keeps the one it had.
STATUS = {
    "type": "string",
    "description": (
        "'active' or 'archived' (the archive state only): a version since revised stays "
        "'active'; whether it is still in force is `current`."
    ),
}
CURRENT = {
    "type": "boolean",
    "description": (
        "False for a version since revised (validTo set): its successor is the one in force."
    ),
}


SCOPE = {
    "type": "string",
    "minLength": 1,
    "maxLength": bounds.SCOPE_MAX,
    "pattern": bounds.SCOPE_PATTERN.pattern,
}
PROJECT = {"type": "string", "minLength": 1, "maxLength": bounds.PROJECT_MAX}
THREAD_NAME = {"type": "string", "minLength": 1, "maxLength": bounds.THREAD_NAME_MAX}
TOPIC = {"type": "string", "minLength": 1, "maxLength": bounds.TOPIC_MAX}
CONTENT = {"type": "string", "minLength": 1, "maxLength": bounds.CONTENT_MAX}
TAGS = {
    "type": "array",
    # What may be sent: the bound on the tags kept is on them once repeats are merged, which
    # no schema keyword can count (a tag in another case is a repeat).
    "maxItems": bounds.TAGS_SENT_MAX,
    "items": {"type": "string", "minLength": 1, "maxLength": bounds.TAG_MAX},
    "description": (
        f"At most {bounds.TAGS_MAX} distinct tags: a tag repeated in any case ('Perf', 'perf') "
        f"is kept once, as first given, and counted once (at most {bounds.TAGS_SENT_MAX} sent)."
    ),
}
SELECTOR = {
    "selector": {
        "type": "string",
        "enum": list(briefing.SELECTOR_KINDS),
        "default": "all",
        "description": (
            "What to cover: everything, or one scope, project or thread. A project's "
            "preferences include those of no project, which hold in every project."
        ),
    },
    # One maxLength for the three kinds, the largest; the description gives each kind's own,
    # rather than if/then conditions that some clients' schema converters refuse.
    "value": {
        "type": "string",
        "minLength": 1,
        "maxLength": bounds.PROJECT_MAX,
        "description": (
            "The scope, project or thread name; omit for 'all'. At most "
            f"{bounds.SCOPE_MAX} characters for a scope (kebab-case), {bounds.PROJECT_MAX} for "
            f"a project, {bounds.THREAD_NAME_MAX} for a thread."
        ),
    },
}


def strict(properties: dict, required: tuple[str, ...] = ()) -> dict:
    schema: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def output(properties: dict, required: tuple[str, ...] | None = None) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required if required is not None else properties),
    }


ONLY_WHEN_TRUE = {"type": "boolean", "const": True}
MEMORY_REF = output(
    {
        "id": {"type": "string"},
        "uri": {"type": "string"},
        "memoryType": {"type": "string", "enum": MEMORY_TYPES},
        "topic": {"type": "string"},
        "project": {
            "type": "string",
            "description": (
                "Left out when it has none. A project the account already spells in another "
                "case is stored in that spelling."
            ),
        },
        "scope": {
            "type": "string",
            "description": f"Left out when it is the default, '{bounds.DEFAULT_SCOPE}'.",
        },
        "status": {"type": "string"},
        "commitmentStatus": {"type": "string", "description": "Commitments only."},
        "dueAt": {"type": "string", "format": "date-time", "description": "Only when set."},
        "overdue": ONLY_WHEN_TRUE
        | {"description": "Only for an open or waiting commitment past its dueAt."},
        "resolvedAt": {
            "type": "string",
            "format": "date-time",
            "description": "Only for a resolved commitment: when it was resolved.",
        },
        "validTo": {
            "type": "string",
            "format": "date-time",
            "description": "Only for a version since revised.",
        },
    },
    required=("id", "uri", "memoryType", "topic", "status"),
)
EXCERPT_ITEM = output(
    {
        "id": {"type": "string"},
        "uri": {"type": "string"},
        "memoryType": {"type": "string"},
        "topic": {"type": "string"},
        "excerpt": {"type": "string", "maxLength": EXCERPT_MAX},
        "truncated": {"type": "boolean"},
        "contentLength": {"type": "integer"},
        "scope": {"type": "string"},
        "project": nullable("string"),
        "recordedAt": {"type": "string", "format": "date-time"},
        "commitmentStatus": nullable("string"),
        "dueAt": NULLABLE_DATETIME,
        "overdue": {"type": "boolean"},
    }
)


# How briefing and handoff show each item: compact (the default) leaves out what every item of
# a section shares or what can be derived, full gives every field of every item.
DETAILS = ("compact", "full")
DETAIL = {
    "type": "string",
    "enum": list(DETAILS),
    "default": "compact",
    "description": (
        "'compact': items without memoryType (a section holds one type), uri "
        "(threengram://memory/{id}), the scope or project the selector names, scope "
        f"'{bounds.DEFAULT_SCOPE}' (an item without scope is in it), commitmentStatus unless "
        "'waiting', and fields that do not apply (no project, no due date, an excerpt not "
        "cut); of a project, a preference of no project is accountWide: true. 'full': every "
        "field of every item, nulls included."
    ),
}
# An excerpt as compact items and search hits give it: its length only when it was cut.
EXCERPT_ONLY_CUT = {
    "excerpt": {"type": "string", "maxLength": EXCERPT_MAX},
    "truncated": ONLY_WHEN_TRUE
    | {"description": "Only when the excerpt was cut, with contentLength."},
    "contentLength": {"type": "integer", "description": "Only when the excerpt was cut."},
}
COMPACT_SECTION_ITEM = output(
    {
        "id": {"type": "string"},
        "topic": {"type": "string"},
        **EXCERPT_ONLY_CUT,
        "scope": {
            "type": "string",
            "description": (
                "Left out when the selector is a scope, and when it is the default, "
                f"'{bounds.DEFAULT_SCOPE}': every memory has one."
            ),
        },
        "project": {
            "type": "string",
            "description": "Left out when the memory has none or the selector is a project.",
        },
        "accountWide": ONLY_WHEN_TRUE
        | {
            "description": (
                "Only when the selector is a project: a preference of no project, which holds "
                "in every project (listed after the project's own)."
            )
        },
        "recordedAt": {"type": "string", "format": "date-time"},
        "commitmentStatus": {
            "type": "string",
            "const": "waiting",
            "description": "Only for a commitment waiting on someone; one without it is open.",
        },
        "dueAt": {"type": "string", "format": "date-time", "description": "Only when set."},
        "overdue": ONLY_WHEN_TRUE | {"description": "Only for an overdue commitment."},
    },
    required=("id", "topic", "excerpt", "recordedAt"),
)
SECTION_TRUNCATED = {
    "type": "boolean",
    "description": "More match than the items show (count). Compact: only when true.",
}


RESOLVED_ITEM = output(
    {
        "id": {"type": "string"},
        "topic": {"type": "string"},
        "scope": {
            "type": "string",
            "description": (
                "Compact: left out when the selector is a scope, and when it is the default, "
                f"'{bounds.DEFAULT_SCOPE}'."
            ),
        },
        "project": nullable("string")
        | {"description": "Compact: left out when it has none or the selector is a project."},
        "excerpt": {"type": "string", "maxLength": handoff.RECENTLY_RESOLVED_EXCERPT},
        "truncated": {"type": "boolean", "description": "Compact: only when true."},
        "resolvedAt": {"type": "string", "format": "date-time"},
    },
    required=("id", "topic", "excerpt", "resolvedAt"),
)


def section(max_items: int, items: tuple[dict, ...] = (COMPACT_SECTION_ITEM, EXCERPT_ITEM)) -> dict:
    return output(
        {
            "count": {"type": "integer", "minimum": 0},
            "truncated": SECTION_TRUNCATED,
            "items": {
                "type": "array",
                "maxItems": max_items,
                "items": {"anyOf": list(items)},
            },
        },
        required=("count", "items"),
    )


def handoff_section(spec: SectionSpec) -> dict:
    if spec.name == handoff.RECENTLY_RESOLVED:
        return section(handoff.RECENTLY_RESOLVED_MAX, (RESOLVED_ITEM,))
    return section(handoff.MAX_ITEMS)


PROPOSAL = output(
    {
        "proposalId": {"type": "string"},
        "thread": {"type": "string"},
        "memoryId": {"type": "string"},
        "memoryTopic": {"type": "string"},
        "similarity": nullable("number"),
    }
)
THREAD = output(
    {
        "name": {"type": "string"},
        "pinned": {"type": "boolean"},
        "memberCount": {
            "type": "integer",
            "description": (
                "Its current, active members: what a search of the thread lists by default. "
                "Archived members stay members but are not counted (status 'archived' or "
                "'any' lists them)."
            ),
        },
        "proposalCount": {
            "type": "integer",
            "description": "Its open proposals of current memories, archived ones too.",
        },
    },
    required=("name", "pinned"),
)

REMEMBER_IN = strict(
    {
        "memoryType": {"type": "string", "enum": MEMORY_TYPES},
        "topic": TOPIC,
        "content": CONTENT,
        "scope": SCOPE
        | {
            "description": (
                f"kebab-case, default '{bounds.DEFAULT_SCOPE}'; "
                f"'{bounds.ERASED_SCOPE}' is reserved."
            )
        },
        "project": PROJECT,
        "tags": TAGS,
        "dueAt": DUE_AT | {"description": f"Only for commitments: when it is due. {DUE_AT_FORMS}"},
    },
    required=("memoryType", "topic", "content"),
)
# A due date already past when written: a model that takes its training year for today's writes
# one without knowing.
PAST_DUE_NOTE = {"type": "string", "description": "Only when the dueAt given is already past."}
# The threads a memory written was proposed for (remember; revise, when it changed the topic or
# project a proposal compares).
PROPOSALS_MADE = {"type": "array", "maxItems": threads.PROPOSALS_PER_MEMORY_MAX, "items": PROPOSAL}
REMEMBER_OUT = output(
    {"memory": MEMORY_REF, "proposals": PROPOSALS_MADE, "note": PAST_DUE_NOTE},
    required=("memory", "proposals"),
)

SEARCH_IN = strict(
    {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": search.QUERY_MAX,
            "description": "Omit it to list the memories the filters select, newest first.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": search.MAX_LIMIT,
            "default": search.DEFAULT_LIMIT,
        },
        "memoryTypes": {
            "type": "array",
            "minItems": 1,
            "maxItems": len(MEMORY_TYPES),
            "uniqueItems": True,
            "items": {"type": "string", "enum": MEMORY_TYPES},
        },
        "scope": SCOPE | {"description": "Only memories of this scope; omitted: every scope."},
        "project": PROJECT,
        "thread": THREAD_NAME,
        "status": {
            "type": "string",
            "enum": list(search.STATUS_FILTERS),
            "description": "Default 'active' ('any' when asOf is given).",
        },
        "recordedAfter": DATETIME
        | {"description": f"Recorded at or after this instant: {DATETIME['description']}"},
        "recordedBefore": DATETIME
        | {"description": f"Recorded at or before this instant: {DATETIME['description']}"},
        "asOf": DATETIME
        | {"description": f"Search what was current at this instant: {DATETIME['description']}"},
        "commitmentStatus": {
            "type": "array",
            "minItems": 1,
            "maxItems": len(search.COMMITMENT_STATUS_FILTERS),
            "uniqueItems": True,
            "items": {"type": "string", "enum": list(search.COMMITMENT_STATUS_FILTERS)},
            "description": (
                "Only commitments in one of these states, e.g. ['open', 'waiting'] for what is "
                "still to do, ['resolved'] for what was finished (memoryTypes then defaults to, "
                "and must include, 'commitment'). Not with asOf: a commitment's state is kept as "
                "it is now, not as it was then. Listed without a query, the newest recorded come "
                "first, not the next due: page with nextCursor while hasMore, or use briefing or "
                "handoff, which list open ones next due first."
            ),
        },
        "resolvedAfter": DATETIME
        | {
            "description": (
                "Only commitments resolved at or after this instant (implies commitmentStatus "
                "['resolved']; not with asOf). A commitment resolved before the server kept "
                f"resolution times has none and is not found. {DATETIME['description']}"
            )
        },
        "cursor": {"type": "string", "minLength": 1, "maxLength": search.CURSOR_MAX},
        "projection": {
            "type": "string",
            "enum": list(PROJECTIONS),
            "default": "full",
            "description": (
                "'compact': each hit only as id, memoryType, topic, project (when it has one), "
                "recordedAt and score (a commitment's commitmentStatus, and dueAt, overdue, "
                "status and validTo where they apply), to scan many hits cheaply; read the ones "
                "you need with get_memories. "
                "'full': with its excerpt and the rest; either leaves out what does not apply."
            ),
        },
    },
)
# A full hit leaves out what does not apply or can be derived, as a compact briefing item does:
# search is the call an agent makes most, and the same nulls and defaults on every hit of a page
# spent its context for nothing.
SEARCH_HIT = output(
    {
        "id": {"type": "string", "description": "Its resource is threengram://memory/{id}."},
        "memoryType": {"type": "string"},
        "topic": {"type": "string"},
        **EXCERPT_ONLY_CUT,
        "excerptStart": {
            "type": "integer",
            "minimum": 1,
            "description": (
                "Only when the excerpt is not the content's start but a window around the first "
                "of the query's words it holds (the start does not show them): where the window "
                "starts in the content, in Unicode code points. The excerpt then begins with "
                "'…', which is not in the content, and stays within the same maxLength."
            ),
        },
        "scope": {
            "type": "string",
            "description": (
                f"Left out when it is the default, '{bounds.DEFAULT_SCOPE}': every memory has one."
            ),
        },
        "project": {"type": "string", "description": "Left out when the memory has none."},
        "recordedAt": {"type": "string", "format": "date-time"},
        "commitmentStatus": {"type": "string", "description": "Commitments only."},
        "dueAt": {"type": "string", "format": "date-time", "description": "Only when set."},
        "overdue": ONLY_WHEN_TRUE | {"description": "Only for an overdue commitment."},
        "resolvedAt": {
            "type": "string",
            "format": "date-time",
            "description": "Only for a resolved commitment: when it was resolved.",
        },
        "score": {
            "type": "number",
            "description": "Relevance; left out when listed without a query.",
        },
        "matchedBy": {
            "type": "array",
            "items": {"type": "string", "enum": ["words", "meaning"]},
            "description": "How the memory matched: by the query's words (or the topic's "
            "spelling), by meaning, or both; left out when listed without a query.",
        },
        "lacks": {
            "type": "array",
            "maxItems": WORDS_SCALE_TERMS,
            "items": {"type": "string"},
            "description": "The question's most distinctive words (as you wrote them) this "
            "memory does not contain, when it lacks some: one about the right topic that lacks "
            "the detail you asked for may not answer it.",
        },
        "status": {
            "type": "string",
            "const": "archived",
            "description": "Only for an archived memory (status 'archived' or 'any').",
        },
        "current": {
            "type": "boolean",
            "const": False,
            "description": (
                "Only for a version since revised (with validTo): its successor is the one in "
                "force."
            ),
        },
        "validTo": {
            "type": "string",
            "format": "date-time",
            "description": "Only for a version since revised: when it was superseded.",
        },
    },
    required=("id", "memoryType", "topic", "excerpt", "recordedAt"),
)
COMPACT_SEARCH_HIT = output(
    {
        name: SEARCH_HIT["properties"][name]
        for name in (
            "id",
            "memoryType",
            "topic",
            "project",
            "recordedAt",
            "score",
            "commitmentStatus",
            "dueAt",
            "overdue",
            "resolvedAt",
            "status",
            "validTo",
        )
    },
    required=("id", "memoryType", "topic", "recordedAt"),
)
SEARCH_OUT = output(
    {
        "hits": {
            "type": "array",
            "maxItems": search.MAX_LIMIT,
            "items": {"anyOf": [SEARCH_HIT, COMPACT_SEARCH_HIT]},
            "description": "Full hits, or compact ones with projection 'compact'.",
        },
        "count": {
            "type": "integer",
            "minimum": 0,
            "maximum": search.MAX_LIMIT,
            "description": (
                "How many hits this page holds, not how many memories match: no total is "
                "counted. hasMore says whether more follow (go on with nextCursor)."
            ),
        },
        "hasMore": {"type": "boolean"},
        "nextCursor": nullable("string"),
        "note": nullable("string")
        | {
            "description": (
                "On an empty first page of a query: why nothing came back and how to ask "
                "instead (the account holds no memories yet, or none by asOf; the query held "
                "only stop words or exclusions; memories of another "
                "status match; memories matched, none closely enough; or none shares a word or "
                "meaning with it under the filters given). On a listing (no query): why its "
                "first page is empty, or that a page holds fewer hits than asked for because "
                "it read as many memories as a page may while older ones remain (go on with "
                "nextCursor). Else null."
            )
        },
    }
)

GET_MEMORIES_IN = strict(
    {
        "ids": {"type": "array", "minItems": 1, "maxItems": reading.IDS_MAX, "items": ID},
        "maxChars": {
            "type": "integer",
            "minimum": reading.BUDGET_MIN,
            "maximum": reading.BUDGET_MAX,
            "default": reading.DEFAULT_BUDGET,
            "description": "Character budget for all bodies of this call together.",
        },
    },
    required=("ids",),
)
GET_MEMORIES_OUT = output(
    {
        "memories": {
            "type": "array",
            "maxItems": reading.IDS_MAX,
            "items": output(
                {
                    "id": {"type": "string"},
                    "uri": {"type": "string"},
                    "memoryType": {"type": "string"},
                    "topic": {"type": "string"},
                    "content": nullable("string"),
                    "contentWithheld": {"type": "boolean"},
                    "contentLength": {"type": "integer"},
                    "scope": {"type": "string"},
                    "project": nullable("string"),
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "recordedAt": {"type": "string", "format": "date-time"},
                    "status": STATUS,
                    "current": CURRENT,
                    "validTo": NULLABLE_DATETIME,
                    "commitmentStatus": nullable("string"),
                    "dueAt": NULLABLE_DATETIME,
                    "overdue": {"type": "boolean"},
                    "resolvedAt": NULLABLE_DATETIME
                    | {"description": "When a resolved commitment was resolved; else null."},
                    "predecessorId": nullable("string"),
                    "successorId": nullable("string"),
                }
            ),
        },
        "count": {"type": "integer"},
        "notFound": {"type": "array", "maxItems": reading.IDS_MAX, "items": {"type": "string"}},
        "withheldForBudget": {
            "type": "array",
            "maxItems": reading.IDS_MAX,
            "items": {"type": "string"},
        },
        "note": nullable("string"),
    }
)

# revise's optional arguments, each as the service keyword it is (memories.services
# .revise_memory). One left out carries over; one of CLEARABLE_FIELDS named in `clear` is emptied.
# A null is no way to empty one: clients that fill every field send null for each one unused
# (mcp_gateway.tools), and a revision of a commitment's text would drop its deadline unasked.
REVISE_OPTIONAL = {
    "content": "content",
    "memoryType": "memory_type",
    "topic": "topic",
    "scope": "scope",
    "project": "project",
    "tags": "tags",
    "dueAt": "due_at",
}
REVISE_CLEARABLE = [
    name for name, keyword in REVISE_OPTIONAL.items() if keyword in CLEARABLE_FIELDS
]
REVISE_IN = strict(
    {
        "predecessorId": ID,
        "content": CONTENT
        | {"description": "The successor's whole text. Omitted: the predecessor's, unchanged."},
        "memoryType": {
            "type": "string",
            "enum": MEMORY_TYPES,
            "description": (
                "Out of commitment: the due date and commitment state go. Into commitment: it "
                "starts open."
            ),
        },
        "topic": TOPIC,
        "scope": SCOPE | {"description": "Omitted: the predecessor's scope."},
        "project": PROJECT,
        "tags": TAGS,
        "dueAt": DUE_AT
        | {
            "description": (
                f"Only for commitments: the new due date. {DUE_AT_FORMS} To drop it, use clear."
            )
        },
        "clear": {
            "type": "array",
            "maxItems": len(REVISE_CLEARABLE),
            "uniqueItems": True,
            "items": {"type": "string", "enum": REVISE_CLEARABLE},
            "description": (
                "Fields the successor leaves empty instead of carrying over, e.g. ['dueAt'] "
                "when the deadline was dropped. A type, topic and scope cannot be cleared. A "
                "null field is left out, never cleared."
            ),
        },
    },
    required=("predecessorId",),
)
REVISE_OUT = output(
    {
        "memory": MEMORY_REF,
        "predecessorId": {"type": "string"},
        "proposals": PROPOSALS_MADE,
        "note": PAST_DUE_NOTE,
    },
    required=("memory", "predecessorId", "proposals"),
)
ARCHIVE_IN = strict({"memoryId": ID}, required=("memoryId",))
ARCHIVE_OUT = output({"memory": MEMORY_REF})
RESOLVE_IN = strict(
    {"memoryId": ID, "status": {"type": "string", "enum": list(CommitmentStatus.values)}},
    required=("memoryId", "status"),
)
RESOLVE_OUT = output({"memory": MEMORY_REF})

PINNED_THREADS = output(
    {
        "count": {"type": "integer"},
        "truncated": SECTION_TRUNCATED,
        "items": {
            "type": "array",
            "maxItems": briefing.PINNED_THREADS_MAX,
            # Compact leaves `pinned` out: every one listed here is.
            "items": THREAD | {"required": ["name", "memberCount", "proposalCount"]},
        },
    },
    required=("count", "items"),
)
SELECTED = output(
    {
        "kind": {"type": "string", "enum": list(briefing.SELECTOR_KINDS)},
        "value": nullable("string") | {"description": "Compact: left out for 'all'."},
    },
    required=("kind",),
)
UNLISTED_NOTE = nullable("string") | {
    "description": (
        "For a thread: how many of its current memories no section lists (notes, patterns, "
        "events…) and how to read them. Compact: left out when there are none."
    )
}
BRIEFING_IN = strict(
    SELECTOR
    | {
        "mode": {
            "type": "string",
            "enum": list(briefing.MODES),
            "default": "brief",
            "description": (
                f"How much: 'brief', {briefing.ITEMS['brief']} items per section and "
                f"{briefing.EXCERPT['brief']}-character excerpts; 'full', "
                f"{briefing.ITEMS['full']} and {briefing.EXCERPT['full']}. Which fields each "
                "item has is detail's."
            ),
        },
        "detail": DETAIL,
    }
)
BRIEFING_OUT = output(
    {
        "selector": SELECTED,
        "mode": {"type": "string"},
        "generatedAt": {"type": "string", "format": "date-time"},
        "sections": output(
            {
                spec.name: section(max(briefing.ITEMS.values()))
                for spec in briefing.BRIEFING_SECTIONS
            }
        ),
        "pinnedThreads": PINNED_THREADS,
        "note": UNLISTED_NOTE,
    },
    required=("selector", "mode", "generatedAt", "sections", "pinnedThreads"),
)
HANDOFF_IN = strict(
    SELECTOR
    | {
        "sectionLimit": {
            "type": "integer",
            "minimum": 1,
            "maximum": handoff.MAX_ITEMS,
            "default": handoff.DEFAULT_ITEMS,
        },
        "generatedFor": {"type": "string", "minLength": 1, "maxLength": handoff.GENERATED_FOR_MAX},
        "detail": DETAIL,
    }
)
HANDOFF_OUT = output(
    {
        "selector": SELECTED,
        "generatedFor": nullable("string") | {"description": "Compact: left out when not given."},
        "generatedAt": {"type": "string", "format": "date-time"},
        "sections": output({spec.name: handoff_section(spec) for spec in handoff.HANDOFF_SECTIONS}),
        "pinnedThreads": PINNED_THREADS,
        "note": UNLISTED_NOTE,
    },
    required=("selector", "generatedAt", "sections", "pinnedThreads"),
)

CONFIGURE_THREAD_IN = strict(
    {
        "action": {"type": "string", "enum": list(THREAD_ACTION_HANDLERS)},
        "name": THREAD_NAME | {"description": "The thread (all actions but list and *_proposal)."},
        "newName": THREAD_NAME | {"description": "For rename."},
        "memoryIds": {
            "type": "array",
            "minItems": 1,
            "maxItems": threads.MEMBERS_PER_CALL_MAX,
            "items": ID,
            "description": "For add_members and remove_members.",
        },
        "proposalId": ID | {"description": "For accept_proposal and reject_proposal."},
    },
    required=("action",),
)
CONFIGURE_THREAD_OUT = output(
    {
        "action": {"type": "string"},
        "thread": THREAD,
        "threads": {"type": "array", "maxItems": threads.THREADS_MAX, "items": THREAD},
        "proposals": {"type": "array", "maxItems": threads.LIST_MAX, "items": PROPOSAL},
        "proposal": PROPOSAL
        | {"properties": PROPOSAL["properties"] | {"state": {"type": "string"}}},
        "unchanged": {
            "type": "array",
            "maxItems": threads.MEMBERS_PER_CALL_MAX,
            "items": {"type": "string"},
            "description": (
                "add_members and remove_members: the memoryIds the action changed nothing for, "
                "each once: already members (add_members); neither members nor proposed "
                "(remove_members). Empty when it changed every one."
            ),
        },
        "archived": {
            "type": "array",
            "maxItems": threads.MEMBERS_PER_CALL_MAX,
            "items": {"type": "string"},
            "description": (
                "add_members, only when some are: the memoryIds given that are archived. "
                "Members all the same, but memberCount counts active members (what a search "
                "of the thread lists by default); status 'any' lists them too."
            ),
        },
    },
    required=("action",),
)
DESCRIBE_IN = strict({})
DESCRIBE_OUT = output(
    {
        "server": output({"name": {"type": "string"}, "version": {"type": "string"}}),
        "tools": {"type": "array", "items": {"type": "string"}},
        "scopes": {"type": "array", "items": {"type": "string"}},
        "memoryScopes": {"type": "array", "items": {"type": "string"}},
        "projects": output(
            {
                "count": {"type": "integer"},
                "names": {"type": "array", "items": {"type": "string"}},
            }
        ),
        "threads": {"type": "array", "maxItems": threads.THREADS_MAX, "items": THREAD},
        "memoriesByType": {"type": "object", "additionalProperties": {"type": "integer"}},
        "memoriesByStatus": {"type": "object", "additionalProperties": {"type": "integer"}},
        "commitmentsByStatus": {"type": "object", "additionalProperties": {"type": "integer"}},
        "memoryVersions": output({"count": {"type": "integer"}, "max": {"type": "integer"}}),
    }
)
