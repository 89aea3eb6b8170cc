"""The handlers of the ``bedrock-agent`` knowledge-base routes (the route table lists them with
the methods and paths of the service model's ``http.requestUri``): data sources, ingestion jobs
and the documents of a data source, so that an app that writes to Bedrock Knowledge Bases with
boto3's ``bedrock-agent`` client writes to Eragraph by changing its endpoint, not its code.

Each request is validated against the operation's input shape by botocore's own validator
(bedrock_kb.runtime.validate), its path parameters included. The knowledge base id names a
tenant as on the runtime routes (bedrock_kb.runtime.resolve_tenant: the caller's identity
decides; another tenant's id is ResourceNotFoundException, as an unknown one is).
Refusals are the modelled errors (x-amzn-errortype and a JSON ``message``, in words):
ValidationException, ResourceNotFoundException, ConflictException (a data source name taken, a
job running or ended), ServiceQuotaExceededException.

Documents go through THE ingest path (services.uploads with the profile's pipeline, ``ctx.uploads``):
on AWS their bytes are put in the documents bucket and its notification ingests them."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types

from ...domain import kb_sync
from ...domain.model import BadInputError
from ...services import kb_jobs, kb_sources
from ...services.idempotency import once
from ...services.engine import Engine
from ..bedrock_kb.runtime import KbError, resolve_tenant, validate
from . import documents as kb_documents

SERVICE = "bedrock-agent"
DEFAULT_PAGE = 100


def _request(ctx, operation: str, write: bool = True, **path: str) -> tuple[dict[str, Any], Engine]:
    """The validated request of ``operation`` (body and path parameters) and the engine of the
    knowledge base's tenant (for a ``write``: the write engine, where there is one)."""
    body = ctx.event.json_body or {}
    if not isinstance(body, dict):
        raise KbError("ValidationException", "the body must be a JSON object")
    request = {**body, **path}
    validate(operation, request, SERVICE)
    tenant = ctx.caller()
    salt = ctx.get_engine(tenant).settings.kb_id_salt  # the deployment's (every engine has the same)
    resolve_tenant(path["knowledgeBaseId"], tenant, salt=salt)  # the caller's, or a 404
    writer = getattr(ctx, "write_engine", None) if write else None
    return request, (writer or ctx.get_engine)(tenant)


def _answer(fn: Callable[[], Any], status: int = 200):
    """``fn``'s result as the response (SyncError and the upload refusals as modelled errors)."""
    try:
        body = fn()
    except kb_sync.SyncError as exc:
        raise KbError(exc.code, str(exc)) from None
    except BadInputError as exc:  # services.uploads.UploadError (with its status), or bad input met later
        code = {403: "AccessDeniedException", 409: "ConflictException", 429: "ServiceQuotaExceededException"}.get(
            getattr(exc, "status", 400), "ValidationException")
        raise KbError(code, str(exc)) from None
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


def _same(value: Any) -> Any:
    """A remembered answer, given again as it was."""
    return value


def _page(items: list[Any], request: dict[str, Any], key: str) -> dict[str, Any]:
    """One page of ``items`` from the request's nextToken (an offset) and maxResults."""
    token = request.get("nextToken")
    offset = 0
    if token is not None:
        try:
            offset = int(base64.urlsafe_b64decode(token.encode("ascii")).decode("ascii").removeprefix("offset:"))
        except (ValueError, UnicodeError):
            raise KbError("ValidationException", "nextToken is not a token this service returned") from None
    size = request.get("maxResults") or DEFAULT_PAGE
    out: dict[str, Any] = {key: items[offset:offset + size]}
    if offset + size < len(items):
        out["nextToken"] = base64.urlsafe_b64encode(f"offset:{offset + size}".encode("ascii")).decode("ascii")
    return out


# ----- data sources -----
def create_data_source(ctx, knowledgeBaseId: str):  # noqa: N803 (the service model's names)
    request, engine = _request(ctx, "CreateDataSource", knowledgeBaseId=knowledgeBaseId)
    return _answer(lambda: {"dataSource": kb_sources.public(kb_sources.create(engine, knowledgeBaseId, request))})


def get_data_source(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    _request_, engine = _request(ctx, "GetDataSource", False, knowledgeBaseId=knowledgeBaseId,
                                 dataSourceId=dataSourceId)
    return _answer(lambda: {"dataSource": kb_sources.public(kb_sources.get(engine, dataSourceId))})


def list_data_sources(ctx, knowledgeBaseId: str):  # noqa: N803
    request, engine = _request(ctx, "ListDataSources", False, knowledgeBaseId=knowledgeBaseId)
    return _answer(lambda: _page([kb_sources.public(r, summary=True) for r in kb_sources.listing(engine)],
                                 request, "dataSourceSummaries"))


# ----- ingestion jobs -----
def start_ingestion_job(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    request, engine = _request(ctx, "StartIngestionJob", knowledgeBaseId=knowledgeBaseId, dataSourceId=dataSourceId)

    def run():
        record = kb_sources.get(engine, dataSourceId)
        job = kb_jobs.start(engine, ctx.uploads, record, request.get("clientToken"), request.get("description"))
        return {"ingestionJob": kb_sync.public_job(job)}
    return _answer(run, 202)


def get_ingestion_job(ctx, knowledgeBaseId: str, dataSourceId: str, ingestionJobId: str):  # noqa: N803
    _request_, engine = _request(ctx, "GetIngestionJob", knowledgeBaseId=knowledgeBaseId, dataSourceId=dataSourceId,
                                 ingestionJobId=ingestionJobId)

    def run():
        record = kb_sources.get(engine, dataSourceId)
        job = kb_jobs.advance(engine, ctx.uploads, record, kb_jobs.get(engine, dataSourceId, ingestionJobId))
        return {"ingestionJob": kb_sync.public_job(job)}
    return _answer(run)


def list_ingestion_jobs(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    request, engine = _request(ctx, "ListIngestionJobs", knowledgeBaseId=knowledgeBaseId, dataSourceId=dataSourceId)

    def run():
        record = kb_sources.get(engine, dataSourceId)
        jobs = [kb_jobs.advance(engine, ctx.uploads, record, j) if j["status"] in kb_sync.RUNNING else j
                for j in kb_jobs.jobs(engine, dataSourceId)]
        for f in request.get("filters") or []:  # STATUS EQ values (the model's only filter)
            jobs = [j for j in jobs if j["status"] in f["values"]]
        sort = request.get("sortBy") or {"attribute": "STARTED_AT", "order": "DESCENDING"}
        field = "status" if sort["attribute"] == "STATUS" else "startedAt"
        jobs.sort(key=lambda j: (j[field], j["ingestionJobId"]), reverse=sort["order"] == "DESCENDING")
        return _page([kb_sync.public_job(j, summary=True) for j in jobs], request, "ingestionJobSummaries")
    return _answer(run)


def stop_ingestion_job(ctx, knowledgeBaseId: str, dataSourceId: str, ingestionJobId: str):  # noqa: N803
    _request_, engine = _request(ctx, "StopIngestionJob", knowledgeBaseId=knowledgeBaseId, dataSourceId=dataSourceId,
                                 ingestionJobId=ingestionJobId)

    def run():
        kb_sources.get(engine, dataSourceId)
        return {"ingestionJob": kb_sync.public_job(kb_jobs.stop(engine, dataSourceId, ingestionJobId))}
    return _answer(run, 202)


# ----- the documents of a data source -----
def _with_token(ctx, operation: str, knowledgeBaseId: str, dataSourceId: str, details):  # noqa: N803
    """A documents operation that takes a clientToken (services.idempotency: a retry answers the
    same, the token with another request is a ConflictException): ``details(request, engine,
    record)``'s documentDetails, 202."""
    request, engine = _request(ctx, operation, knowledgeBaseId=knowledgeBaseId, dataSourceId=dataSourceId)

    def make():
        out = {"documentDetails": details(request, engine, kb_sources.get(engine, dataSourceId))}
        return out, out
    return _answer(lambda: once(engine.graph, operation, request.get("clientToken"), request, make, _same), 202)


def ingest_documents(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    from ...services import uploads

    def details(request, engine, record):
        docs = request["documents"]
        uploads.submit(engine, ctx.uploads, kb_documents.uploads_of(engine, record, docs))
        return [{"knowledgeBaseId": knowledgeBaseId, "dataSourceId": dataSourceId, "status": "STARTING",
                 "identifier": kb_documents.identifier_of(record, d["content"])} for d in docs]
    return _with_token(ctx, "IngestKnowledgeBaseDocuments", knowledgeBaseId, dataSourceId, details)


def delete_documents(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    from ...domain.ids import document_id_for_source
    from ...services import uploads

    def details(request, engine, record):
        idents = request["documentIdentifiers"]
        if len(idents) > kb_documents.MAX_DOCUMENTS:
            raise kb_sync.SyncError("ValidationException", f"documentIdentifiers: at most {kb_documents.MAX_DOCUMENTS} "
                                    f"a call (got {len(idents)})")
        keys = [kb_sources.key_of(record, ident, engine.tenant) for ident in idents]
        out = []
        for ident, key in zip(idents, keys):
            source = kb_sources.stored_source(engine, ctx.uploads, kb_sources.upload_name(record, key))
            detail = {"knowledgeBaseId": knowledgeBaseId, "dataSourceId": dataSourceId, "identifier": dict(ident)}
            try:
                uploads.delete(engine, ctx.uploads, document_id_for_source(source))
                detail["status"] = "DELETING"
            except uploads.UnknownDocument:
                detail["status"] = "NOT_FOUND"
            out.append(detail)
        return out
    return _with_token(ctx, "DeleteKnowledgeBaseDocuments", knowledgeBaseId, dataSourceId, details)


def get_documents(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    request, engine = _request(ctx, "GetKnowledgeBaseDocuments", False, knowledgeBaseId=knowledgeBaseId,
                               dataSourceId=dataSourceId)

    def run():
        record = kb_sources.get(engine, dataSourceId)
        idents = request["documentIdentifiers"]
        if len(idents) > kb_documents.MAX_DOCUMENTS:
            raise kb_sync.SyncError("ValidationException", f"documentIdentifiers: at most {kb_documents.MAX_DOCUMENTS} "
                                    f"a call (got {len(idents)})")
        return {"documentDetails": [kb_sources.status_detail(engine, record, ctx.uploads, ident,
                                                             kb_sources.key_of(record, ident, engine.tenant)) for ident in idents]}
    return _answer(run)


def list_documents(ctx, knowledgeBaseId: str, dataSourceId: str):  # noqa: N803
    request, engine = _request(ctx, "ListKnowledgeBaseDocuments", False, knowledgeBaseId=knowledgeBaseId,
                               dataSourceId=dataSourceId)

    def run():
        record = kb_sources.get(engine, dataSourceId)
        details, token = kb_sources.documents(engine, record, ctx.uploads, request.get("maxResults") or DEFAULT_PAGE,
                                              request.get("nextToken"))
        return {"documentDetails": details, **({"nextToken": token} if token else {})}
    return _answer(run)
