"""`eragraph serve`: the query API of the API Gateway function over one warm local engine.

A small ASGI app, served by uvicorn. Each request of an API route goes through the request
pipeline (eragraph.entrypoints.http.pipeline): matched in the route table, its parameters
validated once into the handler's model, its handler called in its pool; the routes, the
validation, the JSON bodies and the 4xx errors are those of the deployed API (the same handlers,
powertools' own validation), with no API Gateway event in between. The streamed routes
(the Bedrock KB event stream, the chat endpoint's events, POST /query/stream) and MCP are served by
the app itself.

Concurrency. uvicorn accepts connections on an asyncio loop (listen backlog ``BACKLOG``, so a
burst of clients queues instead of being reset) and the app runs each request's handler in a
thread pool, the one the registry entry of the request's mode names (services.modes ``pool``):

- ``fast``: the summary-side and lexical modes (collapsed, dense, detailed, summarized, bm25,
  hybrid) and every other route (documents, stats, health, bad requests), ``FAST_WORKERS``
  threads;
- ``slow``: the entity-graph modes and those built on them (tri_graph, paths, concept_ppr,
  local_global, fusion, auto), ``SLOW_WORKERS`` threads.

So a fast query never waits in a queue behind a slow graph query: it waits at most for the short
critical sections the two families share. Why one shared engine and not an engine per thread:
what the engine holds is read-safe from several threads already: the SQLite graph store keeps
one connection behind a lock (each statement is short), the FAISS index searches under its
handle's lock (a search of 10k vectors is well under a millisecond; a copy per thread would
multiply the largest part of the memory), the embedder is stateless (hash) or a torch module
in inference mode; Python's sqlite3 is built serialized (``sqlite3.threadsafety == 3``), so a
connection may be used from several threads. The entity store (one SQLite connection without a
statement lock of its own, and the exported PPR matrices, cached per generation under its lock) is
read by the graph modes only, and their pool has one thread by default, so its reads never
interleave either. The GIL still serializes Python work: on two cores the pools buy fairness
(a fast query is not queued behind a 100 ms graph query), not parallel Python.

Freshness: every read of the FAISS index first checks whether another process committed changes
(vector_faiss.FaissVectorIndex.refresh: two ``stat`` calls) and replays only the log's new
records; the graph, lexical, summaries and entity graph are SQLite databases read through
connections in autocommit mode (WAL), so each statement sees every transaction committed before
it began. A query therefore sees every document whose ingest, delete or replacement committed
before the query arrived.

Safety (guard.LocalGuard, applied to every request before any route): bound to 127.0.0.1 unless
told otherwise; there, a request addressed to another Host or from another Origin is refused, so
that a web page cannot drive the server by DNS rebinding or a cross-site POST; a POST must declare
a JSON body; with a token, every route but GET /health and the console's files asks for it, and
binding beyond loopback needs one. Each request writes one log line (request_log) unless quiet."""

from __future__ import annotations

import socket
import sys
import threading
from typing import Any

from ...services.engine import Engine
from .asgi import (  # noqa: F401 (the app and its limits, named here too)
    BACKLOG, DEFAULT_HOST, DEFAULT_PORT, FAST_WORKERS, MAX_BODY_BYTES, SLOW_WORKERS, UPLOAD_MAX_BODY_BYTES, ApiApp,
    takes_documents)
from .guard import LocalGuard, is_loopback


class ApiServer:
    """uvicorn serving ``ApiApp`` on a socket bound at construction (port 0: a free one, known
    at once from ``server_address``/``url``). ``serve_forever`` runs until ``shutdown`` (from
    another thread) or Ctrl-C; ``server_close`` releases the pools and the socket."""

    def __init__(self, engine: Engine | None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log: bool = False,
                 fast_workers: int = FAST_WORKERS, slow_workers: int = SLOW_WORKERS, *, app: ApiApp | None = None,
                 choice: Any = None, token: str = "", uploads: Any = None, limits: Any = None,
                 streams: Any = None, callers: Any = None) -> None:
        """``app``: an app built already (the stream function's), served instead of one over ``engine``;
        ``choice``: the tenants served (tenant_choice; default: ``engine``'s alone); ``token``: the
        bearer token every request but GET /health and the console's files must carry
        (guard.LocalGuard), required to bind beyond loopback (ValueError); ``uploads``: the
        pipeline of POST /documents (ports.uploads.DocumentPipeline); ``callers``: the tokens of a
        principals file (bootstrap.serve_tokens.TokenPrincipals), each request answered inside its
        token's principals (the operator's ``token``: everything)."""
        import uvicorn

        if not is_loopback(host) and not token and callers is None:
            raise ValueError(f"binding {host} (beyond this machine) needs a token: anyone who reaches the port "
                             f"could read the store and spend on its models")
        self.engine = engine
        self.app = app if app is not None else ApiApp(engine, fast_workers, slow_workers, log=log, choice=choice,
                                                      uploads=uploads, limits=limits, streams=streams,
                                                      principals=None if callers is None else callers.caller)
        if is_loopback(host):  # a page in a browser must not reach /mcp by DNS rebinding
            try:
                from ..mcp import loopback_security
            except ImportError:  # no mcp extra: /mcp answers 501
                pass
            else:
                self.app.mcp_security = loopback_security()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # the accepted connections inherit it: without it, h11's separate writes of a response's
        # head and body meet the client's delayed ACK and every keep-alive request waits ~40 ms
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket.bind((host, port))
        self.socket.listen(BACKLOG)
        self.server_address = self.socket.getsockname()
        if app is None:  # eragraph serve's own app (not the stream function's, behind IAM)
            self.app.guard = LocalGuard(loopback=is_loopback(host), port=int(self.server_address[1]), token=token,
                                        callers=callers)
            # its operator may ask as other principals (the console's "ask as"), in the store's access default
            self.app.operator_switch = engine.settings.access_default if engine is not None else "tenant"
        config = uvicorn.Config(self.app, lifespan="off", http="h11", loop="asyncio", backlog=BACKLOG,
                                access_log=log, log_level="info" if log else "warning",
                                timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._started, self._stopped = threading.Event(), threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def serve_forever(self, poll_interval: float | None = None) -> None:  # noqa: ARG002 (the stdlib's signature)
        self._stopped.clear()
        self._started.set()
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (running in another thread) and wait until it has returned."""
        self._server.should_exit = True
        if self._started.is_set():
            self._stopped.wait()

    def server_close(self) -> None:
        self._server.should_exit = True
        self.app.close()
        self.socket.close()


def warm(engine: Engine) -> None:
    """Load what the first query would: the embedder's model and the vector index."""
    engine.embedder.embed(["warm up"])
    engine.vectors.count()
    engine.graph.layer_sizes()


def make_server(engine: Engine | None, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log: bool = False,
                fast_workers: int = FAST_WORKERS, slow_workers: int = SLOW_WORKERS, choice: Any = None,
                token: str = "", uploads: Any = None, limits: Any = None, streams: Any = None,
                callers: Any = None) -> ApiServer:
    """A warm server bound to (host, port); port 0 picks a free one (see ``server.url``).
    ``choice``: the tenants of a store root the x-eragraph-tenant header picks from
    (tenant_choice.SwitchableTenants; its default tenant's engine is warmed, the others are
    opened on their first request); else ``engine`` alone. ``token``: see ApiServer.
    ``uploads``: the pipeline of POST /documents, started here (None: those routes are not served).
    ``limits`` (config.ApiLimits): the answer budget cap; ``streams``: open streams per tenant;
    ``callers``: the principals file's tokens (see ApiServer)."""
    if engine is None and choice is not None:
        engine = choice.default_engine()
    if engine is not None:
        warm(engine)
    start = getattr(uploads, "start", None)
    if start is not None:  # its first job: finish what a server stopped mid-ingest accepted
        start([choice.engine(t) for t in choice.tenants()] if choice is not None else [engine])
    return ApiServer(engine, host, port, log=log, fast_workers=fast_workers, slow_workers=slow_workers,
                     choice=choice, token=token, uploads=uploads, limits=limits, streams=streams, callers=callers)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `eragraph serve`")
