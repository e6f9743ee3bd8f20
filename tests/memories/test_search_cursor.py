"""A search's cursor tells whoever holds it nothing: not the query it pages, not the account's
size nor how many of its memories hold each word. Only the server that issued it reads it."""

import base64
import hashlib
import random
import string
import uuid
import zlib
from datetime import timedelta

import pytest
from django.core import signing
from django.db import connection
from django.utils import timezone

from memories.errors import InvalidInput
from memories.search import CURSOR_MAX, QUERY_MAX, clean_filters, search_memories
from memories.search.cursor import Position, _opened, _sealed
from memories.search.query import CJK_PAIRS_MAX, parse
from memories.search.scoring import WordStatistics
from tests.factories import MemoryFactory

NOT_ISSUED = (
    "invalid_input: cursor: is not a cursor this server issued; omit it to start a new search"
)


def run(owner, query, **kwargs):
    limit = kwargs.pop("limit", 5)
    cursor = kwargs.pop("cursor", None)
    return search_memories(
        owner_id=owner.pk, query=query, filters=clean_filters(**kwargs), limit=limit, cursor=cursor
    )


def read_without_the_key(cursor: str) -> str:
    """What a cursor's holder reads in it without the server's key: its base64 decoded, as
    django.core.signing writes a payload (before the first ':', inflated when its leading '.'
    says it is compressed), as text."""
    head = cursor.split(":")[0]
    data = head.removeprefix(".")
    raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    if head.startswith("."):
        raw = zlib.decompress(raw)
    return raw.decode(errors="replace")


@pytest.fixture
def paged(tenant, settings):
    """Seven memories a words search ranks, and its first page of two with a cursor."""
    settings.SEARCH_EMBEDDER = "none"  # words only: the cursor carries word statistics
    for n in range(7):
        MemoryFactory(owner=tenant, content=f"opaque harbour ledger {n}")
    first = run(tenant, "harbour ledger", limit=2)
    assert first.next_cursor
    return first


def test_a_cursor_shows_neither_its_query_nor_the_accounts_word_statistics(tenant, paged):
    query = "harbour ledger"
    fingerprint = clean_filters().fingerprint(tenant.pk, query, thread_id=None)
    position = Position.decode(paged.next_cursor, fingerprint)
    statistics = position.statistics
    assert statistics is not None and statistics.held_by  # the cursor does carry them

    read = read_without_the_key(paged.next_cursor)

    assert fingerprint not in read
    assert hashlib.md5(query.encode()).hexdigest() not in read
    assert hashlib.sha256(query.encode()).hexdigest()[:32] not in read
    assert str(position.id) not in read
    assert '"w"' not in read
    for separator in (",", ", "):
        assert f"[{statistics.total}{separator}[" not in read
        assert separator.join(str(count) for count in statistics.held_by) not in read


def test_the_fingerprint_a_cursor_carries_is_keyed_with_the_secret_key(tenant, paged, settings):
    """Even read with the server's key, what binds a cursor to its query confirms no guessed
    query to whoever lacks the key: it is not the query's digest, and it changes with the key."""
    fingerprint = clean_filters().fingerprint(tenant.pk, "harbour ledger", thread_id=None)
    position = Position.decode(paged.next_cursor, fingerprint)
    carried = _opened(paged.next_cursor)[0]["f"]
    assert carried != fingerprint

    settings.SECRET_KEY = "another server's key"
    assert _opened(position.encode(fingerprint))[0]["f"] not in (carried, fingerprint)


def test_an_encrypted_cursor_pages_through_every_hit_once(tenant, paged):
    seen, cursor = [hit.id for hit in paged.hits], paged.next_cursor
    while cursor:
        page = run(tenant, "harbour ledger", limit=2, cursor=cursor)
        seen += [hit.id for hit in page.hits]
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 7


def test_a_tampered_cursor_is_refused(tenant, paged):
    cursor = paged.next_cursor
    middle = len(cursor) // 2
    flipped = "A" if cursor[middle] != "A" else "B"
    for tampered in (
        cursor[:middle] + flipped + cursor[middle + 1 :],  # its ciphertext
        cursor[:-4] + ("AAAA" if cursor[-4:] != "AAAA" else "BBBB"),  # its authentication tag
        cursor[: len(cursor) - 40],
        "é" + cursor[1:],
    ):
        with pytest.raises(InvalidInput) as refused:
            run(tenant, "harbour ledger", limit=2, cursor=tampered)
        assert str(refused.value) == NOT_ISSUED


def test_another_accounts_cursor_is_refused(tenant, other_tenant, paged):
    for n in range(7):
        MemoryFactory(owner=other_tenant, content=f"opaque harbour ledger {n}")
    with pytest.raises(InvalidInput, match="cursor: was issued for a different query"):
        run(other_tenant, "harbour ledger", limit=2, cursor=paged.next_cursor)


def test_a_cursor_issued_under_another_secret_key_is_refused(tenant, settings):
    for n in range(7):
        MemoryFactory(owner=tenant, content=f"opaque harbour ledger {n}")
    settings.SECRET_KEY = "the key of another server, or of this one before a rotation"
    cursor = run(tenant, "harbour ledger", limit=2).next_cursor
    settings.SECRET_KEY = "this server's key"

    with pytest.raises(InvalidInput) as refused:
        run(tenant, "harbour ledger", limit=2, cursor=cursor)
    assert str(refused.value) == NOT_ISSUED


def test_a_cursor_issued_under_a_fallback_key_pages_on(tenant, settings):
    """While SECRET_KEY is rotated (the old one in SECRET_KEY_FALLBACKS), a cursor issued just
    before pages on, as Django's signed values stay valid."""
    for n in range(7):
        MemoryFactory(owner=tenant, content=f"opaque harbour ledger {n}")
    settings.SECRET_KEY = "the key before the rotation"
    cursor = run(tenant, "harbour ledger", limit=2).next_cursor
    settings.SECRET_KEY = "the key after the rotation"
    settings.SECRET_KEY_FALLBACKS = ["the key before the rotation"]

    assert len(run(tenant, "harbour ledger", limit=2, cursor=cursor).hits) == 2


def test_a_cursor_issued_before_cursors_were_encrypted_is_refused(tenant, paged):
    """A signed cursor of the earlier release, still within its day, is refused with the
    message of any cursor this server cannot read: its search is started anew."""
    query = "harbour ledger"
    payload = _opened(paged.next_cursor)[0] | {
        "f": clean_filters().fingerprint(tenant.pk, query, thread_id=None)
    }
    signed = signing.dumps(payload, salt="threengram.memories.search-cursor", compress=True)

    with pytest.raises(InvalidInput) as refused:
        run(tenant, query, limit=2, cursor=signed)
    assert str(refused.value) == NOT_ISSUED


def test_a_cursors_length_does_not_tell_the_accounts_size_or_word_counts():
    def cursor(total: int, held_by: tuple[int, ...]) -> str:
        now = timezone.now()
        return Position(
            mode="ranked",
            score=0.5,
            recorded_at=now,
            id=uuid.UUID(int=0),
            snapshot=now,
            statistics=WordStatistics(total=total, held_by=held_by, average_length=100.0),
        ).encode("0" * 32)

    assert len(cursor(100, (1, 2))) == len(cursor(10_000, (9_876, 5_432)))


def test_the_longest_cursor_fits_its_bound(db):
    """A query of about the most terms a query may have (as many CJK pairs as are read, and
    hyphenated pairs of two-letter words, three terms each: the pair and each word), each term
    counted in five digits that do not compress, and every instant the cursor may carry."""
    rng = random.Random(7)
    words = iter(rng.sample([a + b for a in string.ascii_lowercase for b in "aeiouy"], 156))
    pairs = (f"{word}-{next(words)}" for word in words)
    cjk = "".join(chr(0x4E00 + 7 * n) for n in range(CJK_PAIRS_MAX + 1))  # a pair each
    query = (cjk + " " + " ".join(pairs))[:QUERY_MAX].rsplit(" ", 1)[0]
    with connection.cursor() as cursor:
        terms = parse(cursor, query).terms
    assert len(terms) >= 240
    now = timezone.now().replace(microsecond=123_456)
    longest = Position(
        mode="ranked",
        score=0.123_456_789_012_345_67,
        recorded_at=now,
        id=uuid.uuid4(),
        snapshot=now,
        statistics=WordStatistics(
            total=10_000,
            held_by=tuple(rng.randint(10_000, 99_999) for _ in terms),
            average_length=1_234.567_890_123_456_7,
            rare=tuple(range(6)),
            walked_to=now - timedelta(days=3, microseconds=1),
            rare_walked_to=now - timedelta(days=9, microseconds=1),
            walk_max=20_000,
        ),
    ).encode("0" * 32)
    assert len(longest) <= CURSOR_MAX


def test_a_sealed_payload_that_inflates_past_any_cursors_is_refused(tenant, paged):
    """Even sealed under the server's key: a payload inflating to a megabyte (a cursor's bound of
    characters lets one inflate to about that) is no cursor."""
    bomb = _opened(paged.next_cursor)[0] | {"pad": " " * (1024 * 1024)}
    with pytest.raises(InvalidInput) as refused:
        run(tenant, "harbour ledger", limit=2, cursor=_sealed(bomb))
    assert str(refused.value) == NOT_ISSUED
