"""Structured logs and health probes.

Log records are JSON lines with a request id, so one request can be followed across the site and
the MCP gateway. Memory content and tokens never reach a log record: nothing here formats request
bodies or headers other than the request id.
"""

from __future__ import annotations

import collections
import contextvars
import json
import logging
import logging.config
import os
import select
import sys
import threading
import time
import traceback
import uuid
import weakref
from importlib.metadata import PackageNotFoundError, version
from typing import TextIO

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from starlette.requests import ClientDisconnect

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
tenant_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("tenant_id", default="-")

# uvicorn's records carry their message again with terminal colour codes, as `color_message`.
_STANDARD_ATTRS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "color_message"}


def configure_logging(config: dict) -> None:
    """Django's LOGGING_CONFIG: the LOGGING dict, and Python's warnings sent to the logger
    `py.warnings`, so that the process writes nothing to stderr but log lines."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


def _loggable(value: object) -> object:
    """An `extra=` value as a line may hold it. Django attaches the request to the records of
    its 4xx and 5xx responses: its repr holds the query string, where a search's text is (the
    memory pages' `q`), so only its method and path are written."""
    if isinstance(value, HttpRequest):
        return f"{value.method} {value.path}"
    return value


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request/tenant ids, and any
    `extra=` fields the caller passed (method, status, latency_ms, ...)."""

    def format(self, record: logging.LogRecord) -> str:
        second = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        # Django logs a 4xx after the middleware chain has returned (the context's id is reset
        # by then): the request carries its id (RequestIdMiddleware).
        request = getattr(record, "request", None)
        entry = {
            "time": f"{second}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None)
            or getattr(request, "request_id", None)
            or request_id_var.get(),
            "tenant_id": getattr(record, "tenant_id", None) or tenant_id_var.get(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and key not in entry:
                entry[key] = _loggable(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)

    def formatException(self, exc_info) -> str:
        return exception_without_message(exc_info)


class PlainFormatter(logging.Formatter):
    """`LOG_FORMAT=plain`: one readable line per record, exceptions as JsonFormatter's."""

    def formatException(self, exc_info) -> str:
        return exception_without_message(exc_info)


def exception_without_message(exc_info) -> str:
    """The exception's type and stack, and those of its causes, never its message: a database
    error's message quotes the values of its statement (a search, a key, a name)."""
    lines: list[str] = []
    exc: BaseException | None = exc_info[1]
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        lines.append(f"{type(exc).__module__}.{type(exc).__qualname__}\n")
        lines.extend(traceback.format_tb(exc.__traceback__))
        exc = exc.__cause__ or exc.__context__
    return "".join(lines).rstrip("\n")


class DropClientDisconnect(logging.Filter):
    """Drops the MCP SDK's ERROR, with a stack trace, for a client that hung up before its
    request body was read ("Error handling POST request", legacy-wire transport). Nothing failed
    on the server; the router logs such a request on the 2026 wire at DEBUG. The access line
    still records the request."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ClientDisconnect))


class BackgroundStreamHandler(logging.Handler):
    """Writes log records to a stream (stderr) from a background thread, in batches.

    Every /mcp request logs an access line. Writing it from the event loop slowed every request
    (docs/performance.md, "Background log writer"); handing each record to a thread through a
    queue cost more still: every record woke the thread, and each wake-up is a GIL hand-over.
    So records wait in a deque (no wake-up) and the
    writer formats and writes them every `flush_interval` seconds, a few writes per batch. A record
    of level WARNING or above is written at once. Lines are at most `flush_interval` late, and
    `close()` (logging.shutdown, at exit) writes what is left."""

    FLUSH_INTERVAL = 0.1
    _instances: weakref.WeakSet[BackgroundStreamHandler] = weakref.WeakSet()

    def __init__(
        self, stream: TextIO | None = None, flush_interval: float = FLUSH_INTERVAL
    ) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self.flush_interval = flush_interval
        self._pending: collections.deque[logging.LogRecord] = collections.deque()
        self._closed = False
        self._at_once = False
        self._start_writer()
        self._instances.add(self)
        # A forked child (gunicorn --preload, say) inherits no running thread: start its own,
        # without the parent's pending records, which the parent writes.
        handler = weakref.ref(self)
        os.register_at_fork(
            after_in_child=lambda: (h := handler()) is not None and h._restart_after_fork()
        )

    def _start_writer(self) -> None:
        self._has_pending = threading.Event()
        self._write_now = threading.Event()
        self._write_lock = threading.Lock()
        self._writer = threading.Thread(target=self._write_batches, name="log-writer", daemon=True)
        self._writer.start()

    def _restart_after_fork(self) -> None:
        self._pending.clear()
        if not self._closed:
            self._start_writer()

    def emit(self, record: logging.LogRecord) -> None:
        # The request's ids live in context variables of the emitting thread: pin them on the
        # record before it changes threads.
        if not hasattr(record, "request_id"):
            request = getattr(record, "request", None)  # Django's 4xx/5xx records (JsonFormatter)
            record.request_id = getattr(request, "request_id", None) or request_id_var.get()
        if not hasattr(record, "tenant_id"):
            record.tenant_id = tenant_id_var.get()
        self._pending.append(record)
        if self._closed or self._at_once:  # shutting down: no writer to wait for
            self.flush()
            return
        if record.levelno >= logging.WARNING:
            self._write_now.set()
        if not self._has_pending.is_set():
            self._has_pending.set()

    def _write_batches(self) -> None:
        while not self._closed:
            self._has_pending.wait()
            self._write_now.wait(self.flush_interval)  # let a batch gather
            # Cleared before the batch is taken: a record appended from here on sets it again.
            self._has_pending.clear()
            self._write_now.clear()
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            chunk: list[str] = []
            size = 0
            while self._pending:
                record = self._pending.popleft()
                try:
                    line = self.format(record) + "\n"
                except Exception:
                    self.handleError(record)
                    continue
                # Several processes may share one stderr pipe (uvicorn --workers, a container):
                # a write of at most PIPE_BUF bytes is atomic there, so lines never interleave.
                length = len(line) if line.isascii() else len(line.encode())  # PIPE_BUF is bytes
                if chunk and size + length > select.PIPE_BUF:
                    self._write(chunk)
                    chunk, size = [], 0
                chunk.append(line)
                size += length
            if chunk:
                self._write(chunk)

    def _write(self, lines: list[str]) -> None:
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:  # noqa: S110 (a log line that cannot be written is dropped)
            pass

    def write_at_once(self) -> None:
        """From now on each record is written as it is logged, in the logging thread."""
        self._at_once = True
        self.flush()

    def close(self) -> None:
        # logging.shutdown() (at exit) closes every handler: write what is left, once.
        self._closed = True
        self._has_pending.set()
        self._write_now.set()
        if self._writer.is_alive() and self._writer is not threading.current_thread():
            self._writer.join()
        self.flush()
        super().close()


def write_logs_at_once() -> None:
    """For a server that is shutting down: uvicorn, stopped by SIGTERM, raises the signal again
    once it has shut down, and the process dies without running its exit handlers (no
    logging.shutdown), so the lines a background writer still held would be lost: the last
    requests' and the server's own last ones."""
    for handler in list(BackgroundStreamHandler._instances):
        handler.write_at_once()


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
        request.request_id = request_id  # for the records Django logs after this returns
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
logger = logging.getLogger(__name__)


def health(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. No database access, so a database outage does not make an
    orchestrator restart healthy processes."""
    return JsonResponse({"status": "ok"})


class ReadinessCheck:
    """The readiness answer, computed at most once every `max_age` seconds per process: the
    probe is public, and the migration planner behind it reads the migration table and loads
    every migration, so a flood of probes must not become a flood of that work."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._answer: tuple[float, int, dict] | None = None  # (monotonic time, status, body)
        self._lock = threading.Lock()

    def answer(self) -> tuple[int, dict]:
        with self._lock:  # one check at a time; probes meanwhile wait for its answer
            if self._answer is None or time.monotonic() - self._answer[0] >= self.max_age:
                self._answer = (time.monotonic(), *self._check())
            return self._answer[1], self._answer[2]

    def forget(self) -> None:
        """Drop the kept answer, so that the next probe checks anew. For tests: each starts
        from its own check, not from an answer kept from an earlier test."""
        with self._lock:
            self._answer = None

    @staticmethod
    def _check() -> tuple[int, dict]:
        def pending_migrations() -> list:
            executor = MigrationExecutor(connection)
            return executor.migration_plan(executor.loader.graph.leaf_nodes())

        try:
            pending = pending_migrations()
        except DatabaseError:
            # The pooled connection may have died with a restart the database is back from:
            # drop the dead ones and ask once more, or the probe would fail once per pooled
            # connection, keeping the process out of a load balancer's rotation that long.
            connection.close()
            try:
                from infra.dbfaults import check_django_pool  # (logging loads this module early)

                check_django_pool()
                pending = pending_migrations()
            except DatabaseError as error:
                # The probe is public and says only "unreachable"; which host, role or database
                # failed, and how, is for the operator's log (a role the owner may not use, a
                # wrong password, a server down all read alike from outside).
                reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
                logger.warning("readiness: the database cannot be used: %s", reason)
                return 503, {"status": "unavailable", "database": "unreachable"}
        if pending:
            body = {"status": "unavailable", "database": "ok", "pending_migrations": len(pending)}
            return 503, body
        return 200, {"status": "ready", "database": "ok"}


readiness = ReadinessCheck(max_age=5.0)


def ready(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers and every migration is applied (as of at most a few
    seconds ago)."""
    status, body = readiness.answer()
    return JsonResponse(body, status=status)


class ProbeMiddleware:
    """Answers the liveness and readiness probes before the host check and the https redirect:
    an orchestrator probes each process at its own address (a Host that ALLOWED_HOSTS does not
    name, which Django answers with 400) and over plain http behind the TLS proxy (which the
    redirect answers with 301). Their answers hold nothing of any account."""

    PROBES = {"/health": health, "/ready": ready}
    METHODS = ("GET", "HEAD")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = self.PROBES.get(request.path_info)
        if probe is None:
            return self.get_response(request)
        if request.method not in self.METHODS:
            # A probe only reads: a POST or a DELETE answered "ok" would tell its sender that
            # something was done. Said as the site's other JSON addresses say it.
            return method_not_allowed_json(request.method, ", ".join(self.METHODS))
        return probe(request)


def method_not_allowed_json(method: str, allowed: str) -> JsonResponse:
    """A 405 for a program: which methods the address takes, in the OAuth endpoints' error
    format (RFC 6749 §5.2), with the Allow header RFC 9110 §15.5.6 asks for."""
    problem = f"{method} is not allowed here; this address takes {allowed or 'none'}"
    refused = JsonResponse({"error": "invalid_request", "error_description": problem}, status=405)
    if allowed:
        refused["Allow"] = allowed
    return refused


# A program's request carries no CSRF token: without the exemption, any other method got the
# site's "form expired" page instead of the 405 that names the methods.
@csrf_exempt
@require_safe
def version_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"name": "threengram", "version": VERSION})
