"""HTTP API (payload v2) -> query, documents (read, submitted, removed), changes, stats, health, and the MCP tools (POST /mcp:
eragraph.entrypoints.mcp). The routes are the route table's (eragraph.entrypoints.http.routes), served by
eragraph.entrypoints.http.api's resolver (shared with the local `eragraph serve`); the OpenAPI schema they
generate is printed by `python -m eragraph.entrypoints.http.api`. The
caller's tenant comes from its identity (bootstrap.identity: ERAGRAPH_TENANT_CLAIM,
ERAGRAPH_TENANT_TAG, ERAGRAPH_TENANT_REQUIRED)."""

from aws_lambda_powertools.metrics import MetricUnit

from eragraph.entrypoints.http.api import make_app
from eragraph.entrypoints.http.models import QueryRequest  # noqa: F401  (the request schema)
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools, priced
from eragraph.bootstrap.identity import TenantIdentity
from eragraph.bootstrap.principals import PrincipalIdentity
from eragraph.bootstrap.limits import api_limits

logger, metrics, tracer = powertools()
# fails the init if a provider it uses is missing; spaCy is found, not imported: only the graph
# and router modes use it, and a dense query should not pay for it
LAMBDA_ENGINE.cold_start("embedder", "ner", "parser", "generator", load=False)


def publish(response) -> None:
    metrics.add_metric("Queries", MetricUnit.Count, 1)
    metrics.add_metric("QueryLatency", MetricUnit.Milliseconds, round(response.seconds * 1000.0, 3))
    metrics.add_metric("QueryResults", MetricUnit.Count, len(response.results))
    total = response.usage.get("total", {})
    metrics.add_metric("QueryTokens", MetricUnit.Count, total.get("tokens_in", 0) + total.get("tokens_out", 0))


def engine_of(tenant: str):
    return LAMBDA_ENGINE.get(tenant, register=False)


MCP = []  # the MCP server, built by the first POST /mcp: the other routes' cold starts never import mcp


def serve_mcp(event: dict, body: bytes, tenant: str, caller=None):
    """POST /mcp: the MCP tools (stateless streamable HTTP, JSON) for the caller's tenant, inside
    its principals' view (caller: bootstrap.principals; None: the operator)."""
    from eragraph.entrypoints.http.context import answer_budget
    from eragraph.entrypoints.mcp import build_server, event_response

    if not MCP:  # the answer tool's budget capped as every generating route's (AnswerMaxBudget)
        MCP.append(build_server(engine_of, budget_of=lambda engine: answer_budget(LIMITS, engine)))
    metrics.add_metric("McpRequests", MetricUnit.Count, 1)
    return event_response(MCP[0], event, body, tenant, caller)


# the caller's tenant from its identity only: the JWT claim, or the IAM principal's tag
IDENTITY = TenantIdentity.from_env()
# who is asking inside the tenant (off unless ERAGRAPH_PRINCIPALS): an IAM caller's principals tag
# is read with its tenant tag (one cached read per principal)
PRINCIPALS = PrincipalIdentity.from_env(iam_tags=IDENTITY.iam_tags)
LIMITS, ADMIT = api_limits()  # the answer budget cap; the per-tenant token bucket (429)
app = make_app(engine_of, on_query=publish, tenant_of=IDENTITY.tenant, limits=LIMITS, admit=ADMIT, logger=logger,
               mcp=serve_mcp, tenants=lambda: LAMBDA_ENGINE.tenancy.tenants(),  # a foreign KB id is a 403
               uploads=LAMBDA_ENGINE.uploads(), write_engine=LAMBDA_ENGINE.writer,  # POST /documents: the bucket
               principals=PRINCIPALS.caller)


@logger.inject_lambda_context(clear_state=True)  # a request's tenant/caller keys end with it
@metrics.log_metrics
@priced(metrics, logger)  # the invocation's Bedrock spend, priced from the ledger's table
@tracer.capture_lambda_handler
def handler(event, context):
    return app.resolve(event, context)
