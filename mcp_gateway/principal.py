"""Who is calling: derived only from a verified access token, never from the request body."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: int
    scopes: frozenset[str]

    def can(self, scope: str) -> bool:
        return scope in self.scopes
