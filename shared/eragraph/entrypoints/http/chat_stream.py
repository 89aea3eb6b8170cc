"""POST /v1/chat/completions with ``stream: true`` under `eragraph serve`: the server-sent events
of eragraph.entrypoints.openai_chat sent as the generator writes them (a chunked response),
through the stream primitive (streaming.serve_stream).

The request is admitted as every route's (the ApiApp's admission: the caller's tenant, its rate
bucket) and refused in the endpoint's JSON error before the first event; a failure after it is
an ``error`` event (OpenAI's shape) before ``[DONE]``. Every refusal of the API (errors.ANSWERS:
no tenant chosen, a foreign one, a budget over the cap, too many open streams...) has its status
before the head; a fault is what failed and the request id (request_log.withheld), never the
exception's text, which is in the log. The resolver answers the same request
whole (handlers.post_chat_completions: the API Gateway function answers whole responses)."""

from __future__ import annotations

import json

from .. import openai_chat
from .body import BadRequestBody
from .context import answer_budget
from .streaming import Encoder, Prepared


def wants_stream(request) -> bool:
    """Whether a chat request (request.Request) asks for a stream (a body that is no JSON object:
    no; the pipeline refuses it)."""
    if b'"stream"' not in request.body:
        return False
    try:
        parsed = request.json_body
    except BadRequestBody:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


def _error_event(words: str) -> bytes:
    error = {"error": {"message": words, "type": "server_error", "param": None, "code": None}}
    return b"data: " + json.dumps(error).encode() + b"\n\n"


ENCODER = Encoder("text/event-stream", lambda event: event, _error_event)


def prepare(app, request, hold) -> Prepared:
    caller = app.admission.caller(request.headers)  # first: a caller without a tenant gets no work done
    asking = app.asking(request.headers)  # who is asking inside the tenant (a 403 without principals when required)
    engine = app.engines(caller)
    chat = openai_chat.parse_request(engine, request.json_body)
    budget = answer_budget(app.limits, engine)
    hold(caller)  # last: a refused request holds no slot
    return Prepared(openai_chat.sse(openai_chat.chunks(engine, chat, budget, caller=asking)))
