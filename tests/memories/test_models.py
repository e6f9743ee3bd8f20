"""The memory queryset's filter of the account pages' browser (MemoryQuerySet.containing) and
the words it reads in a typed text (filter_words)."""

import pytest

from memories.bounds import FILTER_WORDS_MAX
from memories.errors import InvalidInput
from memories.models import Memory, filter_words
from tests.factories import MemoryFactory


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("Celery.", ["Celery"]),
        ("celery,redis", ["celery", "redis"]),
        ('"weekly report"', ["weekly", "report"]),
        ("what runs our background jobs?", ["what", "runs", "our", "background", "jobs"]),
        (
            "v1.2 node.js stand-up O'Brien don\u2019t",
            ["v1.2", "node.js", "stand-up", "O'Brien", "don\u2019t"],
        ),
        ("C++, C# and F#.", ["C++", "C#", "and", "F#"]),
        ("max_connections __init__", ["max_connections", "__init__"]),
        ("-leading trailing- .dotted.", ["leading", "trailing", "dotted"]),
        ("東京 हिन्दी مرحبا Ελλάδα", ["東京", "हिन्दी", "مرحبا", "Ελλάδα"]),
        ("Valparai\u0301so", ["Valparaíso"]),  # as typed decomposed: one word, in NFC
        ("Redis redis REDIS", ["Redis"]),
        ("🚀", ["🚀"]),
        ("  ", []),
    ],
)
def test_filter_words(typed, words):
    assert filter_words(typed) == words


def test_a_filter_finds_the_owners_memories_only(tenant, other_tenant):
    mine = MemoryFactory(owner=tenant, content="Deploy to Valparaíso on Friday")
    MemoryFactory(owner=other_tenant, content="Deploy to Valparaíso on Friday")
    found = Memory.objects.owned_by(tenant).containing("valparaiso, friday.")
    assert list(found) == [mine]


def test_a_filter_of_more_words_than_the_bound_is_invalid_input(tenant):
    words = " ".join(f"w{n}" for n in range(FILTER_WORDS_MAX + 1))
    with pytest.raises(InvalidInput, match=f"text: at most {FILTER_WORDS_MAX} words; got 17"):
        Memory.objects.owned_by(tenant).containing(words)
