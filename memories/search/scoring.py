"""Scoring a search's candidates (candidates.py finds them):
- Words. Each candidate is scored BM25F-style on which of its fields hold each query term (not
  how often: a memory is a few sentences, in which a repeated term says little): a term weighs
  more the fewer of the tenant's memories hold it (IDF), content is length-normalised (up to
  LENGTH_RATIO_MAX times the candidates' average length), a term in the topic counts
  TOPIC_WEIGHT times, in the tags or project TAGS_WEIGHT times, a term in the content, and the
  fields' sum saturates. The words score is that sum divided by the summed IDFs of the query's
  WORDS_SCALE_TERMS rarest terms: about 1 when a memory holds what is most distinctive in the
  question, near 0 when it shares only common words.
- Fusion: score = words + MEANING_WEIGHT * max(0, cosine), rounded to 6 places so paging
  compares exact values. A hit matches by words or has a cosine of at least MEANING_MATCH_MIN.
- Abstention: when the best candidate scores under the relevance floor the search returns no
  hits: a question whose distinctive words match nothing and whose meaning is not close gets an
  empty answer rather than the closest noise. The floor is per query, not per hit, so a weaker
  second or third answer still shows. It rises with how many memories compete
  (relevance_floor): the best of more unrelated memories scores higher (and in a larger account
  a partial match's words score a little more: its terms' IDF nears that of the terms it lacks).
  A hit holding all of the query's WORDS_SCALE_TERMS rarest terms is no partial match: however
  long (LENGTH_RATIO_MAX), its words score stays above the highest floor, which the account's
  size counted up to TENANT_SIZE_COUNTED_MAX bounds. The weights
  and the floor were set on the retrieval eval set, measured by scripts/eval_search.py (how:
  tests/memories/retrieval_eval/README.md).
- `matchedBy` of a hit: "words" when a query term (or, in the fallback, the topic's spelling)
  matched, "meaning" when its cosine reached MEANING_MATCH_MIN.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

# A tenant's current memories are counted up to this many (for the IDF); a larger
# tenant counts as this large. An account whose own nearest-neighbour index held at least this
# many entries when PostgreSQL last counted them (pg_class.reltuples: set by the index's build
# and by VACUUM, estimated by ANALYZE) is not counted again: an account's current memories never
# become fewer (a revision closes one and adds its successor), and counting reads a table page
# per row written since the last VACUUM (the visibility map does not cover them yet), as many
# as this right after a bulk load.
TENANT_SIZE_COUNTED_MAX = 10_000
# BM25F (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 3.3).
# A new account's handful of memories says little about how rare a word is: below this many, the
# IDF is computed as if the tenant had this many memories, so a word the question asks about that
# matches nothing still weighs against the match.
IDF_TENANT_SIZE_MIN = 100
BM25_K1 = 0.9
BM25_B = 0.75
# A content term's weight falls with the memory's length, but no further than at this many times
# the candidates' average: terms are counted by which fields hold them, not how often, so what
# BM25's normalisation corrects for (a term repeated the more the longer the text) does not grow
# with a long memory; what does, the chance of holding a word at all, grows far more slowly than
# its length. So a long memory that answers the question is not ranked under short ones that
# merely mention its words.
LENGTH_RATIO_MAX = 1.5
TOPIC_WEIGHT = 2.0
TAGS_WEIGHT = 2.0
# Fusion and the relevance floor (see the module docstring).
MEANING_WEIGHT = 0.4
MEANING_MATCH_MIN = 0.5
# The floor for an account of up to RELEVANCE_FLOOR_SIZE memories, and how much it rises for each
# tenfold growth beyond (counted up to TENANT_SIZE_COUNTED_MAX, as the IDF is): set on the eval
# set's memories alone and behind crowds of others (scripts/eval_search.py --crowd).
RELEVANCE_FLOOR = 0.28
RELEVANCE_FLOOR_SIZE = 200
RELEVANCE_FLOOR_PER_DECADE = 0.07
WORDS_SCALE_TERMS = 3


@dataclass
class Candidate:
    id: uuid.UUID
    recorded_at: datetime
    content_length: int
    # Query term -> labels of the fields holding it (sql.fields_held_sql).
    fields_held: dict[str, str]
    cosine: float | None
    score: float = 0.0
    matched_by: tuple[str, ...] = ()
    lacking: tuple[str, ...] = ()  # the query's rarest terms it does not hold, rarest first


@dataclass(frozen=True)
class WordStatistics:
    """What a words score depends on besides the memory: the account's size (as the IDF counts it),
    how many candidates hold each query term (in the query's term order) and their average length;
    and, of the words walk (candidates.ranked_candidates), which terms were rare among its matches
    (`rare`, their positions in the query's term order) and the oldest match it reached when it
    stopped at its bound (`walked_to`; None: it read all it may), and the same of the rare terms'
    own walk (`rare_walked_to`), and how many of the most recent memories it might read (`walk_max`;
    None when there was no walk). A cursor carries the first page's, so that later pages score as it
    did and rank every candidate it did that still passes the filters: a write between pages changes
    what a bounded walk finds (an archived memory, or one added to a thread, joins the matches of a
    `status: archived` or thread walk and would push the oldest one out; an archive lets an older
    match in, which may hold a rare term and make it common), so a later page walks back as far as
    the first did, without a bound, and looks up the same rare terms, which it walks for as far back
    as the first page did too. It reads as many memories as the first page's walk might: which walk
    an account gets follows its nearest-neighbour index's count, which VACUUM and ANALYZE move."""

    total: int
    held_by: tuple[int, ...]
    average_length: float
    rare: tuple[int, ...] = ()
    walked_to: datetime | None = None
    rare_walked_to: datetime | None = None
    walk_max: int | None = None

    @classmethod
    def of(
        cls,
        candidates: list[Candidate],
        terms: tuple[str, ...],
        tenant_size: int,
        rare: tuple[str, ...] = (),
        walked_to: datetime | None = None,
        rare_walked_to: datetime | None = None,
        walk_max: int | None = None,
    ) -> WordStatistics:
        held = Counter(term for candidate in candidates for term in candidate.fields_held)
        lengths = [candidate.content_length for candidate in candidates] or [1]
        return cls(
            total=max(tenant_size, len(candidates), IDF_TENANT_SIZE_MIN),
            held_by=tuple(held[term] for term in terms),
            average_length=sum(lengths) / len(lengths),
            rare=tuple(terms.index(term) for term in rare),
            walked_to=walked_to,
            rare_walked_to=rare_walked_to,
            walk_max=walk_max,
        )

    def rare_terms(self, terms: tuple[str, ...]) -> tuple[str, ...]:
        """The first page's rare terms among `terms` (the query's)."""
        return tuple(terms[n] for n in self.rare if 0 <= n < len(terms))


def words_scores(
    candidates: list[Candidate],
    terms: tuple[str, ...],
    statistics: WordStatistics,
    undistinctive: frozenset[str] = frozenset(),
) -> tuple[str, ...]:
    """BM25F over the candidates, each divided by the sum of the IDFs of the query's
    WORDS_SCALE_TERMS rarest terms but its `undistinctive` ones: the parts of its hyphenated
    words (a memory writing "standups" holds what "stand-ups" asks for, not "stand" and "up"),
    and the names of a type (Query.type_terms), which no memory's words need hold;
    returns those terms, rarest first."""
    if not terms or not candidates:
        return ()
    total = statistics.total
    idf = {
        term: math.log(1 + (total - count + 0.5) / (count + 0.5))
        for term, count in zip(terms, statistics.held_by, strict=True)
    }
    # Normalised by the question's most distinctive terms, not all of them: a long question in
    # the asker's own words has many terms no memory holds, and should not sink the one that
    # holds what it is about.
    distinctive = [term for term in terms if term not in undistinctive] or terms
    rarest = sorted(distinctive, key=lambda term: idf[term], reverse=True)[:WORDS_SCALE_TERMS]
    scale = sum(idf[term] for term in rarest)
    average_length = statistics.average_length
    for candidate in candidates:
        ratio = min(candidate.content_length / average_length, LENGTH_RATIO_MAX)
        norm = 1 - BM25_B + BM25_B * ratio
        score = 0.0
        for term, held in candidate.fields_held.items():
            weighted = (
                TOPIC_WEIGHT * ("A" in held) + TAGS_WEIGHT * ("C" in held) + ("B" in held) / norm
            )
            score += idf[term] * weighted / (BM25_K1 + weighted)
        candidate.score = score / scale
    return tuple(rarest)


def relevance_floor(competing: int) -> float:
    """The score under which a search's best candidate means no answer, when `competing`
    memories may be found: the account's current memories, or those of the project, the
    commitment states, the scope or the thread that choose what the search reads (the IDF is
    the account's, but moves a partial match's score little); see the module docstring."""
    counted = min(competing, TENANT_SIZE_COUNTED_MAX)
    growth = max(counted, RELEVANCE_FLOOR_SIZE) / RELEVANCE_FLOOR_SIZE
    return RELEVANCE_FLOOR + RELEVANCE_FLOOR_PER_DECADE * math.log10(growth)


def fuse(candidate: Candidate) -> None:
    cosine = candidate.cosine if candidate.cosine is not None else 0.0
    words = candidate.score
    candidate.score = round(words + MEANING_WEIGHT * max(0.0, cosine), 6)
    candidate.matched_by = tuple(
        label
        for label, matched in (("words", words > 0), ("meaning", cosine >= MEANING_MATCH_MIN))
        if matched
    )
