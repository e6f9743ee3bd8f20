"""Structured logs and health probes.

Log records are JSON lines with a request id, so one request can be followed across the site and
the MCP gateway. Memory content and tokens never reach a log record: nothing here formats request
bodies or headers other than the request id.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.handlers
import queue
import time
import uuid
from importlib.metadata import PackageNotFoundError, version

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
tenant_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("tenant_id", default="-")

_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request/tenant ids, and any
    `extra=` fields the caller passed (method, status, latency_ms, ...)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
            "tenant_id": getattr(record, "tenant_id", None) or tenant_id_var.get(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


JsonFormatter.converter = time.gmtime


class BackgroundStreamHandler(logging.handlers.QueueHandler):
    """Writes log records to stderr from a background thread. Every /mcp request logs an access
    line; formatting it and writing it from the event loop cost ~11 % of resources/read
    throughput and doubled its p99 (docs/performance.md, "Gateway"). The queue hands the record
    over; the listener thread formats (JsonFormatter) and writes it."""

    def __init__(self) -> None:
        super().__init__(queue.SimpleQueue())
        self.target = logging.StreamHandler()
        self.listener = logging.handlers.QueueListener(self.queue, self.target)
        self.listener.start()

    def close(self) -> None:
        # logging.shutdown() (at exit) closes every handler: drain the queue first, once.
        if self.listener._thread is not None:
            self.listener.stop()
        super().close()

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        self.target.setFormatter(fmt)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # In-process queue: hand over the record itself. The base class would format it here (on
        # the event loop) and drop exc_info, which the JSON formatter needs on the other side.
        # The request's ids live in context variables of this thread: pin them on the record.
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        if not hasattr(record, "tenant_id"):
            record.tenant_id = tenant_id_var.get()
        return record


def new_request_id(incoming: str | None = None) -> str:
    """Reuse a well-formed incoming X-Request-ID (from a proxy), else mint one."""
    if incoming and 8 <= len(incoming) <= 64 and incoming.replace("-", "").isalnum():
        return incoming
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """Tags every site request with a request id (echoed in X-Request-ID) and logs one access
    line: method, path, status, latency, tenant id. Never the body."""

    logger = logging.getLogger("threengram.access")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = new_request_id(request.headers.get("X-Request-ID"))
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            user = getattr(request, "user", None)
            self.logger.info(
                "request",
                extra={
                    "request_id": request_id,
                    "method": request.method,
                    "path": request.path,
                    "status": response.status_code,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                    "tenant_id": str(user.pk)
                    if user is not None and user.is_authenticated
                    else "-",
                },
            )
            response["X-Request-ID"] = request_id
            return response
        finally:
            request_id_var.reset(token)


def _version() -> str:
    try:
        return version("threengram")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


VERSION = _version()


def health(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. No database access, so a database outage does not make an
    orchestrator restart healthy processes."""
    return JsonResponse({"status": "ok"})


def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers and every migration is applied."""
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return JsonResponse({"status": "unavailable", "database": "unreachable"}, status=503)
    if pending:
        return JsonResponse(
            {"status": "unavailable", "database": "ok", "pending_migrations": len(pending)},
            status=503,
        )
    return JsonResponse({"status": "ready", "database": "ok"})


def version_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"name": "threengram", "version": VERSION})
