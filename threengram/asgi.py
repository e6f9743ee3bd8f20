"""ASGI entry point (daphne or uvicorn): the Django site, with /mcp and its OAuth protected
resource metadata routed to the MCP gateway (mcp_gateway.asgi)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()  # sets Django up before the gateway imports models

from mcp_gateway.asgi import GatewayRouter  # noqa: E402

application = GatewayRouter(django_application)
