"""Remove documents: their chunks leave layer 0 and the affected segments are reconciled.

A versioned removal (an S3 delete event with its ``sequencer``) leaves a tombstone in place of
the document: its source and version, so that an older put of the same key delivered later is
recognized as stale (services.ingest). It is written conditionally on the record it replaces,
and written even when there is no document yet (the delete overtook the put it follows)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..domain.access import ATTRIBUTE as ACCESS, partition_of
from ..domain.ids import document_id_for_source
from ..domain.model import DELETED, ConflictError, Document
from ..domain.sequencer import supersedes
from . import changes, doc_status
from . import followup
from .engine import Engine
from .announce import announce
from .ingest import COMMIT_ATTEMPTS, remove_chunks, remove_document
from .reports import ChangeReport


def resolve(engine: Engine, ref: str) -> list:
    """A document id, or a source key (path / s3 key): the documents it names."""
    doc = engine.graph.get_document(ref)
    if doc is not None:
        return [doc]
    return engine.graph.find_documents(ref)


def tombstone(source: str, doc_id: str, version: str, now: float | None = None) -> Document:
    return Document(doc_id=doc_id, source=source, content_hash="", status=DELETED, version=version,
                    meta={"deleted_at": round(time.time() if now is None else now, 3)})


def remove_versioned(engine: Engine, source: str, version: str, report: ChangeReport,
                     tokens: list[str]) -> list[tuple[str, int]]:
    """Replace the documents of ``source`` by tombstones of ``version`` unless their stored
    version is newer; returns the removed (chunk id, code) pairs. The follow-up records
    (services.followup) this writes are appended to ``tokens``, to end after the announce."""
    doc_ids = {d.doc_id for d in engine.graph.find_documents(source)} | {document_id_for_source(source)}
    removed: list[tuple[str, int]] = []
    for doc_id in sorted(doc_ids):
        for _ in range(COMMIT_ATTEMPTS):
            stored = engine.graph.get_document(doc_id, include_deleted=True)
            todo = followup.pending(engine, stored) if stored is not None and stored.is_tombstone \
                and stored.source == source and stored.version == version else None
            if todo is not None:  # this very remove died before its follow-up: redo it
                remove_chunks(engine, stored, [i for i, _ in todo])
                removed += todo
                tokens.append(followup.token_of(stored))  # a remove's record names this document alone
                break
            if stored is not None and (stored.source != source or not supersedes(version, stored.version)):
                report.documents_stale += stored.source == source
                break
            dead = tombstone(source, doc_id, version)
            if stored is not None and not stored.is_tombstone:
                codes = engine.graph.get_nodes(stored.chunk_ids)
                tokens.append(followup.begin(engine, {doc_id: [(c, codes[c].code) for c in stored.chunk_ids
                                                               if c in codes]}, [dead]))
                dead = followup.stamped(dead, tokens[-1])
            try:
                engine.graph.put_document(dead, expected=stored)
            except ConflictError:
                continue
            doc_status.delete(engine, doc_id)
            if stored is not None and not stored.is_tombstone:
                removed += remove_chunks(engine, stored, stored.chunk_ids)
                report.documents_removed += 1
                report.add_source(source, partition_of((stored.metadata or {}).get(ACCESS)))
                report.chunks_removed += len(stored.chunk_ids)
            break
        else:
            raise ConflictError(f"document {doc_id}: {COMMIT_ATTEMPTS} conditional writes lost in a row")
    return removed


def remove(engine: Engine, refs: Sequence[str], version: str = "") -> ChangeReport:
    """Remove documents by id or source. With ``version`` (an S3 sequencer) each ref is a
    source key and the removal is versioned (see the module docstring)."""
    started = time.perf_counter()
    report = ChangeReport()
    removed: list[tuple[str, int]] = []
    tokens: list[str] = []
    for ref in refs:
        if version:
            removed += remove_versioned(engine, ref, version, report, tokens)
            continue
        docs = resolve(engine, ref)
        if not docs:
            report.errors.append({"source": ref, "error": "no such document"})
            continue
        for doc in docs:
            removed += remove_document(engine, doc)
            doc_status.delete(engine, doc.doc_id)
            report.documents_removed += 1
            report.add_source(doc.source, partition_of((doc.metadata or {}).get(ACCESS)))
            report.chunks_removed += len(doc.chunk_ids)
    if removed:
        announce(engine, 0, removed=removed, reason="delete")
    engine.vectors.flush()  # the deletes are durable before the records that would redo them go
    # the follow-up records end in the change record's write (one request)
    changes.record_documents(engine, "remove", report, time.perf_counter() - started,
                             done=[followup.PREFIX + token for token in tokens])
    return report
