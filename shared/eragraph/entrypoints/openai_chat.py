"""The OpenAI-compatible chat endpoint: ``POST /v1/chat/completions`` (whole, or streamed as
server-sent events with ``stream: true``) and ``GET /v1/models``, so that chat front ends (Open
WebUI, LibreChat), the OpenAI SDKs and LangChain's ``ChatOpenAI`` talk to a store unchanged.

A model is a retrieval mode: ``eragraph-<mode>`` (``eragraph-auto``, ``eragraph-collapsed``, ...;
``GET /v1/models`` lists the modes this store can run). The last user message is the question;
its evidence is retrieved in that mode (services.query) and the configured generator answers
from it. The answer's citations go in the text (a "Sources" list after the answer, numbered
as the answer's ``[n]`` markers would be) and in the response's ``citations`` field (each cited
passage's id, document, source and title; the last chunk of a stream carries it). Without a
generator the reply is the evidence itself, with a line saying no generator is configured.

The caller, its tenant, rate limit and answer budget cap are every route's (the handlers in
eragraph.entrypoints.http.handlers admit the caller first). A request this cannot serve raises
``ChatError``: a 4xx with OpenAI's error body (``{"error": {"message", "type", "param",
"code"}}``, and the API's ``message`` beside it), in words.

The request: ``model`` and ``messages`` (roles system, user, assistant, tool, developer; content
a string or a list of ``{"type": "text", "text"}`` parts) are required; ``stream``,
``stream_options.include_usage`` are honoured; the sampling and tool fields a client sends
(``temperature``, ``top_p``, ``max_tokens``, ``n`` = 1, ``user``, ...) are accepted and
ignored, once in OpenAI's ranges (``temperature`` 0..2, ``top_p`` 0..1, ``max_tokens`` and
``max_completion_tokens`` at least 1: outside them, or of another type, OpenAI's 400 and code); ``k`` (results, 1..100) and ``filter`` (a Bedrock KB metadata filter) are Eragraph's
own, optional."""

from __future__ import annotations

import contextvars
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..domain.access import Caller
from ..domain.conversation import ASSISTANT, USER, Message
from ..services import query as query_service
from ..services.engine import Engine
from ..services.modes import available_modes

PREFIX = "eragraph-"
ROLES = ("system", "user", "assistant", "tool", "developer", "function")
# fields OpenAI clients send that do not change retrieval: accepted, not used
IGNORED = frozenset({"temperature", "top_p", "max_tokens", "max_completion_tokens", "n", "user", "stop",
                     "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
                     "response_format", "tools", "tool_choice", "parallel_tool_calls", "metadata", "store",
                     "service_tier", "reasoning_effort", "modalities", "audio", "prediction", "functions",
                     "function_call", "web_search_options", "verbosity", "prompt_cache_key", "safety_identifier"})
KNOWN = frozenset({"model", "messages", "stream", "stream_options", "k", "filter"}) | IGNORED
MAX_MESSAGES = 200
# the sampling fields OpenAI range-checks (field: integer only, lowest, highest or None)
RANGES = {"temperature": (False, 0, 2), "top_p": (False, 0, 1), "max_tokens": (True, 1, None),
          "max_completion_tokens": (True, 1, None)}


class ChatError(Exception):
    """A request the endpoint refuses: ``status`` and OpenAI's error ``type``/``param``/``code``."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"statusCode": self.status, "message": str(self),
                "error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    mode: str
    question: str
    stream: bool = False
    include_usage: bool = False
    k: int | None = None
    filter: dict | None = None
    history: tuple[Message, ...] = ()  # the user and assistant messages before the question


def models(engine: Engine) -> dict:
    """GET /v1/models: one model per retrieval mode this store can run."""
    return {"object": "list", "data": [{"id": PREFIX + m, "object": "model", "created": 0, "owned_by": "eragraph"}
                                       for m in available_modes(engine)]}


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ChatError(f"{where}.content[{i}] must be an object with a type", param=f"{where}.content")
            if part["type"] == "text":
                if not isinstance(part.get("text"), str):
                    raise ChatError(f"{where}.content[{i}].text must be a string", param=f"{where}.content")
                parts.append(part["text"])
        return "\n".join(parts)
    raise ChatError(f"{where}.content must be a string or a list of content parts", param=f"{where}.content")


def _check_range(field: str, value: Any, integer: bool, low: float, high: float | None) -> None:
    """ChatError in OpenAI's words and code unless ``value`` (None: not given) is a number of the
    field's type within low..high."""
    if value is None:
        return
    kind = "integer" if integer else "decimal"
    number = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not number:
        got = {str: "a string", list: "an array", dict: "an object", bool: "a boolean", float: "a decimal"}.get(
            type(value), "a value")
        raise ChatError(f"Invalid type for '{field}': expected {'an' if integer else 'a'} {kind}, but got {got} "
                        "instead.", param=field, code="invalid_type")
    if value < low:
        raise ChatError(f"Invalid '{field}': {kind} below minimum value. Expected a value >= {low}, but got "
                        f"{value} instead.", param=field, code=f"{kind}_below_min_value")
    if high is not None and value > high:
        raise ChatError(f"Invalid '{field}': {kind} above maximum value. Expected a value <= {high}, but got "
                        f"{value} instead.", param=field, code=f"{kind}_above_max_value")


def parse_request(engine: Engine, body: Any) -> ChatRequest:
    """The request of a body, or a ChatError naming what is wrong."""
    if not isinstance(body, dict):
        raise ChatError("the body must be a JSON object")
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise ChatError(f"unknown field {unknown[0]!r} (this endpoint reads model, messages, stream, "
                        f"stream_options, k and filter)", param=unknown[0])
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ChatError("model is required: a string such as 'eragraph-auto' (GET /v1/models lists them)",
                        param="model")
    modes = available_modes(engine)
    mode = model[len(PREFIX):] if model.startswith(PREFIX) else None
    if mode not in modes:
        raise ChatError(f"the model {model!r} does not exist: choose one of "
                        f"{', '.join(PREFIX + m for m in modes)}", status=404, param="model", code="model_not_found")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatError("messages is required: a non-empty list of {role, content}", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ChatError(f"messages must hold at most {MAX_MESSAGES} messages (got {len(messages)})", param="messages")
    question = None
    said: list[Message] = []  # user and assistant messages with text, in order
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ChatError(f"{where} must be an object whose role is one of {', '.join(ROLES)}", param="messages")
        text = _text_of(message.get("content"), where)
        if message["role"] == "user":
            question = text
            said.append(Message(USER, text))
        elif message["role"] == "assistant" and text.strip():
            said.append(Message(ASSISTANT, text))
    last = max((i for i, m in enumerate(said) if m.role == USER), default=0)
    if question is None or not question.strip():
        raise ChatError("messages must end with a user message that has text (the question)", param="messages")
    if len(question) > query_service.MAX_QUERY_CHARS:
        raise ChatError(f"the question is longer than {query_service.MAX_QUERY_CHARS} characters", param="messages")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise ChatError("stream must be true or false", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ChatError("stream_options must be an object", param="stream_options")
    for field, (integer, low, high) in RANGES.items():
        _check_range(field, body.get(field), integer, low, high)
    n = body.get("n")
    if n is not None and n != 1:
        raise ChatError("n must be 1: one answer a request", param="n")
    k = body.get("k")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 100):
        raise ChatError(f"k must be an integer within 1..100 (got {k!r})", param="k")
    where = body.get("filter")
    if where is not None and not isinstance(where, dict):
        raise ChatError("filter must be a metadata filter object (Bedrock Knowledge Bases' shape)", param="filter")
    return ChatRequest(model=model, mode=mode, question=question, stream=bool(stream),
                       include_usage=bool(options.get("include_usage")), k=k, filter=where,
                       history=tuple(said[:last]))


def _citations(response: query_service.QueryResponse) -> list[dict]:
    by_id = {r.id: r for r in response.results}
    cited = [i for i in response.cited_ids if i in by_id] if response.answer is not None else list(by_id)
    return [{"index": n, "id": i, "doc_id": by_id[i].doc_id, "source": by_id[i].source, "title": by_id[i].title,
             "place": by_id[i].where} for n, i in enumerate(cited, 1)]


def _page(c: dict) -> str:
    place = c.get("place") or {}
    pages = place.get("pages")
    if not pages:
        return ""
    return f", page {pages[0]}" if pages[0] == pages[1] else f", pages {pages[0]}-{pages[1]}"


def _sources(citations: list[dict]) -> str:
    if not citations:
        return ""
    lines = [f"[{c['index']}] {c['title'] or c['source']} ({c['source']}{_page(c)})" if c["title"] else
             f"[{c['index']}] {c['source']}{_page(c)}" for c in citations]
    return "\n\nSources:\n" + "\n".join(lines)


def _evidence_text(response: query_service.QueryResponse) -> str:
    if not response.results:
        return "No passage of this knowledge base matches the question."
    passages = "\n\n".join(f"[{n}] {r.text}" for n, r in enumerate(response.results, 1))
    return "No generator is configured for this knowledge base, so here is the evidence it holds:\n\n" + passages


def _usage(response: query_service.QueryResponse) -> dict:
    gen = (response.usage.get("by_kind") or {}).get("generate") or {}
    prompt, completion = int(gen.get("tokens_in", 0)), int(gen.get("tokens_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def answer(engine: Engine, request: ChatRequest, budget: int | None = None,
           on_piece: Callable[[str], None] | None = None,
           caller: Caller | None = None) -> tuple[query_service.QueryResponse, str, list[dict]]:
    """Retrieve and generate: the query response, the reply's whole text (the answer with its
    sources, or the evidence) and its citations. ``on_piece`` sees the answer's pieces as written;
    ``caller``: who is asking (domain.access; None: the operator): the evidence is inside its view."""
    try:
        response = query_service.query(engine, request.question, mode=request.mode, k=request.k, budget=budget,
                                       answer=engine.generator is not None, where=request.filter,
                                       on_piece=on_piece, conversation=request.history, caller=caller)
    except query_service.BadQueryError as exc:
        raise ChatError(str(exc)) from None
    citations = _citations(response)
    if response.answer is None:
        return response, _evidence_text(response) + _sources(citations), citations
    return response, response.answer + _sources(citations), citations


def completion(engine: Engine, request: ChatRequest, budget: int | None = None, caller: Caller | None = None) -> dict:
    """POST /v1/chat/completions without streaming: a ``chat.completion`` object (inside ``caller``'s view)."""
    response, text, citations = answer(engine, request, budget, caller=caller)
    return {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion", "created": int(time.time()),
            "model": request.model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(response), "citations": citations, **_rewrite(response)}


def _rewrite(response: query_service.QueryResponse) -> dict:
    """The follow-up's standalone question and how it was made (a conversation's only)."""
    return {"rewrite": response.rewrite} if response.rewrite is not None else {}


def chunks(engine: Engine, request: ChatRequest, budget: int | None = None,
           caller: Caller | None = None) -> Iterator[dict]:
    """POST /v1/chat/completions with streaming: the ``chat.completion.chunk`` objects, the
    answer's text as the generator writes it (the work runs in a thread of its own, each piece
    handed over as it comes), then the sources, the finish reason with the ``citations``, and
    (``include_usage``) the usage chunk. A refusal before the first piece raises ChatError."""
    ident, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())

    def chunk(delta: dict, finish: str | None = None, **extra: Any) -> dict:
        return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": request.model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}

    pieces: queue.Queue = queue.Queue()
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["out"] = answer(engine, request, budget, on_piece=lambda p: pieces.put(p), caller=caller)
        except BaseException as exc:  # noqa: BLE001 (re-raised in the caller's thread)
            done["error"] = exc
        finally:
            pieces.put(None)

    threading.Thread(target=contextvars.copy_context().run, args=(work,), daemon=True,
                     name="eragraph-chat").start()
    written, first = [], True
    while (piece := pieces.get()) is not None:
        if first:
            yield chunk({"role": "assistant", "content": ""})
            first = False
        written.append(piece)
        yield chunk({"content": piece})
    if "error" in done:
        raise done["error"]
    response, text, citations = done["out"]
    if first:
        yield chunk({"role": "assistant", "content": ""})
    so_far = "".join(written)
    rest = text[len(so_far):] if text.startswith(so_far) else text
    if rest:
        yield chunk({"content": rest})
    yield chunk({}, "stop", citations=citations, **_rewrite(response))
    if request.include_usage:
        yield {**chunk({}), "choices": [], "usage": _usage(response)}


def sse(events: Iterator[dict]) -> Iterator[bytes]:
    """Server-sent events of ``events``, then ``data: [DONE]``."""
    for event in events:
        yield b"data: " + json.dumps(event, separators=(",", ":")).encode("utf-8") + b"\n\n"
    yield b"data: [DONE]\n\n"
