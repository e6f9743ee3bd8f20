"""configure_thread's actions: one function per action and the one table of them.

THREAD_ACTION_HANDLERS is the single list of the actions: the input schema's enum
(mcp_gateway.schemas), the dispatch and field checks (mcp_gateway.handlers.configure_thread) and
the actions the read scope alone allows (mcp_gateway.tools) are all read from it. This module
imports neither of those, so each can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from django.contrib.auth.base_user import AbstractBaseUser

from mcp_gateway import serializers
from memories import threads


class ThreadAction(NamedTuple):
    # Takes the owner and the arguments and returns the result's fields after "action".
    run: Callable[[AbstractBaseUser, dict], dict]
    # The fields it reads, all required.
    fields: tuple[str, ...]
    # Whether it only reads, and so needs the read scope alone.
    reads_only: bool = False


def _list(owner: AbstractBaseUser, args: dict) -> dict:
    overview = threads.describe_threads(owner=owner)
    return {
        "threads": [serializers.thread(t) for t in overview.threads],
        "proposals": [serializers.proposal(p) for p in overview.proposals],
    }


def _create(owner: AbstractBaseUser, args: dict) -> dict:
    thread = threads.create_thread(owner=owner, name=args["name"])
    return {"thread": serializers.thread(thread)}


def _rename(owner: AbstractBaseUser, args: dict) -> dict:
    thread = threads.rename_thread(owner=owner, name=args["name"], new_name=args["newName"])
    return {"thread": serializers.thread(thread)}


def _pin(owner: AbstractBaseUser, args: dict) -> dict:
    thread = threads.pin_thread(owner=owner, name=args["name"], pinned=True)
    return {"thread": serializers.thread(thread)}


def _unpin(owner: AbstractBaseUser, args: dict) -> dict:
    thread = threads.pin_thread(owner=owner, name=args["name"], pinned=False)
    return {"thread": serializers.thread(thread)}


def _delete(owner: AbstractBaseUser, args: dict) -> dict:
    thread = threads.delete_thread(owner=owner, name=args["name"])
    return {"thread": serializers.thread(thread)}


def _add_members(owner: AbstractBaseUser, args: dict) -> dict:
    change = threads.add_thread_members(
        owner=owner, name=args["name"], memory_ids=args["memoryIds"]
    )
    return serializers.members_change(change)


def _remove_members(owner: AbstractBaseUser, args: dict) -> dict:
    change = threads.remove_thread_members(
        owner=owner, name=args["name"], memory_ids=args["memoryIds"]
    )
    return serializers.members_change(change)


def _accept_proposal(owner: AbstractBaseUser, args: dict) -> dict:
    membership = threads.decide_thread_proposal(
        owner=owner, proposal_id=args["proposalId"], accept=True
    )
    return {"proposal": serializers.decided_proposal(membership)}


def _reject_proposal(owner: AbstractBaseUser, args: dict) -> dict:
    membership = threads.decide_thread_proposal(
        owner=owner, proposal_id=args["proposalId"], accept=False
    )
    return {"proposal": serializers.decided_proposal(membership)}


# Every action the input schema offers, and the fields it reads. Any other field is refused
# rather than ignored: an accept_proposal naming a thread would otherwise accept into the
# proposal's own thread, and a create with members would create an empty thread, both answered
# as success.
THREAD_ACTION_HANDLERS: dict[str, ThreadAction] = {
    "list": ThreadAction(_list, (), reads_only=True),
    "create": ThreadAction(_create, ("name",)),
    "rename": ThreadAction(_rename, ("name", "newName")),
    "pin": ThreadAction(_pin, ("name",)),
    "unpin": ThreadAction(_unpin, ("name",)),
    "delete": ThreadAction(_delete, ("name",)),
    "add_members": ThreadAction(_add_members, ("name", "memoryIds")),
    "remove_members": ThreadAction(_remove_members, ("name", "memoryIds")),
    "accept_proposal": ThreadAction(_accept_proposal, ("proposalId",)),
    "reject_proposal": ThreadAction(_reject_proposal, ("proposalId",)),
}
