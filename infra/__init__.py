"""Infrastructure the apps share: the native async PostgreSQL pool and its batching (`asyncdb`),
the mapping of database faults to retryable answers (`dbfaults`), structured logging with the
health probes (`observability`), and the fixed-window rate limiter (`rate_limit`).

Nothing here knows the domain: this package imports no app (memories, accounts, mcp_gateway) and
no wiring (threengram); tests/test_architecture.py enforces it.
"""
