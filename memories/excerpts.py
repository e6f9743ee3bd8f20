"""The one excerpt rule shared by search, briefing and handoff: bodies longer than the limit are
cut and end in an ellipsis, and the caller is told (truncated, contentLength) so it can fetch the
full body from the cacheable `threengram://memory/{id}` resource."""

from __future__ import annotations

from dataclasses import dataclass

ELLIPSIS = "\u2026"
SEARCH_EXCERPT_MAX = 600


@dataclass(frozen=True)
class Excerpt:
    text: str
    truncated: bool


def excerpt(content: str, limit: int = SEARCH_EXCERPT_MAX) -> Excerpt:
    """At most `limit` code points: the body as is, or its first limit-1 and an ellipsis."""
    if len(content) <= limit:
        return Excerpt(content, False)
    return Excerpt(content[: limit - 1].rstrip() + ELLIPSIS, True)
