"""Trie partition: bounds, remainder rule, coverage, determinism, stability, locality."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from support import hamming
from eragraph.domain.model import NodeRef
from eragraph.domain.partition import check_bounds, partition, partitionable, should_summarize

BOUNDS = [(3, 5, 12), (8, 12, 20), (8, 12, 8), (10, 12, 16), (4, 9, 10)]


def _layer(rng: random.Random, n: int, bits: int, tag: str = "n") -> list[NodeRef]:
    return [NodeRef(f"{tag}{i:05d}", rng.getrandbits(bits)) for i in range(n)]


def _clustered(rng: random.Random, n: int, bits: int) -> list[NodeRef]:
    """Codes drawn around a few centres (real layers are clumpy), with many exact duplicates."""
    centres = [rng.getrandbits(bits) for _ in range(4)]
    out = []
    for i in range(n):
        code = rng.choice(centres)
        for _ in range(rng.choice([0, 0, 1, 2])):
            code ^= 1 << rng.randrange(bits)
        out.append(NodeRef(f"c{i:05d}", code))
    return out


def test_partitionable_counts():
    assert [c for c in range(0, 40) if not partitionable(c, 8, 12)] == [*range(1, 8), 13, 14, 15]
    assert [c for c in range(0, 12) if not partitionable(c, 3, 5)] == [1, 2]
    # brute force agrees with the closed form
    for s_min, s_max in [(3, 5), (8, 12), (10, 12), (4, 9)]:
        reach = {0}
        for c in range(1, 120):
            if any(c - s in reach for s in range(s_min, s_max + 1) if c - s >= 0):
                reach.add(c)
            assert partitionable(c, s_min, s_max) == (c in reach), (s_min, s_max, c)


def test_bad_bounds_rejected():
    for s_min, s_max in [(0, 5), (6, 5)]:
        with pytest.raises(ValueError):
            check_bounds(s_min, s_max)
        with pytest.raises(ValueError):
            partition([NodeRef("a", 0)], 4, s_min, s_max)


def test_empty_and_small_layers():
    assert partition([], 8, 3, 5) == []
    nodes = [NodeRef(f"x{i}", i) for i in range(4)]
    assert partition(nodes, 8, 3, 5) == [("x0", "x1", "x2", "x3")]


@pytest.mark.parametrize("s_min,s_max,bits", BOUNDS)
def test_bounds_and_exact_cover_over_many_random_layers(s_min, s_max, bits):
    rng = random.Random(s_min * 100 + s_max)
    for trial in range(150):
        n = rng.randint(1, 300)
        nodes = _layer(rng, n, bits) if trial % 2 else _clustered(rng, n, bits)
        segs = partition(nodes, bits, s_min, s_max)
        members = [m for s in segs for m in s]
        assert sorted(members) == sorted(x.node_id for x in nodes)  # every node exactly once
        assert len(members) == len(set(members))
        assert all(list(s) == sorted(s) for s in segs)
        if partitionable(n, s_min, s_max):
            assert all(s_min <= len(s) <= s_max for s in segs), (n, [len(s) for s in segs])
        else:
            # remainder rule: the whole layer is cut evenly into the fewest parts <= S_max
            sizes = sorted(len(s) for s in segs)
            assert len(segs) == math.ceil(n / s_max)
            assert sizes[-1] <= s_max and sizes[-1] - sizes[0] <= 1


def test_remainder_cut_is_by_node_id():
    rng = random.Random(4)
    nodes = _layer(rng, 14, 12)  # 14 is not partitionable into [8, 12]
    segs = partition(nodes, 12, 8, 12)
    assert segs == [tuple(f"n{i:05d}" for i in range(7)), tuple(f"n{i:05d}" for i in range(7, 14))]


def test_one_overfull_bucket_is_split_evenly():
    nodes = [NodeRef(f"same{i:02d}", 0b1010) for i in range(30)]
    segs = partition(nodes, 4, 8, 12)
    assert [len(s) for s in segs] == [10, 10, 10]


def test_deterministic_and_input_order_independent():
    rng = random.Random(9)
    nodes = _clustered(rng, 250, 16)
    first = partition(nodes, 16, 8, 12)
    shuffled = nodes[:]
    rng.shuffle(shuffled)
    assert partition(shuffled, 16, 8, 12) == first
    assert partition(list(reversed(nodes)), 16, 8, 12) == first


@pytest.mark.parametrize("s_min,s_max,bits", [(3, 5, 12), (8, 12, 20)])
def test_stability_adding_one_node(s_min, s_max, bits):
    """Adding one node changes only the segment holding its bucket, unless a split decision
    on its root-to-leaf path flips, which re-partitions only the subtree below that decision."""
    rng = random.Random(bits)
    added_counts, absorbed = [], 0
    for trial in range(200):
        nodes = _layer(rng, rng.randint(60, 400), bits, tag=f"t{trial}_")
        codes = {x.node_id: x.code for x in nodes}
        newcomer = NodeRef(f"new{trial}", rng.getrandbits(bits))
        codes[newcomer.node_id] = newcomer.code
        old = set(partition(nodes, bits, s_min, s_max))
        new = set(partition(nodes + [newcomer], bits, s_min, s_max))
        removed, added = old - new, new - old
        assert any(newcomer.node_id in s for s in added)
        region = {m for s in removed for m in s} | {newcomer.node_id}
        assert region == {m for s in added for m in s}  # everything else is untouched
        # the changed region is one subtree: it shares a code prefix with the newcomer
        shared = min(bits - (codes[m] ^ newcomer.code).bit_length() for m in region)
        assert shared >= 1
        assert len(region) <= 5 * s_max  # a flip is deep in the trie, never near the root
        if len(removed) == 1 and len(added) == 1:
            (r,), (a,) = removed, added
            if set(a) == set(r) | {newcomer.node_id}:
                absorbed += 1
        added_counts.append(len(added))
    assert absorbed >= 0.45 * len(added_counts)  # common case: the newcomer joins one segment
    assert statistics.median(added_counts) <= 2
    assert statistics.mean(added_counts) < 2.5


def test_removing_a_node_is_the_inverse_of_adding_it():
    rng = random.Random(21)
    nodes = _clustered(rng, 180, 16)
    extra = NodeRef("zz-new", rng.getrandbits(16))
    grown = partition(nodes + [extra], 16, 8, 12)
    assert partition([n for n in nodes + [extra] if n.node_id != "zz-new"], 16, 8, 12) == partition(nodes, 16, 8, 12)
    assert any("zz-new" in s for s in grown)


def test_locality_members_share_code_prefixes():
    rng = random.Random(13)
    bits = 16
    nodes = _layer(rng, 400, bits)
    codes = {x.node_id: x.code for x in nodes}
    segs = partition(nodes, bits, 8, 12)
    within = statistics.mean(hamming(codes[a], codes[b]) for s in segs for a in s for b in s if a < b)
    ids = list(codes)
    between = statistics.mean(hamming(codes[rng.choice(ids)], codes[rng.choice(ids)]) for _ in range(4000))
    assert within < 0.8 * between
    # with uniform codes most segments are whole trie subtrees: a shared prefix of >= 4 bits
    prefixes = [bits - max((codes[m] ^ codes[s[0]]).bit_length() for m in s) for s in segs]
    assert statistics.median(prefixes) >= 4


def test_stopping_rule():
    assert should_summarize(13, 0, 12, 5)
    assert not should_summarize(12, 0, 12, 5)
    assert not should_summarize(100, 5, 12, 5)
    assert should_summarize(100, 4, 12, 5)
    assert not should_summarize(100, 0, 12, 0)
