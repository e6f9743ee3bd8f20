"""The query as a search reads it: its significant terms (stop words dropped, stemmed and
unaccented by the `threengram_unaccented` configuration), which are OR'ed, and its required
parts: `"quoted phrases"` and `-exclusions` (of words or `-"phrases"`) are required, as in a web
search engine; one of stop words only requires nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CONFIG = "'threengram_unaccented'"
# A quoted phrase, excluded when a minus sign precedes it.
_PHRASE = re.compile(r'((?:^|(?<=\s))-)?"([^"]*)"?')
_EXCLUSION = re.compile(r"(?:^|\s)-(\w[^\s]*)")


@dataclass(frozen=True)
class _Query:
    terms: tuple[str, ...]  # significant lexemes, deduplicated
    required: str  # the phrases and exclusions, in web-search syntax ("" for none)
    wanted: str  # the text asked for: the query without its exclusions


def _parse(db, text: str) -> _Query:
    """The query's OR'ed terms and its required phrases and exclusions. A phrase or exclusion
    of stop words only requires nothing (PostgreSQL would make it a query that matches no row)."""
    quoted = [(minus, phrase) for minus, phrase in _PHRASE.findall(text) if phrase.strip()]
    phrases = [phrase for minus, phrase in quoted if not minus]
    rest = _PHRASE.sub(" ", text)
    exclusions = _EXCLUSION.findall(rest)
    rest = _EXCLUSION.sub(" ", rest)
    # An exclusion goes as a phrase: "-env:staging" excludes the two words together, where as a
    # bare word its punctuation would split it and leave "staging" required.
    required = " ".join(
        [f'{minus}"{phrase}"' for minus, phrase in quoted]
        + ['-"{}"'.format(x.replace('"', " ")) for x in exclusions]
    )
    wanted = " ".join(" ".join([rest, *phrases]).split())
    db.execute(
        f"SELECT (SELECT coalesce(array_agg(lexeme), '{{}}') "  # noqa: S608 (constant)
        f"FROM unnest(to_tsvector({_CONFIG}, %s))), "
        f"numnode(websearch_to_tsquery({_CONFIG}, %s))",
        [wanted, required],
    )
    terms, required_nodes = db.fetchone()
    return _Query(terms=tuple(terms), required=required if required_nodes else "", wanted=wanted)


def _any_term(terms: tuple[str, ...]) -> str:
    """A tsquery matching any of `terms`, given as lexemes (not normalised again)."""
    return " | ".join("'" + term.replace("\\", "\\\\").replace("'", "''") + "'" for term in terms)
