"""Ingest documents: chunk, embed, hash into layer-0 buckets, announce the affected layer.

The re-partitioning and summarizing happen in the resummarize service, driven by the
SegmentsAffected message this emits (EraRAG Alg. 3 lines 1-2)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..domain.ids import chunk_id, content_hash, document_id_for_source
from ..domain.lsh import hash_vectors
from ..domain.model import Document, Node, SegmentsAffected
from ..domain.text import chunk_text
from .engine import Engine
from .reports import ChangeReport


@dataclass(frozen=True)
class SourceDoc:
    source: str
    text: str
    title: str = ""
    doc_id: str = ""
    meta: dict | None = None

    @property
    def resolved_id(self) -> str:
        return self.doc_id or document_id_for_source(self.source)


Progress = Callable[[int], None]


def remove_document_nodes(engine: Engine, doc: Document) -> list[str]:
    """Delete a document's chunks from the graph store and the vector index; hooks see them
    first (the entity graph drops their postings). Returns the removed chunk ids."""
    ids = list(doc.chunk_ids)
    for hook in engine.extras.get("remove_hooks", ()):
        hook(engine, doc, ids)
    engine.graph.delete_nodes(ids)
    engine.vectors.delete(ids)
    engine.graph.delete_document(doc.doc_id)
    return ids


def ingest(engine: Engine, docs: Sequence[SourceDoc], progress: Progress | None = None,
           batch_docs: int = 256) -> ChangeReport:
    """Add or replace documents. Unchanged documents (same id, same content) are skipped."""
    report = ChangeReport()
    lsh = engine.lsh()
    settings = engine.settings
    added_ids: list[str] = []
    removed_ids: list[str] = []
    for start in range(0, len(docs), batch_docs):
        batch = docs[start : start + batch_docs]
        pending: list[tuple[SourceDoc, str, list]] = []
        seen: set[str] = set()
        for src in batch:
            doc_id = src.resolved_id
            digest = content_hash(src.text)
            if doc_id in seen:
                report.errors.append({"source": src.source, "error": f"duplicate document id {doc_id} in batch"})
                continue
            seen.add(doc_id)
            old = engine.graph.get_document(doc_id)
            if old is not None and old.content_hash == digest:
                report.documents_unchanged += 1
                continue
            if old is not None:
                removed_ids += remove_document_nodes(engine, old)
                report.chunks_removed += len(old.chunk_ids)
                report.documents_replaced += 1
            else:
                report.documents_added += 1
            pieces = chunk_text(src.text, engine.tokenizer.offsets, settings.chunk_tokens, settings.chunk_overlap)
            pending.append((src, digest, pieces))
        texts = [p.text for _, _, pieces in pending for p in pieces]
        vectors = engine.embedder.embed(texts) if texts else None
        codes = hash_vectors(lsh, vectors) if texts else []
        nodes: list[Node] = []
        metas = []
        row = 0
        documents = []
        for src, digest, pieces in pending:
            doc_id = src.resolved_id
            ids = []
            for piece in pieces:
                node = Node(
                    node_id=chunk_id(doc_id, piece.index, piece.text),
                    layer=0,
                    text=piece.text,
                    tokens=piece.tokens,
                    code=codes[row],
                    doc_id=doc_id,
                    source=src.source,
                )
                row += 1
                nodes.append(node)
                metas.append({"layer": 0, "doc_id": doc_id, "text": piece.text})
                ids.append(node.node_id)
            documents.append(Document(doc_id=doc_id, source=src.source, content_hash=digest,
                                      title=src.title, chunk_ids=tuple(ids), meta=dict(src.meta or {})))
        if nodes:
            engine.graph.put_nodes(nodes)
            engine.vectors.upsert([n.node_id for n in nodes], vectors, metas)
            for hook in engine.extras.get("ingest_hooks", ()):
                hook(engine, nodes)
        for doc in documents:
            engine.graph.put_document(doc)
        added_ids += [n.node_id for n in nodes]
        report.chunks_added += len(nodes)
        if progress:
            progress(len(batch))
    if added_ids or removed_ids:
        announce(engine, SegmentsAffected(layer=0, added=tuple(added_ids), removed=tuple(removed_ids),
                                          reason="ingest"))
    engine.vectors.flush()
    return report


def announce(engine: Engine, message: SegmentsAffected, now: float | None = None) -> None:
    """Mark the layer dirty (so a lost message is found again by reindex) and send."""
    import time

    engine.graph.put_meta(f"dirty:{message.layer}", now if now is not None else time.time())
    engine.queue.send([message])
