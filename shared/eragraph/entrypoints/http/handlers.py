"""The handlers of the HTTP API's routes (the route table, eragraph.entrypoints.http.routes, lists
each with its method and path). Each takes the request's context (context.RouteContext) first,
then its own parameters, which the resolver validates and documents in the OpenAPI schema. A
handler answers a dict (the JSON body, 200) and raises to refuse: eragraph.entrypoints.http.errors
converts each exception to its status and body. Every route answers from the caller's tenant's
engine, the caller admitted first (admission.Admission)."""

from __future__ import annotations

from typing import Annotated, Optional

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from ...services import query as query_service
from ..bedrock_kb import runtime as bedrock_kb
from ..documents import document_json
from .context import RouteContext, answer_budget, check_budget, check_tenant
from .models import DocumentsRequest, QueryRequest, rerank_spec


def post_query(ctx: RouteContext, request: QueryRequest) -> dict:
    """POST /query: the evidence (and with ``answer``, the answer) of a question."""
    if request.answer:
        check_budget(ctx.limits, request.budget)
    tenant = ctx.caller()
    check_tenant(request.tenant, tenant)
    served = ctx.get_engine(tenant)
    # the default budget (ERAGRAPH_TOKEN_BUDGET) is capped too, not only an explicit one
    budget = answer_budget(ctx.limits, served, request.budget) if request.answer else request.budget
    response = query_service.query(served, request.query, mode=request.mode, k=request.k,
                                   budget=budget, p=request.p, answer=request.answer,
                                   where=request.filter, rerank=rerank_spec(request.rerank),
                                   explain=request.explain, conversation=request.turns(),
                                   caller=ctx.asking(), decompose=request.decompose)
    if ctx.on_query is not None:
        ctx.on_query(response)
    return response.to_dict()


def get_document(ctx: RouteContext, doc_id: Annotated[str, Path(min_length=1, max_length=512)]) -> dict:
    """GET /documents/{doc_id}: a document with its status (entrypoints.documents)."""
    body = document_json(ctx.engine(), doc_id, ctx.asking())
    if body is None:  # one the caller may not read is not there for it
        raise NotFoundError(f"no document {doc_id!r}")
    return body


def list_statuses(ctx: RouteContext, prefix: Annotated[str, Query(max_length=1024)] = "",
                  limit: Annotated[int, Query(ge=0, le=1000)] = 100,
                  cursor: Annotated[str, Query(max_length=4096)] = "") -> dict:
    """Counts of each status of the caller's documents whose source starts with ``prefix``
    (and Bedrock's ingestion-job statistic names for them), with up to ``limit`` documents by
    source after ``cursor`` (the ``next_cursor`` of the page before; null: the last page). With
    principals, a page lists only the documents the caller may read (it may then hold fewer than
    ``limit``); the counts are the tenant's."""
    from ...services import doc_status
    from ..documents import readable_views

    engine = ctx.engine()
    asking = ctx.asking()
    counts, views, next_cursor, truncated = doc_status.page(engine, prefix, limit, cursor)
    views = readable_views(engine, views, asking)
    return {**counts.to_json(), "documents": views, "truncated": truncated,
            "next_cursor": next_cursor}


def post_documents(ctx: RouteContext, request: DocumentsRequest):
    """POST /documents: 1..25 documents, each stored and ingested asynchronously through the
    pipeline an upload to the documents bucket takes (services.uploads); 202 with their ids."""
    from ...services import uploads

    docs = uploads.decode([d.model_dump() for d in request.documents])
    accepted = uploads.submit(ctx.writer(), ctx.uploads, docs)
    return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body={"documents": accepted})


def delete_document(ctx: RouteContext, doc_id: Annotated[str, Path(min_length=1, max_length=512)]):
    """DELETE /documents/{doc_id}: the document leaves through the pipeline (202); 404 if unknown."""
    from ...services import uploads

    return Response(status_code=202, content_type=content_types.APPLICATION_JSON,
                    body=uploads.delete(ctx.writer(), ctx.uploads, doc_id))


def get_changes(ctx: RouteContext, limit: Annotated[int, Query(ge=1, le=200)] = 20) -> dict:
    """GET /changes: the most recent change records, newest first (services.changes), and the
    estimated cost of summarizing the whole store again; a caller with principals sees only
    what its partitions hold (changes.in_view)."""
    from ...services import changes

    engine = ctx.engine()
    return {"changes": changes.in_view(engine, changes.recent(engine, limit), ctx.asking()),
            "rebuild": changes.rebuild_estimate(engine)}


def get_stats(ctx: RouteContext) -> dict:
    """GET /stats: the store's statistics (services.stats)."""
    from ...services import stats as stats_service

    return stats_service.stats(ctx.engine())


def get_modes(ctx: RouteContext) -> dict:
    """GET /modes: the registry's modes, each with whether this store can run it."""
    from ...services import graph_view

    return graph_view.modes_listing(ctx.engine())


def get_tenants(ctx: RouteContext) -> dict:
    """GET /tenants: the tenants the caller may choose (x-eragraph-tenant) and the current one,
    and whether the operator may ask as other principals (``ask_as``: a local eragraph serve)."""
    from .tenant_choice import listing

    return {**listing(ctx.choice, ctx.caller()), "ask_as": ctx.operator_switch is not None}


def get_layer(ctx: RouteContext, layer: Annotated[int, Path(ge=0, le=64)],
              limit: Annotated[int, Query(ge=1, le=1000)] = 200,
              cursor: Annotated[str, Query(max_length=1200)] = "") -> dict:
    """GET /graph/layers/{layer}: one page of the layer's nodes in code order (the band view);
    pass ``next_cursor`` back as ``cursor`` for the next."""
    from ...services import graph_view

    engine = ctx.engine()
    return graph_view.layer_page(engine, layer, limit, cursor or None, readable_of(engine, ctx.asking()))


def get_node(ctx: RouteContext, node_id: Annotated[str, Path(min_length=1, max_length=512)]) -> dict:
    """GET /nodes/{node_id}: a node with its text, document, parent summary and children."""
    from ...services import graph_view

    engine = ctx.engine()
    body = graph_view.node_detail(engine, node_id)
    readable = readable_of(engine, ctx.asking())
    if body is None or (readable is not None and not graph_view.in_partitions(engine, node_id, readable)):
        raise NotFoundError(f"no node {node_id!r}")  # one the caller may not read is not there for it
    return body


def readable_of(engine, caller) -> set[int] | None:
    """The access partitions ``caller`` may read (None: all, the operator)."""
    from ...services.placement import readable

    return None if caller is None else readable(engine, caller)


def get_ledger(ctx: RouteContext, bucket: Annotated[str, Query(pattern="^hour$")] = "hour",
               since: Annotated[Optional[int], Query(ge=0)] = None) -> dict:
    """GET /ledger: the cost ledger in hourly buckets since ``since`` (epoch seconds; default the
    last 7 days), one series per kind and model, with the store's totals."""
    from ...services import graph_view

    return graph_view.ledger_series(ctx.engine(), since)


def post_mcp(ctx: RouteContext):
    """POST /mcp: the MCP tools (``ctx.mcp``: mcp.event_response) for the caller's tenant, inside
    its principals' view, after the same identity, rate limit and logging as every route."""
    tenant = ctx.caller()
    asking = ctx.asking()  # before any tool runs: a caller without principals is refused (403)
    event = ctx.event
    body = event.decoded_body or ""
    status, headers, text = ctx.mcp(event.raw_event, body.encode("utf-8"), tenant, asking)
    return Response(status_code=status, content_type=headers.pop("content-type", None), body=text, headers=headers)


def post_kb_retrieve(ctx: RouteContext, knowledgeBaseId: str):  # noqa: N803 (the service model's name)
    """Bedrock Knowledge Bases' Retrieve (bedrock_kb.runtime) on the knowledge base's tenant."""
    caller = ctx.caller()
    engine = ctx.get_engine(caller)
    bedrock_kb.resolve_tenant(knowledgeBaseId, caller, salt=engine.settings.kb_id_salt)  # the caller's, or a 404
    return bedrock_kb.retrieve(engine, ctx.event.json_body or {}, knowledgeBaseId, caller=ctx.asking())


def post_kb_retrieve_and_generate(ctx: RouteContext):
    """Bedrock Knowledge Bases' RetrieveAndGenerate (bedrock_kb.runtime) on the knowledge base's tenant."""
    body = ctx.event.json_body or {}
    bedrock_kb.validate("RetrieveAndGenerate", body)
    kb_id = bedrock_kb.knowledge_base_config(body)["knowledgeBaseId"]
    caller = ctx.caller()
    engine = ctx.get_engine(caller)
    bedrock_kb.resolve_tenant(kb_id, caller, salt=engine.settings.kb_id_salt)  # the caller's, or a 404
    return bedrock_kb.retrieve_and_generate(engine, body, budget=answer_budget(ctx.limits, engine),
                                            caller=ctx.asking())


def post_chat_completions(ctx: RouteContext):
    """POST /v1/chat/completions (openai_chat) on the caller's tenant, its answer budget capped as
    POST /query's; ``stream: true`` answers server-sent events (whole here: the resolver answers
    whole responses; `eragraph serve` sends them as they are written)."""
    from .. import openai_chat

    engine = ctx.engine()
    asking = ctx.asking()  # inside the caller's view; without principals when they are required, a 403
    request = openai_chat.parse_request(engine, ctx.event.json_body)
    budget = answer_budget(ctx.limits, engine)
    if not request.stream:
        return openai_chat.completion(engine, request, budget, caller=asking)
    body = b"".join(openai_chat.sse(openai_chat.chunks(engine, request, budget, caller=asking)))
    return Response(status_code=200, content_type="text/event-stream", body=body.decode("utf-8"),
                    headers={"cache-control": "no-cache"})


def get_models(ctx: RouteContext) -> dict:
    """GET /v1/models: the OpenAI-compatible models of the caller's store (openai_chat)."""
    from .. import openai_chat

    return openai_chat.models(ctx.engine())


def health() -> dict:
    """GET /health: the readiness check (the stream function answers it with this too)."""
    return {"status": "ok"}
