"""The MCP server (Model Context Protocol, on the official ``mcp`` SDK): a store's retrieval as
tools an agent calls.

Tools (``build_server``):
- ``retrieve(query, k, mode, filter)``: the evidence of POST /query (services.query); the
  description lists the modes this store can run, each with what it is for (the registry's
  ``purpose``: services.modes), so an agent can choose;
- ``answer(query, k, mode, filter)``: the evidence and a generated answer with citations; listed
  only when the store has a generator (called without one: a tool error saying so);
- ``get_document(doc_id)``: the JSON of GET /documents/{id} (entrypoints.documents, the same code);
- ``stats``: the JSON of GET /stats (services.stats).
Every failure is an MCP tool error in words (``isError``: a bad argument, mode or filter, an
unknown document), never a protocol error or a crash.

Transports:
- stdio (``run_stdio``; ``eragraph mcp --store DIR [--tenant ID]``);
- stateless streamable HTTP with JSON responses (``serve_http``, an ASGI call): ``eragraph serve``
  mounts it at /mcp, and the query function's POST /mcp route (api.make_app) drives it from the
  API Gateway event (``event_response``). Stateless: every POST is served on its own (a fresh
  session manager per request), so any Lambda container or server thread can answer any request.

Tenants: a stdio server is bound to one tenant. Over HTTP the tenant is the request's
``TENANT_KEY`` in the ASGI scope, set by whoever authenticated the caller (``eragraph serve``:
its engine's tenant; AWS: bootstrap.identity through api.make_app), never by the request; an
HTTP request without it answers nothing. Who is asking inside the tenant is its ``CALLER_KEY``
(a domain.access.Caller: the principals of its identity, bootstrap.principals, or of its
``eragraph serve`` token), set the same way: ``retrieve``, ``answer`` and ``get_document``
answer inside its view; absent (stdio, principals off), the caller is the operator.

The engine's work is blocking (SQLite, FAISS, DynamoDB, OpenSearch, models): it runs in a worker
thread (``run_blocking``; by default one at a time per server, as the entity store needs)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Optional, TypeVar

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..domain.access import Caller
from ..domain.conversation import MAX_TURNS, Message
from ..domain.model import LexicalIndexMissing
from ..domain.rerank import RerankSpec
from ..services import query as query_service
from ..services import stats as stats_service
from ..services.engine import Engine
from ..services.modes import MODES, available_modes
from ..domain.validation import describe_all
from .documents import document_json  # GET /documents/{id}'s own JSON, with the document's status
from .mcp_unicode import BAD_ARGUMENT_KEY, buffered, screen
from .mcp_unicode import message as bad_unicode

log = logging.getLogger(__name__)

SERVER_NAME = "eragraph"
TENANT_KEY = "eragraph.tenant"  # the ASGI scope key of the caller's tenant (HTTP)
CALLER_KEY = "eragraph.caller"  # the ASGI scope key of who is asking (a domain.access.Caller; absent: the operator)
MAX_BODY_BYTES = 1 << 20
T = TypeVar("T")
RunBlocking = Callable[[Callable[[], T], Optional[str]], Awaitable[T]]

FILTER_HELP = ("Optional metadata filter in Amazon Bedrock Knowledge Bases' shape, e.g. {\"andAll\": [{\"equals\": "
               "{\"key\": \"lang\", \"value\": \"en\"}}, {\"greaterThanOrEquals\": {\"key\": \"year\", \"value\": "
               "2020}}]}; operators: equals, notEquals, in, notIn, greaterThan, greaterThanOrEquals, lessThan, "
               "lessThanOrEquals, startsWith, andAll, orAll; built-in keys: source, doc_id, title. Every result is "
               "then a passage of a document that matches.")


class ToolFailed(Exception):
    """A tool call that fails with this message (an MCP tool error)."""


class ConversationTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["user", "assistant"] = Field(description="Who said it")
    content: str = Field(max_length=query_service.MAX_QUERY_CHARS * 4, description="What was said")


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field(min_length=1, max_length=query_service.MAX_QUERY_CHARS, description="The question or search text")
    k: int = Field(5, ge=1, le=100, description="How many results (1..100)")
    mode: str = Field("collapsed", description="The retrieval mode (see the tool's description)")
    filter: Optional[dict[str, Any]] = Field(None, description=FILTER_HELP)
    rerank: bool = Field(False, description="Re-order the results with the knowledge base's reranker (when one is "
                         "configured; else the call fails saying so)")
    conversation: Optional[list[ConversationTurn]] = Field(
        None, max_length=MAX_TURNS * 2, description="The earlier turns of the conversation, oldest first, when the "
        "query is a follow-up (\"And when did she die?\"): it is made standalone from them before retrieval, and "
        "the response's rewrite says how")
    decompose: bool = Field(False, description="Split the question into sub-questions with the knowledge base's "
                            "model, retrieve for each and fuse them (when a Bedrock or OpenAI-compatible generator is "
                            "configured; else the call fails saying so); the response's decomposition shows them")


class DocumentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    doc_id: str = Field(min_length=1, max_length=512, description="The document's id (a result's doc_id)")


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def modes_help(engine: Engine) -> str:
    """The modes this engine can run, each with what it is for (the registry's purpose)."""
    return "Modes (choose by the question): " + "; ".join(
        f"{name}: {MODES[name].purpose or MODES[name].description}" for name in available_modes(engine)) + "."


def _search_schema(engine: Engine) -> dict:
    schema = SearchArgs.model_json_schema()
    schema["properties"]["mode"]["enum"] = available_modes(engine)
    schema.pop("title", None)
    return schema


def _schema(model: type[BaseModel]) -> dict:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


_READ_ONLY = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                   open_world_hint=False)


def tools_for(engine: Engine) -> list[types.Tool]:
    """The tools of this engine's store (``answer`` only when it has a generator)."""
    tools = [types.Tool(
        name="retrieve", title="Retrieve evidence",
        description="Search this knowledge base: the passages (leaf chunks) and topic summaries that best match "
                    "the query, best first, each with its id, doc_id, source, title, layer (0: a passage, above: "
                    "a summary of the nodes in children) and score; the response says the route taken. "
                    + modes_help(engine),
        input_schema=_search_schema(engine), annotations=_READ_ONLY)]
    if engine.generator is not None:
        tools.append(types.Tool(
            name="answer", title="Answer with citations",
            description="Retrieve as the retrieve tool does, then generate an answer from that evidence only: "
                        "answer is the text, cited_ids the ids of the results it rests on, results the evidence. "
                        + modes_help(engine),
            input_schema=_search_schema(engine), annotations=_READ_ONLY))
    tools += [
        types.Tool(name="get_document", title="Get a document",
                   description="One document of this knowledge base by its id (a result's doc_id): source, title, "
                               "content hash, its chunk ids and its status.",
                   input_schema=_schema(DocumentArgs), annotations=_READ_ONLY),
        types.Tool(name="stats", title="Knowledge base statistics",
                   description="The knowledge base's statistics: documents, layers and segments, the graph "
                               "settings, the embedder, vectors and the cost ledger of model calls.",
                   input_schema=_schema(NoArgs), annotations=_READ_ONLY),
    ]
    return tools


def _args(model: type[BaseModel], arguments: dict[str, Any] | None):
    try:
        return model.model_validate(arguments or {})
    except ValidationError as exc:
        raise ToolFailed(describe_all(exc.errors(), skip=(), known=model.model_fields, whole="the arguments")) from None


def call(engine: Engine, name: str, arguments: dict[str, Any] | None, budget: int | None = None,
         caller: Caller | None = None) -> dict:
    """The JSON a tool answers with (blocking); ToolFailed says why it cannot. ``budget``: the
    evidence budget of ``answer`` (the API's cap; None: the store's default); ``caller``: who is
    asking (domain.access; None: the operator): ``retrieve`` and ``answer`` answer inside its
    view, and ``get_document`` knows no document it may not read."""
    if name in ("retrieve", "answer"):
        args = _args(SearchArgs, arguments)
        if name == "answer" and engine.generator is None:
            raise ToolFailed("no generator is configured for this knowledge base, so it cannot answer: use the "
                             "retrieve tool for the evidence")
        response = query_service.query(engine, args.query, mode=args.mode, k=args.k, answer=name == "answer",
                                       where=args.filter, rerank=RerankSpec() if args.rerank else None,
                                       budget=budget if name == "answer" else None,
                                       conversation=[Message(t.role, t.content) for t in args.conversation or ()],
                                       decompose=args.decompose, caller=caller)
        return response.to_dict()
    if name == "get_document":
        args = _args(DocumentArgs, arguments)
        body = document_json(engine, args.doc_id, caller)
        if body is None:
            raise ToolFailed(f"no document {args.doc_id!r} in this knowledge base")
        return body
    if name == "stats":
        _args(NoArgs, arguments)
        return stats_service.stats(engine)
    known = ", ".join(t.name for t in tools_for(engine))
    raise ToolFailed(f"unknown tool {name!r}; the tools are {known}")


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def serial_runner() -> RunBlocking:
    """Run blocking work in a worker thread, one call at a time."""
    lock = threading.Lock()

    async def run(fn: Callable[[], T], _mode: str | None) -> T:
        def locked() -> T:
            with lock:
                return fn()
        return await anyio.to_thread.run_sync(locked)
    return run


def build_server(get_engine: Callable[[str], Engine], tenant: str | None = None,
                 run_blocking: RunBlocking | None = None,
                 budget_of: Callable[[Engine], int | None] | None = None) -> Server:
    """The MCP server over ``get_engine(tenant)``. ``tenant``: the one tenant of a stdio server;
    None: each HTTP request's ``TENANT_KEY``. ``run_blocking(fn, mode)`` runs the engine's work
    off the event loop (``mode``: the retrieval mode asked for, None for the other tools; a server
    with thread pools per mode family routes by it). ``budget_of(engine)``: the evidence budget
    of an ``answer`` (the API's cap: entrypoints.http.context.answer_budget; None: the store's)."""
    run = run_blocking or serial_runner()

    def engine_of(ctx) -> Engine:
        if tenant is not None:
            return get_engine(tenant)
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None) or {}
        if TENANT_KEY not in scope:
            raise ToolFailed("this request carries no tenant: the server answers authenticated callers only")
        return get_engine(scope[TENANT_KEY])

    def caller_of(ctx) -> Caller | None:
        """Who is asking: the request's ``CALLER_KEY`` (set by whoever authenticated it), else the
        operator (stdio, or a server whose callers are all the operator)."""
        scope = getattr(getattr(ctx, "request", None), "scope", None) or {}
        return scope.get(CALLER_KEY)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await run(lambda: tools_for(engine_of(ctx)), None))

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        bad = (getattr(getattr(ctx, "request", None), "scope", None) or {}).get(BAD_ARGUMENT_KEY)
        if bad:  # a lone surrogate in the arguments (entrypoints.mcp_unicode): a tool error, in words
            return _error(bad_unicode(bad))
        arguments = params.arguments or {}
        mode = arguments.get("mode") if params.name in ("retrieve", "answer") else None
        try:
            def work() -> dict:
                engine = engine_of(ctx)
                return call(engine, params.name, arguments, budget_of(engine) if budget_of is not None else None,
                            caller_of(ctx))
            out = await run(work, mode if isinstance(mode, str) else None)
        except (ToolFailed, query_service.BadQueryError, LexicalIndexMissing) as exc:
            return _error(str(exc))
        except Exception as exc:  # never a crash of the server: the caller learns that it failed, the log why
            log.exception("MCP tool %r failed", params.name)
            return _error(f"the tool {params.name} failed on the server ({type(exc).__name__}); see its log")
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out, ensure_ascii=False))],
                                    structured_content=out)

    return Server(SERVER_NAME, version=_version(), title="Eragraph knowledge base",
                  instructions="Graph-RAG retrieval over one knowledge base: call retrieve (or answer, when "
                               "listed) with a question; get_document and stats describe what it holds.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("eragraph")
    except Exception:  # an unpacked copy (a Lambda layer) has no distribution metadata
        return "0"


# --------------------------------------------------------------------------- transports

def run_stdio(server: Server) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def loopback_security() -> TransportSecuritySettings:
    """DNS-rebinding protection for a server on this machine: only loopback Host and Origin."""
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                                     allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"])


async def serve_http(server: Server, scope: dict, receive, send, tenant: str,
                     security: TransportSecuritySettings | None = None, caller: Caller | None = None) -> None:
    """One streamable-HTTP request (ASGI) for ``tenant``, asked by ``caller`` (domain.access;
    None: the operator): stateless, JSON responses. Only POST: a stateless server offers no GET
    stream and has no session to DELETE (405, as the spec asks)."""
    if scope.get("method") != "POST":
        await send({"type": "http.response.start", "status": 405,
                    "headers": [(b"allow", b"POST"), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "this MCP endpoint is stateless: "
                                                     "POST JSON-RPC messages to it (no GET stream, no sessions)"}}).encode()})
        return
    scope = dict(scope)
    scope[TENANT_KEY] = tenant
    scope.pop(CALLER_KEY, None)  # never the client's: only the one given here
    if caller is not None:
        scope[CALLER_KEY] = caller
    body, receive, put = await buffered(receive, MAX_BODY_BYTES)
    if body is not None:
        screened, bad = screen(body)
        if bad:
            put(screened)
            scope[BAD_ARGUMENT_KEY] = bad
            scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"] + [
                (b"content-length", str(len(screened)).encode())]
    manager = StreamableHTTPSessionManager(server, json_response=True, stateless=True, security_settings=security,
                                           max_request_body_size=MAX_BODY_BYTES)
    async with manager.run():
        await manager.handle_request(scope, receive, in_words(send))


# the transport's protocol errors carry pydantic's report (class names, links): answered in words
PROTOCOL_WORDS = {
    -32700: "Parse error: the body is not valid JSON",
    -32600: "Invalid request: the body is not a JSON-RPC 2.0 message",
    -32602: 'Validation error: the body is not a valid JSON-RPC 2.0 message (an object, or an array of them, '
            'with jsonrpc "2.0", a string method and object params)',
}


def in_words(send):
    """``send`` with every JSON-RPC error answer of status 400 or more in words (PROTOCOL_WORDS)."""
    held: list[dict] = []

    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
            held.append(message)
            return
        if message["type"] == "http.response.body" and held:
            start = held.pop()
            body = message.get("body", b"")
            try:
                data = json.loads(body)
                error = data.get("error") if isinstance(data, dict) else None
                if isinstance(error, dict) and error.get("code") in PROTOCOL_WORDS:
                    error["message"] = PROTOCOL_WORDS[error["code"]]
                    error.pop("data", None)
                    body = json.dumps(data).encode()
            except ValueError:
                pass
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({**message, "body": body, "more_body": False})
            return
        await send(message)
    return wrapped


def asgi_scope(event: dict, body: bytes) -> dict:
    """The ASGI HTTP scope of an API Gateway HTTP API (payload v2) event."""
    http = (event.get("requestContext") or {}).get("http") or {}
    path = event.get("rawPath") or http.get("path") or "/"
    headers = [(str(k).lower().encode("latin-1"), str(v).encode("latin-1"))
               for k, v in (event.get("headers") or {}).items()]
    if event.get("cookies"):
        headers.append((b"cookie", "; ".join(event["cookies"]).encode("latin-1")))
    host = (event.get("headers") or {}).get("host", "localhost")
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": http.get("method", "POST"), "scheme": "https", "path": path,
            "raw_path": path.encode("utf-8"), "root_path": "",
            "query_string": (event.get("rawQueryString") or "").encode("latin-1"), "headers": headers,
            "client": (http.get("sourceIp", ""), 0), "server": (host, 443)}


def event_response(server: Server, event: dict, body: bytes, tenant: str,
                   caller: Caller | None = None) -> tuple[int, dict[str, str], str]:
    """Serve one API Gateway event's MCP request for ``tenant`` (the caller's, from its identity),
    asked by ``caller`` (its principals, bootstrap.principals; None: the operator): (status,
    headers, body text). ``body``: the request's bytes (decoded from base64 if need be)."""
    scope = asgi_scope(event, body)
    status, headers, chunks = 500, {}, []

    async def drive() -> None:
        nonlocal status
        done = anyio.Event()
        sent = False

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                for key, value in message.get("headers", []):
                    name = key.decode("latin-1")
                    headers[name] = f"{headers[name]}, {value.decode('latin-1')}" if name in headers else value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    done.set()

        await serve_http(server, scope, receive, send, tenant, caller=caller)
        done.set()

    anyio.run(drive)
    headers.pop("content-length", None)
    return int(status), headers, b"".join(chunks).decode("utf-8")
