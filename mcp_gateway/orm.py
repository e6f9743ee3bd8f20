"""What Django's ASGIHandler does around a view, for MCP handlers that use the ORM.

The gateway's router sends /mcp straight to the MCP SDK, past Django's handler, so the hot paths
(token check, resource reads) pay for no worker thread. Handlers that do use the ORM (tools,
prompts, prompt completion) run inside this context instead: a ThreadSensitiveContext gives the
request its own thread for `sync_to_async(thread_sensitive=True)` (without it every MCP ORM call
in the process would share one thread and one connection), and request_started/finished run
close_old_connections() in that thread, as for any Django request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from asgiref.sync import ThreadSensitiveContext
from django.core import signals


@asynccontextmanager
async def orm_request_context() -> AsyncIterator[None]:
    async with ThreadSensitiveContext():
        await signals.request_started.asend(sender=orm_request_context)
        try:
            yield
        finally:
            await signals.request_finished.asend(sender=orm_request_context)
