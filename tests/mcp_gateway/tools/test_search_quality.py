"""Search quality on the retrieval eval set (tests/memories/retrieval_eval), through the real
`search` tool on the real database: what scripts/eval_search.py prints, held at floors.

The floors are the figures the current ranking reaches on this set, less a small margin, so a
change that makes search find less fails here. Raising the ranking raises them."""

import pytest
from asgiref.sync import sync_to_async

from scripts.eval_search import evaluate, load_dataset, store_dataset

pytestmark = pytest.mark.anyio

RECALL_AT_5_MIN = 0.91
MRR_AT_5_MIN = 0.79
SUPERSESSION_MIN = 0.95
ABSTENTION_MIN = 0.82


async def test_search_finds_what_is_asked_in_other_words_and_abstains_on_the_never_stored(
    owner, agent
):
    dataset = load_dataset()
    ids = await sync_to_async(store_dataset, thread_sensitive=True)(owner, dataset)
    figures = await evaluate(agent, dataset, ids)
    report = "\n".join(figures.lines() + figures.misses)
    assert figures.recall >= RECALL_AT_5_MIN, report
    assert figures.mrr >= MRR_AT_5_MIN, report
    assert figures.supersession >= SUPERSESSION_MIN, report
    assert figures.abstention >= ABSTENTION_MIN, report
