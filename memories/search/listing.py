"""A search without a query: the memories the filters select, newest first, read a window at a
time (LISTED_WINDOW) so that a filter few memories pass costs no more than a common one. Nothing
is ranked: each candidate's score is None.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.backends.utils import CursorWrapper

from memories.search.cursor import Position
from memories.search.filters import Where
from memories.search.scoring import Candidate
from memories.search.sql import (
    LISTED_ACCOUNT_WINDOW,
    LISTED_AFTER,
    LISTED_COLUMNS,
    LISTED_CURRENT_OF_TYPE,
    LISTED_CURRENT_WITH,
    LISTED_IN_THREAD,
    LISTED_RECORDED_SINCE,
    LISTED_REVISED_SINCE,
    LISTED_SOURCE_SQL,
    LISTED_SOURCE_WINDOW,
    LISTED_SQL,
    LISTED_WINDOW_END,
    WALK,
    Plan,
    fetch_rows,
)

# A search without a query reads at most this many memories a page (of a small thread's members, or
# without asOf, this many of the types, else of the project or scope, asked for, newest first: see
# listed_candidates): a page of a filter that few of those memories pass may hold fewer hits than
# asked for, and its cursor goes on from the last memory it read.
LISTED_WINDOW = 5_000
# A listing of some types, a project or a scope: their memories newest first through their index
# (memory_owner_type_current, memory_owner_project_recent, memory_owner_scope_recent), as WALK
# reads them, but with sorts allowed: the memories revised since the first page's instant, read by
# key, are sorted (a few rows), where with sorts off the planner would read the account's recency
# index whole to have them in order.
_LISTED_BY_SOURCE: Plan = (("enable_bitmapscan", "off"), ("enable_seqscan", "off"))


def listed_candidates(
    cursor: CursorWrapper, where: Where, params: dict, position: Position | None, most: int
) -> tuple[list[Candidate], Candidate | None]:
    """A search without a query: the `most` newest memories the filters select after `position`,
    among the LISTED_WINDOW memories that follow it, current as of the first page's instant
    (Where.reach_at_snapshot): the account's memories, read newest first through its recency
    index (WALK) whatever the table's statistics say, or those of the thread asked for when a
    walk reads it whole (thread_sql.THREAD_READ_BY_MEMBER_MAX), or without asOf those of the
    types, else the project or the scope asked for (_listed_of_source). Second: when fewer than
    `most` passed and more memories follow the window, the window's last memory, where the next
    page resumes."""
    params |= {"listed_max": most, "listed_window": LISTED_WINDOW}
    after = ""
    if position is not None:
        params |= {"after_recorded_at": position.recorded_at, "after_id": position.id}
        after = LISTED_AFTER
    source = _listed_by_source(cursor, where, params, position)
    if source == "thread":
        window = LISTED_IN_THREAD.format(reach=where.reach_at_snapshot, after=after)
        sql = LISTED_SQL.format(window=window, selection=where.selection)
        plan = _LISTED_BY_SOURCE
    elif source is not None:
        window = _listed_of_source(where, params, after, source)
        sql = LISTED_SOURCE_SQL.format(window=window, selection=where.selection)
        plan = _LISTED_BY_SOURCE
    else:
        window = LISTED_ACCOUNT_WINDOW.format(reach=where.reach_at_snapshot, after=after)
        sql = LISTED_SQL.format(window=window, selection=where.selection)
        plan = WALK
    listed = [_listed_candidate(*row) for row in fetch_rows(cursor, sql, params, plan)]
    if len(listed) == most:
        return listed, None
    end = fetch_rows(cursor, LISTED_WINDOW_END.format(window=window), params, plan)
    # The window's last memory is a position only, read without its length.
    return listed, (_listed_candidate(*end[0]) if len(end) == 2 else None)


def _listed_candidate(
    memory_id: uuid.UUID, recorded_at: datetime, content_length: int = 0
) -> Candidate:
    return Candidate(
        id=memory_id,
        recorded_at=recorded_at,
        content_length=content_length,
        fields_held={},
        cosine=None,
    )


def _listed_source(where: Where, params: dict) -> str | None:
    """Which filter's memories a listing reads as its window: a thread's that a walk reads
    (Where.walks); else, on current memories, through its index (_listed_of_source), the
    types asked for (an index-only read), else a project, else a scope; None for the account's
    recency index."""
    if where.walks == "thread":
        return "thread"
    if not where.current:
        return None
    if params.get("types"):
        return "memory_type"
    return next((f for f in ("project", "scope") if params.get(f) is not None), None)


def _listed_by_source(
    cursor: CursorWrapper, where: Where, params: dict, position: Position | None
) -> str | None:
    """The filter whose memories alone a listing reads (_listed_source), unless more than
    LISTED_WINDOW memories were recorded since its first page's instant (each is read to find
    the memory it revised: the account's window bounds that page instead). Puts the memories
    revised since the instant in params["listed_revised"]: none on a first page, whose instant
    is at least its newest memory's (sql.TENANT_SIZE_SQL)."""
    source = _listed_source(where, params)
    if source in (None, "thread"):
        return source
    params["listed_revised"] = []
    if position is None:
        return source
    [(since, revised)] = fetch_rows(cursor, LISTED_RECORDED_SINCE, params, WALK)
    params["listed_revised"] = revised
    return source if since <= LISTED_WINDOW else None


def _listed_of_source(where: Where, params: dict, after: str, column: str) -> str:
    """The window of a listing of some types, a project or a scope (`column`): the account's
    memories of those current at its first page's instant, newest first after `after` (see
    sql.LISTED_CURRENT_OF_TYPE)."""
    columns = LISTED_COLUMNS
    if params.get("resolved_after") is not None:
        columns += ", m.resolved_at"
    values = params["types"] if column == "memory_type" else [params[column]]
    branch = LISTED_CURRENT_OF_TYPE if column == "memory_type" else LISTED_CURRENT_WITH
    params["listed_values"] = list(values)
    params |= {f"listed_value_{n}": value for n, value in enumerate(values)}
    branches = [
        branch.format(
            value=f"listed_value_{n}",
            column=column,
            columns=columns,
            dates=where.dates,
            after=after,
        )
        for n in range(len(values))
    ]
    branches.append(
        LISTED_REVISED_SINCE.format(column=column, columns=columns, dates=where.dates, after=after)
    )
    return LISTED_SOURCE_WINDOW.format(branches=" UNION ALL ".join(branches))
