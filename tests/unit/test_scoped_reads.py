"""The scoped plan reads a group once: ``domain.scoped.remembering`` answers a group inside one
read whole before from that read. On a store that spreads a layer over partitions (DynamoDB: 256
at layer 0) every read of a wide group is a query per partition, so a sparse layer's plan used
to pay for the same empty partitions at every level of its walk."""

from __future__ import annotations

import random

import pytest
from test_scoped import RefIndex, reconcile

from eragraph.domain.model import RefState
from eragraph.domain.scoped import count_cap, plan_regions, remembering


def _layer(rng: random.Random, n_bits: int, size: int) -> RefIndex:
    index = RefIndex(n_bits)
    for i in range(size):
        index.add(f"n{i:05d}", rng.getrandbits(n_bits))
    return index


@pytest.mark.parametrize("seed", range(20))
def test_every_answer_is_what_the_store_would_read(seed):
    """Random reads (any prefix, depth, limit, wide and narrow, in any order) through the
    remembering reader equal the store's own answers, and the store is read no more often."""
    rng = random.Random(seed)
    n_bits = rng.choice([4, 6, 8])
    index = _layer(rng, n_bits, rng.choice([0, 3, 20, 200]))
    for node_id in rng.sample(sorted(index.refs), len(index.refs) // 4):  # tombstones, segments
        r = index.refs[node_id]
        index.refs[node_id] = RefState(r.node_id, r.code, "seg-" + node_id[-1], rng.random() < 0.5)
    read = remembering(index.read, n_bits)
    calls = 0
    for _ in range(60):
        depth = rng.randrange(n_bits + 1)
        prefix = rng.getrandbits(depth) if depth else 0
        limit = rng.choice([None, 1, 2, 5, 17, 64])
        got = read(prefix, depth, limit)
        calls += 1
        before = index.reads
        assert got == index.read(prefix, depth, limit)
        index.reads = before  # the check's own read is not the plan's
    assert index.reads <= calls


def test_a_sparse_layer_is_read_once_per_plan():
    """A layer the root's capped count reads whole: the whole plan is one read of the store
    (it was one per group on the walk's path: the halves, their halves, the region)."""
    rng = random.Random(7)
    n_bits, s_min, s_max = 8, 3, 5
    size = 2 * count_cap(s_min, s_max)  # with the new node, under the root count's limit: read whole
    index = _layer(rng, n_bits, size)
    reconcile(index, [r.code for r in index.refs.values()], n_bits, s_min, s_max)  # segments stored
    assert index.stored()
    index.add("new", rng.getrandbits(n_bits))
    index.reads = 0
    regions = plan_regions([index.refs["new"].code], index.read, n_bits, s_min, s_max)
    assert index.reads == 1
    assert any(r.node_id == "new" for region in regions for r in region.refs)


def test_a_read_cut_by_its_limit_is_not_taken_for_the_whole():
    index = _layer(random.Random(3), 6, 50)
    read = remembering(index.read, 6)
    first = read(0, 0, 10)
    assert len(first) == 10
    whole = read(0, 0, None)
    assert len(whole) == 50 and index.reads == 2
    assert read(1, 1, None) == [r for r in whole if r.code >> 5 == 1] and index.reads == 2
