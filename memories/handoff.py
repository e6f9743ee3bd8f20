"""The handoff package: what one session hands to the next. Decisions, open commitments,
blockers, preferences and facts with 600-character excerpts, exact counts, and a per-section
`truncated` flag when a section holds more than it shows; and the pinned threads, as the
briefing lists them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from memories import bounds
from memories.briefing import (
    OPEN_COMMITMENT,
    PinnedThreads,
    Section,
    SectionSpec,
    Selector,
    read_pinned_threads,
    read_sections,
)
from memories.errors import InvalidInput
from memories.excerpts import EXCERPT_MAX

DEFAULT_ITEMS = 10
MAX_ITEMS = 25
GENERATED_FOR_MAX = 256

HANDOFF_SECTIONS = [
    SectionSpec("decisions", "m.memory_type = 'decision'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec(
        "commitments", OPEN_COMMITMENT, "m.due_at ASC NULLS LAST, m.recorded_at DESC, m.id DESC"
    ),
    SectionSpec("blockers", "m.memory_type = 'blocker'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec("preferences", "m.memory_type = 'preference'", "m.recorded_at DESC, m.id DESC"),
    SectionSpec("facts", "m.memory_type = 'fact'", "m.recorded_at DESC, m.id DESC"),
]


@dataclass
class Handoff:
    selector: Selector
    generated_for: str | None
    generated_at: datetime
    sections: dict[str, Section]
    pinned_threads: PinnedThreads


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
    selector, sections = read_sections(
        owner_id=owner_id,
        selector=selector,
        specs=HANDOFF_SECTIONS,
        items=section_limit,
        excerpt_max=EXCERPT_MAX,
        now=now,
    )
    return Handoff(
        selector=selector,
        generated_for=label,
        generated_at=now,
        sections=sections,
        pinned_threads=read_pinned_threads(owner_id),
    )
