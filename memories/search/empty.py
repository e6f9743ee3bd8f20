"""Why a search's page is empty, and what kind of memory its query names: the notes that let
an agent tell "nothing stored" from "ask otherwise" (EmptyBecause) and a query that names a type
or a commitment's state from one about those words (KindAsked). Read from what the search found
anyway: no other statement runs for them but, on an empty page, a check that what the filters
name still exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.backends.utils import CursorWrapper

from memories import thread_sql
from memories.environment import require_known_facet
from memories.excerpts import MemoryExcerpt
from memories.models import MemoryType, Status
from memories.search.cursor import Position
from memories.search.filters import SearchFilters, Where
from memories.search.query import KIND_WORDS, Query

# Why a first page of a query has no hits (EmptyBecause.reason), in the order they are checked.
NOTHING_STORED = "nothing_stored"
NOTHING_RECORDED_BY = "nothing_recorded_by"
NOTHING_TO_SEARCH_BY = "nothing_to_search_by"
UNDER_FLOOR = "under_floor"
NO_MATCH = "no_match"
NOTHING_LISTED = "nothing_listed"


_OTHER_STATUS = {
    Status.ACTIVE.value: Status.ARCHIVED.value,
    Status.ARCHIVED.value: Status.ACTIVE.value,
}


@dataclass(frozen=True)
class KindAsked:
    """The words of a query naming a kind of memory or a commitment's state (`words`, as
    written), and the filters that select it: `memory_types` (other than commitment when
    `commitment_states` are named, which select commitments) and `commitment_states`."""

    words: tuple[str, ...]
    memory_types: tuple[str, ...] = ()
    commitment_states: tuple[str, ...] = ()
    # The query holds other words too (kind_named): the filter goes beside them.
    among_other_words: bool = False


# Types whose plural beside other words asks for memories of the type as a rule ("open blockers
# in atlas", "decisions about the API"); not "notes", "facts", "events" or "patterns", which
# name other things as often ("release notes", "design patterns").
_TYPES_ASKED_BY_NAME = {
    MemoryType.BLOCKER,
    MemoryType.COMMITMENT,
    MemoryType.DECISION,
    MemoryType.PREFERENCE,
}
# States that beside other words ask for commitments in them ("what is overdue in infra"): words
# a memory's text seldom holds of itself; not "open", "waiting" or "resolved", which as a rule are
# words of the text ("waiting for store review").
_STATES_ASKED_BY_NAME = {"overdue", "pending", "unresolved"}
_KINDS_NAMED_AMONG_WORDS = {
    word: named
    for word, named in KIND_WORDS.items()
    if (word.endswith("s") and set(named[0]) & _TYPES_ASKED_BY_NAME)
    or word in _STATES_ASKED_BY_NAME
}


def kind_named(
    parsed: Query, filters: SearchFilters, hits: Sequence[MemoryExcerpt]
) -> KindAsked | None:
    """The types a query names in the plural beside other words ("open blockers in atlas"), or
    the commitment states it names by a word a text seldom holds ("what is overdue in infra"),
    when no type or state filter is given and the page is empty or its first hit is not of that
    type or state: search matched those words in the text, whatever a memory's type or state,
    and a filter selects it."""
    if filters.memory_types or filters.commitment_states:
        return None
    words = [parsed.as_written(t) for t in parsed.terms if t not in parsed.parts]
    named = [w for w in words if w.lower() in _KINDS_NAMED_AMONG_WORDS]
    kinds = [_KINDS_NAMED_AMONG_WORDS[w.lower()] for w in named]
    types, states = _filterable(
        tuple(dict.fromkeys(t for kind_types, _ in kinds for t in kind_types)),
        tuple(dict.fromkeys(s for _, kind_states in kinds for s in kind_states)),
    )
    if not states:
        # "overdue blockers": the state word names nothing a filter selects.
        named = [w for w, (kind_types, _) in zip(named, kinds, strict=True) if kind_types]
    if not types and not states:
        return None
    if hits and (
        hits[0].memory_type in types
        or (
            hits[0].memory_type == MemoryType.COMMITMENT.value
            and hits[0].commitment_status in states
        )
    ):
        return None
    return KindAsked(_in_query_order(parsed, named), types, states, among_other_words=True)


def kind_asked(parsed: Query) -> KindAsked | None:
    """What a query made only of words naming a kind of memory or a commitment's state asks
    for ("overdue commitments", "what is pending"), or None: a query with any other significant
    word ("when does the office open") is about that word."""
    words: list[str] = []
    types: list[str] = []
    states: list[str] = []
    for term in parsed.terms:
        if term in parsed.parts:
            continue
        word = parsed.as_written(term)
        named = KIND_WORDS.get(word.lower())
        if named is None:
            return None
        if word in words:
            continue
        words.append(word)
        types += [t for t in named[0] if t not in types]
        states += [s for s in named[1] if s not in states]
    if not words:
        return None
    return KindAsked(_in_query_order(parsed, words), *_filterable(tuple(types), tuple(states)))


def _filterable(types: tuple[str, ...], states: tuple[str, ...]) -> tuple[tuple, tuple]:
    """The types and commitment states named, as filters select them: a state beside a type
    that has none ("open blockers") qualifies nothing a filter selects (a commitment state
    filter keeps commitments only), and commitments are selected by their states alone."""
    if any(t != MemoryType.COMMITMENT.value for t in types):
        return types, ()
    return ((), states) if states else (types, ())


def _in_query_order(parsed: Query, words: list[str]) -> tuple[str, ...]:
    """`words`, each once, in the order the query has them."""
    asked = parsed.wanted.lower()
    return tuple(sorted(dict.fromkeys(words), key=lambda word: asked.find(word.lower())))


@dataclass(frozen=True)
class EmptyBecause:
    """The likeliest reason a first page of a query has no hits, checked in this order:
    - NOTHING_STORED: the account holds no memory at all, of any status (of a listing too).
    - NOTHING_RECORDED_BY: none had been recorded by `as_of` (of a listing too).
    - NOTHING_TO_SEARCH_BY: the query holds only stop words or punctuation, or only exclusions
      (`exclusions_only`): nothing was looked for.
    - UNDER_FLOOR: `count` memories matched it by words or meaning, none closely enough (the
      relevance floor, scoring.py).
    - NO_MATCH: none of the memories searched shares a word with it or is close in meaning,
      under the `filters` given (SearchFilters.given).
    Of a listing (no query) whose first page is empty and the last: NOTHING_LISTED, no memory
    passes the `filters` given.
    `unsearched`: the status the status filter left out ('archived' by default), whose memories
    were not looked at: whether one of them would match is not known, and finding out would
    cost a second search on every empty page. `kind`: of a query made only of words naming a
    type or a commitment's state (kind_asked), or naming one among other words without a type
    or state filter (kind_named), those words (UNDER_FLOOR and NO_MATCH): a memory's type and
    state are not among the words search matches. `phrased`, `excluding` (NO_MATCH): the query
    holds a quoted phrase (every memory searched held it), an exclusion (none held it): memories
    that share its words otherwise were not looked at.
    Counts, names of filters and the query's own words only: never a memory's content."""

    reason: str
    count: int = 0
    exclusions_only: bool = False
    filters: tuple[str, ...] = ()
    unsearched: str | None = None
    kind: KindAsked | None = None
    phrased: bool = False
    excluding: bool = False
    as_of: datetime | None = None

    @property
    def searched(self) -> str | None:
        """The one status searched, when the filter left the other out."""
        return _OTHER_STATUS.get(self.unsearched) if self.unsearched else None


def why_empty(
    cursor: CursorWrapper,
    *,
    owner_id: int,
    filters: SearchFilters,
    where: Where,
    position: Position | None,
    parsed: Query | None,
    under_floor: int,
    tenant_size: int,
    window_ended: bool,
) -> EmptyBecause | None:
    """Of a page without hits: NotFound when the thread it reads is gone, or (a first page, not
    as of an instant) when the scope or project it names holds none of the owner's memories;
    otherwise why a first page is empty (EmptyBecause), None for a later page or a listing whose
    window ended before any memory passed the filters (a cursor goes on past it). `parsed` is
    the query (None: a listing), `under_floor` how many candidates its ranking dropped under the
    floor, `tenant_size` how many current memories the account holds (counted up to a bound)."""
    if where.thread_id is not None:
        # Nothing in the thread: in this read's snapshot, because the thread is gone (deleted
        # since its name was looked up) or because none of its members matched.
        thread_sql.require_still_there(owner_id, where.thread_id, filters.thread)
    if position is not None:
        return None
    if filters.as_of is None:
        # No hits: a scope or project the owner has no memory in is named as the reason,
        # rather than left for the agent to rephrase its query against.
        for facet, value in (("scope", filters.scope), ("project", filters.project)):
            if value is not None:
                require_known_facet(cursor, owner_id=owner_id, facet=facet, value=value)
    # Nothing could have matched: advice to ask otherwise, widen the status or go back in time
    # would lead to more empty pages.
    if tenant_size == 0:
        return EmptyBecause(NOTHING_STORED)
    if filters.as_of is not None:
        cursor.execute(_RECORDED_BY_SQL, {"owner": owner_id, "as_of": filters.as_of})
        if not cursor.fetchone()[0]:
            return EmptyBecause(NOTHING_RECORDED_BY, as_of=filters.as_of)
    if parsed is not None:
        return _empty_because(parsed, filters, under_floor)
    if window_ended:
        return None
    return EmptyBecause(NOTHING_LISTED, filters=filters.given(), unsearched=_unsearched(filters))


# Whether the account had recorded any memory by an instant: one probe of its newest-first index.
_RECORDED_BY_SQL = """
SELECT EXISTS (SELECT 1 FROM memories_memory m
               WHERE m.owner_id = %(owner)s AND m.recorded_at <= %(as_of)s)
"""


def _empty_because(parsed: Query, filters: SearchFilters, under_floor: int) -> EmptyBecause:
    """Why the first page of `parsed` under `filters` has no hits (see EmptyBecause), given how
    many candidates its ranking dropped under the floor."""
    if not parsed.terms:
        # Without terms nothing was looked up; what the query requires is then its exclusions
        # (a phrase of other than stop words would have given terms).
        return EmptyBecause(NOTHING_TO_SEARCH_BY, exclusions_only=bool(parsed.required))
    unsearched = _unsearched(filters)
    kind = kind_asked(parsed) or kind_named(parsed, filters, [])
    if under_floor:
        return EmptyBecause(UNDER_FLOOR, count=under_floor, unsearched=unsearched, kind=kind)
    return EmptyBecause(
        NO_MATCH,
        filters=filters.given(),
        unsearched=unsearched,
        kind=kind,
        phrased=parsed.phrased,
        excluding=parsed.excluding,
    )


def _unsearched(filters: SearchFilters) -> str | None:
    """The status whose memories the status filter (or its default) leaves out, if one."""
    return _OTHER_STATUS.get(filters.status or filters.default_status)
