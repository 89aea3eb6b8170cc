"""A document's JSON, as GET /documents/{id} answers it and the MCP tool ``get_document`` returns
it: its fields, chunk ids and ingestion status (services.doc_status). No web framework is
imported here, so the MCP server and the CLI use it without the ``aws`` extra."""

from __future__ import annotations

from ..domain.access import ATTRIBUTE, Caller
from ..services.engine import Engine


def document_body(doc, status: dict | None = None) -> dict:
    """A document's JSON; with ``status`` (services.doc_status.read) its ingestion state
    (received, indexed, summaries_pending, done, failed), the reason of a failure and the times
    it was received and last updated (Unix seconds). ``readers``: who may read it (its access
    list's principals, or ``["*"]``: the whole tenant; domain.access)."""
    from ..domain.access import ATTRIBUTE, readers_of

    body = {"doc_id": doc.doc_id, "source": doc.source, "title": doc.title, "content_hash": doc.content_hash,
            "chunks": len(doc.chunk_ids), "chunk_ids": list(doc.chunk_ids), "status": doc.status,
            "readers": readers_of((doc.metadata or {}).get(ATTRIBUTE))}
    return body if status is None else {**body, **_status_fields(status)}


def _status_fields(status: dict) -> dict:
    out = {"status": status["state"], "received_at": status["received_at"], "updated_at": status["updated_at"]}
    return {**out, "reason": status["reason"]} if "reason" in status else out


def readable(doc, caller: Caller | None) -> bool:
    """Whether ``caller`` (None: the operator) may read the stored document ``doc``; a document
    not stored (None: its access list is not known) is the operator's only: fail closed."""
    if caller is None or caller.everything:
        return True
    return doc is not None and caller.may_read((doc.metadata or {}).get(ATTRIBUTE))


def readable_views(engine: Engine, views: list[dict], caller: Caller | None) -> list[dict]:
    """The status views (GET /documents) of the documents ``caller`` may read, each with its
    document's ``readers`` (as GET /documents/{id} gives them): the page's documents in one
    batched read (at most its ``limit``). A status without a stored document (refused before it
    was stored, or deleted) has no readers and is listed to the operator only: fail closed."""
    from ..domain.access import readers_of

    docs = engine.graph.get_documents(v["doc_id"] for v in views) if views else {}
    out = []
    for v in views:
        doc = docs.get(v["doc_id"])
        if readable(doc, caller):
            out.append(v if doc is None else {**v, "readers": readers_of((doc.metadata or {}).get(ATTRIBUTE))})
    return out


def document_json(engine: Engine, doc_id: str, caller: Caller | None = None) -> dict | None:
    """GET /documents/{id}: the stored document with its status, or (a document refused before it
    was stored: a binary or empty file...) its status alone; None when neither is known. Asked by
    ``caller`` (domain.access; None: the operator), None too for a document it may not read, and
    for one whose access list is not known (a status without a stored document): fail closed."""
    from ..services import doc_status

    doc = engine.graph.get_document(doc_id)
    if not readable(doc, caller):
        return None
    status = doc_status.read(engine, doc_id)
    if doc is not None:
        return document_body(doc, status)
    if status is None:
        return None
    return {"doc_id": doc_id, "source": status["source"], "chunks": 0, "chunk_ids": [], **_status_fields(status)}
