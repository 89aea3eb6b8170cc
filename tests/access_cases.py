"""Helpers of the access-partition tests (tests/unit/test_access_partitions.py and its moto
twin): documents with random access lists, and the check that no segment mixes partitions."""

from __future__ import annotations

from dataclasses import replace

from eragraph.domain.access import index_of
from eragraph.services import placement
from eragraph.services.resummarize import target_segments

GROUPS = (None, ["group:finance"], ["group:board", "user:alice"], ["user:bob"])


def tagged(docs, rng, groups=GROUPS):
    out = []
    for doc in docs:
        access = rng.choice(groups)
        out.append(doc if access is None else replace(doc, metadata={"access": list(access)}))
    return out


def partition_index_of(engine) -> dict[str, int]:
    """doc id -> the partition index its access list was given."""
    return {d.doc_id: placement.partition_index(engine, (d.metadata or {}).get("access"))
            for d in engine.graph.list_documents()}


def node_partitions(engine) -> dict[str, int]:
    n = engine.settings.n_planes
    return {r.node_id: index_of(r.code, n) for layer in engine.graph.layer_sizes()
            for r in engine.graph.layer_refs(layer)}


def check_no_mixing(engine) -> int:
    """Every segment's members lie in one partition, and its summary in the same; the number
    of summaries."""
    where = node_partitions(engine)
    summaries = 0
    for layer in engine.graph.layer_sizes():
        for seg in engine.graph.get_segments(layer):
            assert len({where[m] for m in seg.members}) == 1, (layer, seg)
            if seg.summary_id in where:
                assert where[seg.summary_id] == where[seg.members[0]]
                summaries += 1
        assert {s.members for s in engine.graph.get_segments(layer)} == \
            {s.members for s in target_segments(engine, layer)}
    return summaries


def leaves_docs(engine, node_id: str, seen: dict) -> set[str]:
    """The documents under a node (a chunk's own; a summary's, down its children)."""
    if node_id not in seen:
        node = engine.graph.get_nodes([node_id])[node_id]
        seen[node_id] = {node.doc_id} if not node.is_summary else \
            set().union(*(leaves_docs(engine, c, seen) for c in node.children))
    return seen[node_id]
