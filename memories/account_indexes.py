"""Indexes of one large account each: a nearest-neighbour (HNSW) index over its vectors and a
full-text (GIN) index over its words.

A search reads one tenant's current memories (memories/search/). A small account is read
directly: its few thousand rows cost less to scan than an index walk. An account with
LARGE_ACCOUNT_MIN current memories or more gets indexes of its own, partial on its owner and on
current rows, because an index over every account's rows costs on both sides:
- every memory written, of any account, would join it (an HNSW insert is the costliest part of
  writing a memory); with indexes per large account, a memory of an ordinary account joins none,
  and one of a large account joins its own account's only;
- a large account's search would read entries of every other account (graph nodes, posting
  lists), each then discarded by the owner filter.

The words index serves a search through `memory_recent_word_matches` (migrations
memories/0012, 0013 and 0018), a function that runs as the owner of the tables and reads the current
tenant from the same setting as the row-level security policies: the full-text operator is not
leakproof, so under row-level security PostgreSQL may not use it as an index condition, and a
search would otherwise read the account's rows one by one.

`Kind.sync` builds the index of its kind of every account that has grown large, rebuilds one left
invalid or built with other options (beside it: one built with other options serves searches
until then), and drops the index of an account that has shrunk below half the bound (half, so that
an account hovering at the bound does not get its index built and dropped in turn; an erased
account counts as empty). `manage.py index_accounts` runs it (from cron: an account's growth past
the bound is not noticed otherwise), and so does `manage.py embed_memories` at the end of every
run. Until an account's index is built, its searches read its rows directly: the same results,
more slowly.

Index names carry the owner's id (`Kind.index_name`). Everything here changes the schema and
spans every tenant, so it runs as the owner of the tables (`tenancy.as_owner`); and outside any
transaction, which CREATE and DROP INDEX CONCURRENTLY require (in return they block neither reads
nor writes).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from django.db import connection, transaction

from memories.models import ERASED_SCOPE

LARGE_ACCOUNT_MIN = 5_000
# An index being built to replace an account's index (Kind.rebuild) has the account index's name
# and this suffix, and the index it replaced has the other one until it is dropped; neither is
# an account index for `Kind.indexes`.
_REPLACEMENT_SUFFIX = "_replacement"
_REPLACED_SUFFIX = "_replaced"
# The nearest-neighbour graph (NEAREST's options) has fewer links per node than pgvector's
# defaults, so that a memory joins it faster: its account's remember pays for that on every write.
# A search makes up for the sparser graph by keeping this many candidates as it walks
# (hnsw.ef_search; pgvector's default is fewer than search.meaning.SEMANTIC_CANDIDATES). Both
# sides are measured in docs/performance.md.
SEARCH_LIST_SIZE = 200


@dataclass
class Sync:
    """What `Kind.sync` did: the owners whose index it built, rebuilt and dropped."""

    built: list[int] = field(default_factory=list)
    rebuilt: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # "built", "rebuilt" -> time taken


@dataclass(frozen=True)
class Kind:
    """One kind of account index. `using`: its method and column; `options`: its storage
    parameters; `holds`: which of the account's current memories it holds (an SQL condition),
    and so which count makes an account large for it; `owner`: how its condition names the
    owner (a statement must name it the same way for the planner to use the index)."""

    label: str
    prefix: str
    using: str
    options: tuple[tuple[str, int], ...]
    holds: str
    owner: str = "owner_id"

    def index_name(self, owner_id: int) -> str:
        return f"{self.prefix}{int(owner_id)}"

    def indexes(self) -> dict[int, bool]:
        """Every index of this kind: owner id -> whether it is current: valid (a CREATE INDEX
        CONCURRENTLY that did not finish leaves an invalid one, still written to, never read)
        and built with `options` (one built with others still serves searches until it is
        rebuilt)."""
        expected = sorted(f"{name}={value}" for name, value in self.options)
        return {
            owner_id: valid and sorted(options) == expected
            for owner_id, valid, options in self._by_owner()
        }

    def invalid(self) -> set[int]:
        """The owners whose index is invalid: written to by every write, read by no search."""
        return {owner_id for owner_id, valid, _ in self._by_owner() if not valid}

    def _by_owner(self) -> list[tuple[int, bool, list[str]]]:
        """Owner id, validity and options of every index of this kind."""
        found = []
        for name, valid, options in self._rows():
            matched = re.fullmatch(rf"{self.prefix}(\d+)", name)
            if matched:
                found.append((int(matched[1]), valid, options))
        return found

    def _rows(self) -> list[tuple[str, bool, list[str]]]:
        """Name, validity and options of every index on memories whose name has the prefix."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.relname, i.indisvalid, coalesce(c.reloptions, '{}') FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'memories_memory'::regclass AND c.relname LIKE %s",
                [self.prefix.replace("_", r"\_") + "%"],
            )
            return cursor.fetchall()

    def _names(self, pattern: str) -> list[str]:
        return [name for name, _, _ in self._rows() if re.fullmatch(pattern, name)]

    def counts(self, *, at_least: int) -> dict[int, int]:
        """Owner id -> current memories this kind holds, for the accounts with at least
        `at_least` of them."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT owner_id, count(*) FROM memories_memory "  # noqa: S608 (constants)
                f"WHERE valid_to IS NULL AND {self.holds} "
                "GROUP BY owner_id HAVING count(*) >= %s",
                [at_least],
            )
            return dict(cursor.fetchall())

    def build(self, owner_id: int) -> None:
        self._create(owner_id, self.index_name(owner_id))

    def drop(self, owner_id: int) -> None:
        _drop_index(self.index_name(owner_id))

    def rebuild(self, owner_id: int) -> None:
        """A current index in place of the account's index, which serves searches until the new
        one is built beside it (under another name). The two then swap names in one transaction,
        so that a search finds one or the other under the account's name at every moment, and
        the old one is dropped (CONCURRENTLY: it waits for the searches still using it)."""
        name = self.index_name(owner_id)
        self._create(owner_id, name + _REPLACEMENT_SUFFIX)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"ALTER INDEX {name} RENAME TO {name}{_REPLACED_SUFFIX}")
            cursor.execute(f"ALTER INDEX {name}{_REPLACEMENT_SUFFIX} RENAME TO {name}")
        _drop_index(name + _REPLACED_SUFFIX)

    def _create(self, owner_id: int, name: str) -> None:
        options = ", ".join(f"{option} = {value}" for option, value in self.options)
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY {name} ON memories_memory "
                f"USING {self.using} {f'WITH ({options}) ' if options else ''}"
                f"WHERE {self.owner} = {int(owner_id)} AND valid_to IS NULL"
            )

    def sync(self) -> Sync:
        """Build the index of every large account that has none, rebuild every index that is
        not current (invalid, or built with other options) of an account at least half as
        large, and drop the index of every account under half of LARGE_ACCOUNT_MIN."""
        done = Sync()
        leftovers = rf"{self.prefix}\d+({_REPLACEMENT_SUFFIX}|{_REPLACED_SUFFIX})"
        for name in self._names(leftovers):
            # Left by a rebuild that did not finish: a replacement (the rebuild starts afresh
            # below) or the index one replaced; each written to for nothing meanwhile.
            _drop_index(name)
        existing = self.indexes()
        counts = self.counts(at_least=LARGE_ACCOUNT_MIN // 2)
        done.seconds["rebuilt"] = 0.0
        for owner_id, current in sorted(existing.items()):
            if owner_id not in counts:
                self.drop(owner_id)
                done.dropped.append(owner_id)
            elif not current:
                started = time.perf_counter()
                self.rebuild(owner_id)
                done.seconds["rebuilt"] += time.perf_counter() - started
                done.rebuilt.append(owner_id)
        started = time.perf_counter()
        for owner_id, count in sorted(counts.items()):
            if count >= LARGE_ACCOUNT_MIN and owner_id not in existing:
                self.build(owner_id)
                done.built.append(owner_id)
        done.seconds["built"] = time.perf_counter() - started
        return done


def _drop_index(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


# The operator class is the cosine distance's, which search orders by (`<=>`).
NEAREST = Kind(
    label="nearest-neighbour",
    prefix="memory_nearest_",
    using="hnsw (embedding vector_cosine_ops)",
    options=(("m", 8), ("ef_construction", 32)),
    holds="embedding IS NOT NULL",
)
# The owner as an expression, not the bare column, in the index's condition and in the one
# statement that reads it (migrations memories/0012, 0013, 0018): the btree indexes that lead
# with the owner cannot serve that expression, so the planner has no other plan for that
# statement, whatever the table's statistics say (without them it took a btree's bitmap of the
# whole account).
WORDS = Kind(
    label="words",
    prefix="memory_words_",
    using="gin (search_vector)",
    options=(),
    # An erased account's memories stay current, each with the same placeholder words.
    holds=f"scope <> '{ERASED_SCOPE}'",
    owner="(owner_id + 0)",
)
KINDS = (NEAREST, WORDS)
