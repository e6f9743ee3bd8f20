"""What `completion/complete` refuses whichever reference it completes (a prompt's argument,
mcp_gateway.prompts; a resource template's, mcp_gateway.resources): the same text a prompt
or tool would refuse, and a value longer than any value completed. Refusals are JSON-RPC
-32602 (Invalid Params), as an unknown prompt is on prompts/get."""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from memories import bounds

# The longest value any argument completes to (a project): a longer one completes nothing, and
# the prefix match would be run for it all the same.
COMPLETION_VALUE_MAX = max(bounds.PROJECT_MAX, bounds.SCOPE_MAX, bounds.THREAD_NAME_MAX)


def invalid_params(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def refuse_unreadable(reference: dict[str, object], argument: str, value: object) -> None:
    """Raise -32602 naming the field: text PostgreSQL could not store in `reference` (its
    fields by their wire names, `ref.name`, `ref.uri`), the argument's name or its value, or a
    value past COMPLETION_VALUE_MAX."""
    problem = bounds.text_problem_in(
        reference | {"argument.name": argument, "argument.value": value}
    )
    if problem:
        raise invalid_params(f"invalid_input: {problem}")
    if isinstance(value, str) and len(value) > COMPLETION_VALUE_MAX:
        raise invalid_params(
            f"invalid_input: argument.value: must be at most {COMPLETION_VALUE_MAX} characters "
            f"(no value completed is longer); got {len(value)}"
        )


def refuse_unknown_argument(argument: str) -> None:
    """Raise -32602 for an argument the reference does not take, as prompts/get names it."""
    shown = bounds.shown_field_name(argument)
    raise invalid_params(f"invalid_input: {shown}: unknown argument")
