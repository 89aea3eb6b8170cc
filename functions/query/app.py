"""HTTP API (payload v2) -> query, documents, stats, health. The routes and the pydantic request
model live in eragraph.api (shared with the local `eragraph serve`); the OpenAPI schema they
generate is kept in openapi.json."""

from aws_lambda_powertools.metrics import MetricUnit

from eragraph.api import QueryRequest, make_app  # noqa: F401  (QueryRequest: the request schema)
from eragraph.bootstrap.aws import LAMBDA_ENGINE, powertools

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


app = make_app(LAMBDA_ENGINE.get, on_query=publish)


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    return app.resolve(event, context)
