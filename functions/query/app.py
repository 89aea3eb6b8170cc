"""HTTP API (payload v2) -> query, documents, stats, health. Requests are validated from the
pydantic models below; the OpenAPI schema they generate is kept in openapi.json."""

from typing import Annotated, Optional

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field

from eragraph.bootstrap.aws import LAMBDA_ENGINE
from eragraph.services import query as query_service
from eragraph.services import stats as stats_service

logger, metrics, tracer = Logger(), Metrics(), Tracer()
app = APIGatewayHttpResolver(enable_validation=True)


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000, description="The question or search text")
    mode: str = Field("collapsed", description="collapsed | detailed | summarized | dense | a graph mode")
    k: int = Field(5, ge=1, le=100, description="Number of results")
    budget: Optional[int] = Field(None, ge=1, le=100000, description="Token budget of the evidence (default: ERAGRAPH_TOKEN_BUDGET)")
    p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Bias proportion (detailed/summarized)")
    answer: bool = Field(False, description="Generate an answer with citations from the evidence")


@app.exception_handler(query_service.BadQueryError)
def bad_query(exc: query_service.BadQueryError) -> Response:
    return Response(status_code=400, content_type=content_types.APPLICATION_JSON,
                    body={"statusCode": 400, "message": str(exc)})


@app.post("/query")
def post_query(request: QueryRequest) -> dict:
    response = query_service.query(LAMBDA_ENGINE.get(), request.query, mode=request.mode, k=request.k,
                                   budget=request.budget, p=request.p, answer=request.answer)
    metrics.add_metric("Queries", MetricUnit.Count, 1)
    metrics.add_metric("QueryLatency", MetricUnit.Milliseconds, round(response.seconds * 1000.0, 3))
    metrics.add_metric("QueryResults", MetricUnit.Count, len(response.results))
    total = response.usage.get("total", {})
    metrics.add_metric("QueryTokens", MetricUnit.Count, total.get("tokens_in", 0) + total.get("tokens_out", 0))
    return response.to_dict()


@app.get("/documents/<doc_id>")
def get_document(doc_id: Annotated[str, Path(min_length=1, max_length=512)]) -> dict:
    doc = LAMBDA_ENGINE.get().graph.get_document(doc_id)
    if doc is None:
        raise NotFoundError(f"no document {doc_id!r}")
    return {"doc_id": doc.doc_id, "source": doc.source, "title": doc.title, "content_hash": doc.content_hash,
            "chunks": len(doc.chunk_ids), "chunk_ids": list(doc.chunk_ids), "status": doc.status}


@app.get("/stats")
def get_stats() -> dict:
    return stats_service.stats(LAMBDA_ENGINE.get())


@app.get("/health")
def health() -> dict:
    return {"status": "ok"}


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler
def handler(event, context):
    return app.resolve(event, context)
