"""Store statistics: documents (a counter where the store keeps one), layers and segments, settings, vectors, the cost ledger (every
model call by kind and model, priced: services.cost). One service that the CLI (`eragraph
stats`) and the query API (GET /stats) both call. Everything comes from counters and small
records (layer and document counters, the segment counters, the hyperplanes that a store
keeps once read, the ledger's totals, the dirty markers), never from a read of the nodes or
segments, so its cost does not grow with what the tenant holds."""

from __future__ import annotations

from typing import Any

from ..domain.knowledge_base import knowledge_base_id
from ..domain.segment_stats import SegmentStats
from . import cost
from .engine import Engine


def document_count(engine: Engine) -> int | None:
    """Live documents: a store's counter where it keeps one (DynamoDB: one read, never a scan of
    the table; None until the reindex has counted a store older than the counter), else the
    listing (the local stores)."""
    counted = getattr(engine.graph, "document_count", None)
    if counted is not None:
        return counted()
    return len(engine.graph.list_documents())


def stats(engine: Engine) -> dict[str, Any]:
    s = engine.settings
    layers = []
    snapshot = getattr(engine.graph, "counter_snapshot", None)  # the counters in one read (DynamoDB)
    marked = None
    if snapshot is not None:
        sizes, segments, documents = snapshot()
        marked = getattr(engine.graph, "marked_keys", None)  # the dirty markers, in the same read
    else:
        sizes, segments, documents = engine.graph.layer_sizes(), engine.graph.segment_stats(), document_count(engine)
    for layer, count in sizes.items():
        seg = segments.get(layer, SegmentStats(0, None, None))
        layers.append({"layer": layer, "nodes": count, "segments": seg.count,
                       "smallest_segment": seg.smallest, "largest_segment": seg.largest})
    # a store that keeps the hyperplanes once read (DynamoDB) answers from its copy
    lsh = getattr(engine.graph, "known_lsh", engine.graph.get_lsh)()
    return {
        "knowledge_base_id": knowledge_base_id(engine.tenant, engine.settings.kb_id_salt),
        "documents": documents,
        "layers": layers,
        "s_min": s.s_min, "s_max": s.s_max, "n_planes": s.n_planes, "max_layers": s.max_layers,
        "chunk_tokens": s.chunk_tokens, "chunk_overlap": s.chunk_overlap,
        "embedder": lsh.embedder_id if lsh else None,
        "vectors": engine.vectors.count(),
        "ledger": cost.ledger_report(engine.graph, s.price_table()),
        "dirty_layers": dirty_layers(engine, sizes) if marked is None else [int(k.split(":")[1]) for k in marked],
    }


def dirty_layers(engine: Engine, sizes: dict[int, int]) -> list[int]:
    """The layer of each dirty marker (a reconcile still to come), in the markers' order
    (DynamoDB's counter snapshot lists them itself: their copies in its partition). A store that reads keys by
    name in batches (DynamoDB: ``meta_present``) is asked for the markers that can exist, every
    shard of every layer it holds or has counted, and the one above (one BatchGetItem for up to
    five layers); any other store lists them (``meta_keys``). A marker can only name a layer
    that has held nodes (its counter then exists) or the layer above the top one."""
    present = getattr(engine.graph, "meta_present", None)
    if present is None:
        return [int(k.split(":")[1]) for k in engine.graph.meta_keys("dirty:")]
    from .announce import GROUP_BITS, dirty_key

    counted = set(getattr(engine.graph, "counted_layers", None) or ()) | set(sizes)
    layers = sorted(counted | {max(counted, default=-1) + 1})
    candidates = [dirty_key(layer, g) for layer in layers for g in [None, *range(2 ** GROUP_BITS)]]
    return [int(k.split(":")[1]) for k in sorted(present(candidates))]  # one per marker, as listed
