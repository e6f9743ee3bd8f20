"""ASGI entry point (daphne or uvicorn): the Django site, with /mcp and its OAuth protected
resource metadata routed to the MCP gateway (mcp_gateway.asgi)."""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()  # sets Django up before the gateway imports models

from infra.asgi import BodilessHead, leave_request_bodies_to_the_application  # noqa: E402
from mcp_gateway.asgi import GatewayRouter  # noqa: E402

application = GatewayRouter(BodilessHead(django_application))
leave_request_bodies_to_the_application()

# The search embedding model is loaded now, once per process, not by the first search.
from memories.embedding import get_embedder  # noqa: E402

get_embedder()

# Everything loaded so far (Django, the apps, the SDK, pydantic models) lives as long as the
# process: move it out of the cyclic garbage collector's view. Without this, each full collection
# walks every start-up object, a pause every in-flight request waits for: the p99 of the /mcp
# benchmark (docs/performance.md, "gc.freeze() after start-up").
gc.freeze()
