"""HTTP API (payload v2) -> query, documents, stats, health. The routes and the pydantic request
model live in eragraph.api (shared with the local `eragraph serve`); the OpenAPI schema they
generate is kept in openapi.json."""

from aws_lambda_powertools import Logger

from eragraph.api import QueryRequest, make_app  # noqa: F401  (QueryRequest: the request schema)
from eragraph.bootstrap.aws import LAMBDA_ENGINE

logger = Logger()
app = make_app(LAMBDA_ENGINE.get)


@logger.inject_lambda_context
def handler(event, context):
    return app.resolve(event, context)
