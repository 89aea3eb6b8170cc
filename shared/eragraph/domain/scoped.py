"""Re-cut only the part of a layer that changed: the plan of the scoped reconcile.

The partition rule (domain.partition) is a recursion over groups of a layer, each decided
from the counts of its two halves at the group's bit. A change (a node added or removed)
changes counts only on the root-to-leaf path of its code, so decisions can differ only there.

Every entry of a layer's code-ordered ref index is in one of four states (model.RefState):
live with a segment (in the stored partition and still there), live without one (added
since), a tombstone with a segment (removed since), a tombstone without one (added and
removed in between). One read therefore gives the *old* node set -- the one the stored
segments partition -- and the *new* one, without trusting any message to say what changed.

The walk starts at the root and follows the changed codes. At each group the rule's
decision is computed twice, for the old and for the new node set, from the counts of the
group's halves; a count only has to be known exactly up to K = max(S_max, the largest count
that cannot be cut), so a half is read with a small limit, never in full. While the two
decisions agree and say split or skip, the stored segments below the group are the old
recursion's own, and a half without a changed code is left unread (its segments stand).
The first group on a path where the decisions differ, or where both say terminal (one
segment) or cut (an over-full bucket), is a *region*: it is read in full; its old segments
are those its old members name (they lie inside it, since above it both recursions agree);
its new segments are the rule applied to its new members from its depth. Replacing a
region's old segments by its new ones, region by region, yields exactly the partition a
whole-layer reconcile computes (tests/unit/test_scoped.py checks this on random layers,
random changes and several bounds).

A skipped bit merges a half that is small (at most K nodes, old and new) into the other: such
a group is kept as a code prefix plus the small half's refs, read once and carried along.

Cost: one changed node reads about 2 * n_bits capped half-counts (each at most ~2K refs) and
one region, usually one segment's worth; a region is large only where a decision flips at a
large group, which needs a half of at most K nodes next to a large one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .model import NodeRef, RefState
from .partition import decide, largest_unpartitionable, partition

# read(prefix, depth, limit): the refs (tombstones included) whose code starts with the
# ``depth``-bit ``prefix``, in (code, node_id) order, at most ``limit`` of them (None: all)
Reader = Callable[[int, int, int | None], list[RefState]]


@dataclass(frozen=True)
class Region:
    """A group of the rule's recursion whose segments are re-cut as a whole."""

    depth: int
    refs: tuple[RefState, ...]
    root: bool = False  # the whole layer: it may turn out not to be summarized at all

    def old_segments(self) -> set[str]:
        return {r.seg for r in self.refs if r.seg is not None}

    def new_members(self) -> list[NodeRef]:
        return [NodeRef(r.node_id, r.code) for r in self.refs if r.live]


def count_cap(s_min: int, s_max: int) -> int | None:
    """K: counts above it need not be known exactly (None: they always must be)."""
    largest = largest_unpartitionable(s_min, s_max)
    return None if largest is None else max(s_max, largest)


def bit(code: int, depth: int, n_bits: int) -> int:
    return (code >> (n_bits - 1 - depth)) & 1


def code_prefix(code: int, depth: int, n_bits: int) -> int:
    return code >> (n_bits - depth) if depth else 0


@dataclass
class _Half:
    old: int
    new: int
    refs: list[RefState] | None  # every ref of the half, when the read was complete


def _count(read: Reader, prefix: int, depth: int, cap: int | None) -> _Half:
    """Old and new counts of a prefix, exact up to ``cap`` (capped at cap + 1 above it)."""
    limit = None if cap is None else 2 * cap + 2
    while True:
        refs = read(prefix, depth, limit)
        old = sum(1 for r in refs if r.old)
        new = sum(1 for r in refs if r.live)
        if limit is None or len(refs) < limit:
            if cap is None:
                return _Half(old, new, refs)
            return _Half(min(old, cap + 1), min(new, cap + 1), refs)
        if old > cap and new > cap:
            return _Half(cap + 1, cap + 1, None)
        limit *= 4


def plan_regions(dirty: Iterable[int], read: Reader, n_bits: int, s_min: int, s_max: int,
                 summarized: bool = True) -> list[Region]:
    """The regions to re-cut for the changed ``dirty`` codes (disjoint groups).

    ``summarized``: the layer may have segments at all (layer + 1 <= max layers)."""
    codes = sorted(set(dirty))
    if not codes:
        return []
    cap = count_cap(s_min, s_max)
    root = _count(read, 0, 0, cap)
    if not summarized or root.old <= s_max or root.new <= s_max:
        # the layer is (or was) too small to summarize, or never is: it is one region
        refs = root.refs if root.refs is not None else read(0, 0, None)
        return [Region(0, tuple(refs), root=True)]
    regions: list[Region] = []
    # (depth, prefix, carried refs of merged small halves, dirty codes of the group)
    stack: list[tuple[int, int, tuple[RefState, ...], list[int]]] = [(0, 0, (), codes)]
    while stack:
        depth, prefix, extra, group_codes = stack.pop()
        if depth >= n_bits:
            regions.append(_region(read, depth, prefix, extra))
            continue
        halves = []
        for b in (0, 1):
            half = _count(read, prefix * 2 + b, depth + 1, cap)
            carried = [e for e in extra if bit(e.code, depth, n_bits) == b]
            halves.append(_Half(half.old + sum(e.old for e in carried),
                                half.new + sum(e.live for e in carried),
                                None if half.refs is None else half.refs + carried))
        old = decide(halves[0].old, halves[1].old, depth, n_bits, s_min, s_max)
        new = decide(halves[0].new, halves[1].new, depth, n_bits, s_min, s_max)
        if old != new or new in ("terminal", "cut"):
            regions.append(_region(read, depth, prefix, extra, depth == 0))
            continue
        if new == "split":
            for b in (1, 0):
                sub_extra = tuple(e for e in extra if bit(e.code, depth, n_bits) == b)
                sub_codes = [c for c in group_codes if bit(c, depth, n_bits) == b]
                sub_codes += [e.code for e in sub_extra if e.changed]
                if sub_codes:
                    stack.append((depth + 1, prefix * 2 + b, sub_extra, sub_codes))
            continue
        # skip: carry the smaller half (small in both states) and go on with the other's prefix
        small = [b for b in (0, 1) if cap is not None
                 and max(halves[b].old, halves[b].new) <= cap]
        if not small:
            regions.append(_region(read, depth, prefix, extra, depth == 0))
            continue
        s = min(small, key=lambda b: (max(halves[b].old, halves[b].new), b))
        own = tuple(read(prefix * 2 + s, depth + 1, None))
        more_codes = [e.code for e in own if e.changed]
        stack.append((depth + 1, prefix * 2 + (1 - s), extra + own, group_codes + more_codes))
    return regions


def _region(read: Reader, depth: int, prefix: int, extra: Sequence[RefState],
            root: bool = False) -> Region:
    own = read(prefix, depth, None)
    return Region(depth, tuple(own) + tuple(extra), root=root and not extra)


def whole_layer(read: Reader) -> Region:
    """The layer as one region (a whole-layer reconcile: reindex, requeues)."""
    return Region(0, tuple(read(0, 0, None)), root=True)


def cut_region(region: Region, n_bits: int, s_min: int, s_max: int,
               summarized: bool = True) -> list[tuple[str, ...]]:
    """The region's new segments (member id tuples)."""
    members = region.new_members()
    if region.root and (not summarized or len(members) <= s_max):
        return []
    return partition(members, n_bits, s_min, s_max, start_depth=region.depth)
