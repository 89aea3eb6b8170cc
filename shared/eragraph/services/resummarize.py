"""Reconcile one layer's segments with its current nodes (EraRAG Alg. 3 lines 3-14).

A SegmentsAffected(layer=l) message means "the node set of layer l changed". The reconcile
recomputes the partition of layer l (domain.partition: stable, so only segments around the
changed buckets differ), keeps every segment whose members are unchanged (same id, same
summary, byte for byte), summarizes only the new segments into layer l+1, removes the
summaries of segments that no longer exist, and announces layer l+1. A new segment that
replaces an old one is revised from the old one's summary plus the children that joined and
left, when the summarizer can revise and that reads fewer tokens (``delta_summaries``); the
text of deleted summaries is kept under ``retired:`` meta keys until the layer above has
reconciled, because there they are the children that left. Because it works from
the stored state rather than from the message's contents it is idempotent (a re-delivered
message finds nothing to do) and coalescing (one reconcile covers a burst of changes).
Summaries whose segment is kept but whose node is missing (a consumer that died half-way)
are recreated; summary nodes no segment owns are removed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..domain.diff import diff_segments, predecessors, segments_for, sentence_delta
from ..domain.lsh import hash_vectors, majority_code
from ..domain.model import ConflictError, Node, Segment, SegmentsAffected
from ..domain.partition import partition, should_summarize
from ..ports import RevisingSummarizer
from . import cost
from .engine import Engine
from .ingest import announce
from .reports import ChangeReport

MAX_CONFLICT_RETRIES = 5
RETIRED = "retired:"  # meta key prefix: text of a deleted summary, kept for the layer above


def target_segments(engine: Engine, layer: int) -> list[Segment]:
    """The segments layer ``layer`` should have now (empty above the stopping rule)."""
    s = engine.settings
    refs = engine.graph.layer_refs(layer)
    if not should_summarize(len(refs), layer, s.s_max, s.max_layers):
        return []
    return segments_for(layer, partition(refs, s.n_planes, s.s_min, s.s_max))


@dataclass(frozen=True)
class Revision:
    """How to update a predecessor's summary instead of summarizing a segment from scratch."""

    previous: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    previous_share: float


def retired_key(layer: int, node_id: str) -> str:
    return f"{RETIRED}{layer}:{node_id}"


def can_revise(engine: Engine) -> bool:
    return engine.settings.delta_summaries and isinstance(engine.summarizer, RevisingSummarizer)


def plan_revisions(engine: Engine, segments: list[Segment], removed: tuple[Segment, ...],
                   children: dict[str, Node]) -> dict[str, Revision]:
    """Segments worth revising instead of summarizing afresh: a segment whose predecessor (the
    removed segment holding most of its members) still has its summary, whose departed children
    all left text (moved children are still nodes; replaced summaries are kept under
    ``retired:`` keys; a deleted chunk leaves none, so its segment is summarized afresh and what
    it said goes with it), and whose revision -- the previous summary plus the sentences the
    joined children add and the departed ones took away (domain.diff.sentence_delta) -- reads
    fewer tokens than summarizing every member."""
    if not can_revise(engine) or not segments or not removed:
        return {}
    layer = segments[0].layer
    before = predecessors(segments, removed)
    if not before:
        return {}
    departed = {m for seg in segments if seg.segment_id in before
                for m in before[seg.segment_id].members if m not in seg.members}
    known = engine.graph.get_nodes({old.summary_id for old in before.values()} | (departed - set(children)))
    texts = {m: (n.text, n.tokens) for m, n in known.items()}
    texts.update({m: (n.text, n.tokens) for m, n in children.items()})
    for m in departed - set(texts):
        text = engine.graph.get_meta(retired_key(layer, m))
        if text is not None:
            texts[m] = (str(text), engine.tokenizer.count(str(text)))
    plans: dict[str, Revision] = {}
    for seg in segments:
        old = before.get(seg.segment_id)
        if old is None or old.summary_id not in texts:
            continue
        joined = [m for m in seg.members if m not in old.members]
        left = [m for m in old.members if m not in seg.members]
        if any(m not in texts for m in joined + left) or any(m not in children for m in seg.members):
            continue
        previous, previous_tokens = texts[old.summary_id]
        added, gone = sentence_delta([texts[m][0] for m in joined], [texts[m][0] for m in left])
        revise_cost = previous_tokens + sum(engine.tokenizer.count(t) for t in added + gone)
        full_cost = sum(children[m].tokens for m in seg.members)
        if revise_cost < full_cost:
            plans[seg.segment_id] = Revision(previous, tuple(added), tuple(gone),
                                             (len(seg.members) - len(joined)) / len(seg.members))
    return plans


def summarize_segments(engine: Engine, segments: list[Segment], report: ChangeReport,
                       removed: tuple[Segment, ...] = ()) -> list[Node]:
    """Summarize ``segments`` into the layer above; a segment that replaces one of ``removed``
    is revised from that one's summary when plan_revisions finds it cheaper."""
    if not segments:
        return []
    lsh = engine.lsh()
    layer_above = segments[0].layer + 1
    children = engine.graph.get_nodes({m for seg in segments for m in seg.members})
    plans = plan_revisions(engine, segments, removed, children)
    texts, summaries, child_codes = [], [], []
    for seg in segments:
        members = [children[m] for m in seg.members if m in children]
        plan = plans.get(seg.segment_id)
        if plan is not None:
            report.summaries_revised[layer_above] = report.summaries_revised.get(layer_above, 0) + 1
        if plan is not None and not plan.added and not plan.removed:
            # the children changed ids but say the same sentences: the summary stands, no call
            report.summaries_carried[layer_above] = report.summaries_carried.get(layer_above, 0) + 1
            texts.append(plan.previous)
            summaries.append(seg)
            child_codes.append([c.code for c in members])
            continue
        started = time.perf_counter()
        if plan is not None:
            result = engine.summarizer.revise(plan.previous, plan.added, plan.removed,
                                              engine.settings.summary_tokens, plan.previous_share)
        else:
            result = engine.summarizer.summarize([c.text for c in members], engine.settings.summary_tokens)
        seconds = time.perf_counter() - started
        cost.record(engine.graph, "summarize", engine.summarizer.identity, result.tokens_in, result.tokens_out,
                    seconds)
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


def retire(engine: Engine, layer: int, node_ids: list[str]) -> None:
    """Keep the text of summaries about to be deleted until the layer above has revised from
    them (their segments there lose them as members)."""
    if not can_revise(engine) or not node_ids:
        return
    for node_id, node in engine.graph.get_nodes(node_ids).items():
        engine.graph.put_meta(retired_key(layer, node_id), node.text)


def reconcile(engine: Engine, layer: int) -> ChangeReport:
    """Bring layer ``layer``'s segments and the summaries above them up to date."""
    report = ChangeReport()
    made_ids: list[str] = []  # summaries written by every attempt (a retry reuses them)
    retired = engine.graph.meta_keys(retired_key(layer, "")) if can_revise(engine) else []
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
            _forget_retired(engine, retired)
            engine.graph.delete_meta(f"dirty:{layer}")
            return report
        made = summarize_segments(engine, to_make, report, diff.removed)
        made_ids += [n.node_id for n in made]
        try:
            engine.graph.replace_segments(layer, [s.segment_id for s in diff.removed], list(diff.added), version)
        except ConflictError:
            continue  # another consumer changed this layer; recompute from its state
        if orphans:
            retire(engine, layer + 1, orphans)
            engine.graph.delete_nodes(orphans)
            engine.vectors.delete(orphans)
        if made_ids:
            report.segments_resummarized[layer + 1] = len(made_ids)
        if orphans:
            report.summaries_removed[layer + 1] = len(orphans)
        announce(engine, SegmentsAffected(layer=layer + 1, added=tuple(made_ids),
                                          removed=tuple(orphans), reason=f"reconcile:{layer}"))
        _forget_retired(engine, retired)
        engine.graph.delete_meta(f"dirty:{layer}")
        return report
    raise ConflictError(f"layer {layer}: gave up after {MAX_CONFLICT_RETRIES} concurrent updates")


def _forget_retired(engine: Engine, keys: list[str]) -> None:
    for key in keys:
        engine.graph.delete_meta(key)


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
