"""The paged walk of every layer's live node ids (services.ref_pages.live_id_pages): each live id
once, in (layer, code, node id) order, tombstones left out, and a walk resumed from any cursor it
yields reads exactly the pages after it."""

from __future__ import annotations

import random

from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.domain.model import Node, RegionChange, Segment
from eragraph.services.ref_pages import live_id_pages


def _store(seed: int):
    rng = random.Random(seed)
    store = MemoryGraphStore()
    nodes = [Node(node_id=f"n{i:03d}", layer=rng.randrange(3), text=f"t{i}", tokens=3, doc_id="d",
                  code=rng.choice([1, 2, 2, 2, 2, 2, 2, 7, 9])) for i in range(60)]
    store.put_nodes(nodes)
    # a tombstone: a node in a stored segment, then deleted
    dead = next(n for n in nodes if n.layer == 0)
    ref = next(r for r in store.prefix_refs(0, 0, 2 ** 62) if r.node_id == dead.node_id)
    store.apply_region(RegionChange(layer=0, expected=(ref,), assign=((dead.node_id, "sg"),),
                                    add=(Segment(segment_id="sg", layer=0, members=(dead.node_id,), summary_id="sum-sg"),)))
    store.delete_nodes([dead.node_id])
    live = sorted((n.layer, n.code, n.node_id) for n in nodes if n is not dead)
    return store, [i for _, _, i in live], dead.node_id


def test_every_live_id_once_in_order_and_tombstones_left_out():
    for seed in range(5):
        store, live, dead = _store(seed)
        pages = list(live_id_pages(store, 2, 2 ** 62, None, page=4))
        assert [i for ids, _ in pages for i in ids] == live
        assert dead not in live
        assert [c is None for _, c in pages] == [False] * (len(pages) - 1) + [True]


def test_a_walk_resumed_from_any_cursor_reads_the_rest():
    store, live, _ = _store(11)
    pages = list(live_id_pages(store, 2, 2 ** 62, None, page=3))
    for k, (_, cursor) in enumerate(pages[:-1]):
        done = [i for ids, _ in pages[:k + 1] for i in ids]
        rest = [i for ids, _ in live_id_pages(store, 2, 2 ** 62, cursor, page=3) for i in ids]
        assert done + rest == live, k


def test_a_top_below_the_store_stops_there_and_an_empty_store_yields_one_empty_page():
    store, live, _ = _store(3)
    below = [i for ids, _ in live_id_pages(store, 0, 2 ** 62, None, page=5) for i in ids]
    layer0 = [i for i in live if store.get_nodes([i])[i].layer == 0]
    assert below == layer0
    assert list(live_id_pages(MemoryGraphStore(), 0, 2 ** 62)) == [([], None)]
