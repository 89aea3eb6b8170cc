"""Ingest documents: chunk, embed, hash into layer-0 buckets, announce the affected layer.

A chunk is embedded with its document's title before it (domain.text.embedding_text: a
continuation chunk keeps its passage's subject); its stored text is its own.

The re-partitioning and summarizing happen in the resummarize service, driven by the
SegmentsAffected message this emits (EraRAG Alg. 3 lines 1-2).

A document's metadata (``SourceDoc.metadata``, domain.filters.check_metadata) is stored on its
record and, with the built-in ``source``, ``doc_id`` and ``title``, in every leaf chunk's vector
meta (``attrs``: ``leaf_meta``), what filtered searches select on. Content that did not change
with attributes (metadata, title) that did is *retagged*: its chunks' stored vectors are
re-upserted with the new attributes (VectorIndex.get_vectors: no embedding, no chunking,
nothing announced, so the summary graph is untouched) and then its record is rewritten."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

import numpy as np

from ..domain.access import ATTRIBUTE as ACCESS, partition_of, placed
from ..domain.filters import MetadataError, check_metadata, chunk_attrs
from ..domain.ids import chunk_id, content_hash, document_id_for_source
from ..domain.lsh import hash_vectors
from ..domain.model import ConflictError, Document, ItemTooLargeError, Node
from ..domain.refusals import reason, reason_of, refused
from ..domain.sequencer import supersedes
from ..domain import tenants
from ..domain.tenants import TenantError
from ..domain.places import place_of
from ..domain.text import chunk_text, embedding_text
from . import changes, followup
from . import doc_status
from .announce import announce
from .placement import partition_index
from .engine import Engine
from .reports import ChangeReport


@dataclass(frozen=True)
class SourceDoc:
    source: str
    text: str
    title: str = ""
    doc_id: str = ""
    meta: dict | None = None
    version: str = ""  # the S3 sequencer of the event that wrote it; "" for a local file
    input_bytes: int = 0  # the bytes of input it was read from (a file, a JSONL line): for progress
    metadata: dict | None = None  # the user's attributes (domain.filters.check_metadata)
    pages: tuple[tuple[int, int], ...] = ()  # where its pages begin in ``text`` (domain.places), if paged

    @property
    def resolved_id(self) -> str:
        return self.doc_id or document_id_for_source(self.source)


Progress = Callable[[int], None]
COMMIT_ATTEMPTS = 8


def _refuse(report: ChangeReport, reasons: dict[str, str], source: str, error: str, why: str) -> None:
    """One document refused: its error entry (the detail) and its status's reason (words)."""
    report.errors.append({"source": source, "error": error})
    reasons[source] = why


def own_metadata(engine: Engine, src: SourceDoc) -> dict | None:
    """A document's metadata without its ``tenant`` attribute, which must name the engine's
    tenant (documents are routed to their tenant's engine before they get here)."""
    if not src.metadata or tenants.ATTRIBUTE not in src.metadata:
        return src.metadata
    named, rest = tenants.resolve(engine.tenant, src.metadata, src.source)
    if named != engine.tenant:
        raise refused(TenantError(f"{src.source}: its metadata names tenant {named!r}, not this store's "
                                  f"({engine.tenant or 'the default tenant'})"), "wrong_tenant", named=repr(named)[:80])
    return rest


def leaf_meta(node: Node, doc: Document, tenant: str = "") -> dict:
    """A leaf chunk's vector meta: its layer and document, its text (the lexical index of a
    store that keeps it beside the vector) and ``attrs``, what a filtered search selects on."""
    return {"layer": 0, "doc_id": doc.doc_id, "text": node.text,
            "attrs": chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title, tenant)}


def moved(old: Document, metadata: Mapping[str, Any]) -> bool:
    """Whether a retag changes the document's access partition (domain.access): its chunks
    then leave their segments and join the new partition's, as a replaced document's do."""
    return partition_of((old.metadata or {}).get(ACCESS)) != partition_of(metadata.get(ACCESS))


def _typed(metadata: Mapping[str, Any]) -> dict[str, tuple]:
    """Metadata compared by type and value: a stored list may come back as a tuple or a number
    as another numeric type, but ``true`` is not ``1``."""
    def key(v: Any) -> tuple:
        if isinstance(v, (list, tuple)):
            return ("list", tuple(v))
        return ("bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number", v)
    return {k: key(v) for k, v in metadata.items()}


def same_attributes(doc: Document, metadata: Mapping[str, Any], title: str) -> bool:
    return doc.title == title and _typed(doc.metadata or {}) == _typed(metadata)


def remove_chunks(engine: Engine, doc: Document, ids: Sequence[str]) -> list[tuple[str, int]]:
    """Take chunks out of the store (the remove act, for some chunks of ``doc``): the remove
    hooks see them first (the entity graph deletes their postings), then their nodes and
    vectors are deleted. Returns the (chunk id, code) pairs that were there, for the
    announcement."""
    ids = list(ids)
    if not ids:
        return []
    for hook in engine.remove_hooks:
        hook(engine, doc, ids)
    codes = {i: n.code for i, n in engine.graph.get_nodes(ids).items()}
    engine.graph.delete_nodes(ids)
    engine.vectors.delete(ids)
    return [(i, codes[i]) for i in ids if i in codes]


def remove_document(engine: Engine, doc: Document) -> list[tuple[str, int]]:
    """Remove a document: its chunks out of the store, then its record deleted. Returns the
    removed (id, code) pairs."""
    removed = remove_chunks(engine, doc, doc.chunk_ids)
    engine.graph.delete_document(doc.doc_id)
    return removed


def _live(doc: Document | None) -> Document | None:
    return doc if doc is not None and not doc.is_tombstone else None


@dataclass
class _Written:
    """The chunks one ingest call wrote for one document (to repair or undo them)."""

    doc: Document
    expected: Document | None
    nodes: list[Node]
    vectors: object
    metas: list[dict]


@dataclass
class _Retag:
    """A document whose content is unchanged and whose attributes are not: the live record
    read (``stored``), what to write in its place, and the vectors re-upserted (to undo them)."""

    src: SourceDoc
    stored: Document
    changes: dict
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def doc(self) -> Document:
        return replace(self.stored, **self.changes)


def _retag_vectors(engine: Engine, retags: Sequence[_Retag]) -> None:
    """Re-upsert the chunks of ``retags`` with their new attributes, from the stored vectors. A
    chunk without a vector is left to reindex (it re-embeds missing vectors, with attrs). A
    chunk whose embedding text a new title changes (domain.text.embedding_text: a continuation
    chunk) is embedded again; its LSH code stays (as services.title_migration keeps it)."""
    ids = [c for r in retags for c in r.stored.chunk_ids]
    vectors = engine.vectors.get_vectors(ids)
    nodes = engine.graph.get_nodes([c for c in ids if c in vectors])
    metas: list[dict] = []
    retitled: list[tuple[int, str]] = []  # (row, the text it is embedded with now)
    for r in retags:
        doc = r.doc
        r.vectors = {c: vectors[c] for c in doc.chunk_ids if c in nodes}
        for c in r.vectors:
            now = embedding_text(doc.title, nodes[c].text)
            if now != embedding_text(r.stored.title, nodes[c].text):
                retitled.append((len(metas), now))
            metas.append(leaf_meta(nodes[c], doc, engine.tenant))
    if metas:
        rows = np.stack([v for r in retags for v in r.vectors.values()])
        if retitled:
            rows[[i for i, _ in retitled]] = engine.embedder.embed([t for _, t in retitled])
        engine.vectors.upsert([c for r in retags for c in r.vectors], rows, metas)


def _undo_retag(engine: Engine, r: _Retag) -> None:
    """A retag that lost to another write: the chunks it re-upserted get the attributes of the
    record that won; those that are gone meanwhile lose the vector it put back."""
    current = _live(engine.graph.get_document(r.stored.doc_id))
    listed = set(current.chunk_ids) if current is not None else set()
    nodes = engine.graph.get_nodes(list(r.vectors))
    keep = [c for c in r.vectors if c in nodes and c in listed]
    if keep:
        engine.vectors.upsert(keep, np.stack([r.vectors[c] for c in keep]),
                              [leaf_meta(nodes[c], current, engine.tenant) for c in keep])
    gone = [c for c in r.vectors if c not in nodes]
    if gone:
        engine.vectors.delete(gone)


def _write_chunks(engine: Engine, nodes: Sequence[Node], vectors, metas: Sequence[dict]) -> None:
    engine.graph.put_nodes(nodes)
    engine.vectors.upsert([n.node_id for n in nodes], vectors, metas)
    for hook in engine.ingest_hooks:
        hook(engine, nodes)


def _commit(engine: Engine, written: _Written, report: ChangeReport
            ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Store the document conditionally on the record this call read; returns the (chunk id,
    code) pairs that are now live and those removed. A lost condition is resolved by version: a newer stored
    record makes this call stale (it undoes the chunks it wrote that the stored document does
    not list); an older one is replaced on the next attempt."""
    doc, expected = written.doc, written.expected
    mine = [n.node_id for n in written.nodes]
    for _ in range(COMMIT_ATTEMPTS):
        try:
            engine.graph.put_document(doc, expected=expected)
        except ConflictError:
            current = engine.graph.get_document(doc.doc_id, include_deleted=True)
            if current is not None and (current.stamp() == doc.stamp()
                                        or not supersedes(doc.version, current.version)):
                keep = set(_live(current).chunk_ids) if _live(current) else set()
                extra = [c for c in mine if c not in keep]
                undone = remove_chunks(engine, doc, extra)
                report.documents_stale += 1
                return [], undone
            expected = current
            continue
        old = _live(expected)
        listed = True
        if old is not None and old.content_hash != doc.content_hash:
            report.documents_replaced += 1
        elif old is None:
            report.documents_added += 1
        elif moved(old, doc.metadata or {}):  # a retag to another access partition: placed anew
            report.documents_retagged += 1
        else:
            listed = False
        if listed:
            report.add_source(doc.source, partition_of((doc.metadata or {}).get(ACCESS)))
        gone = [c for c in (old.chunk_ids if old else ()) if c not in set(mine)]
        if gone:
            now = _live(engine.graph.get_document(doc.doc_id))
            if now is not None and now.stamp() != doc.stamp():  # a newer writer already won
                gone = [c for c in gone if c not in set(now.chunk_ids)]
            gone_codes = remove_chunks(engine, old, gone)
            report.chunks_removed += len(gone)
        # a concurrent stale writer may have deleted chunks this version shares with it
        present = engine.graph.get_nodes(mine)
        lost = [n for n in range(len(mine)) if mine[n] not in present]
        if lost:
            _write_chunks(engine, [written.nodes[n] for n in lost], written.vectors[lost],
                          [written.metas[n] for n in lost])
        return [(n.node_id, n.code) for n in written.nodes], (gone_codes if gone else [])
    raise ConflictError(f"document {doc.doc_id}: {COMMIT_ATTEMPTS} conditional writes lost in a row")


def _begin_followup(engine: Engine, written: list[_Written]) -> str:
    """Record what follows the batch's commits (services.followup) and stamp its documents."""
    gone = {w.doc.doc_id: [c for c in _live(w.expected).chunk_ids if c not in set(w.doc.chunk_ids)]
            for w in written if _live(w.expected) is not None}
    nodes = engine.graph.get_nodes([c for ids in gone.values() for c in ids])
    token = followup.begin(engine, {d: [(c, nodes[c].code) for c in ids if c in nodes] for d, ids in gone.items()},
                           [w.doc for w in written])
    for w in written:
        w.doc = followup.stamped(w.doc, token)
    return token


def _restamp(engine: Engine, stored: Document, version: str, **changes: Any) -> tuple[str, Document | None]:
    """Record a newer version of unchanged content, or (``changes``: metadata, title) its new
    attributes. Returns ("done", the record written over), ("stale", None) when a record this
    version does not supersede won meanwhile, or ("ingest", current) when other content (or a
    tombstone) won meanwhile that this newer version must replace."""
    for _ in range(COMMIT_ATTEMPTS):
        try:
            engine.graph.put_document(replace(stored, version=version, **changes), expected=stored)
            return "done", stored  # the record written over
        except ConflictError:
            current = engine.graph.get_document(stored.doc_id, include_deleted=True)
            if current is not None and not supersedes(version, current.version):
                return "stale", None
            if current is None or current.is_tombstone or current.content_hash != stored.content_hash:
                return "ingest", current
            stored = current
    raise ConflictError(f"document {stored.doc_id}: {COMMIT_ATTEMPTS} conditional writes lost in a row")


def batches(docs: Iterable[SourceDoc], size: int, again: list[SourceDoc] | None = None
            ) -> Iterator[list[SourceDoc]]:
    """Consecutive lists of at most ``size`` documents, drawn from ``docs`` as they are needed;
    the documents put in ``again`` meanwhile come first in the next list."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    stream = iter(docs)
    again = [] if again is None else again
    while True:
        batch = again[:size]
        del again[:size]
        batch += islice(stream, size - len(batch))
        if not batch:
            return
        yield batch


def _commit_retags(engine: Engine, retags: Sequence[_Retag], report: ChangeReport, again: list[SourceDoc]) -> None:
    """Rewrite the records of retagged documents (their vectors are flushed). One that lost to
    other content its newer version must replace goes back in ``again`` (ingested in full)."""
    for r in retags:
        outcome, over = _restamp(engine, r.stored, r.changes["version"],
                                 **{k: v for k, v in r.changes.items() if k != "version"})
        if outcome == "done":
            report.documents_retagged += 1
            report.add_source(r.src.source, partition_of((r.changes.get("metadata") or {}).get(ACCESS)))
            if over is not r.stored:  # written over a record that changed since the vectors were: again
                _retag_vectors(engine, [replace(r, stored=over)])
            continue
        _undo_retag(engine, r)
        if outcome == "stale":
            report.documents_stale += 1
        else:
            again.append(r.src)


def ingest(engine: Engine, docs: Iterable[SourceDoc], progress: Progress | None = None,
           batch_docs: int = 256) -> ChangeReport:
    """Add or replace documents. Unchanged documents (same id, same content) are skipped, and
    so is a document whose stored record (or tombstone) has a version this one does not
    supersede (an S3 event older than the one already applied). Unchanged content with new
    attributes (metadata, title) is retagged (see the module), also at the stored version (a
    refresh: an S3 sidecar's event re-reads its document at the version stored).

    ``docs`` may be any iterable, e.g. a lazy reader (services.sources.iter_sources): it is
    consumed ``batch_docs`` documents at a time, and each batch is chunked, embedded, written
    and announced before the next is drawn, so memory holds one batch, not the corpus.

    The chunks are written first and their vectors flushed (a committed document's vectors are
    durable, so a rerun that finds it unchanged lacks nothing); the document is written last,
    conditionally on the record read at the start (GraphStore.put_document ``expected``): of
    two concurrent ingests of one document exactly one wins and the other undoes its extra
    chunks or retries. A retag follows the same order (vectors with the new attributes, then
    the record), so a rerun after a crash between the two finds the old attributes and retags
    again."""
    started = time.perf_counter()
    report = ChangeReport()
    lsh = engine.lsh()
    settings = engine.settings
    added_ids: list[tuple[str, int]] = []
    removed_ids: list[tuple[str, int]] = []
    redone: dict[str, set[str]] = {}  # follow-up token -> documents whose follow-up this call redid
    again: list[SourceDoc] = []  # retags that must be ingested in full after all (drawn first)
    ending: str | None = None  # a finished batch's follow-up token, ended before the next batch reads
    for batch in batches(docs, batch_docs, again):
        if ending:
            followup.end(engine, ending)
            ending = None
        pending: list[tuple[SourceDoc, str, list, Document | None, dict]] = []
        retags: list[_Retag] = []
        errors_before = len(report.errors)
        reasons: dict[str, str] = {}  # source -> the reason its failed status records
        seen: set[str] = set()
        for src in batch:
            doc_id = src.resolved_id
            digest = content_hash(src.text)
            if doc_id in seen:
                _refuse(report, reasons, src.source, f"duplicate document id {doc_id} in batch", reason("duplicate"))
                continue
            seen.add(doc_id)
            try:
                metadata = check_metadata(own_metadata(engine, src))
            except (MetadataError, TenantError) as exc:
                _refuse(report, reasons, src.source, str(exc), reason_of(exc))
                continue
            stored = engine.graph.get_document(doc_id, include_deleted=True)
            old = _live(stored)
            same = old is not None and old.content_hash == digest
            retag = same and not same_attributes(old, metadata, src.title)
            relocate = retag and moved(old, metadata)
            if relocate:  # another access partition: its chunks are placed anew, in full
                same = retag = False
            if same and old.version == src.version:
                todo = followup.pending(engine, old)
                if todo is not None:  # this very write died before its follow-up: redo it
                    redone.setdefault(followup.token_of(old), set()).add(doc_id)
                    remove_chunks(engine, old, [i for i, _ in todo])
                    removed_ids += todo
                    added_ids += [(i, n.code) for i, n in engine.graph.get_nodes(old.chunk_ids).items()]
                    if not retag:
                        report.documents_unchanged += 1
                        continue
            if (stored is not None and src.version and not supersedes(src.version, stored.version)
                    and not ((retag or relocate) and old.version == src.version)):
                report.documents_stale += 1
                continue
            if retag:
                item = _Retag(src, old, {"version": src.version or old.version, "metadata": metadata,
                                         "title": src.title})
                try:
                    engine.graph.check_fits(item.doc)
                except ItemTooLargeError as exc:
                    _refuse(report, reasons, src.source, str(exc), reason_of(exc))
                    continue
                retags.append(item)
                continue
            if same:
                outcome = "done"
                if src.version and src.version != old.version:
                    outcome, stored = _restamp(engine, old, src.version)
                if outcome != "ingest":
                    report.documents_stale += outcome == "stale"
                    report.documents_unchanged += outcome == "done"
                    continue
            pieces = chunk_text(src.text, engine.tokenizer.offsets, settings.chunk_tokens, settings.chunk_overlap)
            pending.append((src, digest, pieces, stored, metadata))
        texts = [embedding_text(src.title, p.text) for src, _, pieces, _, _ in pending for p in pieces]
        vectors = engine.embedder.embed(texts) if texts else None
        codes = hash_vectors(lsh, vectors) if texts else []
        indexes: dict[str, int] = {}  # partition key -> its index (services.placement), this batch
        nodes: list[Node] = []
        metas: list[dict] = []
        written: list[_Written] = []
        rows: list[int] = []  # the rows of ``vectors`` kept (a document that cannot be stored is not)
        row = 0
        for src, digest, pieces, stored, metadata in pending:
            doc_id = src.resolved_id
            access = metadata.get(ACCESS)
            key, index = partition_of(access), partition_index(engine, access, indexes)
            mine = [Node(node_id=chunk_id(doc_id, piece.index, piece.text, key), layer=0, text=piece.text,
                         tokens=piece.tokens, code=placed(codes[row + n], index, lsh.n_planes), doc_id=doc_id,
                         source=src.source, place=place_of(piece.start, piece.end, src.pages))
                    for n, piece in enumerate(pieces)]
            span = list(range(row, row + len(pieces)))
            row += len(pieces)
            doc = Document(doc_id=doc_id, source=src.source, content_hash=digest, title=src.title,
                           chunk_ids=tuple(n.node_id for n in mine), meta=dict(src.meta or {}),
                           version=src.version, metadata=metadata)
            try:
                engine.graph.check_fits(doc, mine)  # refused whole, before any of it is written
            except ItemTooLargeError as exc:
                _refuse(report, reasons, src.source, str(exc), reason_of(exc))
                continue
            mine_metas = [leaf_meta(n, doc, engine.tenant) for n in mine]
            nodes += mine
            metas += mine_metas
            written.append(_Written(doc, stored, mine, vectors[span] if texts else vectors, mine_metas))
            rows += span
        if texts and len(rows) < len(texts):
            vectors = vectors[rows]
        if retags:
            _retag_vectors(engine, retags)
        if nodes:
            _write_chunks(engine, nodes, vectors, metas)
        if nodes or retags:
            engine.vectors.flush()  # durable before any document that lists them is committed
        token = _begin_followup(engine, written) if written else None
        committed: list[tuple[Document, list[tuple[str, int]]]] = []
        for item in written:
            live, gone = _commit(engine, item, report)
            if live or not item.nodes:
                committed.append((item.doc, live))
            added_ids += live
            removed_ids += gone
            report.chunks_added += len(live)
        _commit_retags(engine, retags, report, again)
        if added_ids or removed_ids:  # per batch: a message names one batch's chunks, never the corpus's
            announce(engine, 0, added=added_ids, removed=removed_ids, reason="ingest")
            added_ids, removed_ids = [], []
        for doc, live in committed:  # after the announcement: its shards' markers are set
            doc_status.record_indexed(engine, doc.doc_id, doc.source, (code for _, code in live), doc.content_hash)
        doc_status.record_failures(engine, report.errors[errors_before:],
                                   {src.source: src.resolved_id for src in batch}, reasons)
        engine.vectors.flush()  # the removed chunks' deletes, before the record that redoes them goes
        ending = token  # its record goes before the next batch, or with the change record
        for earlier in [t for t, ids in redone.items() if followup.settle(engine, t, ids)]:
            del redone[earlier]
        if progress:
            progress(len(batch) - len(again))  # a document put back counts when it is ingested
    engine.vectors.flush()
    changes.record_documents(engine, "ingest", report, time.perf_counter() - started,
                             done=[followup.PREFIX + ending] if ending else [])
    return report
