"""A tools/call whose list argument holds hundreds of thousands of wrong items (well under the
body limit) is refused at once by its item limit: the schema's validator, which looks at every
item (and compares every pair of a list that must be unique), would hold the server's event loop,
every tenant's requests, for seconds."""

from __future__ import annotations

import asyncio
import json
import time

import httpx2
import pytest

from mcp_gateway.asgi import MAX_REQUEST_BODY_BYTES

pytestmark = [pytest.mark.anyio, pytest.mark.live]

LEGACY = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}
MISSING = "threengram://memory/00000000-0000-7000-8000-000000000000"


def _body(method: str, params: dict) -> bytes:
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return json.dumps(call, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    ("tool", "arguments", "refusal"),
    [
        # ~500,000 integers where tag strings belong: 1 MB.
        (
            "remember",
            {"memoryType": "note", "topic": "t", "content": "c", "tags": [1] * 500_000},
            "invalid_input: tags: at most 256 items",
        ),
        # memoryTypes must be unique: numbers and strings mixed cannot be sorted, so the
        # validator would compare every pair (32 million for these 8,000 in 47 kB).
        (
            "search",
            {"query": "x", "memoryTypes": [n if n % 2 else str(n) for n in range(8_000)]},
            "invalid_input: memoryTypes: at most 8 items",
        ),
    ],
    ids=["wrong-typed tags", "unsortable memory types"],
)
async def test_a_huge_list_argument_is_refused_at_once_and_stalls_no_other_tenant(
    live_uvicorn, seeded, tool, arguments, refusal
):
    hostile = _body("tools/call", {"name": tool, "arguments": arguments})
    assert len(hostile) < MAX_REQUEST_BODY_BYTES
    probe = _body("resources/read", {"uri": MISSING})
    async with httpx2.AsyncClient(base_url=live_uvicorn.url, timeout=300) as http:
        for token in (seeded.token, seeded.other_token):
            headers = LEGACY | {"authorization": f"Bearer {token}"}
            assert (await http.post("/mcp", content=probe, headers=headers)).status_code == 200

        async def timed(body: bytes, token: str, delay: float):
            await asyncio.sleep(delay)
            started = time.monotonic()
            headers = LEGACY | {"authorization": f"Bearer {token}"}
            response = await http.post("/mcp", content=body, headers=headers)
            return response, time.monotonic() - started

        (refused, attack_seconds), (answered, other_seconds) = await asyncio.gather(
            timed(hostile, seeded.token, 0), timed(probe, seeded.other_token, 0.5)
        )
    assert refused.json()["result"]["content"][0]["text"].startswith(refusal)
    assert answered.status_code == 200
    assert attack_seconds < 2, f"refusing the list took {attack_seconds:.1f}s"
    assert other_seconds < 2, f"another tenant's read waited {other_seconds:.1f}s"
