"""The tool handlers: one async function per tool, `(principal, arguments) -> result dict`.

Each is thin: it reads the arguments (already checked against the tool's input schema by
mcp_gateway.tools.call_tool), calls one `memories` service (a read in one snapshot or a write in
one transaction) with the tenant taken from the verified token only, and shapes the answer with
mcp_gateway.serializers. The domain's own refusals (memories.errors.DomainError) and
`InvalidArguments` propagate to call_tool, which turns them into tool errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser

from mcp_gateway import serializers
from mcp_gateway.principal import Principal
from mcp_gateway.schemas import REVISE_OPTIONAL
from mcp_gateway.thread_actions import THREAD_ACTION_HANDLERS
from memories import environment, reading, replica, search, threads
from memories.briefing import Selector, build_briefing
from memories.handoff import DEFAULT_ITEMS as HANDOFF_DEFAULT_ITEMS
from memories.handoff import build_handoff
from memories.services import archive_memory, resolve_commitment


class InvalidArguments(Exception):
    """Arguments the input schema lets through but the call cannot use (a field one action of
    a tool requires): reported as `invalid_input`, like a schema violation."""


def _owner(principal: Principal) -> AbstractBaseUser:
    """The tenant as a reference by primary key, from the verified token only. Write services
    lock the account row and refuse a deactivated one themselves."""
    return get_user_model()(pk=principal.user_id)


# Sync services run in the request's thread-sensitive executor (asgiref): the gateway runs each
# MCP request in a ThreadSensitiveContext, so each call gets one DB connection thread.
_db = sync_to_async(lambda function, **kwargs: function(**kwargs), thread_sensitive=True)
# The same, for read-only services whose results may lag the client's own writes a little: on the
# read replica when one is configured (memories/replica.py).
_lag_tolerant_db = sync_to_async(
    lambda function, **kwargs: replica.tolerant_read(function, **kwargs), thread_sensitive=True
)


async def remember(principal: Principal, args: dict) -> dict:
    memory, proposals = await _db(
        threads.record_memory_with_proposals,
        owner=_owner(principal),
        memory_type=args["memoryType"],
        topic=args["topic"],
        content=args["content"],
        scope=args.get("scope"),
        project=args.get("project"),
        tags=args.get("tags"),
        due_at=args.get("dueAt"),
    )
    return {
        "memory": serializers.memory_ref(memory),
        "proposals": [serializers.proposal(p) for p in proposals],
    } | serializers.past_due(memory, args)


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
        commitment_status=args.get("commitmentStatus"),
        resolved_after=args.get("resolvedAfter"),
    )
    return search.search_memories(
        owner_id=owner_id,
        query=args.get("query"),
        filters=filters,
        limit=args.get("limit", search.DEFAULT_LIMIT),
        cursor=args.get("cursor"),
    )


async def search_memories(principal: Principal, args: dict) -> dict:
    page = await _lag_tolerant_db(_search_page, owner_id=principal.user_id, args=args)
    return serializers.search_page(page, compact=args.get("projection") == "compact")


async def get_memories(principal: Principal, args: dict) -> dict:
    batch = await reading.read_memories(
        owner_id=principal.user_id,
        ids=args["ids"],
        budget=args.get("maxChars", reading.DEFAULT_BUDGET),
    )
    return serializers.memory_batch(batch)


async def revise(principal: Principal, args: dict) -> dict:
    # An omitted field carries over; one named in `clear` is None, which the service empties.
    cleared = args.get("clear", ())
    for name in cleared:
        if name in args:
            raise InvalidArguments(
                f"clear: names {name}, which this call also gives; give it or clear it, not both"
            )
    fields = {keyword: args[name] for name, keyword in REVISE_OPTIONAL.items() if name in args}
    memory, proposals = await _db(
        threads.revise_memory_with_proposals,
        owner=_owner(principal),
        predecessor_id=args["predecessorId"],
        **fields,
        **{REVISE_OPTIONAL[name]: None for name in cleared},
    )
    return {
        "memory": serializers.memory_ref(memory),
        "predecessorId": str(memory.predecessor_id),
        "proposals": [serializers.proposal(p) for p in proposals],
    } | serializers.past_due(memory, args)


async def archive(principal: Principal, args: dict) -> dict:
    memory = await _db(archive_memory, owner=_owner(principal), memory_id=args["memoryId"])
    return {"memory": serializers.memory_ref(memory)}


async def resolve(principal: Principal, args: dict) -> dict:
    memory = await _db(
        resolve_commitment,
        owner=_owner(principal),
        memory_id=args["memoryId"],
        status=args["status"],
    )
    return {"memory": serializers.memory_ref(memory)}


async def briefing(principal: Principal, args: dict) -> dict:
    result = await _lag_tolerant_db(
        build_briefing,
        owner_id=principal.user_id,
        selector=Selector.clean(args.get("selector"), args.get("value")),
        mode=args.get("mode", "brief"),
    )
    return serializers.briefing(result, compact=args.get("detail") != "full")


async def handoff(principal: Principal, args: dict) -> dict:
    result = await _lag_tolerant_db(
        build_handoff,
        owner_id=principal.user_id,
        selector=Selector.clean(args.get("selector"), args.get("value")),
        section_limit=args.get("sectionLimit", HANDOFF_DEFAULT_ITEMS),
        generated_for=args.get("generatedFor"),
    )
    return serializers.handoff(result, compact=args.get("detail") != "full")


# --- configure_thread --------------------------------------------------------------------
# The input schema is one object for every action, so it cannot say which fields an action reads:
# THREAD_ACTION_HANDLERS does, and each action gets all of its fields, checked before it runs
# (`name` first), and no other.


def _configure_thread_sync(principal: Principal, args: dict) -> dict:
    action = args["action"]
    handler = THREAD_ACTION_HANDLERS[action]
    for field in args:
        if field != "action" and field not in handler.fields:
            taking = [
                name for name, other in THREAD_ACTION_HANDLERS.items() if field in other.fields
            ]
            used_by = f" (it is used by {', '.join(taking)})" if taking else ""
            raise InvalidArguments(f"{field}: not used by action '{action}'; omit it{used_by}")
    for field in handler.fields:
        if field not in args:
            raise InvalidArguments(f"{field}: is required for action '{action}'")
    return {"action": action, **handler.run(_owner(principal), args)}


async def configure_thread(principal: Principal, args: dict) -> dict:
    return await _db(_configure_thread_sync, principal=principal, args=args)


async def describe_environment(
    principal: Principal, args: dict, *, tool_names: Sequence[str]
) -> dict:
    """`tool_names` from the catalogue (mcp_gateway.tools), which imports this module and so
    passes them in rather than being imported from here."""
    account = await _lag_tolerant_db(environment.describe_account, owner=_owner(principal))
    return serializers.environment(
        tool_names=tool_names, scopes=principal.scopes, stats=account.stats, threads=account.threads
    )
