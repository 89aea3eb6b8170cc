"""The graph invariants, checked by tests and by the reindex service.

1. Every live node of a summarized layer is a member of exactly one segment of that layer;
   segments name only live nodes; a layer that is not summarized has no segments.
2. Segment sizes are within [S_min, S_max], except the stated remainder: a layer whose node
   count is not partitionable (domain.partition) may have smaller parts, each <= S_max.
3. Every segment's summary node exists one layer up, with exactly the segment's members as
   children; every node above layer 0 is the summary of a segment (no orphans).
4. The vector index holds exactly the live nodes.
5. Every layer's counter (GraphStore.layer_sizes) equals its live refs.
6. Documents and chunks agree: every chunk a document lists is a live layer-0 node, and every
   live layer-0 node is listed by a document.
7. The entity graph (when the engine has one) covers exactly the live chunks, and its vector
   index holds exactly the names of its entities (and, with sentence vectors, its sentences).
8. Access partitions (domain.access): 1-3 hold for each partition's nodes of a layer on their
   own (a partition of at most S_max nodes at a layer is not summarized there), no segment
   holds nodes of two partitions, and a summary lies in its members' partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..domain.access import index_of, max_code
from ..domain.partition import partitionable, should_summarize
from .engine import Engine


@dataclass
class InvariantReport:
    violations: list[str] = field(default_factory=list)
    checked_nodes: int = 0
    checked_segments: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict:
        return {"ok": self.ok, "violations": self.violations[:200], "violation_count": len(self.violations),
                "checked_nodes": self.checked_nodes, "checked_segments": self.checked_segments}


def check(engine: Engine, check_vectors: bool = True) -> InvariantReport:
    s = engine.settings
    report = InvariantReport()
    v = report.violations
    sizes = engine.graph.layer_sizes()
    top = max(sizes) if sizes else 0
    live: set[str] = set()
    chunks: set[str] = set()
    for layer in range(0, top + 2):
        refs = engine.graph.layer_refs(layer)
        ids = {r.node_id for r in refs}
        live |= ids
        if layer == 0:
            chunks = ids
        if sizes.get(layer, 0) != len(ids):
            v.append(f"layer {layer}: its counter says {sizes.get(layer, 0)} nodes, the ref index holds {len(ids)}")
        drift = getattr(engine.graph, "prefix_counts_drift", None)  # a store's prefix counts (DynamoDB, SQLite)
        if drift is not None:
            v += [f"layer {layer}: {words}" for words in drift(layer, engine.graph.prefix_refs(layer, 0, max_code()))]
        report.checked_nodes += len(ids)
        all_segments = engine.graph.get_segments(layer)
        report.checked_segments += len(all_segments)
        where = {r.node_id: index_of(r.code, s.n_planes) for r in refs}
        by_partition: dict[int, list] = {}
        for seg in all_segments:
            held = {where.get(m) for m in seg.members} - {None}
            if len(held) > 1:
                v.append(f"layer {layer}: segment {seg.segment_id} holds nodes of partitions {sorted(held)}")
            by_partition.setdefault(min(held) if held else 0, []).append(seg)
        groups: dict[int, set[str]] = {}
        for r in refs:
            groups.setdefault(where[r.node_id], set()).add(r.node_id)
        above: dict[int, list[str]] = {}
        for r in engine.graph.layer_refs(layer + 1) if layer + 1 in sizes else ():
            above.setdefault(index_of(r.code, s.n_planes), []).append(r.node_id)
        for index in sorted(set(groups) | set(by_partition)):
            _check_partition(engine, layer, index, groups.get(index, set()), by_partition.get(index, []),
                             above.get(index, []), v)
    for layer in sizes:
        if layer > 0 and not engine.graph.get_segments(layer - 1) and sizes[layer]:
            v.append(f"layer {layer}: {sizes[layer]} nodes above an unsummarized layer")
    if check_vectors:
        indexed = engine.vectors.ids()
        for node_id in sorted(live - indexed)[:100]:
            v.append(f"vector index lacks node {node_id}")
        for node_id in sorted(indexed - live)[:100]:
            v.append(f"vector index has a vector for no live node: {node_id}")
    _check_documents(engine, chunks, v)
    _check_entities(engine, chunks, v, check_vectors)
    return report


def _check_partition(engine: Engine, layer: int, index: int, ids: set[str], segments: list,
                     above_ids: list[str], v: list[str]) -> None:
    """Invariants 1-3 for access partition ``index``: its nodes ``ids`` of ``layer``, their
    segments and ``above_ids``, the nodes of the layer above in the partition."""
    s = engine.settings
    if not should_summarize(len(ids), layer, s.s_max, s.max_layers):
        if segments:
            v.append(f"layer {layer}: {len(segments)} segments but the layer is not summarized")
        return
    seen: dict[str, str] = {}
    remainder_ok = not partitionable(len(ids), s.s_min, s.s_max)
    above = engine.graph.get_nodes(seg.summary_id for seg in segments)
    for seg in segments:
        n = len(seg.members)
        if n > s.s_max or (n < s.s_min and not remainder_ok):
            v.append(f"layer {layer}: segment {seg.segment_id} has {n} members, outside [{s.s_min}, {s.s_max}]")
        for m in seg.members:
            if m not in ids:
                v.append(f"layer {layer}: segment {seg.segment_id} names missing node {m}")
            if m in seen:
                v.append(f"layer {layer}: node {m} in segments {seen[m]} and {seg.segment_id}")
            seen[m] = seg.segment_id
        summary = above.get(seg.summary_id)
        if summary is None:
            v.append(f"layer {layer}: summary {seg.summary_id} of segment {seg.segment_id} is missing")
        elif summary.layer != layer + 1 or tuple(sorted(summary.children)) != tuple(sorted(seg.members)):
            v.append(f"layer {layer}: summary {seg.summary_id} does not summarize exactly its segment")
        elif index_of(summary.code, s.n_planes) != index:
            v.append(f"layer {layer}: summary {seg.summary_id} lies outside its members' partition")
    for node_id in sorted(ids - set(seen)):
        v.append(f"layer {layer}: node {node_id} is in no segment")
    owned = {seg.summary_id for seg in segments}
    for node_id in above_ids:
        if node_id not in owned:
            v.append(f"layer {layer + 1}: node {node_id} is the summary of no segment")


def _check_documents(engine: Engine, chunks: set[str], v: list[str]) -> None:
    listed: set[str] = set()
    for doc in engine.graph.list_documents():
        listed |= set(doc.chunk_ids)
        missing = [c for c in doc.chunk_ids if c not in chunks]
        if missing:
            v.append(f"document {doc.doc_id} lists {len(missing)} missing chunks, e.g. {missing[0]}")
    for node_id in sorted(chunks - listed)[:100]:
        v.append(f"chunk {node_id} is listed by no document")


def _check_entities(engine: Engine, chunks: set[str], v: list[str], check_vectors: bool) -> None:
    index = engine.entities
    if index is None:
        return
    from .entity_index import entity_vector_id

    recorded = index.store.chunk_ids()
    for node_id in sorted(chunks - recorded)[:100]:
        v.append(f"entity graph lacks live chunk {node_id}")
    for node_id in sorted(recorded - chunks)[:100]:
        v.append(f"entity graph has records of a chunk that is gone: {node_id}")
    if not check_vectors:
        return
    graph = index.store.export()
    wanted = {entity_vector_id(e) for e in graph.entities}
    if index.embed_sentences:
        wanted |= set(graph.sentences)
    indexed = index.vectors.ids()
    for vid in sorted(wanted - indexed)[:100]:
        v.append(f"entity vector index lacks {vid}")
    for vid in sorted(indexed - wanted)[:100]:
        v.append(f"entity vector index has a vector of nothing: {vid}")
