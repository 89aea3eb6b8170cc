"""Remove documents: their chunks leave layer 0 and the affected segments are reconciled."""

from __future__ import annotations

from collections.abc import Sequence

from .engine import Engine
from .announce import announce
from .ingest import remove_document_nodes
from .reports import ChangeReport


def resolve(engine: Engine, ref: str) -> list:
    """A document id, or a source key (path / s3 key): the documents it names."""
    doc = engine.graph.get_document(ref)
    if doc is not None:
        return [doc]
    return engine.graph.find_documents(ref)


def remove(engine: Engine, refs: Sequence[str]) -> ChangeReport:
    report = ChangeReport()
    removed: list[tuple[str, int]] = []
    for ref in refs:
        docs = resolve(engine, ref)
        if not docs:
            report.errors.append({"source": ref, "error": "no such document"})
            continue
        for doc in docs:
            removed += remove_document_nodes(engine, doc)
            report.documents_removed += 1
            report.chunks_removed += len(doc.chunk_ids)
    if removed:
        announce(engine, 0, removed=removed, reason="delete")
    engine.vectors.flush()
    return report
