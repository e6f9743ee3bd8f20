"""The memory browser of the account pages (My memories): an owner's memories narrowed by the
filter box's words and the filters, with what the page offers and says beside them, read in one
snapshot. A person's simple filter, word by word; agents use the ranked search (memories.search).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import regex
from django.contrib.postgres.fields import ArrayField
from django.core.paginator import Page
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, F, Value
from django.db.models.sql.compiler import SQLCompiler

from memories import bounds, replica
from memories.environment import unknown_facet
from memories.errors import InvalidInput
from memories.models import MembershipState, Memory, MemoryQuerySet, Thread

# The account's projects offered as the project filter's suggestions.
PROJECTS_LISTED = 100


@dataclass(frozen=True)
class BrowseFilters:
    """The browser's filters; None (or blank) filters nothing. `text` as `containing` reads it,
    `project` in any case, `thread` by a thread's name in any case, the others exactly."""

    text: str | None = None
    memory_type: str | None = None
    project: str | None = None
    thread: str | None = None
    commitment_status: str | None = None

    @property
    def given(self) -> bool:
        """Whether any filter narrows the list."""
        return any((self.text, self.memory_type, self.project, self.thread, self.commitment_status))


@dataclass(frozen=True)
class FilterText:
    """A filter box's text as the filter reads it: the words it looks for, each of which a
    memory must hold, and the common English words it leaves out."""

    words: list[str]
    common: list[str]


@dataclass(frozen=True)
class Browse:
    """One page of the browser, with what the page says around it."""

    page: Page  # of the memories listed, newest first
    # As applied: the project in the account's spelling, the thread's name as stored (as given
    # when the owner has no thread by it).
    filters: BrowseFilters
    # The page is empty only because every memory of the account is superseded or archived.
    hidden_exist: bool
    # The owner's names nearest a project none of their current memories has (asked of an empty
    # page only) or a name that is none of their threads, nearest first (perhaps none); None
    # for a name they have, or for no such filter.
    near_projects: list[str] | None
    near_threads: list[str] | None
    projects: list[str]  # the account's, offered as the project filter's suggestions
    threads: list[str]  # the owner's thread names, offered as the thread filter's
    # The filter box's text as read (`read_filter_text`), or None for none. A text of only
    # common words is not applied: `filters.text` is then None.
    text: FilterText | None = None

    @property
    def project_unknown(self) -> bool:
        return self.near_projects is not None

    @property
    def thread_unknown(self) -> bool:
        return self.near_threads is not None


def browse_memories(
    *,
    owner_id: int,
    filters: BrowseFilters,
    show_all: bool,
    paginate: Callable[[MemoryQuerySet], Page],
) -> Browse:
    """The page that `paginate` picks of the owner's memories matching `filters` (current and
    active ones only, unless `show_all`), with what the page says beside it, all read in one
    snapshot: the page, its count and the names offered agree. On the replica inside
    `replica.tolerant_read`."""
    with replica.one_snapshot() as alias:
        project, thread, near_threads = filters.project, filters.thread, None
        if project:
            # In the account's spelling, however it was typed ('Atlas' for 'atlas'), as the
            # tools and the agent's writes take a project.
            project = Memory.objects.in_account_spelling(owner_id, project, using=alias)
        if thread:
            # A name that is no thread of the owner's is applied all the same, listing nothing,
            # and named with the owner's nearest ones, as the tools refuse it (not found) rather
            # than search without it: a mistyped name is not a reason to list every memory.
            stored = Thread.objects.spelling(owner_id, thread)
            if stored is None:
                near_threads = Thread.objects.near_names(owner_id, thread)
            else:
                thread = stored
        text = read_filter_text(filters.text, using=alias) if filters.text else None
        # A text of only common words looks for nothing: it is not applied, and the page says so
        # rather than list every memory as matching it.
        applied = replace(
            filters,
            project=project,
            thread=thread,
            text=filters.text if text and text.words else None,
        )
        owned = Memory.objects.filter(owner_id=owner_id)
        # A name already found to be no thread of the owner's has no members to look up again.
        matching = (
            owned.none()
            if near_threads is not None
            else _matching(owner_id, applied, text.words if applied.text else [])
        )
        listed = matching if show_all else matching.active()
        listed = listed.annotate(successor_id=F("successors__id")).order_by("-recorded_at", "-id")
        page = paginate(listed)
        empty = not page.object_list  # the page's rows are read here, in the snapshot
        # No current memory must not read as "no memories at all" when superseded or archived
        # ones would be shown with the toggle. Asked of the unfiltered account only (its first
        # row answers): with a filter, the empty page offers the toggle without a second scan of
        # the account for the filter's sake.
        hidden_exist = empty and not show_all and not applied.given and matching.exists()
        # A mistyped project is not a project without matches; a page that lists memories of it
        # needs no look.
        near_projects = None
        if empty and project:
            with connections[alias].cursor() as cursor:
                near_projects = unknown_facet(
                    cursor, owner_id=owner_id, facet="project", value=project
                )
        return Browse(
            page=page,
            filters=applied,
            hidden_exist=hidden_exist,
            near_projects=near_projects,
            near_threads=near_threads,
            projects=owned.current().project_names(PROJECTS_LISTED),
            threads=Thread.objects.names(owner_id),
            text=text,
        )


def _matching(owner_id: int, filters: BrowseFilters, words: list[str]) -> MemoryQuerySet:
    """The owner's memories (of every version) matching `filters`: holding each of `words` (the
    text as `read_filter_text` read it), the thread as the members of the owner's thread by that
    name in any case (none for a name that is no thread of theirs), the rest exactly."""
    exact = {
        "memory_type": filters.memory_type,
        "project": filters.project,
        "commitment_status": filters.commitment_status,
    }
    owned = Memory.objects.filter(owner_id=owner_id)
    narrowed = owned.filter(HoldingEveryWord(words)) if words else owned
    narrowed = narrowed.filter(**{column: value for column, value in exact.items() if value})
    if filters.thread:
        narrowed = narrowed.filter(
            memberships__thread__in=Thread.objects.named(owner_id, filters.thread),
            memberships__state=MembershipState.MEMBER,
        )
    return narrowed


def containing(memories: MemoryQuerySet, text: str) -> MemoryQuerySet:
    """Those of `memories` holding each of the words `read_filter_text` looks for in `text` in
    the content, the topic or a tag (part of one will do), in any case and with or without
    accents: the filter box. Word by word, as a person types a filter box: "postgres 16" finds
    "PostgreSQL 16", "Valparaiso" finds "Valparaíso". A text of only common words looks for
    nothing: all of `memories`."""
    words = read_filter_text(text, using=memories.db).words
    return memories.filter(HoldingEveryWord(words)) if words else memories


def read_filter_text(text: str, *, using: str = DEFAULT_DB_ALIAS) -> FilterText:
    """The `filter_words` of `text`, split into those the filter looks for and the common English
    words it leaves out ("what", "our", "the", "a": the stop words of the `english_stem`
    dictionary, which the search drops too), each list in the text's order. One statement on
    the database `using`, whose dictionary decides."""
    words = filter_words(text)
    if len(words) > bounds.FILTER_WORDS_MAX:
        raise InvalidInput("text", f"at most {bounds.FILTER_WORDS_MAX} words; got {len(words)}")
    if not words:
        return FilterText(words=[], common=[])
    # Folded as HoldingEveryWord folds them; a word the dictionary does not read (NULL) is kept.
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
SELECT coalesce(
    cardinality(ts_lexize('english_stem', unaccent(casefold(word COLLATE pg_unicode_fast)))) = 0,
    false
)
FROM unnest(%s::text[]) WITH ORDINALITY AS words (word, position)
ORDER BY position""",
            [words],
        )
        common = [stop for (stop,) in cursor.fetchall()]
    return FilterText(
        words=[word for word, stop in zip(words, common, strict=True) if not stop],
        common=[word for word, stop in zip(words, common, strict=True) if stop],
    )


# A word of the browser's filter box: letters, marks and digits of any script and connector
# punctuation ("_", as in identifiers), joined by a hyphen, a dot or an apostrophe between two of
# them ("stand-up", "v1.2", "node.js", "O'Brien", as the search reads a word), and ending in "+"
# or "#" as "C++" and "C#" do. Any other character separates words, and punctuation before or
# after a word is none of it ("Celery." is "Celery", "celery,redis" two words).
_WORD_CHARACTER = r"[\p{L}\p{M}\p{N}\p{Pc}]"
_FILTER_WORD = regex.compile(
    rf"{_WORD_CHARACTER}+(?:[-.'\u2019]{_WORD_CHARACTER}+)*(?:[+#]++(?!{_WORD_CHARACTER}))?"
)


def filter_words(text: str) -> list[str]:
    """The words of a filter box's text, each once (in any case), in order; for a text with no
    word (emoji, a symbol), the text itself, trimmed, as one. Quotes make no phrase: the box
    finds words, in any order."""
    text = bounds.trimmed(text)
    words: dict[str, str] = {}
    for word in _FILTER_WORD.findall(text) or ([text] if text else []):
        words.setdefault(word.casefold(), word)
    return list(words.values())


class HoldingEveryWord(models.Func):
    """Whether a memory holds every one of `words`, as `containing` says: in its content, topic
    and tags, read as one text (a line break between them, which no word holds, so none matches
    across two), each word a substring, case-folded and unaccented alike on both sides (the
    `unaccent` dictionary, as the search configuration `threengram_unaccented` of migration 0003
    uses it; casefold under pg_unicode_fast, as thread names are compared, since the database's
    own locale folds ASCII only). Every word counts: `read_filter_text` leaves out the common
    ones first."""

    output_field = BooleanField()

    def __init__(self, words: list[str]) -> None:
        words_array = Value(list(words), output_field=ArrayField(models.TextField()))
        super().__init__(F("content"), F("topic"), F("tags"), words_array)

    def as_sql(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: object
    ) -> tuple[str, list[object]]:
        compiled = [compiler.compile(expression) for expression in self.get_source_expressions()]
        (content, _), (topic, _), (tags, _), (words, params) = compiled
        text = f"({content} || E'\\n' || {topic} || E'\\n' || array_to_string({tags}, E'\\n'))"
        # LIKE ALL reads the memory's text once for all the words, which are folded once per
        # statement. A text of ASCII alone (its bytes as many as its characters) is its own
        # unaccented form: unaccent, the costly part, reads only the others. Only compiled
        # column names go into the statement; the words are a parameter.
        sql = f"""
(CASE WHEN octet_length({text}) = char_length({text})
    THEN casefold({text} COLLATE pg_unicode_fast)
    ELSE unaccent(casefold({text} COLLATE pg_unicode_fast))
END) LIKE ALL (ARRAY(
    SELECT '%%' || replace(replace(replace(folded, '\\', '\\\\'), '%%', '\\%%'), '_', '\\_') || '%%'
    FROM (
        SELECT unaccent(casefold(word COLLATE pg_unicode_fast)) AS folded
        FROM unnest({words}) AS word
    ) AS words
))"""  # noqa: S608
        return sql, params
