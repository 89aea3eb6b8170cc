"""`eragraph smoke --stack NAME --caller A --caller B`: after `sam deploy`, one document through
the deployed stack and every door asked about it (smoke_run), as two callers of two tenants;
a report of each step, passed or failed, with its request id and the log groups to read.

The stack's resources come from CloudFormation (smoke_stack); ``--endpoint-url`` sends the
CloudFormation and S3 calls elsewhere (a local cloud), ``--api-url`` overrides the stack's
``ApiUrl`` output (a custom domain). Exit 0 when every step passed, 1 when one failed or was
skipped, 2 for bad arguments."""

from __future__ import annotations

import argparse

from .exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CommandError
from .render import emit
from .smoke_doors import DOORS
from .smoke_run import FAIL, PASS, Smoke, StepResult
from .smoke_stack import Stack, caller_of, read_stack


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, metavar="NAME", help="the CloudFormation stack `sam deploy` made")
    p.add_argument("--caller", action="append", required=True, metavar="SPEC",
                   help="give it twice: the identities to ask as, each of its own tenant (the first's tenant gets the "
                        "document, the second must not see it): an AWS named profile (NAME or profile:NAME; its "
                        "IAM role or user carries the stack's tenant tag) or jwt-file:PATH (a JWT whose claim "
                        "names the tenant, for ApiAuthMode=JWT)")
    p.add_argument("--region", help="the stack's region (default: the AWS configuration's)")
    p.add_argument("--endpoint-url", metavar="URL",
                   help="where to send the CloudFormation and S3 calls instead of AWS (a local cloud)")
    p.add_argument("--api-url", metavar="URL", help="the API's base URL (default: the stack's ApiUrl output)")
    p.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS",
                   help="how long the document may take to be done, and to be gone once deleted (default 900)")
    p.add_argument("--poll", type=float, default=2.0, metavar="SECONDS",
                   help="seconds between two reads of the document's status (default 2)")


def cmd_smoke(args: argparse.Namespace) -> int:
    if len(args.caller) != 2:
        raise CommandError(f"--caller: give exactly two (got {len(args.caller)}): the tenant boundary is checked "
                           f"between them", EXIT_USAGE)
    if args.timeout <= 0 or args.poll <= 0:
        raise CommandError("--timeout and --poll must be positive", EXIT_USAGE)
    try:
        import boto3
        import botocore.exceptions
    except ImportError as exc:
        raise CommandError(f"smoke needs the aws extra (boto3): {exc}") from None
    from ..entrypoints.console.upstream import check_url

    session = boto3.session.Session(region_name=args.region) if args.region else boto3.session.Session()
    region = session.region_name
    if not region:
        raise CommandError("no region: say --region (or set AWS_REGION)", EXIT_USAGE)
    api_url = check_url(args.api_url) if args.api_url else None
    try:
        cloudformation = session.client("cloudformation", endpoint_url=args.endpoint_url)
        stack = read_stack(cloudformation, args.stack, region, api_url)
        s3 = session.client("s3", endpoint_url=args.endpoint_url)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        raise CommandError(f"the stack {args.stack} in {region} cannot be read: {exc}") from None
    check_url(stack.api_url)
    callers = (caller_of(args.caller[0], region), caller_of(args.caller[1], region))
    results = Smoke(stack, callers, s3, timeout=args.timeout, poll=args.poll).run(DOORS)
    ok = all(r.status == PASS for r in results)
    emit(args, {"stack": stack.name, "region": stack.region, "api_url": stack.api_url, "ok": ok,
                "steps": [r.to_json() for r in results]}, render_smoke(stack, results))
    return EXIT_OK if ok else EXIT_ERROR


def render_smoke(stack: Stack, results: list[StepResult]) -> str:
    """One line a step (PASS/FAIL/SKIP, its name, what it found), its request id and log groups
    under it, then the count."""
    lines = [f"smoke run of stack {stack.name} ({stack.region}), API {stack.api_url}"]
    width = max(len(r.name) for r in results)
    for r in results:
        lines.append(f"{r.status.upper():4}  {r.name:{width}}  {r.detail}" + (f" ({r.seconds:.1f} s)" if r.seconds
                                                                            else ""))
        if r.status != "skip":
            where = ", ".join(r.log_groups)
            lines.append(f"      {'':{width}}  request {r.request_id or '(none)'}" + (f"; logs: {where}" if where else ""))
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, "skip")}
    lines.append(f"{len(results)} steps: {counts[PASS]} passed, {counts[FAIL]} failed, {counts['skip']} skipped")
    return "\n".join(lines)
