"""The commands that keep one warm engine over a store and serve it: `serve` (the HTTP API as
deployed, on 127.0.0.1) and `mcp` (the MCP tools over stdio)."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import quote

from ..entrypoints.http.guard import is_loopback
from .exits import EXIT_OK, CommandError
from .store import existing_store, open_engine, settings_of, tenant_of


def cmd_serve(args: argparse.Namespace) -> int:
    token = args.token or ""
    callers = principals_file(args, token)
    if not is_loopback(args.host) and not token and callers is None:
        raise CommandError(f"--host {args.host} serves beyond this machine: give --token (or ERAGRAPH_SERVE_TOKEN) "
                           f"or --principals-file, or anyone who reaches the port can read the store and spend on "
                           f"its models")
    existing_store(args.store)
    try:
        import uvicorn  # noqa: F401 (the server's)

        from ..bootstrap import document_pipeline
        from ..bootstrap.limits import stream_slots
        from ..config import ApiLimits
        from ..entrypoints.http.server import make_server
    except ImportError as exc:
        raise CommandError(f"serve needs the aws extra (powertools, pydantic) and the local extra (uvicorn): "
                           f"{exc}") from None
    choice = switchable_tenants(args)
    engine = open_engine(args) if choice is None else None
    # POST /documents: a worker of this process with engines of its own, opened with the store's
    # recorded providers as every command opens it (bootstrap.local: LocalProfile.uploads)
    uploads = document_pipeline("local", args.store, settings_of(args),
                                (lambda _tenant: engine) if choice is None else choice.engine)
    # the deployed API's cost bounds, from the same variables: the answer budget cap
    # (ERAGRAPH_ANSWER_MAX_BUDGET), the answers a tenant may stream at once (ERAGRAPH_TENANT_STREAMS)
    limits = ApiLimits.from_env()
    server = make_server(engine, args.host, args.port, log=not args.quiet, choice=choice, token=token,
                         uploads=uploads, limits=limits, streams=stream_slots(limits, local=True), callers=callers)
    if choice is not None:
        names = ", ".join(t or "(default)" for t in choice.tenants())
        tenant = f" (tenants {names}: the x-eragraph-tenant header picks one)"
    else:
        tenant = f" (tenant {engine.tenant})" if engine.tenant else ""
    console = f"{server.url}/" + (f"#token={quote(token, safe='')}" if token else "")
    print(f"eragraph: serving {args.store}{tenant} on {server.url} (the query API as deployed, MCP at /mcp); "
          f"Ctrl-C stops", file=sys.stderr, flush=True)
    print(f"eragraph: console at {console}", file=sys.stderr, flush=True)
    if callers is not None:
        print(f"eragraph: {len(callers.callers)} token(s) of {args.principals_file} are answered inside their "
              f"principals" + (", the --token holder reads everything" if token else ""), file=sys.stderr, flush=True)
    if not is_loopback(args.host):
        print(f"eragraph: warning: bound to {args.host}, beyond this machine: whoever reaches the port and holds "
              f"the token reads this store and spends on its models, and plain HTTP shows the token to anyone on "
              f"the path; prefer 127.0.0.1 behind an SSH tunnel or a TLS proxy", file=sys.stderr, flush=True)
    return run_until_stopped(server)


def principals_file(args: argparse.Namespace, token: str):
    """The tokens of --principals-file (bootstrap.serve_tokens.TokenPrincipals), validated before
    anything is served (a fault is a CommandError in words); None without one. A document
    without an access list is read as the store's ERAGRAPH_ACCESS_DEFAULT says."""
    path = getattr(args, "principals_file", None)
    if not path:
        return None
    from ..bootstrap.serve_tokens import TokenFileError, TokenPrincipals

    try:
        return TokenPrincipals.load(path, operator=token, default=settings_of(args).access_default)
    except TokenFileError as exc:
        raise CommandError(f"--principals-file {exc}") from None


def run_until_stopped(server) -> int:
    """Serve until Ctrl-C, then release the server (its pools, its socket)."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


def switchable_tenants(args: argparse.Namespace):
    """The tenants of a store root served without --tenant that holds named tenants (the request
    header x-eragraph-tenant picks one: http.tenant_choice), else None (one engine is served)."""
    from ..bootstrap.store_access import STORE_MARK, local_tenancy
    from ..entrypoints.http.tenant_choice import SwitchableTenants

    if tenant_of(args):
        return None
    path = existing_store(args.store)
    tenancy = local_tenancy(path, settings_of(args))
    if not tenancy.tenants():
        return None
    return SwitchableTenants(tenancy, has_default=(path / STORE_MARK).is_file())


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store's tools over MCP on stdin/stdout (eragraph.entrypoints.mcp), bound to --tenant."""
    existing_store(args.store)
    try:
        from ..entrypoints.mcp import build_server, run_stdio
    except ImportError as exc:
        raise CommandError(f"mcp needs the mcp extra (pip install 'eragraph[mcp]'): {exc}") from None
    engine = open_engine(args)
    print(f"eragraph: MCP over stdio for {args.store}" + (f" (tenant {engine.tenant})" if engine.tenant else "")
          + "; the client closes it", file=sys.stderr, flush=True)
    run_stdio(build_server(lambda _tenant: engine, tenant=engine.tenant))
    return EXIT_OK
