"""ASGI entry point: the Django site, with /mcp routed to the MCP gateway (see mcp_gateway)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "threengram.settings")

from django.core.asgi import get_asgi_application

application = get_asgi_application()
