"""Reindex: audit the store, repair drift, verify the invariants, report (the scheduled Lambda
and ``eragraph reindex`` run this same function).

1. Layer counters (after migrating a store whose ref index has an earlier layout, where the
   store has versioned layouts: adapters.aws.ref_layout): each layer's live refs are recounted and a counter that drifted (two
   writers of one new node both counted it; a writer died between its refs and its count) is
   rewritten, the counters of layers without nodes removed (GraphStore.repair_layer_counts);
   a store whose document statuses predate their counters has them counted once.
   First, as the other steps find the layers and size the reconciles from the counters.
2. Documents ⇄ chunks: layer-0 nodes that no document lists (an ingest that died between
   writing chunks and the document) are removed; documents that list missing chunks are
   removed with their remaining chunks, so a re-upload ingests them afresh (reported by id).
   Paged (documents, then layer-0 refs, a page at a time), like the vector audit (5).
3. Outbox entries of region writes whose consumer died before finishing (summary vectors,
   removed summaries, the announce one layer up) are finished (resummarize.finish_outbox), and
   ingest follow-up records older than ``stuck_after`` are dropped (services.followup: the
   audits here repair what they would have).
   Dirty layers whose marker is older than ``stuck_after`` seconds (a consumer died mid-way, or
   its message was lost) are re-announced (services.resummarize.requeue_dirty).
4. Every layer whose stored segments differ from the partition of its current nodes (segments
   out of bounds after deletes, segments naming gone nodes, missing or orphan summaries), or
   that holds part of a region apply that stopped between its writes (an ``applying:`` mark,
   see adapters.aws.nodes_dynamodb), is reconciled, bottom-up. Layers marked dirty more recently
   than ``stuck_after`` are being worked on by a consumer and are left to it.
5. Graph store ⇄ vector index: live nodes without a vector are re-embedded from their text
   (a leaf chunk's meta with its document's attributes, as ingest writes it); vectors of no
   live node are deleted.
6. Chunks ⇄ entity graph (when the engine has one, services.entity_index): a live chunk with
   no entity records is extracted again; the records of a chunk that is gone are removed; the
   shared counts (frequencies, co-occurrences, ...) are recounted from the per-chunk records
   and rewritten where they drifted (EntityStore.repair_counts); the entity vector index is
   made to hold exactly the names of the live entities (and, with sentence vectors, their
   sentences): missing ones are embedded, orphans deleted.
7. The lexical (BM25) index of a store built before it existed is built from the leaves, and
   the leaf vectors of a store built before metadata filters get their attributes (the
   ``leaf_attrs`` meta mark says a store's leaves carry them: set when a store is created).
   A store whose nodes predate access lists gets every node's ``readers`` (services.readers_backfill:
   paged, resumable, from each document's access list or the whole tenant when it has none, a
   summary's from its partition), then is marked: until then a caller's view does not see them.
8. A store whose entities predate the synonymy edges gets them (services.synonyms.backfill):
   every entity searched once, a page of entities at a time, resumable, marked done.
9. Where the entity graph keeps a snapshot for cold readers (AWS: adapters/aws/entity_snapshot_s3,
   one S3 object per tenant), it is brought up to date and written (``entity_snapshot``), after
   every repair above. A store without one (local, memory) skips it.
10. The graph invariants (services.invariants) are checked and reported.

``run`` takes the steps in this order, except that the entity audit (6) runs right after the
documents (2), before anything is re-announced. Everything found and repaired is counted in
the report's ``metrics`` (the reindex Lambda
publishes them with powertools Metrics).

With ``drain`` (the local profile, whose queue is in-process) the announced messages are
delivered before the vector audit; on AWS the summarize consumers pick them up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..domain.access import max_code
from ..domain.audit import AuditProgress
from ..domain.diff import diff_segments
from ..domain.model import APPLYING, BadInputError
from ..domain.text import embedding_text
from . import followup, invariants, readers_backfill, synonyms
from .engine import Engine
from .announce import announce
from .engine import LEAF_ATTRS
from .ingest import leaf_meta, remove_document
from .ref_pages import live_id_pages, ref_pages
from .resummarize import drain as drain_queue
from .resummarize import finish_outbox, reconcile, requeue_dirty, target_segments


REF_PAGE = 1000  # refs per page of the paged vector audit


def _layers(engine: Engine) -> list[int]:
    sizes = engine.graph.layer_sizes()
    top = max(sizes) if sizes else 0
    return list(range(0, top + 1))


def repair_counts(engine: Engine, report: dict) -> None:
    migrate = getattr(engine.graph, "migrate_ref_layout", None)  # a store with a versioned layout
    if migrate is not None:
        report["layers_migrated"] = sorted(migrate()["moved"])
    count_statuses = getattr(engine.graph, "migrate_status_counters", None)  # statuses from before their counters
    if count_statuses is not None:
        report["statuses_counted"] = count_statuses()
    fixed = engine.graph.repair_layer_counts()
    report["layer_counts_repaired"] = [{"layer": layer, "correction": n} for layer, n in sorted(fixed.items())]


Cursor = tuple[int, int, str]  # where a paged step stopped (the last ref it looked at, in the vector step)


def _never() -> bool:
    return False


DOC_PAGE = 256  # documents (and layer-0 refs) per page of the document audit


def audit_documents(engine: Engine, report: dict, cursor: Cursor | None = None,
                    out_of_time: Callable[[], bool] = _never, page: int | None = None) -> Cursor | None:
    """Documents ⇄ chunks, a page at a time, never the whole store at once. First the
    documents (DocumentStore.documents_page): one listing a chunk that is gone is removed with
    its remaining chunks (a re-upload ingests it afresh), and the live ones are counted, to
    repair the store's document counter when the listing ends. Then the layer-0 refs, in code
    order: a chunk whose document does not list it (or is gone) is removed. The cursor:
    ``(-1, documents counted, the listing's cursor)`` in the first part, ``(0, code, node id)``
    of the last ref looked at in the second; returned when ``out_of_time()`` after a page,
    None when done."""
    page = page or DOC_PAGE
    report["orphan_chunks_removed"] = report.get("orphan_chunks_removed", 0)
    report.setdefault("incomplete_documents_removed", [])
    removed: list[tuple[str, int]] = []
    phase, counted, after = cursor if cursor is not None else (-1, 0, "")
    try:
        while phase == -1:
            docs, after = engine.graph.documents_page(after or None, page)
            counted += len(docs)
            nodes = engine.graph.get_nodes(c for d in docs for c in d.chunk_ids)
            for doc in docs:
                if any(c not in nodes for c in doc.chunk_ids):
                    removed += [(c, code) for c, code in remove_document(engine, doc) if c in nodes]
                    report["incomplete_documents_removed"].append(doc.doc_id)
            if after is None:
                repair = getattr(engine.graph, "repair_document_count", None)  # a store with a counter
                if repair is not None:
                    report["document_count_correction"] = repair(counted)
                phase, counted, after = 0, 0, ""
            if out_of_time():
                return (phase, counted, after or "")
        return _orphan_chunks(engine, report, counted, after, out_of_time, page, removed)
    finally:
        if removed:
            announce(engine, 0, removed=removed, reason="reindex:documents")


def _orphan_chunks(engine: Engine, report: dict, code: int, last: str, out_of_time: Callable[[], bool],
                   page: int, removed: list[tuple[str, int]]) -> Cursor | None:
    """The second part of audit_documents: layer-0 refs from (code, last) on, a page at a time."""
    hi = max_code()  # every access partition's codes (domain.access.placed)
    for fresh, (code, last), done in ref_pages(engine.graph, 0, hi, (code, last), page):
        live = {r.node_id: r.code for r in fresh if r.live}
        nodes = engine.graph.get_nodes(live)
        docs = {d: engine.graph.get_document(d) for d in {n.doc_id for n in nodes.values()}}
        orphans = [i for i in live if i not in nodes or docs[nodes[i].doc_id] is None
                   or i not in docs[nodes[i].doc_id].chunk_ids]
        if orphans:  # an ingest writes its chunks before its document: look again before deleting
            again = {d: engine.graph.get_document(d) for d in {nodes[i].doc_id for i in orphans if i in nodes}}
            orphans = [i for i in orphans if i not in nodes or again[nodes[i].doc_id] is None
                       or i not in again[nodes[i].doc_id].chunk_ids]
        if orphans:
            engine.graph.delete_nodes(orphans)
            engine.vectors.delete(orphans)
            removed += [(i, live[i]) for i in orphans]
            report["orphan_chunks_removed"] += len(orphans)
        if done:
            return None
        if out_of_time():
            return (0, code, last)
    return None


def repair_layers(engine: Engine, stuck_after: float, now: float, report: dict) -> None:
    busy = set()
    for key in engine.graph.meta_keys("dirty:"):
        stamp = engine.graph.get_meta(key)
        if stamp is not None and now - float(stamp) < stuck_after:
            busy.add(int(key.split(":")[1]))
    repaired, out_of_bounds = [], []
    s = engine.settings
    for layer in _layers(engine):
        if layer in busy:
            continue
        old = engine.graph.get_segments(layer)
        new = target_segments(engine, layer)
        if any(not s.s_min <= len(seg.members) <= s.s_max for seg in old):
            out_of_bounds.append(layer)
        above = {r.node_id for r in engine.graph.layer_refs(layer + 1)}
        wanted = {seg.summary_id for seg in new}
        unfinished = engine.graph.meta_keys(f"{APPLYING}{layer}:")  # refs may disagree with segments
        if diff_segments(old, new).changed or above != wanted or unfinished:
            changes = reconcile(engine, layer)
            repaired.append({"layer": layer,
                             "segments_resummarized": sum(changes.segments_resummarized.values()),
                             "summaries_removed": sum(changes.summaries_removed.values())})
    report["layers_in_progress"] = sorted(busy)
    report["layers_with_out_of_bounds_segments"] = out_of_bounds
    report["layers_repaired"] = repaired


def _reembed(engine: Engine, node_ids: list[str]) -> None:
    """Embed the stored text of ``node_ids`` again and upsert their vectors (a leaf chunk's
    text with its document's title as ingest embeds it, domain.text.embedding_text, and its
    meta with the document's attributes, as ingest writes it)."""
    for start in range(0, len(node_ids), 256):
        nodes = engine.graph.get_nodes(node_ids[start:start + 256])
        batch = [nodes[i] for i in node_ids[start:start + 256] if i in nodes]
        if batch:
            docs = {d: engine.graph.get_document(d) for d in {n.doc_id for n in batch if n.layer == 0}}
            vectors = engine.embedder.embed([embedding_text(docs[n.doc_id].title, n.text)
                                             if n.layer == 0 and docs[n.doc_id] is not None else n.text for n in batch])
            engine.vectors.upsert([n.node_id for n in batch], vectors,
                                  [leaf_meta(n, docs[n.doc_id], engine.tenant) if n.layer == 0 and docs[n.doc_id] is not None
                                   else {"layer": n.layer, "doc_id": n.doc_id} for n in batch])


def reembed_missing(engine: Engine, report: dict, cursor: Cursor | None = None,
                    out_of_time: Callable[[], bool] = _never, page: int | None = None) -> Cursor | None:
    """Live nodes without a vector are re-embedded, a page of refs at a time in (layer, code,
    node id) order (GraphStore.prefix_refs: one range read per page, never a whole layer),
    asking the index for that page's vectors only. After each page, when ``out_of_time()``,
    returns the cursor to resume after (the pages before it are done, the page after it is
    untouched); None when every layer is done."""
    report["vectors_missing_reembedded"] = report.get("vectors_missing_reembedded", 0)
    hi = max_code()  # every access partition's codes (domain.access.placed)
    for live, resume in live_id_pages(engine.graph, _layers(engine)[-1], hi, cursor, page or REF_PAGE):
        present = engine.vectors.get_vectors(live) if live else {}
        missing = [i for i in live if i not in present]
        _reembed(engine, missing)
        report["vectors_missing_reembedded"] += len(missing)
        if resume is not None and out_of_time():
            engine.vectors.flush()
            return resume
    engine.vectors.flush()
    return None


def delete_orphan_vectors(engine: Engine, report: dict) -> None:
    """Vectors of no live node are deleted (reads every live id and every indexed id)."""
    live: set[str] = set()
    for layer in _layers(engine):
        live |= {r.node_id for r in engine.graph.layer_refs(layer)}
    orphans = sorted(engine.vectors.ids() - live)
    if orphans:
        engine.vectors.delete(orphans)
    engine.vectors.flush()
    report["vectors_orphaned_deleted"] = len(orphans)


def audit_vectors(engine: Engine, report: dict) -> None:
    """Graph store and vector index agree: missing vectors re-embedded, orphans deleted."""
    report.pop("vectors_missing_reembedded", None)
    reembed_missing(engine, report)
    delete_orphan_vectors(engine, report)


def audit_entities(engine: Engine, report: dict, batch: int = 256) -> None:
    from .entity_index import ENTITY_LAYER, SENTENCE_LAYER, entity_vector_id

    keys = ("entity_chunks_reextracted", "entity_chunks_orphaned_removed", "entity_vectors_reembedded",
            "entity_vectors_orphaned_deleted")
    for key in keys:
        report[key] = 0
    report["entity_counts_repaired"] = {}
    index = engine.entities
    if index is None:
        return
    store = index.store
    live = {r.node_id for r in engine.graph.layer_refs(0)}
    recorded = store.chunk_ids()
    leftover = sorted(recorded - live)
    if leftover:
        index.delete_chunks(leftover)
    missing = sorted(live - recorded)
    for start in range(0, len(missing), batch):
        nodes = engine.graph.get_nodes(missing[start:start + batch])
        index.add_nodes([nodes[i] for i in missing[start:start + batch] if i in nodes])
    report["entity_chunks_orphaned_removed"] = len(leftover)
    report["entity_chunks_reextracted"] = len(missing)
    report["entity_counts_repaired"] = {k: v for k, v in store.repair_counts().items() if v}
    graph = store.export()
    wanted = {entity_vector_id(e): e for e in graph.entities}
    sentences = set(graph.sentences) if index.embed_sentences else set()
    indexed = index.vectors.ids()
    absent = sorted((set(wanted) | sentences) - indexed)
    orphans = sorted(indexed - set(wanted) - sentences)
    names = [i for i in absent if i in wanted]
    texts = [wanted[i] for i in names]
    metas = [{"layer": ENTITY_LAYER, "doc_id": ""} for _ in names]
    sentence_ids = [i for i in absent if i not in wanted]
    found = store.get_sentences(sentence_ids)
    owners = engine.graph.get_nodes({s.chunk_id for s in found.values()})
    for sid in sentence_ids:
        if sid in found:
            names.append(sid)
            texts.append(found[sid].text)
            owner = owners.get(found[sid].chunk_id)
            metas.append({"layer": SENTENCE_LAYER, "doc_id": owner.doc_id if owner else ""})
    for start in range(0, len(names), batch):
        part = slice(start, start + batch)
        index.vectors.upsert(names[part], engine.embedder.embed(texts[part]), metas[part])
    if orphans:
        index.vectors.delete(orphans)
    index.vectors.flush()
    report["entity_vectors_reembedded"] = len(names)
    report["entity_vectors_orphaned_deleted"] = len(orphans)


def audit_lexical(engine: Engine, report: dict) -> None:
    """A store built before the lexical index existed gets it, from its leaf chunks."""
    report["lexical_index_built"] = 0
    lexical = engine.lexical
    if lexical is None or lexical.ready():
        return
    refs = [r.node_id for r in engine.graph.layer_refs(0)]
    nodes = []
    for start in range(0, len(refs), 1000):
        nodes += list(engine.graph.get_nodes(refs[start:start + 1000]).values())
    report["lexical_index_built"] = lexical.rebuild(nodes)


def audit_attributes(engine: Engine, report: dict, batch: int = 256) -> None:
    """A store built before metadata filters: every leaf vector is re-upserted with its
    document's attributes (from the stored vector: nothing is embedded), then the store is
    marked. Until then no filter matches its leaves (queries say so)."""
    report["leaf_attributes_added"] = 0
    if engine.graph.get_meta(LEAF_ATTRS) is not None:
        return
    docs = [d for d in engine.graph.list_documents() if d.chunk_ids]
    for start in range(0, len(docs), batch):
        part = docs[start:start + batch]
        ids = [c for d in part for c in d.chunk_ids]
        vectors = engine.vectors.get_vectors(ids)
        nodes = engine.graph.get_nodes([c for c in ids if c in vectors])
        rows = [(c, d) for d in part for c in d.chunk_ids if c in nodes]
        if rows:
            engine.vectors.upsert([c for c, _ in rows], np.stack([vectors[c] for c, _ in rows]),
                                  [leaf_meta(nodes[c], d, engine.tenant) for c, d in rows])
            report["leaf_attributes_added"] += len(rows)
    engine.vectors.flush()
    engine.graph.put_meta(LEAF_ATTRS, 1)


def _steps(engine: Engine, stuck_after: float, drain: bool, now: float, report: dict) -> list[tuple[str, Callable]]:
    """The audit in order, each step ``(name, fn(cursor, out_of_time) -> cursor | None)``; the
    document and vector steps are paged (they return a cursor when they stop early), the others
    run whole."""
    def whole(fn: Callable[[], None]) -> Callable:
        return lambda cursor, out_of_time: fn()

    def outboxes() -> None:
        report["outboxes_finished"] = sum(finish_outbox(engine, layer, None, older_than=stuck_after)
                                          for layer in _layers(engine))

    def followups() -> None:
        report["followups_expired"] = followup.expire(engine, older_than=stuck_after, now=now)

    def requeue() -> None:
        report["layers_requeued"] = requeue_dirty(engine, older_than=stuck_after, now=now)
        if drain:
            drain_queue(engine)

    def layers() -> None:
        # locally nothing else is reconciling, so no layer is "in progress"
        repair_layers(engine, 0.0 if drain else stuck_after, now, report)
        if drain:
            drain_queue(engine)

    def check() -> None:
        report["invariants"] = invariants.check(engine).to_dict()

    def snapshot() -> None:
        keep = getattr(engine.entities.store, "keep_snapshot", None) if engine.entities is not None else None
        if keep is not None:
            done = keep()
            if done:
                report["entity_snapshot"] = done

    return [("counts", whole(lambda: repair_counts(engine, report))),
            ("documents", lambda cursor, out_of_time: audit_documents(engine, report, cursor, out_of_time)),
            ("entities", whole(lambda: audit_entities(engine, report))),
            ("outboxes", whole(outboxes)), ("followups", whole(followups)), ("requeue", whole(requeue)),
            ("layers", whole(layers)),
            ("vectors", lambda cursor, out_of_time: reembed_missing(engine, report, cursor, out_of_time)),
            ("orphan_vectors", whole(lambda: delete_orphan_vectors(engine, report))),
            ("lexical", whole(lambda: audit_lexical(engine, report))),
            ("attributes", whole(lambda: audit_attributes(engine, report))),
            ("readers", lambda cursor, out_of_time: readers_backfill.backfill(engine, report, cursor, out_of_time)),
            ("synonyms", lambda cursor, out_of_time: synonyms.backfill(engine, report, cursor, out_of_time)),
            ("entity_snapshot", whole(snapshot)), ("invariants", whole(check))]


STEPS = ("counts", "documents", "entities", "outboxes", "followups", "requeue", "layers", "vectors",
         "orphan_vectors", "lexical", "attributes", "readers", "synonyms", "entity_snapshot",
         "invariants")

# report key -> (metric, how it counts); a piece that did not run a step reports none of its metrics
METRICS = {"layers_migrated": ("LayersMigrated", len), "layer_counts_repaired": ("LayerCountsRepaired", len), "orphan_chunks_removed": ("OrphanChunksRemoved", int),
           "incomplete_documents_removed": ("IncompleteDocumentsRemoved", len),
           "layers_requeued": ("LayersRequeued", len), "outboxes_finished": ("OutboxesFinished", int),
           "followups_expired": ("FollowupsExpired", int), "layers_repaired": ("LayersRepaired", len),
           "vectors_missing_reembedded": ("VectorsReembedded", int),
           "vectors_orphaned_deleted": ("VectorsOrphanedDeleted", int),
           "entity_chunks_reextracted": ("EntityChunksReextracted", int),
           "entity_chunks_orphaned_removed": ("EntityChunksOrphanedRemoved", int),
           "entity_counts_repaired": ("EntityCountsRepaired", lambda v: sum(v.values())),
           "entity_vectors_reembedded": ("EntityVectorsReembedded", int),
           "entity_vectors_orphaned_deleted": ("EntityVectorsOrphanedDeleted", int),
           "lexical_index_built": ("LexicalIndexBuilt", int),
           "synonym_edges_backfilled": ("SynonymEdgesBackfilled", int), "leaf_attributes_added": ("LeafAttributesAdded", int),
           "readers_added": ("ReadersAdded", int),
           "invariants": ("InvariantViolations", lambda v: v["violation_count"]),
           "entity_snapshot": ("EntitySnapshotBytes", lambda v: v["bytes"])}


def run(engine: Engine, stuck_after: float = 900.0, drain: bool = True, now: float | None = None,
        out_of_time: Callable[[], bool] | None = None, progress: AuditProgress | None = None) -> dict:
    """Audit and repair; returns a JSON-able report with a flat ``metrics`` dict (this run's).

    ``out_of_time`` (the reindex worker's deadline) is asked after each step and each page of
    the vector step, so every run does at least one of them: when it says so the run stops and
    the report's ``resume`` is the AuditProgress to continue from (``run(..., progress=)``);
    the steps before it are not run again, the pages before its cursor not read again. Without
    it (``eragraph reindex``) the run goes to the end. ``complete``: the audit reached its end;
    ``totals``: the metrics of every piece of it."""
    started = time.perf_counter()
    now = time.time() if now is None else now
    progress = progress or AuditProgress()
    engine.lsh()  # refuses a store built with another embedder before touching anything
    report: dict = {}
    steps = _steps(engine, stuck_after, drain, now, report)
    step, cursor = progress.step, progress.cursor
    if not 0 <= step <= len(steps):
        raise BadInputError(f"audit step {step} is not one of 0..{len(steps)}")
    stop = out_of_time or _never
    ran = []
    while step < len(steps):
        ran.append(steps[step][0])
        cursor = steps[step][1](cursor, stop)
        if cursor is None:
            step += 1
        if step < len(steps) and stop():
            break
    report["metrics"] = {name: count(report[key]) for key, (name, count) in METRICS.items() if key in report}
    totals = dict(progress.metrics)
    for name, value in report["metrics"].items():
        totals[name] = totals.get(name, 0) + value
    report["complete"] = step == len(steps)
    report["steps_run"] = ran
    if report["complete"]:
        report["totals"] = totals
    else:
        report["resume"] = AuditProgress(run=progress.run, step=step, cursor=cursor, metrics=totals,
                                         pieces=progress.pieces + 1).to_dict()
    report["seconds"] = round(time.perf_counter() - started, 4)
    return report


def run_tenants(engine_of: Callable[[str], Engine], tenants: list[str], stuck_after: float,
                named: bool = False) -> dict:
    """``run`` (no drain) in each tenant's engine (``engine_of(tenant)``; "" the default); the
    first tenant's report at the top, as before tenants, with the metrics summed over all, and
    every tenant's report under ``tenants`` when there are several (or ``named``: the request
    named its one tenant)."""
    reports = {}
    totals: dict[str, float] = {}
    for tenant in tenants:
        reports[tenant] = run(engine_of(tenant), stuck_after=stuck_after, drain=False)
        for name, value in reports[tenant]["metrics"].items():
            totals[name] = totals.get(name, 0) + value
    report = dict(reports[tenants[0]])
    report["metrics"] = totals
    if len(tenants) > 1 or named:
        report["tenants"] = {t or "(default)": r for t, r in reports.items()}
    return report
