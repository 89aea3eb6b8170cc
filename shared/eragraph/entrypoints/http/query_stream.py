"""POST /query/stream: POST /query's answer as it is written, served by the ASGI app of
``eragraph serve`` (eragraph.entrypoints.http.server.ApiApp) as NDJSON, one JSON object a line:

- ``{"type": "results", ...}``: the /query response without its answer, once the evidence is
  ranked (before any generation);
- ``{"type": "piece", "text": ...}``: each piece of the answer as the generator writes it
  (services.generation.stream_answer: a generator that does not stream gives one piece);
- ``{"type": "done", "answer", "cited_ids", "usage", "stages", "note"}``: the whole answer, the
  query's model calls and the time of each stage (without a generator ``answer`` is null and
  the note says so);
- ``{"type": "error", "message"}``: a failure after the head was sent (the status is 200 then).

The body is POST /query's (models.QueryRequest, answer implied); the caller is admitted as on
every route (admission.Admission: its tenant, the x-eragraph-tenant header, the rate limit).
A refusal before the first line is the API's JSON error with its status (errors.ANSWERS): 400
for a body that is no JSON object or a bad mode, 403, 404, 415 for a content-type that is not
JSON, 422 for a body that breaks the request model, 429, never a 500 for bad input. A fault
(a 500 before the head, an error line after it) says what failed and the request id, never the
exception's text: that is in the log (request_log.withheld)."""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

from .body import parse_body
from ..request_log import withheld
from .errors import error_body, refusal
from .admission import ForeignTenant
from .context import answer_budget

NDJSON = "application/x-ndjson"
_END = object()


class _Invalid(Exception):
    """A body that breaks the request model: answered 422 with the API's message."""

    def __init__(self, message: str, detail: list[dict]) -> None:
        super().__init__(message)
        self.detail = detail


class _NotJson(Exception):
    """A content-type that is given and is not JSON (answered 415)."""


def _refusal(exc: Exception) -> tuple[int, dict, dict[str, str]] | None:
    """The status, body and headers of a refusal, as the API answers it (None: not a refusal)."""
    if isinstance(exc, _Invalid):
        return 422, error_body(422, str(exc), detail=exc.detail), {}
    if isinstance(exc, _NotJson):
        return 415, error_body(415, str(exc)), {}
    return refusal(exc)


def _request(scope: dict, body: bytes):
    """The request model of ``body`` (models.QueryRequest) or the refusal saying why not."""
    from pydantic import ValidationError

    from ...domain.validation import describe_all
    from .models import QueryRequest

    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    given = headers.get("content-type", "")
    if given and "json" not in given.split(";")[0].lower():
        raise _NotJson(f"the body must be JSON: content-type must be application/json (got {given!r})")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        from .body import BadRequestBody

        raise BadRequestBody(f"the body is not UTF-8 text (byte 0x{body[exc.start]:02x} at offset {exc.start})") from None
    try:
        return QueryRequest.model_validate(parse_body(text), strict=True)
    except ValidationError as exc:
        errors = exc.errors()
        raise _Invalid(describe_all([{**e, "loc": ("body", *e["loc"])} for e in errors], known=QueryRequest.model_fields),
                       [{"loc": ["body", *e["loc"]], "type": e["type"]} for e in errors]) from None


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


async def serve_query_stream(server, scope: dict, send, body: bytes, pool) -> None:
    """Answer one POST /query/stream of ``server`` (the ApiApp) whose whole ``body`` was read;
    its blocking work runs in ``pool`` (the one of the mode's family, as POST /query's)."""
    from ...services import query as query_service
    from .models import rerank_spec

    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    release = []  # the tenant's open-stream slot, freed when the answer ends (or is refused)

    def put(item: Any) -> None:
        loop.call_soon_threadsafe(events.put_nowait, item)

    def run() -> None:
        """Admission, validation and the query with its answer: blocking work, in a pool."""
        try:
            tenant = server.caller_tenant(scope)  # first: a caller without a tenant gets no work done
            request = _request(scope, body)
            if request.tenant is not None and request.tenant != tenant:
                raise ForeignTenant("the request names another tenant than the caller's: the tenant comes from "
                                    "the caller's identity, never from the body")
            engine = server.engines(tenant)
            budget = answer_budget(server.limits, engine, request.budget)
            release.append(server.open_stream(tenant))  # last: a refused request holds no slot
            response = query_service.query(
                engine, request.query, mode=request.mode, k=request.k, budget=budget, p=request.p,
                answer=True, where=request.filter, rerank=rerank_spec(request.rerank), explain=request.explain,
                on_results=lambda head: put(("results", head)), on_piece=lambda text: put(("piece", text)))
            put(("done", response))
        except Exception as exc:  # every failure reaches the client: a status before the head, a line after
            put(("error", exc))
        finally:
            for free in release:
                free()
            put(_END)

    future = loop.run_in_executor(pool, contextvars.copy_context().run, run)
    started = False
    try:
        while True:
            item = await events.get()
            if item is _END:
                break
            kind, value = item
            if not started:
                if kind == "error":
                    refused = _refusal(value)
                    status, payload, headers = refused if refused is not None else (
                        500, error_body(500, withheld("the query failed", value)), {})
                    await server.send_whole(send, scope, status, {"content-type": "application/json", **headers},
                                            json.dumps(payload).encode())
                    continue
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", NDJSON.encode()), (b"cache-control", b"no-cache"),
                                        (b"x-content-type-options", b"nosniff")]})
                started = True
            await send({"type": "http.response.body", "body": _line(_event(kind, value)), "more_body": True})
        if started:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await future


def _event(kind: str, value: Any) -> dict:
    if kind == "results":
        head = value.to_dict()
        for key in ("answer", "cited_ids", "usage"):
            head.pop(key, None)
        return {"type": "results", **head}
    if kind == "piece":
        return {"type": "piece", "text": value}
    if kind == "done":
        return {"type": "done", "answer": value.answer, "cited_ids": list(value.cited_ids), "usage": value.usage,
                "stages": value.stages, "note": value.note, "seconds": round(value.seconds, 4)}
    refused = _refusal(value)
    return {"type": "error", "message": refused[1].get("message") if refused else withheld("the answer broke off", value)}

