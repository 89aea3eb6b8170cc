"""POST /v1/chat/completions with ``stream: true`` under `eragraph serve`: the server-sent events
of eragraph.entrypoints.openai_chat sent as the generator writes them (a chunked response).

The request is admitted as every route's (the ApiApp's admission: the caller's tenant, its rate
bucket) and refused in the endpoint's JSON error before the first event; a failure after it is
an ``error`` event (OpenAI's shape) before ``[DONE]``. The resolver answers the same request
whole (handlers.post_chat_completions: the API Gateway function answers whole responses)."""

from __future__ import annotations

import asyncio
import contextvars
import json

from ...bootstrap.identity import TenantForbidden
from .. import openai_chat
from .admission import RateLimited
from .body import BadRequestBody, parse_body
from .context import answer_budget
from .errors import error_body


def wants_stream(body: bytes) -> bool:
    """Whether a chat request's body asks for a stream (a body that is no JSON object: no; the
    resolver refuses it)."""
    if b'"stream"' not in body:
        return False
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


async def serve_chat_stream(server, scope: dict, send, body: bytes) -> None:
    """Answer one streamed chat request of ``server`` (the ApiApp) whose whole ``body`` was read."""
    loop = asyncio.get_running_loop()
    pool = server.pools["slow"]
    release = []  # the tenant's open-stream slot, freed when the stream ends (or is refused)

    def prepare():
        caller = server.caller_tenant(scope)  # first: a caller without a tenant gets no work done
        engine = server.engine if server.engines is None else server.engines(caller)
        request = openai_chat.parse_request(engine, parse_body(body.decode("utf-8", errors="replace")))
        budget = answer_budget(server.limits, engine)
        release.append(server.open_stream(caller))  # last: a refused request holds no slot
        return openai_chat.sse(openai_chat.chunks(engine, request, budget))

    try:
        await _answer(server, scope, send, loop, pool, prepare)
    finally:
        for free in release:
            await loop.run_in_executor(pool, free)


async def _answer(server, scope: dict, send, loop, pool, prepare) -> None:
    context = contextvars.copy_context()
    try:
        events = await loop.run_in_executor(pool, context.run, prepare)
        first = await loop.run_in_executor(pool, context.run, next, events, None)
    except openai_chat.ChatError as exc:
        await server.send_whole(send, scope, exc.status, {"content-type": "application/json"},
                                json.dumps(exc.body()).encode())
        return
    except (BadRequestBody, TenantForbidden, RateLimited) as exc:
        status = 400 if isinstance(exc, BadRequestBody) else 403 if isinstance(exc, TenantForbidden) else 429
        headers = {"content-type": "application/json"}
        if isinstance(exc, RateLimited):
            headers["retry-after"] = str(exc.retry_after)
        await server.send_whole(send, scope, status, headers, json.dumps(error_body(status, str(exc))).encode())
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    frame = first
    try:
        while frame is not None:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            frame = await loop.run_in_executor(pool, context.run, next, events, None)
    except Exception as exc:  # noqa: BLE001 (after the head: the stream's own error event)
        error = {"error": {"message": str(exc) or type(exc).__name__, "type": "server_error", "param": None,
                           "code": None}}
        await send({"type": "http.response.body", "body": b"data: " + json.dumps(error).encode() + b"\n\n",
                    "more_body": True})
    finally:
        await loop.run_in_executor(pool, context.run, events.close)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
