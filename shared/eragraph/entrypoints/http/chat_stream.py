"""POST /v1/chat/completions with ``stream: true`` under `eragraph serve`: the server-sent events
of eragraph.entrypoints.openai_chat sent as the generator writes them (a chunked response).

The request is admitted as every route's (the ApiApp's admission: the caller's tenant, its rate
bucket) and refused in the endpoint's JSON error before the first event; a failure after it is
an ``error`` event (OpenAI's shape) before ``[DONE]``. Every refusal of the API (errors.ANSWERS:
no tenant chosen, a foreign one, a budget over the cap, too many open streams...) has its status
before the head; a fault is what failed and the request id (request_log.withheld), never the
exception's text, which is in the log. The resolver answers the same request
whole (handlers.post_chat_completions: the API Gateway function answers whole responses)."""

from __future__ import annotations

import asyncio
import contextvars
import json

from .. import openai_chat
from ..request_log import withheld
from .body import parse_body
from .context import answer_budget
from .errors import error_body, refusal


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
    except Exception as exc:  # noqa: BLE001 (before the head: the API's answer, never uvicorn's 500)
        status, body, headers = refusal(exc) or (500, error_body(500, withheld("the answer failed", exc)), {})
        await server.send_whole(send, scope, status, {"content-type": "application/json", **headers},
                                json.dumps(body).encode())
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    frame = first
    try:
        while frame is not None:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            frame = await loop.run_in_executor(pool, context.run, next, events, None)
    except Exception as exc:  # noqa: BLE001 (after the head: the stream's own error event)
        refused = refusal(exc)
        words = refused[1].get("message") if refused else withheld("the answer broke off", exc)
        error = {"error": {"message": words, "type": "server_error", "param": None, "code": None}}
        await send({"type": "http.response.body", "body": b"data: " + json.dumps(error).encode() + b"\n\n",
                    "more_body": True})
    finally:
        await loop.run_in_executor(pool, context.run, events.close)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
