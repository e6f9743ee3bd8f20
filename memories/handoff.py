"""The handoff package: what one session hands to the next. Decisions, open commitments, the
commitments resolved in the last RECENTLY_RESOLVED_DAYS (what was just finished), blockers,
preferences and facts with 600-character excerpts (the resolved ones shorter, and fewer), exact
counts, and a per-section `truncated` flag when a section holds more than it shows; and the
pinned threads, as the briefing lists them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from memories import bounds, replica
from memories.briefing import (
    EXCERPT,
    OPEN_COMMITMENT,
    PinnedThreads,
    Section,
    SectionSpec,
    Selector,
    read_pinned_threads,
    read_sections,
    unlisted_members,
)
from memories.errors import InvalidInput
from memories.excerpts import EXCERPT_MAX

DEFAULT_ITEMS = 10
MAX_ITEMS = 25
GENERATED_FOR_MAX = 256
# What was just finished, as a reminder rather than a record: a week spans the gap between two
# sessions over a weekend; the few newest, each in a short excerpt (the briefing's brief one),
# keep a package that is long already from growing much. The exact count says how many more.
RECENTLY_RESOLVED = "recentlyResolved"
RECENTLY_RESOLVED_DAYS = 7
RECENTLY_RESOLVED_MAX = 5
RECENTLY_RESOLVED_EXCERPT = EXCERPT["brief"]

HANDOFF_SECTIONS = [
    SectionSpec("decisions", "m.memory_type = 'decision'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec(
        "commitments", OPEN_COMMITMENT, "m.due_at ASC NULLS LAST, m.recorded_at DESC, m.id DESC"
    ),
    # Only a resolved commitment has a resolved_at (the table's constraint).
    SectionSpec(
        RECENTLY_RESOLVED,
        f"m.resolved_at >= %(now)s - interval '{RECENTLY_RESOLVED_DAYS} days'",
        "m.resolved_at DESC, m.id DESC",
        items_max=RECENTLY_RESOLVED_MAX,
        excerpt_max=RECENTLY_RESOLVED_EXCERPT,
    ),
    SectionSpec("blockers", "m.memory_type = 'blocker'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec(
        "preferences",
        "m.memory_type = 'preference'",
        "m.recorded_at DESC, m.id DESC",
        account_wide=True,
    ),
    SectionSpec("facts", "m.memory_type = 'fact'", "m.recorded_at DESC, m.id DESC"),
]


@dataclass
class Handoff:
    selector: Selector
    generated_for: str | None
    generated_at: datetime
    sections: dict[str, Section]
    pinned_threads: PinnedThreads
    # Of a thread's current memories, how many no section lists (0 for another selector).
    unlisted: int = 0


def build_handoff(
    *,
    owner_id: int,
    selector: Selector,
    section_limit: int = DEFAULT_ITEMS,
    generated_for: object = None,
) -> Handoff:
    if not 1 <= section_limit <= MAX_ITEMS:
        raise InvalidInput(
            "sectionLimit", f"must be between 1 and {MAX_ITEMS}; got {section_limit}"
        )
    label = (
        bounds.clean_text("generatedFor", generated_for, maximum=GENERATED_FOR_MAX)
        if generated_for is not None
        else None
    )
    now = timezone.now()
    with replica.one_snapshot():
        selector, sections, members = read_sections(
            owner_id=owner_id,
            selector=selector,
            specs=HANDOFF_SECTIONS,
            items=section_limit,
            excerpt_max=EXCERPT_MAX,
            now=now,
        )
        pinned_threads = read_pinned_threads(owner_id)
    return Handoff(
        selector=selector,
        generated_for=label,
        generated_at=now,
        sections=sections,
        pinned_threads=pinned_threads,
        unlisted=unlisted_members(members, sections),
    )
