"""Prepared statements run together (infra.asyncdb.execute_prepared): one message, one
transaction, arguments bound safely, nothing left on the connection afterwards; the same
behind a transaction pooler, where nothing may be prepared."""

from __future__ import annotations

import psycopg
import pytest

from infra import asyncdb

pytestmark = pytest.mark.anyio

ECHO = asyncdb.prepared_statement("threengram_test_echo", "SELECT $1::text, $2::text")
SET_MARK = asyncdb.prepared_statement(
    "threengram_test_set_mark", "SELECT set_config('threengram.test_mark', $1, true)"
)
READ_MARK = asyncdb.prepared_statement(
    "threengram_test_read_mark", "SELECT current_setting('threengram.test_mark', true)"
)
DIVIDE = asyncdb.prepared_statement("threengram_test_divide", "SELECT 1 / $1::int")


@pytest.fixture(autouse=True, params=["prepared", "inline (transaction pooler)"])
def prepare_mode(request, settings) -> str:
    """Both ways of sending: EXECUTE of statements prepared per connection, or the statements
    themselves (ASYNC_DATABASE_PREPARE = False, behind PgBouncer in transaction mode)."""
    settings.ASYNC_DATABASE_PREPARE = request.param == "prepared"
    return request.param


async def test_each_statement_gets_its_own_rows_and_arguments_stay_data(db):
    tricky = "O'Reilly \\ '); DROP TABLE memories_memory; --"
    async with asyncdb.connection() as conn:
        echoed, other = await asyncdb.execute_prepared(
            conn, [(ECHO, (tricky, "é ✓")), (ECHO, ("second", None))]
        )
    assert echoed == [(tricky, "é ✓")]
    assert other == [("second", None)]


async def test_a_local_setting_holds_for_the_statements_after_it_and_no_longer(db):
    async with asyncdb.connection() as conn:
        _, during = await asyncdb.execute_prepared(conn, [(SET_MARK, ("7",)), (READ_MARK, ())])
        (after,) = await asyncdb.execute_prepared(conn, [(READ_MARK, ())])
    assert during == [("7",)]
    assert after in ([("",)], [(None,)])  # the setting ended with its implicit transaction


async def test_a_failing_statement_fails_the_call_and_the_connection_stays_usable(db):
    async with asyncdb.connection() as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await asyncdb.execute_prepared(conn, [(SET_MARK, ("8",)), (DIVIDE, (0,))])
        (mark,) = await asyncdb.execute_prepared(conn, [(READ_MARK, ())])
        ((quotient,),) = (await asyncdb.execute_prepared(conn, [(DIVIDE, (1,))]))[0]
    assert mark in ([("",)], [(None,)])
    assert quotient == 1


async def test_a_statement_registered_after_the_connection_opened_is_prepared_on_first_use(db):
    async with asyncdb.connection() as conn:
        late = asyncdb.prepared_statement("threengram_test_late", "SELECT $1::int + 1")
        ((value,),) = (await asyncdb.execute_prepared(conn, [(late, (41,))]))[0]
    assert value == 42


def test_statement_names_are_plain_and_unique():
    with pytest.raises(ValueError, match="plain"):
        asyncdb.prepared_statement("Robert'); --", "SELECT 1")
    with pytest.raises(ValueError, match="already"):
        asyncdb.prepared_statement(ECHO, "SELECT 2")
    assert asyncdb.prepared_statement(ECHO, "SELECT $1::text, $2::text") == ECHO


async def test_behind_a_transaction_pooler_nothing_is_prepared(db, prepare_mode):
    async with asyncdb.connection() as conn:
        await asyncdb.execute_prepared(conn, [(ECHO, ("a", "b"))])
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'threengram%%'"
        )
        ((prepared,),) = await cursor.fetchall()
    assert (prepared > 0) is (prepare_mode == "prepared")
