"""The HTTP query API (payload v2): POST /query, GET /documents/{id}, GET /stats, GET /health.

One definition serves both the API Gateway function (functions/query/app.py) and the local warm
server (``eragraph serve``, eragraph.server): ``make_app`` builds the powertools resolver over an
engine getter, so both validate requests with the same pydantic model and answer with the same
JSON and the same 4xx errors. Requests are validated from the models below; the OpenAPI schema
they generate is kept in functions/query/openapi.json. Needs the ``aws`` extra (powertools,
pydantic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Optional

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from .domain.model import LexicalIndexMissing
from .services import query as query_service
from .services.modes import MODES, mode_names
from .services.engine import Engine

OPENAPI_TITLE = "Eragraph query API"
OPENAPI_VERSION = "0.1.0"


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000, description="The question or search text")
    # the registry (services.modes) is the one list of modes; an unknown one gets the service's 400
    mode: str = Field("collapsed", description="; ".join(f"{m.name}: {m.description}" for m in MODES.values()),
                      json_schema_extra={"enum": mode_names()})
    k: int = Field(5, ge=1, le=100, description="Number of results")
    budget: Optional[int] = Field(None, ge=1, le=100000, description="Token budget of the evidence (default: ERAGRAPH_TOKEN_BUDGET)")
    p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Bias proportion (detailed/summarized)")
    answer: bool = Field(False, description="Generate an answer with citations from the evidence")


def document_body(doc) -> dict:
    return {"doc_id": doc.doc_id, "source": doc.source, "title": doc.title, "content_hash": doc.content_hash,
            "chunks": len(doc.chunk_ids), "chunk_ids": list(doc.chunk_ids), "status": doc.status}


def make_app(get_engine: Callable[[], Engine], on_query: Callable | None = None) -> APIGatewayHttpResolver:
    """The resolver with every route; ``get_engine`` is called per request (it returns the one
    warm engine: the Lambda container's, or the local server's); ``on_query`` sees each query
    response (the Lambda function publishes metrics from it)."""
    from .services import stats as stats_service

    app = APIGatewayHttpResolver(enable_validation=True)

    @app.exception_handler(query_service.BadQueryError)
    def bad_query(exc: query_service.BadQueryError) -> Response:
        return Response(status_code=400, content_type=content_types.APPLICATION_JSON,
                        body={"statusCode": 400, "message": str(exc)})

    @app.exception_handler(LexicalIndexMissing)
    def lexical_missing(exc: LexicalIndexMissing) -> Response:
        return Response(status_code=409, content_type=content_types.APPLICATION_JSON,
                        body={"statusCode": 409, "message": str(exc)})

    @app.post("/query")
    def post_query(request: QueryRequest) -> dict:
        response = query_service.query(get_engine(), request.query, mode=request.mode, k=request.k,
                                       budget=request.budget, p=request.p, answer=request.answer)
        if on_query is not None:
            on_query(response)
        return response.to_dict()

    @app.get("/documents/<doc_id>")
    def get_document(doc_id: Annotated[str, Path(min_length=1, max_length=512)]) -> dict:
        doc = get_engine().graph.get_document(doc_id)
        if doc is None:
            raise NotFoundError(f"no document {doc_id!r}")
        return document_body(doc)

    @app.get("/stats")
    def get_stats() -> dict:
        return stats_service.stats(get_engine())

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app
