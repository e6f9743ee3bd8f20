"""Requests that reach a query in the same turn of the event loop share one message
(infra.asyncdb.LoopTurnBatch): each still gets its own answer, or its own error."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from infra.asyncdb import LoopTurnBatch

pytestmark = pytest.mark.anyio


# A bug here leaves a caller waiting forever: every wait is bounded, so the test fails instead.
LONG_ENOUGH = 5


def within(awaitable):
    return asyncio.wait_for(awaitable, LONG_ENOUGH)


class Doubling(LoopTurnBatch[int, int]):
    """Doubles each item; a batch holding 13 fails as a whole, as a failed message would, and
    one holding 7 answers one item short."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []

    async def run(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        await asyncio.sleep(0)  # a round trip
        if 13 in items:
            raise ValueError("the message failed")
        return [item * 2 for item in items if item != 7]


async def test_one_turns_items_run_together_and_each_gets_its_own_result():
    batch = Doubling()
    assert await within(asyncio.gather(*(batch.submit(item) for item in (1, 2, 3)))) == [2, 4, 6]
    assert await asyncio.wait_for(batch.submit(5), 0.5) == 10  # alone: no waiting for company
    assert batch.batches == [[1, 2, 3], [5]]


async def test_a_poisoned_item_fails_only_its_own_caller():
    batch = Doubling()
    results = await within(
        asyncio.gather(*(batch.submit(item) for item in (1, 13, 3)), return_exceptions=True)
    )
    assert results[0] == 2 and results[2] == 6
    assert isinstance(results[1], ValueError)
    # The failed message, then each item alone.
    assert batch.batches == [[1, 13, 3], [1], [13], [3]]
    assert await within(batch.submit(4)) == 8


async def test_a_healthy_batch_runs_once():
    batch = Doubling()
    assert await within(asyncio.gather(batch.submit(1), batch.submit(2))) == [2, 4]
    assert batch.batches == [[1, 2]]


async def test_a_batch_answered_short_fails_only_the_item_answered_short():
    batch = Doubling()
    results = await within(asyncio.gather(batch.submit(1), batch.submit(7), return_exceptions=True))
    assert results[0] == 2 and isinstance(results[1], RuntimeError)


class Unreachable(LoopTurnBatch[int, int]):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []

    async def run(self, items: list[int]) -> list[int]:
        self.batches.append(items)
        raise psycopg.OperationalError("connection refused")


async def test_an_outage_fails_every_caller_without_running_each_again():
    batch = Unreachable()
    results = await within(asyncio.gather(batch.submit(1), batch.submit(2), return_exceptions=True))
    assert [type(result) for result in results] == [psycopg.OperationalError] * 2
    assert batch.batches == [[1, 2]]


async def test_a_caller_that_gives_up_leaves_the_others_their_answers():
    batch = Doubling()
    leaving = asyncio.ensure_future(batch.submit(1))
    staying = asyncio.ensure_future(batch.submit(2))
    await asyncio.sleep(0)  # both submitted
    leaving.cancel()
    assert await within(staying) == 4
    assert leaving.cancelled()
    assert batch.batches == [[1, 2]]
