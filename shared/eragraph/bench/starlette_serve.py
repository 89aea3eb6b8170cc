"""`eragraph serve` with Starlette in front: what adopting Starlette (issue 56, step 3) would cost,
measured by ``eragraph bench load --target starlette`` against `eragraph serve` as it is.

The app built here is Starlette's (``starlette.applications.Starlette``): its router matches the
API routes of the route table (one ``starlette.routing.Route`` per route, the path parameters
Starlette's), the request log and the guard (guard.LocalGuard) are Starlette middleware (pure
ASGI ones, the kind Starlette recommends over ``BaseHTTPMiddleware``, inside the
ServerErrorMiddleware and ExceptionMiddleware Starlette always adds), an answer is a Starlette
``Response``, the console's files are a ``StaticFiles`` mount. Behind the router the work is the
project's: the body read by Starlette, the parameters bound by the request pipeline
(pipeline.Pipeline.bind: powertools' validation), the handler run in its mode's pool. A request no
Starlette route takes (the streams, MCP, a 404) falls through to the project's app (ApiApp), so
the server answers everything `eragraph serve` answers; the load benchmark's requests
(``POST /query``) take Starlette's path from end to end.

Run as `eragraph serve` over one store: ``python -m eragraph.bench.starlette_serve --store DIR
--port 0 --quiet``; Starlette comes with the ``mcp`` extra."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any


def starlette_app(app: Any) -> Any:
    """A Starlette app over ``app`` (server.ApiApp: its pipeline, pools, guard and log)."""
    from importlib import resources

    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from ..entrypoints import request_log
    from ..entrypoints.console.assets import is_console_path
    from ..entrypoints.http.asgi import MAX_BODY_BYTES, UPLOAD_MAX_BODY_BYTES, takes_documents
    from ..entrypoints.http.errors import refused
    from ..entrypoints.http.pipeline import Entry
    from ..entrypoints.http.request import SCOPE_KEY, from_scope
    from ..entrypoints.http.routes import API, ROUTES

    async def endpoint(entry: Entry, request) -> Response:
        cap = UPLOAD_MAX_BODY_BYTES if takes_documents(request.url.path) else MAX_BODY_BYTES
        body = await request.body()
        if len(body) > cap:
            return Response(b'{"message":"request body too large"}', 413, media_type="application/json")
        req = request.scope[SCOPE_KEY] = from_scope(request.scope, body, request_log.request_id())
        req.params = dict(request.path_params)
        pipeline = app.pipeline
        modelled = bool(entry.route.modelled)

        def first():
            try:
                values = pipeline.bind(entry, req)
            except Exception as exc:  # noqa: BLE001 (the resolver's 422)
                return refused(exc, req, modelled)
            from ..entrypoints.http.pipeline import pool_of

            pool = pool_of(values)
            call = partial(pipeline.call, entry, req, values, modelled)
            return call() if pool == "fast" else (pool, call)

        out = await app.in_pool("fast", first)
        if len(out) == 2:
            out = await app.in_pool(out[0], out[1])
        status, headers, payload = out
        return Response(payload, status, headers={k: v for k, v in headers.items() if k.lower() != "content-length"})

    entries = {e.route.key: e for e in app.pipeline.entries}
    routes = [Route(r.path, partial(endpoint, entries[r.key]), methods=[r.method])
              for r in ROUTES if API in r.on and r.key in entries and r.asgi is None]
    static = StaticFiles(directory=str(resources.files("eragraph.entrypoints.console").joinpath("static")))
    routes.append(Mount("/console", static))

    class Logged:
        """The request log (ApiApp.__call__'s record) as middleware."""

        def __init__(self, inner) -> None:
            self.inner = inner

        async def __call__(self, scope, receive, send) -> None:
            if scope["type"] != "http":
                await self.inner(scope, receive, send)
                return
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            record = request_log.begin(app.request_id_of(headers), scope["method"], scope["path"])
            request_log.note(caller=app.caller_of(scope, headers))
            sent: list[int] = []

            async def send_logged(message: dict) -> None:
                if message["type"] == "http.response.start":
                    sent.append(message["status"])
                await send(message)
            try:
                await self.inner(scope, receive, send_logged)
            finally:
                if app.log:
                    request_log.finish(record, sent[0] if sent else 499)

    class Guarded:
        """eragraph serve's checks (guard.LocalGuard) as middleware."""

        def __init__(self, inner) -> None:
            self.inner = inner

        async def __call__(self, scope, receive, send) -> None:
            if scope["type"] == "http" and app.guard is not None:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
                static = scope["method"] in ("GET", "HEAD") and is_console_path(scope["path"])
                refused_ = app.guard.check(scope["method"], scope["path"], headers, static=static)
                if refused_ is not None:
                    status, message, extra = refused_
                    await app.send_error(send, scope, status, message, extra)
                    return
            await self.inner(scope, receive, send)

    class FallThrough:
        """What no Starlette route takes: the project's app (the streams, MCP, the console's
        index, 404s in the API's shape; the guard checks such a request twice)."""

        async def __call__(self, scope, receive, send) -> None:
            static = scope["method"] in ("GET", "HEAD") and is_console_path(scope["path"])  # GET /: the index
            await app.serve(scope, receive, send, {k.decode("latin-1").lower(): v.decode("latin-1")
                                                   for k, v in scope["headers"]}, static)

    site = Starlette(routes=routes, middleware=[Middleware(Logged), Middleware(Guarded)])
    site.router.default = FallThrough()
    return site


def main(argv: list[str] | None = None) -> int:
    """`eragraph serve --store DIR --port N --quiet` of one store (its default tenant), its app in
    Starlette (``starlette_app``): the engine, the document pipeline, the limits and the server
    built as `eragraph serve` builds them (entrypoints.cli.serve)."""
    import argparse

    from ..bootstrap import build_engine, document_pipeline
    from ..bootstrap.limits import stream_slots
    from ..config import ApiLimits, settings_from_env
    from ..entrypoints.http.server import make_server

    p = argparse.ArgumentParser(prog="python -m eragraph.bench.starlette_serve")
    p.add_argument("--store", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    settings = settings_from_env()
    engine = build_engine("local", args.store, settings)
    uploads = document_pipeline("local", args.store, settings, lambda _tenant: engine)
    limits = ApiLimits.from_env()
    server = make_server(engine, args.host, args.port, log=not args.quiet, uploads=uploads, limits=limits,
                         streams=stream_slots(limits, local=True))
    server._server.config.app = starlette_app(server.app)  # noqa: SLF001 (uvicorn loads it when it runs)
    print(f"eragraph: serving {args.store} on {server.url} (Starlette in front)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
