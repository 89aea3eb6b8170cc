"""Who read what: one structured log line per request, and the one place where a failure's detail
is logged instead of answered.

- ``begin(request_id)`` opens a request's record (a context variable, so the admission deep in a
  route fills in the caller and tenant: ``note``); ``finish(record, ...)`` writes its line, JSON
  on one line: request id, caller, tenant, method, route, status and milliseconds. The HTTP API's
  resolver writes it for each API Gateway event (the query function, MCP included:
  eragraph.entrypoints.http.api), the ASGI app for each request it serves (the stream function,
  and ``eragraph serve`` unless ``--quiet``: eragraph.entrypoints.http.server).
- ``withheld(reason, exc)``: the caller's answer to a failure whose text is internal (a model
  provider's error carries account ids and role ARNs): the stable ``reason`` and the request id;
  the detail goes to the log under that id.

The lines go to stdout through the ``eragraph.request`` logger (CloudWatch Logs on Lambda, where
a function URL keeps no access log of its own)."""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from contextvars import ContextVar
from typing import Any

LOG = logging.getLogger("eragraph.request")
_RECORD: ContextVar[dict | None] = ContextVar("eragraph_request", default=None)


class _Stdout(logging.StreamHandler):
    """A handler writing to this process's stdout as it is at each line (not as it was when made)."""

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _handler() -> None:
    if not LOG.handlers:
        out = _Stdout()
        out.setFormatter(logging.Formatter("%(message)s"))
        LOG.addHandler(out)
        LOG.setLevel(logging.INFO)
        LOG.propagate = False


def begin(request_id: str | None = None, method: str = "", route: str = "") -> dict:
    """A new request's record, made the current one."""
    record = {"request_id": request_id or uuid.uuid4().hex, "caller": "", "tenant": None, "method": method,
              "route": route, "started": time.perf_counter()}
    _RECORD.set(record)
    return record


def enter(record: dict) -> None:
    """Make ``record`` the current one (in a worker thread serving that request)."""
    _RECORD.set(record)


def note(**fields: Any) -> None:
    """Add ``fields`` (caller, tenant, ...) to the current request's record, if any."""
    record = _RECORD.get()
    if record is not None:
        record.update(fields)


def current() -> dict | None:
    """The current request's record (None outside one)."""
    return _RECORD.get()


def current_caller() -> str:
    """The current request's caller as noted so far ("" if none)."""
    record = _RECORD.get()
    return (record or {}).get("caller") or ""


def request_id() -> str:
    """The current request's id ("" outside one)."""
    record = _RECORD.get()
    return record["request_id"] if record is not None else ""


def finish(record: dict, status: int, **extra: Any) -> None:
    """Write ``record``'s line with its ``status``."""
    _handler()
    line = {"event": "request", "request_id": record["request_id"], "caller": record.get("caller") or "",
            "tenant": record.get("tenant"), "method": record.get("method", ""), "route": record.get("route", ""),
            "status": status, "ms": round((time.perf_counter() - record["started"]) * 1000.0, 1), **extra}
    LOG.info(json.dumps(line, default=str, ensure_ascii=True))


def withheld(reason: str, exc: BaseException) -> str:
    """The caller's message for a failure of internal text: ``reason`` and the request id; the
    detail (``exc``) is logged under that id."""
    _handler()
    rid = request_id()
    LOG.warning(json.dumps({"event": "withheld", "request_id": rid, "reason": reason,
                            "detail": f"{type(exc).__name__}: {exc}"}, default=str, ensure_ascii=True))
    return f"{reason} (request id {rid or 'none'}; the detail is in the service's log)"
