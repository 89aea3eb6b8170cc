"""The scoped plan reads a group once: ``domain.scoped.remembering`` answers a group inside one
read whole before from that read. On a store that spreads a layer over partitions (DynamoDB: 256
at layer 0) every read of a wide group is a query per partition, so a sparse layer's plan used
to pay for the same empty partitions at every level of its walk."""

from __future__ import annotations

import random

import pytest
from test_scoped import RefIndex, reconcile

from eragraph.domain.model import RefState
from eragraph.domain.scoped import count_cap, plan_regions, remembering, stream_regions


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
    read, _count = remembering(index.read, n_bits)
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
    read, _count = remembering(index.read, 6)
    first = read(0, 0, 10)
    assert len(first) == 10
    whole = read(0, 0, None)
    assert len(whole) == 50 and index.reads == 2
    assert read(1, 1, None) == [r for r in whole if r.code >> 5 == 1] and index.reads == 2


class Counting:
    """The store's reader, recording (prefix, depth, limit) of every call it answers."""

    def __init__(self, index: RefIndex) -> None:
        self.index = index
        self.calls: list[tuple[int, int, int | None]] = []

    def __call__(self, prefix: int, depth: int, limit: int | None) -> list[RefState]:
        self.calls.append((prefix, depth, limit))
        return self.index.read(prefix, depth, limit)


def _stated(n_bits: int, refs: list[tuple[int, str | None, bool]]) -> RefIndex:
    """A hand-built layer: (code, segment, live) per ref, named in code order."""
    index = RefIndex(n_bits)
    for i, (code, seg, live) in enumerate(refs):
        index.refs[f"h{i:03d}"] = RefState(f"h{i:03d}", code, seg, live)
    return index


def test_a_count_asks_for_2k_plus_2_refs_and_reads_again_only_when_undecided():
    """A half's counts are needed exactly up to K, old and new: its first read asks for 2K + 2
    refs -- the fewest that settle a half of K + 1 removed and K + 1 added nodes at once -- and
    a half settled by it is not read again."""
    n_bits, s_min, s_max = 4, 3, 5
    cap = count_cap(s_min, s_max)  # 5
    removed = [(0b0000, "a", False)] * (cap + 1)
    added = [(0b0001, None, True)] * (cap + 1)
    stable = [(0b1000 + i % 8, "b", True) for i in range(3 * cap)]
    index = _stated(n_bits, removed + added + stable)
    read = Counting(index)
    plan_regions([0b0000, 0b0001], read, n_bits, s_min, s_max)
    limited = [(p, d, limit) for p, d, limit in read.calls if limit is not None]
    assert limited and {limit for _p, _d, limit in limited} == {2 * cap + 2}
    assert len(limited) == len({(p, d) for p, d, _limit in limited})  # each group counted once


def test_a_layer_never_summarized_is_one_root_region_of_every_ref():
    """summarized=False (the top layer allowed): however large, the layer is one root region
    holding every ref, tombstones included, read whole once after the root's capped count."""
    rng = random.Random(5)
    index = _layer(rng, 6, 60)
    for number, node_id in enumerate(sorted(index.refs)):  # segmented once, a few removed since
        r = index.refs[node_id]
        index.refs[node_id] = RefState(r.node_id, r.code, "s", number % 7 != 0)
    read = Counting(index)
    [region] = plan_regions([1], read, 6, 3, 5, summarized=False)
    assert region.root and region.depth == 0
    assert sorted(r.node_id for r in region.refs) == sorted(index.refs)
    assert read.calls == [(0, 0, 2 * count_cap(3, 5) + 2), (0, 0, None)]


def test_a_streamed_pass_asks_for_one_ref_over_its_limit():
    """A streamed group is read with limit + 1 (is it over the limit?), the limit raised to at
    least 2K + 2; a group over it is read whole again only when it holds at most K live nodes."""
    rng = random.Random(11)
    n_bits, s_min, s_max = 10, 3, 5
    cap = count_cap(s_min, s_max)
    index = _layer(rng, n_bits, 400)
    for asked in (1, 40):
        read = Counting(index)
        regions = list(stream_regions(read, n_bits, s_min, s_max, asked))
        limit = max(asked, 2 * cap + 2)
        assert {lim for _p, _d, lim in read.calls} == {limit + 1}  # every node live: no re-read
        assert max(len(region.refs) for region in regions) <= limit + n_bits * cap
        assert len(read.calls) == len({(p, d) for p, d, _lim in read.calls})


def test_a_layer_of_exactly_the_limit_streams_as_one_root_region_read_once():
    index = _layer(random.Random(2), 8, 64)
    read = Counting(index)
    [region] = list(stream_regions(read, 8, 3, 5, 64))
    assert region.root and len(region.refs) == 64 and read.calls == [(0, 0, 65)]


def test_k_live_nodes_among_many_tombstones_stream_as_one_root_region():
    """A group over the limit with at most K live nodes is read whole (its live count must be
    exact): here the whole layer, K live nodes first in code order, then tombstones."""
    n_bits, s_min, s_max, limit = 8, 3, 5, 12
    cap = count_cap(s_min, s_max)
    index = _stated(n_bits, [(i, "a", True) for i in range(cap)] +
                    [(cap + i, "a", False) for i in range(100)])
    read = Counting(index)
    [region] = list(stream_regions(read, n_bits, s_min, s_max, limit))
    assert region.root and len(region.refs) == cap + 100
    assert read.calls == [(0, 0, limit + 1), (0, 0, None)]


def test_the_same_group_read_again_comes_from_memory():
    """A group read whole is answered from that read when asked again, with or without a limit
    (the plan counts a half, then reads it whole as a region or a carried small half)."""
    index = _layer(random.Random(4), 6, 30)
    read, _count = remembering(index.read, 6)
    half = read(1, 1, 40)
    assert len(half) < 40 and index.reads == 1
    assert read(1, 1, None) == half and read(1, 1, 3) == half[:3]
    assert index.reads == 1


def test_the_groups_counted_ahead_are_the_walks_own_counts():
    """domain.scoped.path_groups: for one changed code, the groups known before the walk starts
    are nearly all groups it counts, and nearly none are left unasked (each costs a request)."""
    from test_scoped import full

    from eragraph.domain.scoped import code_prefix, cut_region, path_groups, whole_layer

    n_bits, s_min, s_max = 20, 6, 12
    cap = count_cap(s_min, s_max)
    rng = random.Random(3)
    asked_all = missed = unused = 0
    for size in (2_000, 40_000):
        index = _layer(rng, n_bits, 0)
        for i in range(size):
            index.add(f"x{i}", rng.getrandbits(n_bits))
        index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
        for j in range(10):
            code = rng.getrandbits(n_bits)
            index.add(f"n{j}", code)
            asked: set[tuple[int, int]] = set()

            def count(prefix, depth, c):
                asked.add((prefix, depth))
                return index.count(prefix, depth, c)

            for region in plan_regions([code], index.read, n_bits, s_min, s_max, count=count):
                index.apply(region, cut_region(region, n_bits, s_min, s_max))
            ahead = set(path_groups([code], n_bits, size, cap))
            assert (0, 0) in ahead and all(d == 0 or code_prefix(code, d, n_bits) != p or d == max(
                dd for _, dd in ahead) for p, d in ahead)  # the root, siblings, the code's deepest group
            asked_all += len(asked)
            missed += len(asked - ahead)
            unused += len(ahead - asked)
    assert missed <= 0.15 * asked_all and unused <= 0.03 * asked_all, (asked_all, missed, unused)
    assert path_groups([5], n_bits, 10**6, None) == []  # every count exact: no cap to count ahead with
