"""The query API's cost bounds from the environment (config.ApiLimits): the answer budget cap,
the per-tenant rate limiter on the graph table (adapters/aws/rate_limit_dynamodb.py) when
ERAGRAPH_TENANT_RATE > 0, and the open streams per tenant (ERAGRAPH_TENANT_STREAMS > 0): in the
graph table on AWS (adapters/aws/stream_slots_dynamodb.py), in the process for `eragraph serve`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config import ApiLimits, aws_environment
from ..domain.rate_limit import Decision


def api_limits(environ: Mapping[str, str] | None = None,
               client=None) -> tuple[ApiLimits, Callable[[str], Decision] | None]:
    """(limits, admit): ``admit(tenant)`` takes one token of the tenant's bucket (None: no
    per-tenant limit)."""
    limits = ApiLimits.from_env(environ)
    if limits.tenant_rate <= 0:
        return limits, None
    from ..adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    env = aws_environment(environ)
    if client is None:
        import boto3

        client = boto3.client("dynamodb", endpoint_url=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None)
    limiter = DynamoRateLimiter(env["ERAGRAPH_TABLE"], client, limits.tenant_rate, limits.tenant_burst)
    return limits, limiter.acquire


def stream_slots(limits: ApiLimits, environ: Mapping[str, str] | None = None, client=None, local: bool = False) -> Any:
    """The open-stream slots of ``limits.tenant_streams`` per tenant (None: no limit): one
    process's (``local``: `eragraph serve`), else the graph table's (every stream function
    environment shares them)."""
    if limits.tenant_streams <= 0:
        return None
    if local:
        from ..adapters.memory.stream_slots_memory import MemoryStreamSlots

        return MemoryStreamSlots(limits.tenant_streams)
    from ..adapters.aws.stream_slots_dynamodb import DynamoStreamSlots

    env = aws_environment(environ)
    if client is None:
        import boto3

        client = boto3.client("dynamodb", endpoint_url=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None)
    return DynamoStreamSlots(env["ERAGRAPH_TABLE"], client, limits.tenant_streams)
