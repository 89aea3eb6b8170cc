"""Bedrock Knowledge Bases' data sources of a tenant's store, and the documents of each
(domain.kb_sync says what they are).

A data source is a record in the store's meta (``kb-source:<id>``), so it lives and dies with
the tenant's store, on every profile. Its documents are the stored documents whose source is
under the data source's name (domain.kb_sync.document_name, as the ingest path names the key
an upload of that name gets: services.uploads.upload_key, then the pipeline's source_of), so
Get/ListKnowledgeBaseDocuments read services.doc_status and nothing else.

``clientToken`` idempotency is services.idempotency's (the same token with another request:
ConflictException; records lapse)."""

from __future__ import annotations

import secrets
import string
import time
from collections.abc import Mapping
from typing import Any

from ..domain import kb_sync
from ..domain.ids import document_id_for_source
from .engine import Engine
from .idempotency import once

SOURCE = "kb-source:"
ALPHABET = string.ascii_uppercase + string.digits
MAX_DATA_SOURCES = 100


def new_id() -> str:
    """A fresh 10-character id ([0-9A-Z]{10}, the service model's Id)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(10))


def create(engine: Engine, kb_id: str, request: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """CreateDataSource: the new record (or, for a retried clientToken, the one it made)."""
    def make() -> tuple[dict[str, Any], str]:
        record = _create(engine, kb_id, request, now)
        return record, record["dataSourceId"]
    return once(engine.graph, "CreateDataSource", request.get("clientToken"), {**request, "knowledgeBaseId": kb_id},
                make, lambda ds_id: get(engine, ds_id))


def _create(engine: Engine, kb_id: str, request: Mapping[str, Any], now: float | None) -> dict[str, Any]:
    name, config = request["name"], dict(request["dataSourceConfiguration"])
    kind = kb_sync.check_data_source(name, config)
    existing = listing(engine)
    if any(d["name"] == name for d in existing):
        raise kb_sync.SyncError("ConflictException", f"this knowledge base has a data source named {name!r} already")
    if len(existing) >= MAX_DATA_SOURCES:
        raise kb_sync.SyncError("ServiceQuotaExceededException",
                                f"a knowledge base has at most {MAX_DATA_SOURCES} data sources")
    if kind == "S3":
        bucket, _prefix = kb_sync.bucket_of(config)
        bucket_store(engine, bucket)  # refused now, not at the first sync
        kb_sync.check_area(engine.tenant, config)  # the tenant's own area of the shared bucket
    now = time.time() if now is None else now
    record = {"knowledgeBaseId": kb_id, "dataSourceId": new_id(), "name": name, "status": "AVAILABLE",
              "dataSourceConfiguration": config, "dataDeletionPolicy": request.get("dataDeletionPolicy", "DELETE"),
              "createdAt": now, "updatedAt": now}
    if request.get("description"):
        record["description"] = request["description"]
    engine.graph.put_meta(SOURCE + record["dataSourceId"], record)
    return record


def get(engine: Engine, ds_id: str) -> dict[str, Any]:
    """The data source ``ds_id`` (SyncError ResourceNotFoundException when there is none)."""
    record = engine.graph.get_meta(SOURCE + ds_id)
    if record is None:
        raise kb_sync.SyncError("ResourceNotFoundException", f"no data source {ds_id} in this knowledge base")
    return record


def listing(engine: Engine) -> list[dict[str, Any]]:
    """Every data source of the store, by creation time."""
    records = [engine.graph.get_meta(k) for k in engine.graph.meta_keys(SOURCE)]
    return sorted((r for r in records if r is not None), key=lambda r: (r["createdAt"], r["dataSourceId"]))


def public(record: Mapping[str, Any], summary: bool = False) -> dict[str, Any]:
    """A data source as the service answers it (DataSource, or DataSourceSummary)."""
    keys = ("knowledgeBaseId", "dataSourceId", "name", "status", "description")
    if not summary:
        keys += ("dataSourceConfiguration", "dataDeletionPolicy")
    out = {k: record[k] for k in keys if k in record}
    out["updatedAt"] = kb_sync.iso(record["updatedAt"])
    if not summary:
        out["createdAt"] = kb_sync.iso(record["createdAt"])
    return out


def bucket_store(engine: Engine, bucket: str):
    """The blob store of a data source's bucket (the profile's: engine.buckets)."""
    if engine.buckets is None:
        raise kb_sync.SyncError("ValidationException", "this deployment reads no data source buckets")
    try:
        return engine.buckets(bucket)
    except LookupError as exc:
        raise kb_sync.SyncError("ValidationException", str(exc.args[0] if exc.args else exc)) from None


def upload_name(record: Mapping[str, Any], key: str) -> str:
    """The name a data source's document is submitted under (domain.kb_sync.document_name)."""
    return kb_sync.document_name(record["name"], key)


def stored_source(engine: Engine, pipeline: Any, name: str) -> str:
    """The source the ingest path gives a document submitted as ``name`` (services.uploads)."""
    from .uploads import upload_key

    return pipeline.source_of(engine, upload_key(engine.tenant, name))


def status_detail(engine: Engine, record: Mapping[str, Any], pipeline: Any, identifier: Mapping[str, Any],
                  key: str) -> dict[str, Any]:
    """KnowledgeBaseDocumentDetail of one document of the data source (NOT_FOUND: none)."""
    from . import doc_status

    source = stored_source(engine, pipeline, upload_name(record, key))
    view = doc_status.read(engine, document_id_for_source(source))
    out = {"knowledgeBaseId": record["knowledgeBaseId"], "dataSourceId": record["dataSourceId"],
           "identifier": dict(identifier), "status": "NOT_FOUND"}
    if view is not None:
        out["status"] = kb_sync.DOCUMENT_STATUS[view["state"]]
        out["updatedAt"] = kb_sync.iso(view["updated_at"])
        if view.get("reason"):
            out["statusReason"] = view["reason"]
    return out


def documents(engine: Engine, record: Mapping[str, Any], pipeline: Any, limit: int,
              token: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """KnowledgeBaseDocumentDetail of the data source's documents by source, ``limit`` a page
    after ``token`` (GET /documents' cursor: the last document given, so a page is right whatever
    was added or removed since the one before), and the next page's token (None: the last)."""
    from . import doc_status

    prefix = stored_source(engine, pipeline, upload_name(record, ""))
    try:
        _counts, views, cursor, _more = doc_status.page(engine, prefix, limit, token or "")
    except doc_status.BadCursor:
        raise kb_sync.SyncError("ValidationException", "nextToken is not a token this service returned") from None
    out = []
    for view in views:
        key = view["source"][len(prefix):]
        detail = {"knowledgeBaseId": record["knowledgeBaseId"], "dataSourceId": record["dataSourceId"],
                  "identifier": identifier(record, key), "status": kb_sync.DOCUMENT_STATUS[view["state"]],
                  "updatedAt": kb_sync.iso(view["updated_at"])}
        if view.get("reason"):
            detail["statusReason"] = view["reason"]
        out.append(detail)
    return out, cursor


def identifier(record: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The DocumentIdentifier of the data source's document stored under ``key``."""
    config = record["dataSourceConfiguration"]
    if config["type"] == "S3":
        bucket, _prefix = kb_sync.bucket_of(config)
        return {"dataSourceType": "S3", "s3": {"uri": f"s3://{bucket}/{key}"}}
    return {"dataSourceType": "CUSTOM", "custom": {"id": key}}


def key_of(record: Mapping[str, Any], ident: Mapping[str, Any], tenant: str) -> str:
    """The key under the data source of a DocumentIdentifier (SyncError when it is not one of
    this data source's: another type, or an S3 URI of another bucket)."""
    config = record["dataSourceConfiguration"]
    kind = ident.get("dataSourceType")
    if kind != config["type"]:
        raise kb_sync.SyncError("ValidationException", f"data source {record['dataSourceId']} is of type "
                                f"{config['type']}: identify its documents by {config['type']} identifiers")
    if kind == "CUSTOM":
        if not (ident.get("custom") or {}).get("id"):
            raise kb_sync.SyncError("ValidationException", "a CUSTOM identifier needs custom.id")
        return ident["custom"]["id"]
    return s3_key(record, (ident.get("s3") or {}).get("uri", ""), tenant)


def s3_key(record: Mapping[str, Any], uri: str, tenant: str) -> str:
    """The key of an S3 URI in the data source's bucket, under its prefix and in ``tenant``'s
    area of the bucket (SyncError otherwise)."""
    bucket, prefix = kb_sync.bucket_of(record["dataSourceConfiguration"])
    head = f"s3://{bucket}/"
    if not uri.startswith(head) or len(uri) == len(head):
        raise kb_sync.SyncError("ValidationException", f"{uri[:200]!r} is not an object of the data source's "
                                f"bucket (s3://{bucket}/<key>)")
    key = uri[len(head):]
    kb_sync.check_key(tenant, key, "s3.uri", prefix)
    return key
