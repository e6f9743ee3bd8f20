"""Where a hit's content holds the query's words, so that a hit whose leading excerpt does not
show them is shown by a window around the first (excerpts.excerpt_showing): a memory found by
a word near its end otherwise looks unrelated to the question.

Only the page's hits are looked at, and of those only the ones cut (longer than their excerpt)
that hold a query term in their content (windowed) and whose excerpt does not show a query word
as written (shows_a_word). PostgreSQL marks, in those alone, the words matching the query's
terms in the word forms search matches (stems, unaccented, case-folded: the
`threengram_unaccented` configuration), through ts_headline over the content (within its bound,
bounds.CONTENT_MAX): parsing a long content again is the costliest part of showing a hit,
which the common hit, whose excerpt shows the word asked for, is spared. CJK terms, which the
parser reads inside runs it keeps whole, are found as written. A hit matched by its topic or
meaning alone keeps its leading excerpt.
"""

from __future__ import annotations

import re

from memories.bounds import UNPAIRED_SURROGATE_MARK
from memories.excerpts import ELLIPSIS
from memories.search.query import Query
from memories.search.scoring import Candidate

# The mark before and after each match: never in a memory's content (bounds.unstorable_text).
HIGHLIGHT = UNPAIRED_SURROGATE_MARK
# The whole content, every match marked.
HEADLINE_OPTIONS = f"HighlightAll=true, StartSel={HIGHLIGHT}, StopSel={HIGHLIGHT}"


def windowed(candidate: Candidate, excerpt_max: int) -> bool:
    """Whether a hit may need a window: cut, and holding a query term in its content (label B,
    sql.fields_held_sql)."""
    return candidate.content_length > excerpt_max and any(
        "B" in held for held in candidate.fields_held.values()
    )


def shows_a_word(excerpt: str, parsed: Query) -> bool:
    """Whether `excerpt` shows one of the query's words as written (in any case, as a whole
    word): the common hit's, which then needs no more looking at. One that does not may still
    show a word in another form ("retry" for "retries"), which first_match tells."""
    written = sorted({parsed.as_written(term) for term in parsed.terms}, key=len, reverse=True)
    if not written:
        return False
    words = "|".join(re.escape(word) for word in written)
    return re.search(rf"(?<!\w)(?:{words})(?!\w)", excerpt.removesuffix(ELLIPSIS), re.I) is not None


def first_match(content: str, highlighted: str, parsed: Query) -> tuple[int, int] | None:
    """Where (start, end, in code points) `content` first holds one of the query's terms:
    the first marked word of `highlighted` (the content as ts_headline marked it), and the first
    CJK term as written; None when it holds none, or when the marking did not give the content
    as it is up to its first mark (a place in the one would not be the same in the other)."""
    found = []
    start = highlighted.find(HIGHLIGHT)
    end = highlighted.find(HIGHLIGHT, start + 1)
    if 0 <= start < end:
        length = end - start - 1
        if highlighted[:start] == content[:start] and (
            highlighted[start + 1 : end] == content[start : start + length]
        ):
            found.append((start, start + length))
    for term in parsed.cjk_terms:
        if (at := content.find(term)) >= 0:
            found.append((at, at + len(term)))
    return min(found, default=None)
