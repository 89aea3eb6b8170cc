"""The scoped reconcile's plan yields exactly the partition of a whole-layer reconcile.

A layer is simulated as a code-ordered ref index (model.RefState). Each round applies random
adds, removes and re-adds, plans regions from the changed codes only, replaces each region's
old segments by its new ones, and compares the stored partition with domain.partition of the
whole layer -- for several bounds, clumpy and uniform codes, partial deliveries (only some
changes announced before the next reconcile) and interrupted rounds (only some regions
applied). Between partial deliveries the comparison with the old node set's partition holds
for the seeds of ``test_scoped_equals_whole_layer``, not in general (see
``test_partial_deliveries_on_a_built_clumpy_layer_end_in_the_rules_partition``): the end
state, every change delivered, is the rule's partition."""

from __future__ import annotations

import random

import pytest

from eragraph.domain.model import NodeRef, RefState
from eragraph.domain.partition import decide, largest_unpartitionable, partition
from eragraph.domain.scoped import (RefCount, bit, code_prefix, count_cap, cut_region, plan_regions,
                                     stream_regions, whole_layer)


class RefIndex:
    """The reference behaviour of GraphStore.prefix_refs / apply of one layer."""

    def __init__(self, n_bits: int) -> None:
        self.n_bits = n_bits
        self.refs: dict[str, RefState] = {}
        self.reads = 0
        self.refs_read = 0
        self.counts = 0

    def read(self, prefix: int, depth: int, limit: int | None) -> list[RefState]:
        rows = sorted((r for r in self.refs.values() if code_prefix(r.code, depth, self.n_bits) == prefix),
                      key=lambda r: (r.code, r.node_id))
        rows = rows if limit is None else rows[:limit]
        self.reads += 1
        self.refs_read += len(rows)
        return rows

    def count(self, prefix: int, depth: int, cap: int | None) -> RefCount:
        """GraphStore.count_refs as SQLite answers it: capped counts, no refs returned."""
        rows = [r for r in self.refs.values() if code_prefix(r.code, depth, self.n_bits) == prefix]
        old, new = sum(r.old for r in rows), sum(r.live for r in rows)
        self.counts += 1
        return RefCount(old, new) if cap is None else RefCount(min(old, cap + 1), min(new, cap + 1))

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


def reconcile(index: RefIndex, dirty, n_bits, s_min, s_max, interrupt: random.Random | None = None,
              counted: bool = False):
    """``counted``: the walk's counts come from the store's own count (count_refs), not reads."""
    regions = plan_regions(dirty, index.read, n_bits, s_min, s_max, count=index.count if counted else None)
    for region in regions:
        if interrupt is not None and interrupt.random() < 0.3:
            continue  # this consumer died before applying the region
        index.apply(region, cut_region(region, n_bits, s_min, s_max))
    return regions


BOUNDS = [(6, 12, 10), (8, 12, 10), (3, 5, 8), (4, 9, 12), (2, 3, 6), (5, 5, 8)]


@pytest.mark.parametrize("s_min,s_max,n_bits", BOUNDS)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("counted", [False, True], ids=["read-counts", "store-counts"])
def test_scoped_equals_whole_layer(s_min, s_max, n_bits, seed, counted):
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
        reconcile(index, deliver, n_bits, s_min, s_max, counted=counted)
        # invariant: the stored segments partition the old node set exactly as the rule does
        old = [NodeRef(r.node_id, r.code) for r in index.refs.values() if r.old]
        assert index.stored() == full(old, n_bits, s_min, s_max)
    reconcile(index, pending, n_bits, s_min, s_max, counted=counted)
    assert not [r for r in index.refs.values() if r.changed]
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)


@pytest.mark.parametrize("s_min,s_max,n_bits", [(6, 12, 10), (8, 12, 10)])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("counted", [False, True], ids=["read-counts", "store-counts"])
def test_interrupted_reconciles_converge(s_min, s_max, n_bits, seed, counted):
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
        reconcile(index, codes, n_bits, s_min, s_max, interrupt=rng, counted=counted)
        reconcile(index, codes, n_bits, s_min, s_max, counted=counted)  # the redelivery
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


def test_with_the_stores_counts_one_insert_reads_about_one_region_whatever_the_size():
    """count_refs answers the walk's half-counts without rows: the refs one insert reads are its
    region and the small halves it carries, not 2 * cap + 2 per bit of the path (which grows
    with log N); the counts are about one per bit (a half walked into is counted through its
    own halves, which the next step needs anyway: domain.scoped._PathCounts)."""
    n_bits, s_min, s_max = 20, 6, 12
    rng = random.Random(11)
    reads, counts = [], []
    for size in (2_000, 40_000):
        index = RefIndex(n_bits)
        for i in range(size):
            index.add(f"x{i:06d}", rng.getrandbits(n_bits))
        index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
        per_insert, per_counts = [], []
        for j in range(20):
            code = rng.getrandbits(n_bits)
            index.add(f"new{j}", code)
            index.refs_read = index.counts = 0
            reconcile(index, [code], n_bits, s_min, s_max, counted=True)
            per_insert.append(index.refs_read)
            per_counts.append(index.counts)
        assert index.stored() == full(index.live(), n_bits, s_min, s_max)
        reads.append(sorted(per_insert)[len(per_insert) // 2])
        counts.append(sorted(per_counts)[len(per_counts) // 2])
    cap = count_cap(s_min, s_max)
    assert reads[1] <= 4 * (2 * cap + 2)  # a region and a carried half or two: no term in n_bits
    assert counts[1] <= n_bits + 2  # the plain walk's two counts per bit made about 27 here


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


# --- each region against a reference walk of the rule over whole node sets ---

def _ids(refs) -> frozenset[str]:
    return frozenset(r.node_id for r in refs)


def reference_plan(refs, dirty, n_bits, s_min, s_max, summarized=True):
    """The regions the scoped plan must return, from the whole ref list with exact counts:
    the rule's recursion run on the old and the new node set side by side, following the
    changed codes; a region is the first group where the decisions differ or both say terminal,
    or a skip with no half small (at most K) in both states; a skip goes on with the whole
    group one bit down. (depth, node ids, root) per region."""
    cap = count_cap(s_min, s_max)
    dirty = sorted(set(dirty))
    if not dirty:
        return set()
    if not summarized or sum(r.old for r in refs) <= s_max or sum(r.live for r in refs) <= s_max:
        return {(0, _ids(refs), True)}
    out = set()

    def walk(group, depth, codes):
        if depth >= n_bits:
            out.add((depth, _ids(group), False))
            return
        halves = [[r for r in group if bit(r.code, depth, n_bits) == b] for b in (0, 1)]
        old = decide(*(sum(r.old for r in h) for h in halves), depth, n_bits, s_min, s_max)
        new = decide(*(sum(r.live for r in h) for h in halves), depth, n_bits, s_min, s_max)
        small = [h for h in halves if cap is not None
                 and max(sum(r.old for r in h), sum(r.live for r in h)) <= cap]
        if old != new or new == "terminal" or (new == "skip" and not small):
            out.add((depth, _ids(group), depth == 0))
        elif new == "split":
            for b in (0, 1):
                sub = [c for c in codes if bit(c, depth, n_bits) == b]
                if sub:
                    walk(halves[b], depth + 1, sub)
        else:  # the smaller small half is carried: its changed refs are followed as well
            carried = min(small, key=lambda h: (max(sum(r.old for r in h), sum(r.live for r in h)),
                                                 halves.index(h)))
            walk(group, depth + 1, codes + [r.code for r in carried if r.changed])

    walk(list(refs), 0, dirty)
    return out


def _regions(regions):
    got = [(region.depth, _ids(region.refs), region.root) for region in regions]
    assert len(got) == len(set(got))
    return set(got)


def _mixed_layer(rng: random.Random, n_bits: int, size: int, centres: list[int]) -> RefIndex:
    """Refs in all four states: stable (old and live), added (live, no segment), removed
    (a tombstone with a segment), added and removed (a tombstone without one)."""
    index = RefIndex(n_bits)
    for i in range(size):
        state = rng.choice(["stable", "stable", "added", "removed", "gone"])
        index.refs[f"m{i:05d}"] = RefState(f"m{i:05d}", _code(rng, n_bits, centres),
                                           "s" if state in ("stable", "removed") else None,
                                           state in ("stable", "added"))
    return index


REFERENCE_BOUNDS = [(6, 12, 6), (8, 12, 6), (3, 5, 5), (2, 3, 4), (5, 5, 5), (4, 9, 6), (1, 4, 4)]


@pytest.mark.parametrize("s_min,s_max,n_bits", REFERENCE_BOUNDS)
@pytest.mark.parametrize("seed", range(25))
def test_each_region_is_the_reference_walks_own(s_min, s_max, n_bits, seed):
    """Not only the final partition: the very regions (depth, members, root) are those of the
    rule's walk over the whole old and new node sets -- a region found too low, too high, merged
    or split differently is a difference, even where its re-cut happens to come out the same."""
    rng = random.Random(seed * 101 + s_min * 7 + s_max)
    centres = [rng.getrandbits(n_bits) for _ in range(rng.choice([1, 2, 4]))]
    index = _mixed_layer(rng, n_bits, rng.choice([8, 20, 40, 80, 160]), centres)
    changed = [r.code for r in index.refs.values() if r.changed]
    dirty = rng.sample(changed, rng.randint(0, len(changed))) if rng.random() < 0.5 else changed
    if rng.random() < 0.3:  # a code announced with nothing left under it
        dirty.append(rng.getrandbits(n_bits))
    summarized = rng.random() < 0.9
    refs = list(index.refs.values())
    plan = plan_regions(dirty, index.read, n_bits, s_min, s_max, summarized=summarized)
    expected = reference_plan(refs, dirty, n_bits, s_min, s_max, summarized)
    assert _regions(plan) == expected


def reference_stream(refs, n_bits, s_min, s_max, limit):
    """The regions a streamed pass must yield, from the whole ref list: the rule's recursion over
    the live nodes, where a group (its own code prefix, without carried refs) is *held* when it
    holds at most ``limit`` refs or at most K live ones among its first ``limit`` + 1; a held half
    of a split is a region, a held other half of a skip is one with the carried refs, a group
    not held is walked on. (depth, node ids, root) per region."""
    cap = count_cap(s_min, s_max)
    if cap is None:
        return [(0, _ids(refs), True)]
    limit = max(limit, 2 * cap + 2)
    order = sorted(refs, key=lambda r: (r.code, r.node_id))

    def held(own):
        return len(own) <= limit or sum(r.live for r in own[:limit + 1]) <= cap

    if held(order):
        return [(0, _ids(order), True)]
    out = []

    def walk(own, depth, extra):
        if depth >= n_bits:
            out.append((depth, _ids(own + extra), False))
            return
        halves = [[r for r in own if bit(r.code, depth, n_bits) == b] for b in (0, 1)]
        carried = [[e for e in extra if bit(e.code, depth, n_bits) == b] for b in (0, 1)]
        counts = [sum(r.live for r in halves[b] + carried[b]) for b in (0, 1)]
        decision = decide(*counts, depth, n_bits, s_min, s_max)
        if decision == "split":
            for b in (0, 1):
                if held(halves[b]):
                    out.append((depth + 1, _ids(halves[b] + carried[b]), False))
                else:
                    walk(halves[b], depth + 1, carried[b])
        else:
            assert decision == "skip"  # a group walked on holds more than K live nodes
            s = min((b for b in (0, 1) if held(halves[b]) and counts[b] <= cap), key=lambda b: (counts[b], b))
            if held(halves[1 - s]):
                out.append((depth + 1, _ids(halves[1 - s] + extra + halves[s]), False))
            else:
                walk(halves[1 - s], depth + 1, extra + halves[s])

    walk(order, 0, [])
    return out


@pytest.mark.parametrize("s_min,s_max,n_bits", REFERENCE_BOUNDS)
@pytest.mark.parametrize("seed", range(20))
def test_each_streamed_region_is_the_reference_walks_own(s_min, s_max, n_bits, seed):
    """The streamed pass yields the reference's regions, in its order (left to right)."""
    rng = random.Random(seed * 313 + s_min * 5 + s_max)
    centres = [rng.getrandbits(n_bits) for _ in range(rng.choice([1, 2, 4]))]
    index = _mixed_layer(rng, n_bits, rng.choice([10, 40, 90, 200]), centres)
    limit = rng.choice([1, 16, 30])
    got = [(region.depth, _ids(region.refs), region.root)
           for region in stream_regions(index.read, n_bits, s_min, s_max, limit)]
    assert got == reference_stream(list(index.refs.values()), n_bits, s_min, s_max, limit)


@pytest.mark.parametrize("side", ["old", "new"])
def test_a_half_of_exactly_k_among_many_refs_is_counted_exactly(side):
    """A half whose first 2K + 2 refs hold exactly K nodes of one state (and more of the other)
    is read on until that count is exact: with bounds 8-12, K = 15 cannot be cut and 16 can, so
    the root's decisions (skip for one state, split for the other) differ and the whole layer
    is the region."""
    n_bits, s_min, s_max = 4, 8, 12
    cap = count_cap(s_min, s_max)
    assert cap == 15
    index = RefIndex(n_bits)
    for i in range(cap):
        index.refs[f"a{i:02d}"] = RefState(f"a{i:02d}", 0b0000, "s", True)
    for i in range(cap + 2):  # added (for "old": exactly K old) or removed (for "new")
        index.refs[f"b{i:02d}"] = RefState(f"b{i:02d}", 0b0001, None if side == "old" else "s",
                                           side == "old")
    for i in range(20):
        index.refs[f"c{i:02d}"] = RefState(f"c{i:02d}", 0b1000 + i % 8, "s", True)
    refs = list(index.refs.values())
    regions = plan_regions([0b0001], index.read, n_bits, s_min, s_max)
    assert _regions(regions) == reference_plan(refs, [0b0001], n_bits, s_min, s_max)
    assert [(region.depth, region.root, len(region.refs)) for region in regions] == [(0, True, len(refs))]


def test_a_streamed_half_of_few_live_nodes_among_tombstones_is_counted_exactly():
    """A half over the limit whose live nodes are few is read whole and its live nodes counted
    exactly: 2 live nodes among 30 tombstones cannot be cut with 3-5, so the rule merges that
    half into the other (a skip), never splits it off as a region of its own."""
    n_bits, s_min, s_max, limit = 6, 3, 5, 1
    index = RefIndex(n_bits)
    for i in range(40):
        index.refs[f"a{i:02d}"] = RefState(f"a{i:02d}", i % 32, "s", True)
    for i in range(32):
        index.refs[f"b{i:02d}"] = RefState(f"b{i:02d}", 32 + i, "s", i in (7, 21))
    regions = list(stream_regions(index.read, n_bits, s_min, s_max, limit))
    got = [(region.depth, _ids(region.refs), region.root) for region in regions]
    assert got == reference_stream(list(index.refs.values()), n_bits, s_min, s_max, limit)
    assert sorted(seg for region in regions for seg in cut_region(region, n_bits, s_min, s_max)) == \
        full(index.live(), n_bits, s_min, s_max)


def test_a_skip_with_no_half_small_in_both_states_is_a_region_and_the_walk_goes_on():
    """Every old node of a group left one half and every new one came into the other: both
    decisions skip, but neither half is small in both states, so the group is a region -- and
    the other changed paths are still walked (here the right half's added node)."""
    n_bits, s_min, s_max = 4, 3, 5
    refs = ([RefState(f"r{i}", i % 4, "s", False) for i in range(6)] +  # removed from 00
            [RefState(f"a{i}", 4 + i % 4, None, True) for i in range(6)] +  # added to 01
            [RefState(f"k{i:02d}", 8 + i % 8, "t", True) for i in range(12)] +
            [RefState("new", 8, None, True)])
    index = RefIndex(n_bits)
    index.refs = {r.node_id: r for r in refs}
    dirty = [r.code for r in refs if r.changed]
    regions = plan_regions(dirty, index.read, n_bits, s_min, s_max)
    assert _regions(regions) == reference_plan(refs, dirty, n_bits, s_min, s_max)
    assert (1, _ids(refs[:12]), False) in _regions(regions)
    assert any(r.node_id == "new" for region in regions for r in region.refs)


@pytest.mark.parametrize("s_min,s_max,n_bits", [(8, 12, 10), (4, 9, 12)])
@pytest.mark.parametrize("seed", range(6))
def test_partial_deliveries_on_a_built_clumpy_layer_end_in_the_rules_partition(s_min, s_max, n_bits, seed):
    """Between partial deliveries the stored partition need not be the rule's partition of the
    old node set: a region applied while changes are still undelivered elsewhere in a group
    can leave that group's old count between its old and new counts, in a gap the rule cannot
    cut (1-3 for [4, 9], 13-15 for [8, 12]; here seed 0 of (4, 9, 12), after round 32). What
    holds is the end: once every change is delivered, the rule's partition of the live nodes."""
    rng = random.Random(seed * 1000 + s_min * 31 + s_max)
    centres = [rng.getrandbits(n_bits) for _ in range(rng.choice([2, 5]))]
    index = RefIndex(n_bits)
    names = iter(f"n{i:06d}" for i in range(10**6))
    for _ in range(300):
        index.add(next(names), _code(rng, n_bits, centres))
    index.apply(whole_layer(index.read), full(index.live(), n_bits, s_min, s_max))
    removed: list[tuple[str, int]] = []
    pending: list[int] = []
    for _round in range(60):
        for _ in range(rng.choice([1, 1, 2, 5, 30])):
            live = [r for r in index.refs.values() if r.live]
            roll = rng.random()
            if roll < 0.45 or not live:
                code = _code(rng, n_bits, centres)
                index.add(next(names), code)
            elif roll < 0.9:
                victim = rng.choice(live)
                index.remove(victim.node_id)
                removed.append((victim.node_id, victim.code))
                code = victim.code
            elif removed:
                node_id, code = removed.pop(rng.randrange(len(removed)))
                if node_id not in index.refs or not index.refs[node_id].live:
                    index.add(node_id, code)
            else:
                continue
            pending.append(code)
        rng.shuffle(pending)
        cut = rng.randint(1, len(pending)) if pending else 0
        deliver, pending = pending[:cut], pending[cut:]
        reconcile(index, deliver, n_bits, s_min, s_max, counted=True)
    reconcile(index, pending, n_bits, s_min, s_max, counted=True)
    assert not [r for r in index.refs.values() if r.changed]
    assert index.stored() == full(index.live(), n_bits, s_min, s_max)
