"""POST /query/stream: POST /query's answer as it is written, served by the ASGI app of
``eragraph serve`` (eragraph.entrypoints.http.server.ApiApp) through the stream primitive
(streaming.serve_stream) as NDJSON, one JSON object a line:

- ``{"type": "results", ...}``: the /query response without its answer, once the evidence is
  ranked (before any generation);
- ``{"type": "piece", "text": ...}``: each piece of the answer as the generator writes it
  (services.generation.stream_answer: a generator that does not stream gives one piece);
- ``{"type": "done", "answer", "cited_ids", "usage", "stages", "note"}``: the whole answer, the
  query's model calls and the time of each stage (without a generator ``answer`` is null and
  the note says so);
- ``{"type": "error", "message"}``: a failure after the head was sent (the status is 200 then).

The body is POST /query's, validated as POST /query's (the request pipeline's binding of its
handler: models.QueryRequest, answer implied); the caller is admitted as on every route (admission.Admission: its tenant, the x-eragraph-tenant header, the rate limit).
A refusal before the first line is the API's JSON error with its status (errors.ANSWERS): 400
for a body that is no JSON object or a bad mode, 403, 404, 415 for a content-type that is not
JSON, 422 for a body that breaks the request model, 429, never a 500 for bad input. A fault
(a 500 before the head, an error line after it) says what failed and the request id, never the
exception's text: that is in the log (request_log.withheld)."""

from __future__ import annotations

import dataclasses

import json
from typing import Any

from .context import answer_budget, check_tenant
from .pipeline import Entry, pool_of
from .routes import route_of
from .streaming import Encoder, Prepared

NDJSON = "application/x-ndjson"
_QUERY = Entry.of(route_of("POST", "/query"))  # the body is POST /query's


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


def _event(item: tuple[str, Any]) -> bytes:
    kind, value = item
    if kind == "results":
        head = value.to_dict()
        for key in ("answer", "cited_ids", "usage"):
            head.pop(key, None)
        return _line({"type": "results", **head})
    if kind == "piece":
        return _line({"type": "piece", "text": value})
    return _line({"type": "done", "answer": value.answer, "cited_ids": list(value.cited_ids), "usage": value.usage,
                  "stages": value.stages, "note": value.note, "seconds": round(value.seconds, 4)})


ENCODER = Encoder(NDJSON, _event, lambda words: _line({"type": "error", "message": words}),
                  headers=(("cache-control", "no-cache"), ("x-content-type-options", "nosniff")),
                  fault="the query failed")


def prepare(app, request, hold) -> Prepared:
    """Admission, then POST /query's validation, then the stream slot; the query with its answer
    runs in the pool its mode names, its lines emitted as they are written."""
    from ...services import query as query_service
    from .models import rerank_spec

    tenant = app.admission.caller(request.headers)  # first: a caller without a tenant gets no work done
    # who is asking inside the tenant, as POST /query's: its principals (a 403 without them when
    # they are required), or the local operator's "ask as" (None: the operator)
    ctx = getattr(app.pipeline, "ctx", None)
    asking = app.asking(request.headers) if ctx is None else dataclasses.replace(ctx, request=request).asking()
    values = app.pipeline.bind(_QUERY, request)
    query = values["request"]
    check_tenant(query.tenant, tenant)
    engine = app.engines(tenant)
    budget = answer_budget(app.limits, engine, query.budget)
    hold(tenant)  # last: a refused request holds no slot

    def produce(emit) -> None:
        response = query_service.query(
            engine, query.query, mode=query.mode, k=query.k, budget=budget, p=query.p, answer=True,
            where=query.filter, rerank=rerank_spec(query.rerank), explain=query.explain, conversation=query.turns(),
            decompose=query.decompose, on_results=lambda head: emit(("results", head)),
            on_piece=lambda text: emit(("piece", text)), caller=asking)
        emit(("done", response))

    return Prepared(produce, pool=pool_of(values))
