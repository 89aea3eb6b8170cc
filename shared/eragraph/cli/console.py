"""`eragraph console --api URL`: the browser console on 127.0.0.1 over a deployed stack's HTTP
API, every call signed with this machine's credentials (eragraph.entrypoints.console.proxy), and
only a call that carries this run's token (printed in the URL to open, as `serve --token` does)."""

from __future__ import annotations

import argparse
import secrets
import sys

from ..config import named_variable
from .exits import EXIT_USAGE, CommandError
from .serve import run_until_stopped


def console_auth(args: argparse.Namespace, url: str):
    """The request signer the flags ask for (console.upstream.SigV4 or Bearer), and how it signs,
    in words; CommandError when it cannot sign."""
    from ..entrypoints.console.upstream import Bearer, SigV4, Unreachable, region_of

    kind = args.auth or ("jwt" if args.token_env or args.jwt_file else "iam")
    if kind == "iam" and (args.token_env or args.jwt_file):
        raise CommandError("--token-env and --jwt-file go with --auth jwt", EXIT_USAGE)
    if kind == "jwt":
        if args.token_env:
            token = (named_variable(args.token_env) or "").strip()
            if not token:
                raise CommandError(f"--token-env {args.token_env}: that variable is not set or empty", EXIT_USAGE)
            return Bearer(lambda: token), f"a JWT from ${args.token_env}"
        if args.jwt_file:
            try:
                return Bearer.from_file(args.jwt_file), f"the JWT in {args.jwt_file} (read on every request)"
            except Unreachable as exc:
                raise CommandError(str(exc), EXIT_USAGE) from None
        raise CommandError("--auth jwt needs --token-env NAME or --jwt-file FILE", EXIT_USAGE)
    import botocore.session

    session = botocore.session.Session()
    credentials = session.get_credentials()
    if credentials is None:
        raise CommandError("no AWS credentials found (environment, AWS_PROFILE, `aws sso login`, an instance role): "
                           "the console signs every request with them")
    region = args.region or region_of(url) or session.get_config_variable("region")
    if not region:
        raise CommandError(f"the region of {url} is not in its host name: say --region", EXIT_USAGE)
    return SigV4(credentials, region), f"SigV4 with the AWS credentials of {credentials.method}, region {region}"


def cmd_console(args: argparse.Namespace) -> int:
    from ..entrypoints.http.guard import is_loopback

    if not is_loopback(args.host):
        raise CommandError(f"--host {args.host}: the console signs with your credentials, so it listens on this "
                           f"machine only (127.0.0.1, localhost, ::1)", EXIT_USAGE)
    try:
        import botocore  # noqa: F401 (the signer's)
        import uvicorn  # noqa: F401 (the server's)

        from ..entrypoints.console.proxy import console_server
        from ..entrypoints.console.upstream import Upstream, check_url
    except ImportError as exc:
        raise CommandError(f"console needs the aws extra (botocore, powertools) and uvicorn (the local extra): "
                           f"{exc}") from None
    url = check_url(args.api)
    auth, how = console_auth(args, url)
    token = secrets.token_urlsafe(24)  # this run's: only the page opened from the printed URL has it
    try:
        server = console_server(Upstream(url, auth), args.host, args.port, log=not args.quiet, token=token)
    except OSError as exc:
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"eragraph: console of {url} at {server.url}/#token={token} : open it in a browser (the API is called "
          f"with {how}; the tenant is your identity's; a request without this run's token is refused); "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    return run_until_stopped(server)
