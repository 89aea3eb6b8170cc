"""The app of ``eragraph serve`` and of the stream function (``ApiApp``): its pools, its request
pipeline, its stream slots and the work of each route. The ASGI app is Starlette's, built over it
(site.site: the routing, the request log and the guard as middleware, the responses); every
request is logged (request_log), checked (guard.LocalGuard, under ``eragraph serve``), then
served: the console's files, MCP, a streamed route (streaming.serve_stream), or an API route
through the request pipeline (pipeline.Pipeline) in the thread pool its mode names.
server.ApiServer runs it under uvicorn; the module docstring of eragraph.entrypoints.http.server
says why two pools, one engine, and what a query sees."""

from __future__ import annotations

import importlib

import asyncio
import contextvars
import json
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...services.engine import Engine
from ...bootstrap.identity import REQUEST_CONTEXT_HEADER, caller_of
from ...bootstrap.principals import PrincipalsForbidden
from ..bedrock_kb.runtime import KbError
from ...domain.rate_limit import LimitStoreUnavailable
from .admission import Admission, LimitUnavailable, TooManyStreams
from .context import answer_budget
from .errors import error_body
from .request import request_of
from .streaming import serve_stream
from .guard import LocalGuard
from .routes import ASGI_KB_STREAM, Route, route, route_at
from .site import (  # noqa: F401 (the body caps and the console's headers, named here too)
    CONSOLE_HEADERS, MAX_BODY_BYTES, STREAM_ROUTES, UPLOAD_MAX_BODY_BYTES, Whole, site, takes_documents)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
BACKLOG = 2048
FAST_WORKERS = 4
SLOW_WORKERS = 1
KB_STREAM = route(ASGI_KB_STREAM)  # Bedrock KB streaming (eragraph.entrypoints.http.stream)


class ApiApp:
    """The ASGI app: each HTTP request is resolved in its family's thread pool. The routes are the
    route table's (eragraph.entrypoints.http.routes): those with an ``asgi`` handler are served
    here (MCP, the streams), every other through the request pipeline (pipeline.Pipeline).

    ``eragraph serve`` builds it over one engine (every route, the engine's tenant). The stream
    function on AWS (functions/stream, behind the Lambda Web Adapter) builds it ``stream_only``
    (POST /retrieveAndGenerateStream and GET /health; anything else is 404) with ``engine`` None and
    ``identity`` (bootstrap.identity.TenantIdentity: the caller's tenant from the adapter's
    request-context header), ``engines(tenant)`` (that tenant's engine), ``tenants()`` (another
    tenant's knowledge base id is ResourceNotFoundException, as an unknown one) and ``admit(tenant)`` (the per-tenant
    rate limit: 429 ThrottlingException).

    A subclass may answer the API routes otherwise: ``eragraph console`` (console.proxy.ProxyApp)
    forwards them to the deployed API (``needs_engine`` False: its request pipeline,
    console.proxy.Forwarding, prepares each request's call as this one's does; and the
    ``serve_*`` methods of the routes this app serves itself)."""

    needs_engine = True

    def __init__(self, engine: Engine | None, fast_workers: int = FAST_WORKERS, slow_workers: int = SLOW_WORKERS,
                 log: bool = False, *, identity: Any = None, engines: Callable[[str], Engine] | None = None,
                 tenants: Callable[[], Any] | None = None, admit: Callable[[str], Any] | None = None,
                 stream_only: bool = False, on_model_calls: Callable[[list], None] | None = None,
                 choice: Any = None, uploads: Any = None, limits: Any = None, streams: Any = None,
                 principals: Callable[[dict[str, str]], Any] | None = None) -> None:
        if choice is None and engine is not None and identity is None:
            from .tenant_choice import PinnedTenant

            choice = PinnedTenant(engine)
        if self.needs_engine and choice is None and (identity is None or engines is None):
            raise ValueError("ApiApp needs an engine, a tenant choice, or an identity and engines(tenant)")
        self.choice = choice  # eragraph serve: how a request's tenant is chosen (tenant_choice)
        self.engine = engine
        self.identity = identity
        self.engines = engines if engines is not None or choice is None else choice.engine
        self.tenants = tenants if tenants is not None or choice is None or not choice.switchable else choice.tenants
        self.admit = admit
        self.stream_only = stream_only
        self.on_model_calls = on_model_calls  # sees each streamed answer's model calls (the spend metric)
        self.uploads = uploads  # POST/DELETE /documents: the profile's pipeline (its worker thread locally)
        self.limits = limits  # config.ApiLimits: the answer budget cap of every route that generates
        self.streams = streams  # open streams per tenant (adapters' *StreamSlots; None: no limit)
        # who is asking inside the tenant, from the request's headers (a domain.access.Caller;
        # None: principals are off, every caller is the operator): the stream function's
        # bootstrap.principals.PrincipalIdentity.caller_from_headers, eragraph serve's token file
        self.principals = principals
        self.log = log
        self.pools = {"fast": ThreadPoolExecutor(fast_workers, thread_name_prefix="eragraph-fast"),
                      "slow": ThreadPoolExecutor(slow_workers, thread_name_prefix="eragraph-slow")}
        self._pipeline = None  # built on the first request (pipeline.Pipeline)
        self._site = None  # the ASGI app (site.site)
        self._mcp = None  # the MCP server, built on the first request to MCP.path
        self.mcp_security = None  # MCP's Host/Origin check (ApiServer: loopback only when bound to loopback)
        self.guard: LocalGuard | None = None  # eragraph serve's checks of every request (ApiServer sets it)
        self.operator_switch: str | None = None  # eragraph serve: the operator may ask as others (ApiServer sets it)

    @property
    def pipeline(self):
        """The request pipeline of the API routes (pipeline.Pipeline), over the tenant choice."""
        if self._pipeline is None:
            from .admission import Admission
            from .context import RouteContext
            from .pipeline import Pipeline

            choice = self.choice
            self._pipeline = Pipeline(RouteContext(None, Admission(choice.tenant_of), choice.engine, limits=self.limits,
                                                   tenants=self.tenants, choice=choice, uploads=self.uploads,
                                                   principals=self.principals, operator_switch=self.operator_switch))
        return self._pipeline

    def close(self) -> None:
        for pool in self.pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        stop = getattr(self.uploads, "close", None)
        if stop is not None:
            stop()  # after the documents it was given (a killed server's are recovered at its next start)

    @property
    def site(self):
        """The ASGI app: Starlette's over this one (site.site), built on the first request."""
        if self._site is None:
            self._site = site(self)
        return self._site

    async def __call__(self, scope: dict, receive, send) -> None:
        await self.site(scope, receive, send)

    async def serve_streamed(self, streamed: Route, scope: dict, send, body: bytes) -> None:
        """A streamed route: its module (``Route.asgi``: entrypoints.http's stream, chat_stream,
        query_stream) holds its ``prepare`` and ``ENCODER``, served by
        streaming.serve_stream; a module with ``wants_stream`` streams only a request that asks
        (the chat completions' ``stream: true``), and answers any other whole, as any route."""
        module = importlib.import_module(streamed.asgi)
        request = request_of(scope, body)
        wants = getattr(module, "wants_stream", None)
        if wants is not None and not wants(request):
            await self.serve_routed(scope, send, body)
            return
        await serve_stream(self, scope, send, request, module.prepare, module.ENCODER)

    async def serve_routed(self, scope: dict, send, body: bytes) -> None:
        """A request of an API route, through the request pipeline: matched and bound in the fast
        pool, its handler run in the pool its mode names (pipeline.Call.pool)."""
        request = request_of(scope, body)
        pipeline = self.pipeline

        def first():
            call = pipeline.prepare(request)
            return call if call.pool != "fast" else call.run()

        out = await self.in_pool("fast", first)
        if not isinstance(out, tuple):
            out = await self.in_pool(out.pool, out.run)
        status, headers, payload = out
        await self.send_whole(send, scope, status, headers, payload)

    async def in_pool(self, pool: str, fn, *args):
        """``fn(*args)`` in the pool named ``pool``, in the request's context (its log record)."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self.pools[pool], context.run, fn, *args)

    @staticmethod
    def error_answer(path: str, status: int, message: str, extra: dict | None = None) -> tuple[int, dict, bytes]:
        """An error answer: the Bedrock KB service's modelled one on its routes, else the API's JSON."""
        found = route_at(path)
        if found is not None and found.modelled:
            code = {401: "AccessDeniedException", 403: "AccessDeniedException"}.get(status, "ValidationException")
            status, headers, text = KbError(code, message).response()
            return status, {**headers, **(extra or {})}, text.encode()
        return status, {"content-type": "application/json", **(extra or {})}, json.dumps(error_body(status, message)).encode()

    def request_id_of(self, headers: dict[str, str]) -> str:
        """The request id: the function URL's (the Lambda Web Adapter's request context), else a new one."""
        context = self.request_context(headers)
        rid = context.get("requestId") if context else None
        return rid if isinstance(rid, str) and rid else uuid.uuid4().hex

    def request_context(self, headers: dict[str, str]) -> dict:
        """The Lambda Web Adapter's copy of the request context, when this app trusts it ({} else)."""
        if self.identity is None or not getattr(self.identity, "trust_request_context", False):
            return {}
        try:
            context = json.loads(headers.get(REQUEST_CONTEXT_HEADER) or "{}")
        except ValueError:
            return {}
        return context if isinstance(context, dict) else {}

    def caller_of(self, scope: dict, headers: dict[str, str]) -> str:
        """Who called, for the request's log line: the IAM principal of the function URL's request
        context, else the client's address."""
        context = self.request_context(headers)
        if context:
            return caller_of({"requestContext": context})
        client = scope.get("client") or ("", 0)
        return f"address:{client[0]}"

    async def serve_mcp(self, scope: dict, receive, send) -> None:
        """POST /mcp: the MCP tools over stateless streamable HTTP (eragraph.entrypoints.mcp), for the
        served engine's tenant; its blocking work runs in the pool of the mode's family."""
        try:
            from ..mcp import build_server, serve_http
        except ImportError as exc:
            await self.send_whole(send, scope, 501, {"content-type": "application/json"}, json.dumps(
                error_body(501, f"MCP needs the mcp extra (pip install 'eragraph[mcp]'): {exc}")).encode())
            return
        if self._mcp is None:
            self._mcp = build_server(self.engines, run_blocking=self._run_in_pool,
                                     budget_of=lambda engine: answer_budget(self.limits, engine))
        tenant = self.caller_tenant(scope)
        try:
            asking = self.asking({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
        except PrincipalsForbidden as exc:  # no principals when they are required: refused, never the tenant
            await self.send_whole(send, scope, *self.error_answer(scope["path"], 403, str(exc)))
            return
        await serve_http(self._mcp, scope, receive, send, tenant, security=self.mcp_security, caller=asking)

    def asking(self, headers: dict[str, str]):
        """Who is asking (a domain.access.Caller, from the request's ``headers``: lower-case names;
        None: the operator, when principals are off); PrincipalsForbidden when they are on and the
        request names none."""
        return None if self.principals is None else self.principals(headers)

    @property
    def admission(self) -> Admission:
        """The caller's tenant: the one its identity names, after a token of its rate bucket (the
        stream function), else the one the tenant choice gives (the served engine's, or the one
        the x-eragraph-tenant header names: tenant_choice)."""
        if self.identity is None:
            return Admission(self.choice.tenant_of)
        return Admission(self.identity.tenant_from_headers, self.admit)

    def caller_tenant(self, scope: dict) -> str:
        """The caller's tenant (admission.Admission): the served engine's, or (``identity``) the one
        its identity names, after a token of its rate bucket."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        return self.admission.caller(headers)

    def open_stream(self, tenant: str) -> Callable[[], None]:
        """One of ``tenant``'s open-stream slots (``streams``), or TooManyStreams (429); the
        returned callable frees it (blocking: call it in a pool)."""
        slots = self.streams
        if slots is None:
            return lambda: None
        try:
            decision, lease = slots.acquire(tenant)
        except LimitStoreUnavailable as exc:
            raise LimitUnavailable(exc.retry_after) from None
        if not decision.allowed:
            raise TooManyStreams(decision.retry_after, slots.limit)
        return lambda: slots.release(tenant, lease)

    async def _run_in_pool(self, fn, mode: str | None):
        from ...services.modes import MODES

        spec = MODES.get(mode) if mode else None
        return await asyncio.get_running_loop().run_in_executor(self.pools[spec.pool if spec else "fast"], fn)

    async def serve_stream_404(self, scope: dict, send, body: bytes) -> None:  # noqa: ARG002
        """The stream function's answer to a request none of its routes takes."""
        await self.send_whole(send, scope, 404, {"content-type": "application/json"}, json.dumps(error_body(
            404, f"no route {scope['method']} {scope['path']} here: this endpoint serves {KB_STREAM.key} only")).encode())

    @staticmethod
    async def send_whole(send, scope: dict, status: int, headers: dict[str, str], payload: bytes) -> None:
        """A whole answer (site.Whole: Starlette's Response)."""
        await Whole(status, headers, payload)(scope, None, send)
