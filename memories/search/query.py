"""The query as a search reads it: its significant terms (stop words dropped, stemmed and
unaccented by the `threengram_unaccented` configuration), which are OR'ed, and its required
parts: `"quoted phrases"` and `-exclusions` (of words or `-"phrases"`) are required, as in a web
search engine; one of stop words only requires nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from memories.models import CommitmentStatus, MemoryType

_OPEN_OR_WAITING = (CommitmentStatus.OPEN.value, CommitmentStatus.WAITING.value)
# Words of a question that name a kind of memory or a commitment's state ("what is overdue",
# "open commitments"): a memory's type and state are not among its words, so such a question
# finds nothing by them; the filters that select what it asks for. Each word -> the types, then
# the states, it names.
KIND_WORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{
        word: ((memory_type.value,), ())
        for memory_type in MemoryType
        for word in (memory_type.value, f"{memory_type.value}s")
    },
    **dict.fromkeys(
        ("todo", "todos", "to-do", "to-dos", "promise", "promises"),
        ((MemoryType.COMMITMENT.value,), ()),
    ),
    **{state.value: ((), (state.value,)) for state in CommitmentStatus},
    **dict.fromkeys(("overdue", "pending", "unresolved"), ((), _OPEN_OR_WAITING)),
}

_CONFIG = "'threengram_unaccented'"
# A quoted phrase, excluded when a minus sign precedes it.
_PHRASE = re.compile(r'((?:^|(?<=\s))-)?"([^"]*)"?')
_EXCLUSION = re.compile(r"(?:^|\s)-(\w[^\s]*)")


# A word as the asker wrote it: letters and digits, joined by hyphens, apostrophes or dots.
_WORD = re.compile(r"\w+(?:[-'\u2019.]\w+)*")
# A hyphenated word's lexeme ("stand-up"). Memories are indexed by it also as one word
# ("standup": migration 0020's memories_search_vector, the same pattern), so that a question
# writing either finds a memory writing the other.
_COMPOUND = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")
# A hyphen inside a word: a phrase or exclusion holding one is asked for joined too.
_INNER_HYPHEN = re.compile(r"(?<=[^\W_])-(?=[^\W_])")
# A dotted name as written (each part starts with a letter, as in _DOTTED): a phrase or
# exclusion holding one is asked for joined too ("Next.js" as "Nextjs", "x.ai" as "xai"), but for
# an abbreviation of single letters (_joined_name).
_DOTTED_WRITTEN = re.compile(r"(?<![^\W_])[^\W\d_][^\W_]*(?:\.[^\W\d_][^\W_]*)+")
# A dotted name's lexeme ("next.js"), in migration 0020's pattern: memories are indexed by it
# also joined and stemmed ("nextj"), which takes the stemmer, so the query reads it from the
# database (Query.alternatives).
_DOTTED = re.compile(r"[a-z][a-z0-9]*(?:\.[a-z][a-z0-9]*)+")
# What the parser leaves of an English contraction beside its stop words ("doesn" of "doesn't",
# "re" of "we're"; "don", "can", "t" and "s" are stop words already). Asked for, it would be the
# question's rarest word, held by no memory: the hit that answers would be said to lack it and
# score as if it lacked a word that matters. Dropped only where it was written with its apostrophe
# ("won" of "we won the bid" stays).
_CONTRACTED = frozenset(
    {
        "ain", "aren", "couldn", "d", "didn", "doesn", "hadn", "hasn", "haven", "isn", "ll",
        "m", "mightn", "mustn", "needn", "re", "shan", "shouldn", "ve", "wasn", "weren", "won",
        "wouldn",
    }
)  # fmt: skip
_APOSTROPHES = ("'", "\u2019")
# A run of Chinese, Japanese or Korean characters, as migration 0021 reads them: memories are
# indexed also by its pairs of characters (memories_cjk_paired), as a run is one word to the
# parser ("東京都渋谷区の事務所"); a question asks for the pairs of its runs, a phrase for them in
# order.
_CJK_RUN = re.compile(
    "[\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f]+"
)
# A question asks for at most this many pairs (the first ones): a page of CJK text would otherwise
# ask for hundreds of terms.
CJK_PAIRS_MAX = 32


@dataclass(frozen=True)
class Query:
    terms: tuple[str, ...]  # significant lexemes, deduplicated
    required: str  # the phrases and exclusions, as a tsquery's text ("" for none)
    wanted: str  # the text asked for: the query without its exclusions
    written: dict[str, str] = field(default_factory=dict)  # lexeme -> the word that gave it
    # The lexemes of a hyphenated word's parts ("stand" and "up" of "stand-ups"), unless a word
    # of their own gives them too: they add to a memory's score, but what is distinctive in the
    # question is the whole word.
    parts: frozenset[str] = frozenset()
    # The other spellings a term's memories are indexed by, asked for with it: a hyphenated
    # word joined ("stand-up" -> ("standup",)), a dotted name joined and stemmed ("next.js" ->
    # ("nextj",)), as migration 0020's memories_search_vector adds them.
    alternatives: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The terms asked for as prefixes: a CJK character alone, which memories hold only inside
    # pairs ("책" of "책을", "東" of "東京"; memories_cjk_paired indexes no single character of a
    # longer run).
    prefixed: frozenset[str] = frozenset()
    # Whether `required` holds a phrase (not only exclusions): only memories holding it answer.
    phrased: bool = False
    # Whether `required` holds an exclusion: memories holding it do not answer.
    excluding: bool = False

    def as_written(self, term: str) -> str:
        """A term as the asker wrote it ("latency" for the lexeme "latenc")."""
        return self.written.get(term, term)

    @property
    def cjk_terms(self) -> tuple[str, ...]:
        """The terms that are CJK characters (pairs, or one alone): a memory's text holds them
        as written, inside runs the parser reads as one word each (see _CJK_RUN)."""
        return tuple(term for term in self.terms if _CJK_RUN.fullmatch(term))

    @property
    def type_terms(self) -> frozenset[str]:
        """The terms written as a type's name ("launch blocker", "what did I promise"; see
        KIND_WORDS): a memory's type is not among its words, so a memory of the type asked for
        need not hold them. Not a state's: "open", "waiting" or "resolved" beside other words
        is as a rule a word of the memory's text ("waiting for store review")."""
        return frozenset(
            t for t in self.terms if KIND_WORDS.get(self.as_written(t).lower(), ((), ()))[0]
        )

    def any_term(self, terms: tuple[str, ...] | None = None, weights: str = "") -> str:
        """A tsquery matching any of `terms` (the query's by default), given as lexemes (not
        normalised again), each also in its alternatives, as a prefix if prefixed, in the
        fields of `weights` if given."""
        spellings = [
            spelling
            for term in (self.terms if terms is None else terms)
            for spelling in dict.fromkeys([term, *self.alternatives.get(term, ())])
        ]
        return " | ".join(
            "'"
            + spelling.replace("\\", "\\\\").replace("'", "''")
            + "'"
            + (":*" if spelling in self.prefixed else ":" if weights else "")
            + weights
            for spelling in spellings
        )


def parse(db, text: str) -> Query:
    """The query's OR'ed terms and its required phrases and exclusions. A phrase or exclusion
    of stop words only requires nothing (PostgreSQL would make it a query that matches no row)."""
    quoted = [(minus, phrase) for minus, phrase in _PHRASE.findall(text) if phrase.strip()]
    phrases = [phrase for minus, phrase in quoted if not minus]
    rest = _PHRASE.sub(" ", text)
    exclusions = _EXCLUSION.findall(rest)
    rest = _EXCLUSION.sub(" ", rest)
    # An exclusion goes as a phrase: "-env:staging" excludes the two words together, where as a
    # bare word its punctuation would split it and leave "staging" required.
    items = quoted + [("-", x.replace('"', " ")) for x in exclusions]
    # Each in either spelling of its hyphenated words and dotted names, as memories are indexed:
    # a phrase found in one, an exclusion excluding both.
    spellings = [(minus, _spellings(phrase)) for minus, phrase in items]
    wanted = " ".join(" ".join([rest, *phrases]).split())
    # The pairs of its CJK runs, the first ones; the rest read as words. A pair is named as
    # written, not its run: a Japanese question is one run, and a hit holding most of it would
    # be said to lack all of it.
    cjk_pairs = dict.fromkeys(pair for run in _CJK_RUN.findall(wanted) for pair in _cjk_pairs(run))
    cjk_pairs = list(cjk_pairs)[:CJK_PAIRS_MAX]
    plain = _CJK_RUN.sub(" ", wanted)
    words = list(dict.fromkeys(_WORD.findall(plain))) + cjk_pairs
    db.execute(
        f"SELECT (SELECT coalesce(array_agg(lexeme), '{{}}') "  # noqa: S608 (constant)
        f"FROM unnest(to_tsvector({_CONFIG}, %s))), "
        f"array(SELECT websearch_to_tsquery({_CONFIG}, r)::text "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(r, n) ORDER BY n), "
        # Each word's own lexemes, in the words' order: which word a term came from.
        "written.lexemes, written.words FROM ("
        "SELECT coalesce(array_agg(l ORDER BY n), '{}') AS lexemes, "
        "coalesce(array_agg(w ORDER BY n), '{}') AS words "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, n), "
        f"unnest(tsvector_to_array(to_tsvector({_CONFIG}, w))) AS l) written",
        [
            " ".join([plain, *cjk_pairs]),
            [f'{minus}"{v}"' for minus, variants in spellings for v in variants],
            words,
        ],
    )
    terms, queries, lexemes, sources = db.fetchone()
    pairs = list(zip(lexemes, sources, strict=True))
    contracted = {lexeme for lexeme, word in pairs if lexeme in _CONTRACTED} - {
        lexeme for lexeme, word in pairs if not any(mark in word for mark in _APOSTROPHES)
    }
    terms = [term for term in terms if term not in contracted]
    # Only a word whose whole has a joined spelling stands for its parts: a date, a version or a
    # compound in another script ("2024-01-05", "v1.2-beta") has none, so its lexemes stay its own.
    joinable = {word for lexeme, word in pairs if _COMPOUND.fullmatch(lexeme)}
    written: dict[str, str] = {}
    whole_words: set[str] = set()
    for lexeme, word in pairs:
        written.setdefault(lexeme, word)
        if word not in joinable or _COMPOUND.fullmatch(lexeme):
            whole_words.add(lexeme)
    required, phrased, excluding = _required(spellings, iter(queries))
    return Query(
        terms=tuple(terms),
        required=required,
        phrased=phrased,
        excluding=excluding,
        wanted=wanted,
        written=written,
        parts=frozenset(written) - whole_words,
        prefixed=frozenset(
            lexeme for lexeme, word in pairs if len(word) == 1 and _CJK_RUN.fullmatch(word)
        ),
        alternatives={
            **{term: (term.replace("-", ""),) for term in terms if _COMPOUND.fullmatch(term)},
            **_dotted_joined(db, [term for term in terms if _DOTTED.fullmatch(term)]),
        },
    )


def _spellings(phrase: str) -> list[str]:
    """A phrase as written, with its hyphenated words and dotted names joined, and with its CJK
    runs as their pairs of characters in order (as memories_cjk_paired indexes them)."""
    joined = _DOTTED_WRITTEN.sub(_joined_name, phrase)
    return list(
        dict.fromkeys(
            [
                phrase,
                _INNER_HYPHEN.sub("", phrase),
                _INNER_HYPHEN.sub("", joined),
                _cjk_paired(phrase),
            ]
        )
    )


def _joined_name(name: re.Match[str]) -> str:
    """A dotted name without its dots; an abbreviation of single letters as written: "a.m."
    joined is "am", a stop word, and a phrase or exclusion would lose it."""
    parts = name.group().split(".")
    return name.group() if all(len(part) == 1 for part in parts) else "".join(parts)


def _cjk_paired(text: str) -> str:
    """A text with each CJK run replaced, where it stands, by its pairs (memories_cjk_paired)."""
    return _CJK_RUN.sub(lambda run: f" {' '.join(_cjk_pairs(run.group()))} ", text)


def _cjk_pairs(run: str) -> list[str]:
    """A CJK run's overlapping pairs of characters, in order; a run of one, itself."""
    return [run] if len(run) == 1 else [run[n : n + 2] for n in range(len(run) - 1)]


def _dotted_joined(db, dotted: list[str]) -> dict[str, tuple[str, ...]]:
    """Each dotted name's lexemes once joined and stemmed ("next.js" -> ("nextj",)), as
    memories_search_vector adds them; a round trip only for a question that holds one. Not its
    parts: "next" of "Next.js" or "moment" of "moment.js" is a common word, which would find
    "next Tuesday" or "at the moment" for a question about the library."""
    if not dotted:
        return {}
    db.execute(
        f"SELECT t, tsvector_to_array(to_tsvector({_CONFIG}, replace(t, '.', ''))) "  # noqa: S608
        "FROM unnest(%s::text[]) AS t",
        [dotted],
    )
    return {term: tuple(joined) for term, joined in db.fetchall() if joined}


def _required(
    spellings: list[tuple[str, list[str]]], queries: Iterator[str]
) -> tuple[str, bool, bool]:
    """The phrases and exclusions as one tsquery: each phrase in any of its spellings, each
    exclusion in none; one of stop words only (an empty query, `queries` in the spellings'
    order) requires nothing, as PostgreSQL would make it a query that matches no row. Then
    whether a phrase requires something, and whether an exclusion does."""
    required = []
    phrased = excluding = False
    for minus, variants in spellings:
        alternatives = [query for query in (next(queries) for _ in variants) if query]
        if alternatives:
            joiner = " & " if minus else " | "
            required.append("( " + joiner.join(f"( {q} )" for q in alternatives) + " )")
            phrased = phrased or not minus
            excluding = excluding or bool(minus)
    return " & ".join(required), phrased, excluding
