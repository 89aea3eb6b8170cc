"""domain.prefix_counts: a layer's counts by code prefix answer what counting the refs answers,
and a run of ref writes, each tallied, ends in the counts of the refs it leaves."""

from __future__ import annotations

import random

import pytest

from eragraph.domain.access import placed
from eragraph.domain.model import RefState
from eragraph.domain.prefix_counts import DEEP_BITS, PREFIX_BITS, PrefixCounts, bucket_of, merge, tally
from eragraph.domain.scoped import code_prefix, ref_count


def random_refs(rng: random.Random, n: int, n_bits: int) -> list[RefState]:
    refs = []
    for i in range(n):
        code = rng.randrange(1 << n_bits) if rng.random() < 0.8 else rng.choice([5, 6, 7]) << (n_bits - 3)
        seg = f"g{rng.randrange(9)}" if rng.random() < 0.7 else None
        live = rng.random() < 0.85 or seg is None and rng.random() < 0.5
        refs.append(RefState(f"n{i}", code, seg, live))
    return refs


@pytest.mark.parametrize("n_bits", [4, 8, 12, 20])
def test_each_group_above_the_depth_counts_as_its_refs_do(n_bits):
    rng = random.Random(n_bits)
    refs = random_refs(rng, 700, n_bits)
    counts = PrefixCounts.of_refs(refs, n_bits)
    assert counts.depth == min(PREFIX_BITS, n_bits)
    for depth in range(counts.depth + 1):
        for prefix in rng.sample(range(1 << depth), min(1 << depth, 12)):
            inside = [r for r in refs if code_prefix(r.code, depth, n_bits) == prefix]
            for cap in (None, 0, 5, 12):
                assert counts.count(prefix, depth, cap) == ref_count(inside, cap, False)
            assert counts.most_refs(prefix, depth) >= sum(1 for r in inside if r.old or r.live)
    with pytest.raises(ValueError):
        counts.count(0, counts.depth + 1, None)


def deep_rows(refs: list[RefState], n_bits: int) -> list[tuple[int, int, int]]:
    """(deep group, old, live) of ``refs``, as the SQLite store holds them."""
    shift = n_bits - min(DEEP_BITS, n_bits)
    rows: dict[int, list[int]] = {}
    for r in refs:
        row = rows.setdefault(r.code >> shift, [0, 0])
        row[0] += r.old
        row[1] += r.live
    return [(g, o, n) for g, (o, n) in rows.items()]


@pytest.mark.parametrize("n_bits", [12, 16, 20])
def test_the_deep_counts_of_held_groups_count_as_their_refs_do(n_bits):
    """Below the top depth, a group inside a top group whose deep counts are held counts as its
    refs do, down to the deep depth; another is not answered (the walk counts it in the index)."""
    rng = random.Random(n_bits + 1)
    top = min(PREFIX_BITS, n_bits)
    empty = (1 << top) - 1  # a top group left without refs
    refs = [r for r in random_refs(rng, 1500, n_bits) if code_prefix(r.code, top, n_bits) != empty]
    tops = sorted({code_prefix(r.code, top, n_bits) for r in rng.sample(refs, 3)})
    counts = PrefixCounts.of_refs(refs, n_bits).with_deep(n_bits, tops, deep_rows(refs, n_bits))
    assert counts.deep_depth == min(DEEP_BITS, n_bits)
    for code in [r.code for r in refs if code_prefix(r.code, top, n_bits) in tops][:40]:
        for depth in range(counts.depth + 1, counts.deep_depth + 1):
            prefix = code_prefix(code, depth, n_bits) ^ rng.randrange(2)  # on the path, or its sibling
            assert counts.answers(prefix, depth)
            inside = [r for r in refs if code_prefix(r.code, depth, n_bits) == prefix]
            for cap in (None, 0, 3):
                assert counts.count(prefix, depth, cap) == ref_count(inside, cap, False)
        if counts.deep_depth < n_bits:
            assert not counts.answers(code_prefix(code, counts.deep_depth + 1, n_bits), counts.deep_depth + 1)
    other = next(p for p in range(1 << top) if p not in tops and p != empty)
    if counts.deep_depth > top:
        assert not counts.answers(other << 1, top + 1)
        with pytest.raises(ValueError):
            counts.count(other << 1, top + 1, None)
    # a held top group without a row of its own (no refs) counts none below
    bare = PrefixCounts.of_refs(refs, n_bits).with_deep(n_bits, [empty], deep_rows(refs, n_bits))
    if bare.deep_depth > top:
        assert bare.count(empty << 1, top + 1, None) == ref_count([], None, False)


def test_writes_tallied_one_by_one_end_in_the_counts_of_what_they_leave():
    """Adds, segment assignments, removals (tombstones kept while a segment names them) and
    tombstones taken out, each tallied from the state before and after: the sum is the
    counts of the refs left."""
    n_bits = 12
    rng = random.Random(3)
    held: dict[str, RefState] = {}
    counts: dict = {}
    for step in range(3000):
        node = f"n{rng.randrange(400)}"
        before = held.get(node)
        if before is None:
            after = RefState(node, rng.randrange(1 << n_bits), None, True)
        elif before.live and rng.random() < 0.5:
            after = RefState(node, before.code, f"g{step}", True)  # cut into a segment
        elif before.live:
            after = RefState(node, before.code, before.seg, False) if before.seg else None  # removed
        else:
            after = None  # a tombstone taken out
        code = (before or after).code
        merge(counts, tally(code, n_bits, (before.old, before.live) if before else (False, False),
                            (after.old, after.live) if after else (False, False)))
        if after is None:
            held.pop(node)
        else:
            held[node] = after
    assert PrefixCounts.of(n_bits, counts) == PrefixCounts.of_refs(held.values(), n_bits)


def test_only_the_open_partition_is_kept():
    n_bits = 10
    assert bucket_of(placed(0b1011000000, 0, n_bits), n_bits) == 0b10110000
    assert bucket_of(placed(0b1011000000, 3, n_bits), n_bits) is None
    assert tally(placed(1, 3, n_bits), n_bits, (False, False), (False, True)) == {}
    refs = [RefState("a", placed(1, 0, n_bits)), RefState("b", placed(1, 2, n_bits))]
    assert PrefixCounts.of_refs(refs, n_bits).count(0, 0, None).new == 1


def test_differences_name_where_the_counts_part():
    a = PrefixCounts.of_refs([RefState("a", 0x10, "g", True)], 8)
    b = PrefixCounts.of_refs([RefState("a", 0x10, None, True)], 8)
    assert a.differences(a) == []
    assert a.differences(b) == ["old refs of prefix 10: 1 held, 0 counted"]
