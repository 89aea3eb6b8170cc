"""HTTP API (payload v2) -> query, documents, stats, health. Requests are validated from the
pydantic models below; the OpenAPI schema they generate is kept in openapi.json."""

from typing import Annotated, Optional

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from eragraph.bootstrap.aws import LAMBDA_ENGINE
from eragraph.domain.model import LexicalIndexMissing
from eragraph.services import query as query_service
from eragraph.services.modes import MODES, mode_names
from eragraph.cli import stats as stats_service

logger = Logger()

app = APIGatewayHttpResolver(enable_validation=True)


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=4000, description="The question or search text")
    # the registry (services.modes) is the one list of modes; an unknown one gets the service's 400
    mode: str = Field("collapsed", description="; ".join(f"{m.name}: {m.description}" for m in MODES.values()),
                      json_schema_extra={"enum": mode_names()})
    k: int = Field(5, ge=1, le=100, description="Number of results")
    budget: Optional[int] = Field(None, ge=1, le=100000, description="Token budget of the evidence")
    p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Bias proportion (detailed/summarized)")
    answer: bool = Field(False, description="Generate an answer with citations from the evidence")


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
    response = query_service.query(LAMBDA_ENGINE.get(), request.query, mode=request.mode, k=request.k,
                                   budget=request.budget, p=request.p, answer=request.answer)
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
    return stats_service(LAMBDA_ENGINE.get())


@app.get("/health")
def health() -> dict:
    return {"status": "ok"}


@logger.inject_lambda_context
def handler(event, context):
    return app.resolve(event, context)
