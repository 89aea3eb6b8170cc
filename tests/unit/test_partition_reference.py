"""The partition rule against an independent reference: a plain recursive transcription of the
rule (EraRAG Alg. 1 lines 7-11 as domain/partition.py states it), with partitionability decided
by brute-force reachability instead of the closed form. Seeded layers at the boundaries the
rule turns on (a group of exactly S_max, S_max + 1, counts that are not partitionable), and
Hypothesis-generated layers that shrink a difference to a small case."""

from __future__ import annotations

import random
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eragraph.domain.model import NodeRef
from eragraph.domain.partition import decide, largest_unpartitionable, partition


@lru_cache(maxsize=None)
def _cuttable(count: int, s_min: int, s_max: int) -> bool:
    """count is a sum of parts each within [s_min, s_max] (0: the empty sum)."""
    if count == 0:
        return True
    return any(_cuttable(count - s, s_min, s_max) for s in range(s_min, min(s_max, count) + 1))


def _even_parts(nodes: list[NodeRef], s_max: int) -> list[list[NodeRef]]:
    ordered = sorted(nodes, key=lambda n: n.node_id)
    parts = -(-len(ordered) // s_max)
    sizes = [len(ordered) // parts + (1 if i < len(ordered) % parts else 0) for i in range(parts)]
    out, at = [], 0
    for size in sizes:
        out.append(ordered[at:at + size])
        at += size
    return out


def reference(nodes: list[NodeRef], bits: int, s_min: int, s_max: int, depth: int = 0) -> list[list[NodeRef]]:
    if not nodes:
        return []
    if len(nodes) <= s_max:
        return [nodes]
    if depth >= bits:
        return _even_parts(nodes, s_max)
    bit = bits - 1 - depth  # most significant bit first
    zeros = [n for n in nodes if not n.code >> bit & 1]
    ones = [n for n in nodes if n.code >> bit & 1]
    if zeros and ones and _cuttable(len(zeros), s_min, s_max) and _cuttable(len(ones), s_min, s_max):
        return reference(zeros, bits, s_min, s_max, depth + 1) + reference(ones, bits, s_min, s_max, depth + 1)
    return reference(nodes, bits, s_min, s_max, depth + 1)


def segments(groups: list[list[NodeRef]]) -> list[tuple[str, ...]]:
    return sorted(tuple(sorted(n.node_id for n in g)) for g in groups)


def layer(rng: random.Random, n: int, bits: int, distinct: int) -> list[NodeRef]:
    codes = [rng.getrandbits(bits) for _ in range(distinct)]
    return [NodeRef(f"n{i:04d}", rng.choice(codes)) for i in range(n)]


@pytest.mark.parametrize("s_min,s_max,bits", [(6, 12, 8), (8, 12, 6), (3, 5, 10), (4, 9, 4), (5, 5, 6)])
def test_partition_equals_the_reference_on_seeded_layers(s_min, s_max, bits):
    rng = random.Random(f"{s_min}-{s_max}-{bits}")
    sizes = [s_max, s_max + 1, 2 * s_max, 2 * s_max + 1, 3 * s_min - 1] + [rng.randrange(1, 120) for _ in range(150)]
    for n in sizes:
        nodes = layer(rng, n, bits, distinct=rng.choice([2, 5, 20, 200]))
        assert partition(nodes, bits, s_min, s_max) == segments(reference(nodes, bits, s_min, s_max)), n


def test_a_group_of_exactly_s_max_is_one_segment_even_if_its_halves_could_split():
    # 12 nodes, 6 with the top bit 0 and 6 with it 1: both halves fit [6, 12], but 12 <= S_max
    nodes = [NodeRef(f"a{i}", 0b0000) for i in range(6)] + [NodeRef(f"b{i}", 0b1000) for i in range(6)]
    assert partition(nodes, 4, 6, 12) == [tuple(sorted(n.node_id for n in nodes))]
    assert decide(6, 6, 0, 4, 6, 12) == "terminal"
    # one more node: the halves split
    nodes.append(NodeRef("b6", 0b1000))
    assert decide(6, 7, 0, 4, 6, 12) == "split"
    assert len(partition(nodes, 4, 6, 12)) == 2


@pytest.mark.parametrize("s_min,s_max,bits", [(6, 12, 8), (8, 12, 6), (3, 5, 4), (5, 5, 3), (1, 1, 3)])
def test_decide_equals_the_reference_rule_on_every_small_count(s_min, s_max, bits):
    for depth in range(bits + 2):
        for left in range(0, 3 * s_max + 2):
            for right in range(0, 3 * s_max + 2):
                if left + right <= s_max:
                    want = "terminal"
                elif depth >= bits:
                    want = "cut"
                elif left and right and _cuttable(left, s_min, s_max) and _cuttable(right, s_min, s_max):
                    want = "split"
                else:
                    want = "skip"
                assert decide(left, right, depth, bits, s_min, s_max) == want, (left, right, depth)


@pytest.mark.parametrize("s_min,s_max", [(6, 12), (8, 12), (10, 12), (3, 5), (4, 4), (1, 1), (1, 3)])
def test_largest_unpartitionable_by_brute_force(s_min, s_max):
    bad = [c for c in range(1, 400) if not _cuttable(c, s_min, s_max)]
    if s_min == s_max and s_min > 1:
        assert largest_unpartitionable(s_min, s_max) is None
    else:
        assert largest_unpartitionable(s_min, s_max) == max(bad, default=0)


_bounds = st.tuples(st.integers(1, 8), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=150, deadline=None)
@given(bounds=_bounds, bits=st.integers(1, 8), codes=st.lists(st.integers(0, 255), min_size=0, max_size=90),
       start=st.integers(0, 3))
def test_partition_equals_the_reference(bounds, bits, codes, start):
    s_min, s_max = bounds
    nodes = [NodeRef(f"n{i:03d}", c % (1 << bits)) for i, c in enumerate(codes)]
    start = min(start, bits)
    got = partition(nodes, bits, s_min, s_max, start_depth=start)
    assert got == segments(reference(nodes, bits, s_min, s_max, depth=start))
    assert sorted(i for seg in got for i in seg) == sorted(n.node_id for n in nodes)  # an exact cover
