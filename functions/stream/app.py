"""POST /retrieveAndGenerateStream on AWS: the Bedrock KB event stream, each frame sent as the
generator writes it. Python Lambda has no native response streaming, so this function runs
eragraph.entrypoints.http.server's ASGI app under uvicorn (run.sh) behind the Lambda Web Adapter (a layer;
AWS_LWA_INVOKE_MODE=response_stream), fronted by a function URL in RESPONSE_STREAM mode with
AWS_IAM auth. The caller's tenant comes from its identity only: the adapter's copy of the
function URL's requestContext (authorizer.iam), read as the query function reads API Gateway's
(bootstrap.identity; ERAGRAPH_TRUST_REQUEST_CONTEXT, ERAGRAPH_TENANT_TAG, ERAGRAPH_TENANT_REQUIRED), and
with ERAGRAPH_PRINCIPALS=identity who is asking inside it (bootstrap.principals: its principals tag).
The per-tenant rate limit is the query function's (ERAGRAPH_TENANT_RATE, ERAGRAPH_TENANT_BURST)."""

from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools, spend_publisher
from eragraph.bootstrap.identity import TenantIdentity
from eragraph.bootstrap.principals import PrincipalIdentity
from eragraph.bootstrap.limits import api_limits, stream_slots
from eragraph.entrypoints.http.server import ApiApp

# fails the init if a provider it uses is missing (found, not loaded: see the query function)
LAMBDA_ENGINE.cold_start("embedder", "ner", "parser", "generator", load=False)

IDENTITY = TenantIdentity.from_env()
# who is asking inside the tenant (off unless ERAGRAPH_PRINCIPALS), from the same request context
PRINCIPALS = PrincipalIdentity.from_env(iam_tags=IDENTITY.iam_tags)
LIMITS, ADMIT = api_limits()  # the answer budget cap; the per-tenant token bucket (429)
STREAMS = stream_slots(LIMITS)  # the answers each tenant may have streaming at once (429), in the graph table


def engine_of(tenant: str):
    return LAMBDA_ENGINE.get(tenant, register=False)


logger, metrics, _ = powertools()
publish = spend_publisher(metrics, logger)


def spent(calls: list) -> None:
    """A streamed answer's Bedrock spend, as every handler publishes its invocation's
    (BedrockSpendUSD, summed by the BedrockSpend alarm): flushed per answer, there is no handler."""
    publish(calls)
    if any(c.model.startswith("bedrock:") for c in calls):
        metrics.flush_metrics()


app = ApiApp(None, identity=IDENTITY, engines=engine_of, tenants=lambda: LAMBDA_ENGINE.tenancy.tenants(),
             admit=ADMIT, stream_only=True, on_model_calls=spent, limits=LIMITS, streams=STREAMS,
             principals=PRINCIPALS.caller_from_headers,
             log=True)  # one line per request (request id, caller, tenant, route, status): a function URL keeps no access log
