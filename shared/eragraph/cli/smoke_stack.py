"""What `eragraph smoke` needs to know of a deployed stack and of its two callers.

- ``Stack``: the stack's outputs and parameters as CloudFormation's DescribeStacks gives them
  (the API's URL, the documents bucket, the access log group; the stage names the functions' log
  groups, ``/aws/lambda/eragraph-<stage>-<function>`` as template.yaml declares them).
- ``Caller``: one identity the API is called as, an AWS named profile (SigV4, service
  ``execute-api``, as IAM authorization wants) or a file holding a JWT (``Authorization: Bearer``).
  Its tenant is whatever the API says it is (``GET /tenants``), never what the command is told.

``endpoint_url`` (``--endpoint-url``) points CloudFormation and S3 somewhere else than AWS (a
local cloud); the API's URL comes from the stack unless ``--api-url`` is given."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .exits import EXIT_USAGE, CommandError

# the states in which a stack's resources are deployed and settled (an update rolled back serves
# the version before it: worth a smoke run too)
SERVING = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE",
                     "IMPORT_ROLLBACK_COMPLETE"})


@dataclass(frozen=True)
class Stack:
    name: str
    region: str
    api_url: str
    bucket: str
    stage: str
    prefix: str = ""  # DocumentPrefix
    suffix: str = ""  # DocumentSuffix
    auth_mode: str = "IAM"
    text_model: str = ""
    access_log_group: str = ""
    outputs: dict[str, str] = field(default_factory=dict)

    def log_group(self, function: str) -> str:
        """The CloudWatch log group of one of the stack's functions (template.yaml's LogGroupName)."""
        return f"/aws/lambda/eragraph-{self.stage}-{function}"


def read_stack(cloudformation: Any, name: str, region: str, api_url: str | None = None) -> Stack:
    """The stack ``name`` from DescribeStacks; CommandError naming what is missing."""
    stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    if not stacks:
        raise CommandError(f"no stack {name!r} in {region}")
    stack = stacks[0]
    status = stack.get("StackStatus", "")
    if status not in SERVING:
        raise CommandError(f"the stack {name} is {status}: deploy it (sam deploy) before a smoke run")
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs") or []}
    params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters") or []}
    missing = [k for k in ("DocumentsBucketName",) + (() if api_url else ("ApiUrl",)) if not outputs.get(k)]
    if missing:
        raise CommandError(f"the stack {name} has no output {', '.join(missing)}: is it an Eragraph stack?")
    if not params.get("Stage"):
        raise CommandError(f"the stack {name} has no Stage parameter: is it an Eragraph stack?")
    return Stack(name=name, region=region, api_url=(api_url or outputs["ApiUrl"]).rstrip("/"),
                 bucket=outputs["DocumentsBucketName"], stage=params["Stage"],
                 prefix=params.get("DocumentPrefix", ""), suffix=params.get("DocumentSuffix", ""),
                 auth_mode=params.get("ApiAuthMode", "IAM") or "IAM", text_model=params.get("TextModelId", ""),
                 access_log_group=outputs.get("ApiAccessLogGroupName", ""), outputs=outputs)


@dataclass
class Caller:
    """One identity the doors are asked as: ``label`` (the profile or the JWT file, for the
    report), ``auth`` (console.upstream's SigV4 or Bearer) and, for a profile, its boto3 session
    (the Bedrock KB client signs with it)."""

    label: str
    auth: Any
    session: Any = None
    token: Any = None  # Bearer's token() for a JWT caller
    tenant: str | None = None  # as the API names it (GET /tenants), once asked


def caller_of(spec: str, region: str) -> Caller:
    """``profile:NAME`` (or a bare NAME): an AWS named profile; ``jwt-file:PATH``: a JWT in a file,
    read again on every request. CommandError when it cannot sign."""
    from ..entrypoints.console.upstream import Bearer, SigV4, Unreachable

    kind, sep, value = spec.partition(":")
    if not sep or kind not in ("profile", "jwt-file"):
        kind, value = "profile", spec
    if not value:
        raise CommandError(f"--caller {spec!r}: name a profile (profile:NAME) or a JWT file (jwt-file:PATH)",
                           EXIT_USAGE)
    if kind == "jwt-file":
        try:
            bearer = Bearer.from_file(value)
        except Unreachable as exc:
            raise CommandError(f"--caller {spec}: {exc}", EXIT_USAGE) from None
        return Caller(label=f"jwt-file:{value}", auth=bearer, token=bearer.token)
    import boto3
    import botocore.exceptions

    try:
        session = boto3.session.Session(profile_name=value, region_name=region)
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise CommandError(f"--caller {spec}: {exc}", EXIT_USAGE) from None
    if credentials is None:
        raise CommandError(f"--caller {spec}: the profile {value!r} gives no AWS credentials", EXIT_USAGE)
    return Caller(label=f"profile:{value}", auth=SigV4(credentials, region), session=session)
