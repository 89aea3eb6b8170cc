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
from eragraph.domain.scoped import code_prefix, count_cap, cut_region, plan_regions, whole_layer


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
