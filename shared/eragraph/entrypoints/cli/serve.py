"""The commands that keep one warm engine over a store and serve it: `serve` (the HTTP API as
deployed, on 127.0.0.1) and `mcp` (the MCP tools over stdio)."""

from __future__ import annotations

import argparse
import sys

from .exits import EXIT_OK, CommandError
from .store import existing_store, open_engine


def cmd_serve(args: argparse.Namespace) -> int:
    existing_store(args.store)
    try:
        import uvicorn  # noqa: F401 (the server's)

        from ..http.server import make_server
    except ImportError as exc:
        raise CommandError(f"serve needs the aws extra (powertools, pydantic) and the local extra (uvicorn): "
                           f"{exc}") from None
    engine = open_engine(args)
    server = make_server(engine, args.host, args.port, log=not args.quiet)
    tenant = f" (tenant {engine.tenant})" if engine.tenant else ""
    print(f"eragraph: serving {args.store}{tenant} on {server.url} (the console at {server.url}/, the query API "
          f"as deployed, MCP at /mcp); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store's tools over MCP on stdin/stdout (eragraph.entrypoints.mcp), bound to --tenant."""
    existing_store(args.store)
    try:
        from ..mcp import build_server, run_stdio
    except ImportError as exc:
        raise CommandError(f"mcp needs the mcp extra (pip install 'eragraph[mcp]'): {exc}") from None
    engine = open_engine(args)
    print(f"eragraph: MCP over stdio for {args.store}" + (f" (tenant {engine.tenant})" if engine.tenant else "")
          + "; the client closes it", file=sys.stderr, flush=True)
    run_stdio(build_server(lambda _tenant: engine, tenant=engine.tenant))
    return EXIT_OK
