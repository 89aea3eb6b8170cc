"""Reconcile one layer's segments with its current nodes (EraRAG Alg. 3 lines 3-14).

A SegmentsAffected(layer=l) message means "the node set of layer l changed". The reconcile
recomputes the partition of layer l (domain.partition: stable, so only segments around the
changed buckets differ), keeps every segment whose members are unchanged (same id, same
summary, byte for byte), summarizes only the new segments into layer l+1, removes the
summaries of segments that no longer exist, and announces layer l+1. Because it works from
the stored state rather than from the message's contents it is idempotent (a re-delivered
message finds nothing to do) and coalescing (one reconcile covers a burst of changes).
Summaries whose segment is kept but whose node is missing (a consumer that died half-way)
are recreated; summary nodes no segment owns are removed.
"""

from __future__ import annotations

import time

from ..domain.diff import diff_segments, segments_for
from ..domain.lsh import hash_vectors, majority_code
from ..domain.model import ConflictError, Node, Segment, SegmentsAffected
from ..domain.partition import partition, should_summarize
from .engine import Engine
from .ingest import announce
from .reports import ChangeReport

MAX_CONFLICT_RETRIES = 5


def target_segments(engine: Engine, layer: int) -> list[Segment]:
    """The segments layer ``layer`` should have now (empty above the stopping rule)."""
    s = engine.settings
    refs = engine.graph.layer_refs(layer)
    if not should_summarize(len(refs), layer, s.s_max, s.max_layers):
        return []
    return segments_for(layer, partition(refs, s.n_planes, s.s_min, s.s_max))


def summarize_segments(engine: Engine, segments: list[Segment], report: ChangeReport) -> list[Node]:
    if not segments:
        return []
    lsh = engine.lsh()
    layer_above = segments[0].layer + 1
    children = engine.graph.get_nodes({m for seg in segments for m in seg.members})
    texts, summaries, child_codes = [], [], []
    for seg in segments:
        members = [children[m] for m in seg.members if m in children]
        started = time.perf_counter()
        result = engine.summarizer.summarize([c.text for c in members], engine.settings.summary_tokens)
        seconds = time.perf_counter() - started
        engine.graph.add_ledger("summarize", 1, result.tokens_in, result.tokens_out, seconds)
        report.cost.summarize_calls += 1
        report.cost.tokens_in += result.tokens_in
        report.cost.tokens_out += result.tokens_out
        report.cost.summarize_seconds += seconds
        texts.append(result.text)
        summaries.append(seg)
        child_codes.append([c.code for c in members])
    vectors = engine.embedder.embed(texts)
    own_codes = hash_vectors(lsh, vectors)
    nodes = [
        Node(node_id=seg.summary_id, layer=layer_above, text=text,
             tokens=engine.tokenizer.count(text), code=majority_code(kids, own, lsh.n_planes),
             children=seg.members)
        for seg, text, own, kids in zip(summaries, texts, own_codes, child_codes)
    ]
    engine.graph.put_nodes(nodes)
    engine.vectors.upsert([n.node_id for n in nodes], vectors,
                          [{"layer": layer_above, "doc_id": ""} for _ in nodes])
    return nodes


def reconcile(engine: Engine, layer: int) -> ChangeReport:
    """Bring layer ``layer``'s segments and the summaries above them up to date."""
    report = ChangeReport()
    made_ids: list[str] = []  # summaries written by every attempt (a retry reuses them)
    for _attempt in range(MAX_CONFLICT_RETRIES):
        version = engine.graph.segments_version(layer)
        old = engine.graph.get_segments(layer)
        new = target_segments(engine, layer)
        diff = diff_segments(old, new)
        above = {r.node_id for r in engine.graph.layer_refs(layer + 1)}
        wanted = {seg.summary_id for seg in new}
        to_make = [seg for seg in new if seg.summary_id not in above]
        orphans = sorted(above - wanted)
        if not to_make and not orphans and not diff.changed:
            engine.graph.delete_meta(f"dirty:{layer}")
            return report
        made = summarize_segments(engine, to_make, report)
        made_ids += [n.node_id for n in made]
        try:
            engine.graph.replace_segments(layer, [s.segment_id for s in diff.removed], list(diff.added), version)
        except ConflictError:
            continue  # another consumer changed this layer; recompute from its state
        if orphans:
            engine.graph.delete_nodes(orphans)
            engine.vectors.delete(orphans)
        if made_ids:
            report.segments_resummarized[layer + 1] = len(made_ids)
        if orphans:
            report.summaries_removed[layer + 1] = len(orphans)
        announce(engine, SegmentsAffected(layer=layer + 1, added=tuple(made_ids),
                                          removed=tuple(orphans), reason=f"reconcile:{layer}"))
        engine.graph.delete_meta(f"dirty:{layer}")
        return report
    raise ConflictError(f"layer {layer}: gave up after {MAX_CONFLICT_RETRIES} concurrent updates")


def drain(engine: Engine, max_messages: int | None = None) -> ChangeReport:
    """Deliver queued messages to reconcile until the queue is empty (the local bus)."""
    total = ChangeReport()
    delivered = 0
    while engine.queue.pending():
        batch = engine.queue.receive(10)
        for receipt, message in batch:
            total.merge(reconcile(engine, message.layer))
            engine.queue.ack([receipt])
            delivered += 1
        if max_messages is not None and delivered >= max_messages:
            break
    engine.vectors.flush()
    return total


def requeue_dirty(engine: Engine, older_than: float = 0.0, now: float | None = None) -> list[int]:
    """Re-announce layers marked dirty before ``now - older_than`` (a consumer died)."""
    now = time.time() if now is None else now
    layers = []
    for key in engine.graph.meta_keys("dirty:"):
        stamp = engine.graph.get_meta(key)
        if stamp is not None and now - float(stamp) >= older_than:
            layer = int(key.split(":", 1)[1])
            layers.append(layer)
            announce(engine, SegmentsAffected(layer=layer, reason="requeue"), now=now)
    return sorted(layers)
