"""infra.asgi.BodilessHead: a HEAD request gets a page's headers and none of its body, however
many parts the application sends it in."""

import pytest

from infra.asgi import BodilessHead

pytestmark = pytest.mark.anyio


async def page_in_two_parts(scope, receive, send):
    """As Django's ASGI handler sends a page past 64 KiB: whatever the method."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"a" * 65_536, "more_body": True})
    await send({"type": "http.response.body", "body": b"b" * 10, "more_body": False})


async def sent_for(method: str) -> list[dict]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    await BodilessHead(page_in_two_parts)({"type": "http", "method": method}, receive, send)
    return sent


async def test_a_head_request_gets_every_part_empty_and_the_end_of_the_body():
    sent = await sent_for("HEAD")
    assert [message["type"] for message in sent] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert [message.get("body") for message in sent[1:]] == [b"", b""]
    assert [message["more_body"] for message in sent[1:]] == [True, False]


async def test_other_methods_get_the_body_as_sent():
    sent = await sent_for("GET")
    assert b"".join(message.get("body", b"") for message in sent) == b"a" * 65_536 + b"b" * 10
