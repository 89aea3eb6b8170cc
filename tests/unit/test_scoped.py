"""The scoped reconcile's plan yields exactly the partition of a whole-layer reconcile.

A layer is simulated as a code-ordered ref index (model.RefState). Each round applies random
adds, removes and re-adds, plans regions from the changed codes only, replaces each region's
old segments by its new ones, and compares the stored partition with domain.partition of the
whole layer -- for several bounds, clumpy and uniform codes, partial deliveries (only some
changes announced before the next reconcile) and interrupted rounds (only some regions
applied)."""

from __future__ import annotations

import random

import pytest

from eragraph.domain.model import NodeRef, RefState
from eragraph.domain.partition import largest_unpartitionable, partition
from eragraph.domain.scoped import (code_prefix, count_cap, cut_region, plan_regions, stream_regions,
                                     whole_layer)


class RefIndex:
    """The reference behaviour of GraphStore.prefix_refs / apply of one layer."""

    def __init__(self, n_bits: int) -> None:
        self.n_bits = n_bits
        self.refs: dict[str, RefState] = {}
        self.reads = 0
        self.refs_read = 0

    def read(self, prefix: int, depth: int, limit: int | None) -> list[RefState]:
        rows = sorted((r for r in self.refs.values() if code_prefix(r.code, depth, self.n_bits) == prefix),
                      key=lambda r: (r.code, r.node_id))
        rows = rows if limit is None else rows[:limit]
        self.reads += 1
        self.refs_read += len(rows)
        return rows

    def add(self, node_id: str, code: int) -> None:
        old = self.refs.get(node_id)
        self.refs[node_id] = RefState(node_id, code, old.seg if old else None, True)

    def remove(self, node_id: str) -> None:
        old = self.refs[node_id]
        if old.seg is None:
            del self.refs[node_id]
        else:
            self.refs[node_id] = RefState(node_id, old.code, old.seg, False)

    def apply(self, region, groups) -> None:
        owner = {m: "|".join(members) for members in groups for m in members}
        for r in region.refs:
            if r.live:
                self.refs[r.node_id] = RefState(r.node_id, r.code, owner.get(r.node_id), True)
            else:
                self.refs.pop(r.node_id, None)

    def stored(self) -> list[tuple[str, ...]]:
        segs: dict[str, list[str]] = {}
        for r in self.refs.values():
            if r.seg is not None:
                segs.setdefault(r.seg, []).append(r.node_id)
        return sorted(tuple(sorted(v)) for v in segs.values())

    def live(self) -> list[NodeRef]:
        return [NodeRef(r.node_id, r.code) for r in self.refs.values() if r.live]


def full(nodes: list[NodeRef], n_bits: int, s_min: int, s_max: int) -> list[tuple[str, ...]]:
    """What a whole-layer reconcile stores: nothing for a layer of at most S_max nodes."""
    return partition(nodes, n_bits, s_min, s_max) if len(nodes) > s_max else []


def _code(rng: random.Random, n_bits: int, centres: list[int]) -> int:
    if centres and rng.random() < 0.7:
        code = rng.choice(centres)
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            code ^= 1 << rng.randrange(n_bits)
        return code
    return rng.getrandbits(n_bits)


def reconcile(index: RefIndex, dirty, n_bits, s_min, s_max, interrupt: random.Random | None = None):
    regions = plan_regions(dirty, index.read, n_bits, s_min, s_max)
    for region in regions:
        if interrupt is not None and interrupt.random() < 0.3:
            continue  # this consumer died before applying the region
        index.apply(region, cut_region(region, n_bits, s_min, s_max))
    return regions


BOUNDS = [(6, 12, 10), (8, 12, 10), (3, 5, 8), (4, 9, 12), (2, 3, 6), (5, 5, 8)]


@pytest.mark.parametrize("s_min,s_max,n_bits", BOUNDS)
@pytest.mark.parametrize("seed", range(6))
def test_scoped_equals_whole_layer(s_min, s_max, n_bits, seed):
    rng = random.Random(seed * 1000 + s_min * 31 + s_max)
    centres = [rng.getrandbits(n_bits) for _ in range(rng.choice([0, 2, 5]))]
    index = RefIndex(n_bits)
    names = iter(f"n{i:06d}" for i in range(10**6))
    removed: list[tuple[str, int]] = []
    pending: list[int] = []  # changed codes not yet announced to a reconcile
    for _round in range(40):
        for _ in range(rng.choice([1, 1, 2, 5, 30])):
            live = [r for r in index.refs.values() if r.live]
            roll = rng.random()
            if roll < 0.55 or not live:
                code = _code(rng, n_bits, centres)
                index.add(next(names), code)
            elif roll < 0.9:
                victim = rng.choice(live)
                index.remove(victim.node_id)
                removed.append((victim.node_id, victim.code))
            elif removed:  # a removed node comes back (same id, same code)
                node_id, code = removed.pop(rng.randrange(len(removed)))
                if node_id not in index.refs or not index.refs[node_id].live:
                    index.add(node_id, code)
                    code = code
            pending.append(code if roll < 0.55 or not live else
                           (victim.code if roll < 0.9 else code))
        # deliver a random part of the pending changes (the rest comes with a later message)
        rng.shuffle(pending)
        cut = rng.randint(1, len(pending))
        deliver, pending = pending[:cut], pending[cut:]
        reconcile(index, deliver, n_bits, s_min, s_max)
        # invariant: the stored segments partition the old node set exactly as the rule does
        old = [NodeRef(r.node_id, r.code) for r in index.refs.values() if r.old]
        assert index.stored() == full(old, n_bits, s_min, s_max)
    reconcile(index, pending, n_bits, s_min, s_max)
    assert not [r for r in index.refs.values() if r.changed]
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)


@pytest.mark.parametrize("s_min,s_max,n_bits", [(6, 12, 10), (8, 12, 10)])
@pytest.mark.parametrize("seed", range(4))
def test_interrupted_reconciles_converge(s_min, s_max, n_bits, seed):
    """Consumers that die after applying some regions: the redelivered message finishes."""
    rng = random.Random(seed)
    index = RefIndex(n_bits)
    for i in range(300):
        index.add(f"a{i:05d}", rng.getrandbits(n_bits))
    index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
    for round_ in range(30):
        codes = []
        for j in range(rng.choice([1, 3, 20])):
            if rng.random() < 0.6:
                code = rng.getrandbits(n_bits)
                index.add(f"b{round_}-{j}", code)
            else:
                victim = rng.choice([r for r in index.refs.values() if r.live])
                index.remove(victim.node_id)
                code = victim.code
            codes.append(code)
        reconcile(index, codes, n_bits, s_min, s_max, interrupt=rng)
        reconcile(index, codes, n_bits, s_min, s_max)  # the redelivery
        assert index.stored() == full(index.live(), n_bits, s_min, s_max)


def test_one_insert_reads_a_bounded_part_of_a_large_layer():
    n_bits, s_min, s_max = 20, 6, 12
    rng = random.Random(7)
    reads = []
    for size in (2_000, 20_000):
        index = RefIndex(n_bits)
        for i in range(size):
            index.add(f"x{i:06d}", rng.getrandbits(n_bits))
        index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
        per_insert = []
        for j in range(20):
            code = rng.getrandbits(n_bits)
            index.add(f"new{j}", code)
            index.refs_read = 0
            reconcile(index, [code], n_bits, s_min, s_max)
            per_insert.append(index.refs_read)
        assert index.stored() == full(index.live(), n_bits, s_min, s_max)
        reads.append(sorted(per_insert)[len(per_insert) // 2])
    cap = count_cap(s_min, s_max)
    # about two capped half-counts per bit on the path plus one region, whatever the size
    assert reads[1] <= 2 * n_bits * (2 * cap + 2) + 4 * s_max
    assert reads[1] <= 2 * reads[0] + 50


def test_count_cap():
    assert count_cap(6, 12) == 12
    assert count_cap(8, 12) == 15
    assert largest_unpartitionable(8, 12) == 15
    assert count_cap(5, 5) is None


def test_small_layer_is_one_root_region():
    index = RefIndex(8)
    for i in range(5):
        index.add(f"s{i}", i)
    regions = plan_regions([3], index.read, 8, 3, 6)
    assert len(regions) == 1 and regions[0].root
    assert cut_region(regions[0], 8, 3, 6) == []
    assert plan_regions([], index.read, 8, 3, 6) == []


# --- the streamed whole-layer pass (stream_regions) ---

def _random_layer(rng: random.Random, n_bits: int, size: int, clumpy: bool) -> RefIndex:
    """A layer in an arbitrary stored state: segmented as the rule cut an earlier node set,
    then changed without a reconcile (adds without segment, tombstones with and without)."""
    centres = [rng.getrandbits(n_bits) for _ in range(rng.choice([2, 5]))] if clumpy else []
    index = RefIndex(n_bits)
    for i in range(size):
        index.add(f"o{i:06d}", _code(rng, n_bits, centres))
    return index


def _stream(index: RefIndex, n_bits, s_min, s_max, limit, stop_after: int | None = None):
    applied = []
    for number, region in enumerate(stream_regions(index.read, n_bits, s_min, s_max, limit)):
        if stop_after is not None and number >= stop_after:
            break  # the pass stopped (a deadline, a crash): the layer holds part of a re-cut
        index.apply(region, cut_region(region, n_bits, s_min, s_max))
        applied.append(region)
    return applied


@pytest.mark.parametrize("s_min,s_max,n_bits", BOUNDS)
@pytest.mark.parametrize("seed", range(5))
def test_streamed_regions_cut_the_layer_as_the_rule_does(s_min, s_max, n_bits, seed):
    rng = random.Random(seed * 7919 + s_min * 13 + s_max)
    limit = rng.choice([1, 40, 100])
    index = _random_layer(rng, n_bits, rng.choice([3, 30, 400, 1500]), clumpy=seed % 2 == 1)
    if rng.random() < 0.5:  # segmented once, then changed: old segments, tombstones, new nodes
        index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
        live = [r for r in index.refs.values() if r.live]
        for victim in rng.sample(live, len(live) // 4):
            index.remove(victim.node_id)
        for i in range(len(live) // 3):
            index.add(f"n{i:06d}", rng.getrandbits(n_bits))
    refs = [r.node_id for region in stream_regions(index.read, n_bits, s_min, s_max, limit)
            for r in region.refs]
    assert sorted(refs) == sorted(index.refs)  # disjoint, and every ref of the layer is in one
    regions = list(stream_regions(index.read, n_bits, s_min, s_max, limit))
    cut = sorted(seg for region in regions for seg in cut_region(region, n_bits, s_min, s_max))
    assert cut == full(index.live(), n_bits, s_min, s_max)
    _stream(index, n_bits, s_min, s_max, limit)
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)
    assert not [r for r in index.refs.values() if not r.live]  # tombstones are dropped
    if len(index.live()) > s_max:  # a layer that small has no segments
        assert not [r for r in index.refs.values() if r.changed]


@pytest.mark.parametrize("s_min,s_max,n_bits", [(6, 12, 10), (8, 12, 10), (3, 5, 12), (4, 9, 12)])
@pytest.mark.parametrize("seed", range(4))
def test_a_streamed_pass_stopped_part_way_is_finished_by_the_next_walk(s_min, s_max, n_bits, seed):
    """The layer between two walks holds part of a re-cut (not the rule's partition of any node
    set). A later walk -- after more changes, or stopped again -- still ends at the rule's
    partition, and the regions the stopped walk applied cost nothing to walk again."""
    rng = random.Random(seed)
    limit = 48
    index = _random_layer(rng, n_bits, 900, clumpy=seed % 2 == 0)
    for _round in range(4):
        _stream(index, n_bits, s_min, s_max, limit, stop_after=rng.randint(0, 6))
        for j in range(rng.choice([0, 5, 60])):  # writers go on meanwhile
            if rng.random() < 0.6:
                index.add(f"r{_round}-{j}", rng.getrandbits(n_bits))
            else:
                index.remove(rng.choice([r for r in index.refs.values() if r.live]).node_id)
    applied = _stream(index, n_bits, s_min, s_max, limit)
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)
    before = dict(index.refs)
    _stream(index, n_bits, s_min, s_max, limit)  # walked again with nothing changed
    assert index.refs == before
    assert applied
    # and the scoped reconcile's invariant holds again: a later insert is planned from it
    code = rng.getrandbits(n_bits)
    index.add("after", code)
    reconcile(index, [code], n_bits, s_min, s_max)
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)


def test_a_streamed_pass_holds_a_bounded_part_of_a_large_layer():
    """Regions stay near the limit and the walk reads each ref about twice, whatever the size."""
    n_bits, s_min, s_max, limit = 20, 6, 12, 256
    rng = random.Random(3)
    for size in (5_000, 40_000):
        index = _random_layer(rng, n_bits, size, clumpy=False)
        sizes = []
        for region in stream_regions(index.read, n_bits, s_min, s_max, limit):
            sizes.append(len(region.refs))
            index.apply(region, cut_region(region, n_bits, s_min, s_max))
        assert index.stored() == full(index.live(), n_bits, s_min, s_max)
        assert len(sizes) >= size // limit
        assert max(sizes) <= limit + n_bits * count_cap(s_min, s_max)
        assert index.refs_read <= 3 * size


def test_a_small_layer_streams_as_one_root_region():
    index = RefIndex(8)
    for i in range(5):
        index.add(f"s{i}", i)
    [region] = list(stream_regions(index.read, 8, 3, 6, 64))
    assert region.root and cut_region(region, 8, 3, 6) == []


@pytest.mark.parametrize("s_min,s_max,n_bits", [(6, 12, 10), (3, 5, 12)])
@pytest.mark.parametrize("keep", [7, 20, 45])
def test_a_layer_of_mostly_tombstones_streams_to_the_rules_cut(s_min, s_max, n_bits, keep):
    """A group that holds more refs than the limit but few live nodes (the rest removed since
    the last cut) is one region: its tombstones are dropped and its live nodes cut as the rule
    cuts them."""
    rng = random.Random(keep)
    index = _random_layer(rng, n_bits, 700, clumpy=False)
    index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
    live = sorted(r.node_id for r in index.refs.values())
    for victim in rng.sample(live, len(live) - keep):
        index.remove(victim)
    regions = list(stream_regions(index.read, n_bits, s_min, s_max, 1))
    assert sorted(r.node_id for region in regions for r in region.refs) == sorted(index.refs)
    assert sorted(seg for region in regions for seg in cut_region(region, n_bits, s_min, s_max)) == \
        full(index.live(), n_bits, s_min, s_max)
    _stream(index, n_bits, s_min, s_max, 1)
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)
    assert sorted(r.node_id for r in index.refs.values()) == sorted(r.node_id for r in index.live())
