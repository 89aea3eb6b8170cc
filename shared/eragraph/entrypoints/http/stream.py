"""POST /retrieveAndGenerateStream: Bedrock Knowledge Bases' RetrieveAndGenerateStream
(eragraph.entrypoints.bedrock_kb.runtime) as an ASGI response, each event-stream frame sent as
the generator yields it (a chunked response, no content-length).

Served by the ASGI app (eragraph.entrypoints.http.server.ApiApp): under ``eragraph serve``, and on
AWS in the stream function (a function URL in RESPONSE_STREAM mode, the Lambda Web Adapter running
that app: Python Lambda has no native response streaming, and the API Gateway function answers
whole responses only). An error before the first frame is the service's modelled JSON error
(errors.kb_error); one after it is the stream's own exception event."""

from __future__ import annotations

import asyncio
import contextvars
import uuid

from ...bootstrap.identity import TenantForbidden
from ..bedrock_kb import runtime as bedrock_kb
from ..request_log import withheld
from .admission import ForeignTenant, RateLimited
from .body import BadRequestBody, parse_body
from .context import answer_budget
from .errors import BudgetTooLarge, kb_error
from .tenant_choice import TenantNotChosen, UnknownTenant


async def serve_kb_stream(server, scope: dict, send, body: bytes) -> None:
    """Answer one request of ``server`` (the ApiApp: its admission, engines, tenants, pools and
    ``on_model_calls``) whose whole ``body`` has been read."""
    loop = asyncio.get_running_loop()
    pool = server.pools["slow"]
    release = []  # the tenant's open-stream slot, freed when the stream ends (or is refused)

    def prepare():
        """The caller's tenant (an IAM tag lookup, a rate-bucket write), the request and the
        tenant's engine: blocking calls, made in the pool so that the loop serves others."""
        caller = server.caller_tenant(scope)  # first: a caller without a tenant gets no work done
        request = parse_body(body.decode("utf-8", errors="replace"))
        bedrock_kb.validate("RetrieveAndGenerateStream", request)
        kb_id = bedrock_kb.knowledge_base_config(request)["knowledgeBaseId"]
        engine = server.engine if server.engines is None else server.engines(caller)
        bedrock_kb.resolve_tenant(kb_id, caller, salt=engine.settings.kb_id_salt)  # the caller's, or a 404
        budget = answer_budget(server.limits, engine)
        release.append(server.open_stream(caller))  # last: a refused request holds no slot
        frames = bedrock_kb.retrieve_and_generate_stream(engine, request, budget)
        return request, tracked(frames, server.on_model_calls)

    try:
        await _answer(server, scope, send, loop, pool, prepare)
    finally:
        for free in release:
            await loop.run_in_executor(pool, free)


async def _answer(server, scope: dict, send, loop, pool, prepare) -> None:
    # one context for every step, so that the cost ledger's track() block spans the answer
    context = contextvars.copy_context()
    try:
        request, frames = await loop.run_in_executor(pool, context.run, prepare)
        first = await loop.run_in_executor(pool, context.run, next, frames, None)  # errors before any frame: JSON
    except (BadRequestBody, TenantForbidden, ForeignTenant, TenantNotChosen, UnknownTenant, RateLimited,
            BudgetTooLarge, bedrock_kb.KbError) as exc:
        status, headers, text = kb_error(exc).response()
        await server.send_whole(send, scope, status, headers, text.encode())
        return
    except Exception as exc:  # noqa: BLE001 (a fault: the modelled 500 in words, never uvicorn's plain one)
        status, headers, text = bedrock_kb.KbError("InternalServerException",
                                                   withheld("the answer failed", exc)).response()
        await server.send_whole(send, scope, status, headers, text.encode())
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/vnd.amazon.eventstream"),
                            (b"x-amzn-bedrock-knowledge-base-session-id",
                             str(request.get("sessionId") or uuid.uuid4()).encode())]})
    frame = first
    try:
        while frame is not None:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            frame = await loop.run_in_executor(pool, context.run, next, frames, None)
    finally:
        await loop.run_in_executor(pool, context.run, frames.close)  # the client left: the calls so far count
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def tracked(frames, on_model_calls):
    """``frames``, with the model calls made while they are produced handed to
    ``on_model_calls`` at the end (also when an error or the client cut them short)."""
    if on_model_calls is None:
        yield from frames
        return
    from ...services import cost

    with cost.track() as calls:
        try:
            yield from frames
        finally:
            on_model_calls(list(calls))
