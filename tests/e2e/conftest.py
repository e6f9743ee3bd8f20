# The gateway's live-server and data fixtures, shared with the end-to-end tests.
from tests.mcp_gateway.conftest import (  # noqa: F401
    anyio_backend,
    live_daphne,
    live_uvicorn,
    seeded,
)
