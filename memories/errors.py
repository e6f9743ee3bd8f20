"""Typed domain errors. Each carries a stable `reason` (the prefix MCP tools put on tool errors)
and a message written for the caller: it names the field and the limit, never another tenant's
data."""

from __future__ import annotations

from collections.abc import Iterable


class DomainError(Exception):
    reason: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


class InvalidInput(DomainError):
    reason = "invalid_input"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class NotFound(DomainError):
    """Raised alike for a missing id, a malformed id and another tenant's id."""

    reason = "not_found"


# A name the caller got wrong is answered with the caller's own names most like it: at most
# SUGGESTIONS_MAX, at least this alike (pg_trgm similarity, 0..1).
SUGGESTION_SIMILARITY = 0.3
SUGGESTIONS_MAX = 3


def did_you_mean(names: list[str]) -> str:
    """'did you mean 'a' or 'b'?' for the caller's own near names, or '' when there are none."""
    return f"did you mean {' or '.join(repr(name) for name in names)}?" if names else ""


class Conflict(DomainError):
    reason = "conflict"


class DuplicateMemory(DomainError):
    reason = "duplicate_memory"

    def __init__(self, existing_id: object, archived: bool = False) -> None:
        message = f"the same content is already stored as memory {existing_id}"
        if archived:
            # Searches leave archived memories out by default: say where it went.
            message += (
                " (archived: search with status 'archived' finds it; revise it to use it again)"
            )
        else:
            # A caller storing it again usually wants it filed otherwise.
            message += "; revise it to change its type, topic, scope, project or tags"
        super().__init__(message)
        self.existing_id = existing_id


class InvalidTransition(DomainError):
    reason = "invalid_transition"

    def __init__(self, current: str, requested: str, allowed: Iterable[str] = ()) -> None:
        # The moves it has, so a caller knows the way round (reopen, then move on).
        moves = " or ".join(f"'{state}'" for state in sorted(allowed))
        super().__init__(
            f"a commitment cannot move from '{current}' to '{requested}'"
            + (f"; from '{current}' it can move to {moves}" if moves else "")
        )
        self.current = current
        self.requested = requested


class AccountInactive(DomainError):
    reason = "account_inactive"
