"""The request models of the HTTP API: pydantic validates each request body against them (types
are strict: ``"k": "5"`` is refused, not converted), and the resolver's OpenAPI schema is
generated from them (``python -m eragraph.entrypoints.http.api`` prints it)."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from ...domain.conversation import Message
from ...domain.rerank import RerankSpec
from ...domain.tenants import MAX_LENGTH as TENANT_MAX_LENGTH
from ...services.modes import MODES, mode_names


class RerankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    candidates: Optional[int] = Field(None, ge=1, le=1000, description="Results retrieved for the reranker "
                                      "(default ERAGRAPH_RERANK_CANDIDATES; never fewer than k)")
    model: Optional[str] = Field(None, min_length=1, max_length=256, description="A Bedrock rerank model id or ARN "
                                 "(default: the configured reranker's; a local reranker runs only its own)")


class ConversationTurn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["user", "assistant"] = Field(description="Who said it")
    content: str = Field(max_length=16000, description="What was said")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    query: str = Field(min_length=1, max_length=4000, description="The question or search text")
    # the registry (services.modes) is the one list of modes; an unknown one gets the service's 400
    mode: str = Field("collapsed", description="; ".join(f"{m.name}: {m.description}" for m in MODES.values()),
                      json_schema_extra={"enum": mode_names()})
    k: int = Field(5, ge=1, le=100, description="Number of results")
    budget: Optional[int] = Field(None, ge=1, le=100000, description="Token budget of the evidence (default: ERAGRAPH_TOKEN_BUDGET)")
    p: Optional[float] = Field(None, ge=0.0, le=1.0, description="Bias proportion (detailed/summarized)")
    answer: bool = Field(False, description="Generate an answer with citations from the evidence")
    tenant: Optional[str] = Field(None, max_length=TENANT_MAX_LENGTH, description="Optional; must be the caller's own tenant, which "
                                  "comes from its identity (JWT claim or IAM principal tag), never from here")
    filter: Optional[dict[str, Any]] = Field(
        None, description="Metadata filter in Amazon Bedrock Knowledge Bases' shape, e.g. "
        '{"andAll": [{"equals": {"key": "lang", "value": "en"}}, {"greaterThanOrEquals": {"key": "year", '
        '"value": 2020}}]}; operators: equals, notEquals, in, notIn, greaterThan(OrEquals), lessThan(OrEquals), '
        "startsWith, andAll, orAll. Every result is a leaf chunk whose document matches")
    rerank: Union[bool, RerankRequest] = Field(False, description="Re-order the results with the configured reranker: "
                                               "true, or {candidates, model}; the response's rerank says it ran")
    explain: bool = Field(False, description="Say why the entity-graph modes ranked the results so: seeds, activated "
                          "entities, each passage's restart weight, score and connecting entities (other modes: "
                          "explain is null, with a note)")
    conversation: Optional[list[ConversationTurn]] = Field(
        None, max_length=40, description="The earlier turns of a conversation, oldest first: the query is made "
        "standalone from them before retrieval, and the response's rewrite says how")
    decompose: bool = Field(False, description="Split the question into sub-questions with the configured generator, "
                            "retrieve for each and fuse the lists (Bedrock's QUERY_DECOMPOSITION); the response's "
                            "decomposition shows them. Needs a Bedrock or OpenAI-compatible generator (else a 400)")

    def turns(self) -> list[Message]:
        return [Message(t.role, t.content) for t in self.conversation or ()]


class DocumentUpload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    source: str = Field(min_length=1, max_length=900, description="The document's name, a relative '/'-separated "
                        "path such as notes/a.md: its key in the documents bucket (under the caller's tenant prefix); "
                        "its id derives from it, and a later upload of the same name replaces it")
    text: Optional[str] = Field(None, description="The document as text (give text or bytes)")
    bytes: Optional[str] = Field(None, description="The document's bytes in base64: PDF, DOCX, HTML, CSV, Markdown "
                                 "or text, told apart by their content (give text or bytes)")
    metadata: Optional[dict[str, Any]] = Field(None, description="Its attributes (strings, numbers, booleans, lists "
                                               "of strings), what a query's filter selects on")


class DocumentsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    documents: list[DocumentUpload] = Field(min_length=1, max_length=25, description="1 to 25 documents, each at "
                                            "most ERAGRAPH_MAX_DOCUMENT_BYTES; each is ingested asynchronously "
                                            "(poll GET /documents/{doc_id})")


def rerank_spec(value: bool | RerankRequest) -> RerankSpec | None:
    if value is False:
        return None
    if value is True:
        return RerankSpec()
    return RerankSpec(candidates=value.candidates, model=value.model)
