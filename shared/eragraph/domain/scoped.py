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

A whole-layer pass over a large layer (a bulk build) need not hold the layer either:
``stream_regions`` walks the rule's recursion for the live nodes alone, yielding one group at a
time as soon as it holds at most ``limit`` refs. Re-cutting a group of the new recursion is
right whatever the stored segments are: its new segments are the rule's own, and an old
segment named by one of its refs is removed even where it reaches beyond the group (its other
members are re-assigned when their own group comes). So the regions can be applied one after
the other, each before the next is read; until the last is, the layer holds part of a re-cut
(services.resummarize marks it, and a later reconcile walks it again).

Cost: one changed node makes about one capped count per bit of its path (about log2(layer / S)
bits, at most n_bits: a half the walk goes on into is counted through its own halves, which the
next step counts anyway, ``_PathCounts``) and reads one region, usually one segment's worth. A store that counts in place (GraphStore.count_refs: SQLite's covering
ref index) returns two numbers per count, each scanning at most ~2K index entries, so the refs
read do not grow with the layer; the counts grow with the path, except the part of it a store's
held prefix counts answer (domain.prefix_counts). A store that counts by reading returns each count's refs (at most ~2K) and a group inside
one read whole already is not read again (``remembering``). A region is large only where a
decision flips at a large group, which needs a half of at most K nodes next to a large one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from .model import ConflictError, NodeRef, RefState, Segment
from .partition import decide, largest_unpartitionable, partition

# read(prefix, depth, limit): the refs (tombstones included) whose code starts with the
# ``depth``-bit ``prefix``, in (code, node_id) order, at most ``limit`` of them (None: all)
Reader = Callable[[int, int, int | None], list[RefState]]


@dataclass(frozen=True)
class RefCount:
    """The old and live counts of a code range of the ref index, each exact up to a cap and
    cap + 1 above it (exact when the cap is None); ``refs``: every ref of the range in (code,
    node id) order when the count read them all anyway (None: only counted)."""

    old: int
    new: int
    refs: tuple[RefState, ...] | None = None


# count(prefix, depth, cap): the RefCount of the refs whose code starts with the ``depth``-bit
# ``prefix`` (GraphStore.count_refs: a store that counts without returning rows)
Counter = Callable[[int, int, int | None], RefCount]


@dataclass(frozen=True)
class Region:
    """A group of the rule's recursion whose segments are re-cut as a whole."""

    depth: int
    refs: tuple[RefState, ...]
    root: bool = False  # the whole layer: it may turn out not to be summarized at all
    # planned (plan_regions): every old segment its refs name lies inside it while the stored
    # partition is the rule's and the counts it was planned from hold (check_inside)
    planned: bool = False

    def old_segments(self) -> set[str]:
        return {r.seg for r in self.refs if r.seg is not None}

    def new_members(self) -> list[NodeRef]:
        return [NodeRef(r.node_id, r.code) for r in self.refs if r.live]


class OutsideRegion(ConflictError):
    """A planned region's old segment reaches beyond it (``check_inside``)."""


def check_inside(layer: int, region: Region, removed: Iterable[Segment]) -> None:
    """Raise OutsideRegion when one of ``removed`` (the stored records of the old segments a
    planned region's refs name) has a member outside the region. plan_regions' regions hold
    their old segments whole when the stored partition is the rule's and the counts they were
    planned from still hold; a segment reaching beyond shows another reconcile re-cut the
    layer after those counts, or a partition the rule does not give (a plan written from counts
    an ingest had changed). Re-cutting the region would leave that segment's other members in
    no segment. A segment's id is its members', so its record does not change; the region's
    refs are its write's condition: what is checked here holds at the write."""
    inside = {r.node_id for r in region.refs}
    for seg in removed:
        if not inside.issuperset(seg.members):
            raise OutsideRegion(f"layer {layer}: segment {seg.segment_id} reaches beyond its region "
                                f"(the layer changed since the region was planned)")


def count_cap(s_min: int, s_max: int) -> int | None:
    """K: counts above it need not be known exactly (None: they always must be)."""
    largest = largest_unpartitionable(s_min, s_max)
    return None if largest is None else max(s_max, largest)


def bit(code: int, depth: int, n_bits: int) -> int:
    return (code >> (n_bits - 1 - depth)) & 1


def code_prefix(code: int, depth: int, n_bits: int) -> int:
    """The ``depth``-bit prefix of a code's low ``n_bits`` (the bits above them, a placed code's
    access partition, are the Reader's: it reads inside one partition's range)."""
    return (code & ((1 << n_bits) - 1)) >> (n_bits - depth) if depth else 0


@dataclass
class _Half:
    old: int
    new: int
    refs: list[RefState] | None  # every ref of the half, when the read was complete


def ref_count(refs: Sequence[RefState], cap: int | None, whole: bool) -> RefCount:
    """The RefCount of ``refs`` (``whole``: they are the range's every ref)."""
    old = sum(1 for r in refs if r.old)
    new = sum(1 for r in refs if r.live)
    if cap is not None:
        old, new = min(old, cap + 1), min(new, cap + 1)
    return RefCount(old, new, tuple(refs) if whole else None)


def count_by_reading(read: Callable[[int | None], Sequence[RefState]], cap: int | None) -> RefCount:
    """The RefCount of a range from ``read(limit)`` (its first ``limit`` refs; None: all): read
    with a small limit, raised while the limit fills and one of the two counts is still at most
    ``cap`` (tombstones or new refs among many)."""
    limit = None if cap is None else 2 * cap + 2
    while True:
        refs = read(limit)
        if limit is None or len(refs) < limit:
            return ref_count(refs, cap, True)
        counted = ref_count(refs, cap, False)
        if counted.old > cap and counted.new > cap:
            return counted
        limit *= 4


def counting_by_reading(read: Reader) -> Counter:
    """A Counter from a Reader (count_by_reading of each group)."""
    def count(prefix: int, depth: int, cap: int | None) -> RefCount:
        return count_by_reading(lambda limit: read(prefix, depth, limit), cap)

    return count


def _count(count: Counter, prefix: int, depth: int, cap: int | None) -> _Half:
    """Old and new counts of a prefix, exact up to ``cap`` (capped at cap + 1 above it)."""
    counted = count(prefix, depth, cap)
    return _Half(counted.old, counted.new, None if counted.refs is None else list(counted.refs))


def plan_regions(dirty: Iterable[int], read: Reader, n_bits: int, s_min: int, s_max: int,
                 summarized: bool = True, count: Counter | None = None,
                 read_whole: Sequence[tuple[int, int, Sequence[RefState]]] = ()) -> list[Region]:
    """The regions to re-cut for the changed ``dirty`` codes (disjoint groups).

    ``summarized``: the layer may have segments at all (layer + 1 <= max layers). ``count``:
    the store's own capped counts (None: counted by reading, ``counting_by_reading``).
    ``read_whole``: groups (prefix, depth, every ref) read whole already (``remembering``)."""
    codes = sorted(set(dirty))
    if not codes:
        return []
    read, count = remembering(read, n_bits, count, read_whole)
    cap = count_cap(s_min, s_max)
    counts = _PathCounts(count, n_bits, cap)
    root = counts.direct(0, 0)
    if not summarized or root.old <= s_max or root.new <= s_max:
        # the layer is (or was) too small to summarize, or never is: it is one region
        refs = root.refs if root.refs is not None else read(0, 0, None)
        return [Region(0, tuple(refs), root=True, planned=True)]
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
            half = counts.half(prefix, depth, b, group_codes)
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
    return [replace(r, planned=True) for r in regions]


class _PathCounts:
    """The capped counts of plan_regions' walk, each group counted at most once, and one count
    per bit of a changed code's path where the plain walk makes two.

    A group's capped count is the capped sum of its halves' (both exact: the sum is; one above
    the cap: so is the group). A half the walk goes on into (it holds changed codes) is
    therefore counted through its own halves, which the next step counts anyway: first the one
    without changed codes; when that one alone is above the cap in both states, so is the half,
    and the other is left to the next step. A group known exactly gives its second half as the
    difference. The answers are the counts a direct count returns, so the plan is the same."""

    def __init__(self, count: Counter, n_bits: int, cap: int | None) -> None:
        self._count, self._n_bits, self._cap = count, n_bits, cap
        self._known: dict[tuple[int, int], _Half] = {}

    def direct(self, prefix: int, depth: int) -> _Half:
        key = (prefix, depth)
        if key not in self._known:
            self._known[key] = _count(self._count, prefix, depth, self._cap)
        return self._known[key]

    def half(self, prefix: int, depth: int, b: int, codes: Sequence[int]) -> _Half:
        """The count of half ``b`` (at ``depth + 1``) of group ``prefix`` at ``depth``, whose
        changed codes are ``codes``."""
        cap, child = self._cap, (prefix * 2 + b, depth + 1)
        if child in self._known:
            return self._known[child]
        group, other = self._known.get((prefix, depth)), self._known.get((prefix * 2 + 1 - b, depth + 1))
        if cap is not None and group is not None and other is not None and max(group.old, group.new) <= cap:
            # the group is known exactly: this half is what its other half leaves
            self._known[child] = _Half(group.old - other.old, group.new - other.new, None)
            return self._known[child]
        mine = [c for c in codes if bit(c, depth, self._n_bits) == b]
        if cap is None or not mine or depth + 1 >= self._n_bits or (
                group is not None and max(group.old, group.new) <= cap):
            return self.direct(*child)  # not walked into, or small: one count
        ones = sum(bit(c, depth + 1, self._n_bits) for c in mine)
        first = 1 if ones < len(mine) else 0  # the quarter without changed codes, when there is one
        a = self.direct(child[0] * 2 + first, depth + 2)
        if a.old > cap and a.new > cap:
            self._known[child] = _Half(cap + 1, cap + 1, None)
        else:
            z = self.direct(child[0] * 2 + 1 - first, depth + 2)
            self._known[child] = _Half(min(a.old + z.old, cap + 1), min(a.new + z.new, cap + 1), None)
        return self._known[child]


def path_groups(codes: Iterable[int], n_bits: int, layer_size: int, cap: int | None) -> list[tuple[int, int]]:
    """The groups (prefix, depth) plan_regions' walk counts for ``codes`` on a layer of about
    ``layer_size`` refs, known before it starts: the root, then each code's sibling halves
    (``_PathCounts`` counts a half the walk goes into through its halves, one of which is the
    next sibling) down to one level below where a group of an evenly spread layer holds about
    ``cap`` refs, and the code's own group there: where the walk's region usually is (a count
    that reads that group whole answers every group inside it). A store that waits per
    request counts them side by side (services.layer_reads.counted_ahead); a group the walk does
    not ask after all (its region found higher, or a skip that leaves the code's path) costs
    a request, one it asks that is not here is counted as before (20 single inserts into
    random layers of 2k and 40k refs: 2 of the 240 groups counted ahead were not asked, 25 of
    the 263 asked were not ahead; tests/unit/test_scoped_reads.py)."""
    if cap is None:
        return []
    deepest = 0
    while deepest < n_bits and (layer_size >> (deepest + 1)) >= cap:
        deepest += 1
    deepest = min(deepest + 1, n_bits)
    codes = sorted(set(codes))
    out = {(0, 0): None}
    for code in codes:
        for depth in range(1, deepest + 1):
            out[(code_prefix(code, depth, n_bits) ^ 1, depth)] = None
        out[(code_prefix(code, deepest, n_bits), deepest)] = None
    # a half holding another changed code is counted through its own halves, never directly
    return [(p, d) for p, d in out if d in (0, deepest) or all(code_prefix(c, d, n_bits) != p for c in codes)]


def remembering(read: Reader, n_bits: int, count: Counter | None = None,
                read_whole: Sequence[tuple[int, int, Sequence[RefState]]] = ()) -> tuple[Reader, Counter]:
    """``read`` and ``count`` (None: ``counting_by_reading(read)``), answering a group that lies
    inside a group read whole before from that read instead of reading or counting it again. A
    read is whole when it returned fewer refs than its limit (or had none), a count when it
    returned its refs; their refs, in (code, node id) order, include every ref of their
    sub-groups in the same order. Within one plan the walk counts a half, then its halves, then
    reads a region made of them: on a small or sparse layer the root's count already holds
    everything (a store that spreads a layer over partitions pays one query per partition for
    each such read). A store that counts without reading (SQLite) returns no refs: its counts
    cost one small query each and the walk reads only its regions and carried halves.
    ``read_whole``: groups read whole before the plan (services.layer_reads.counted_ahead)."""
    whole: list[tuple[int, int, Sequence[RefState]]] = list(read_whole)  # (prefix, depth, refs)

    def held(prefix: int, depth: int) -> list[RefState] | None:
        for p, d, refs in whole:
            if d <= depth and prefix >> (depth - d) == p:
                return [r for r in refs if code_prefix(r.code, depth, n_bits) == prefix]
        return None

    def read_once(prefix: int, depth: int, limit: int | None) -> list[RefState]:
        inside = held(prefix, depth)
        if inside is not None:
            return inside if limit is None else inside[:limit]
        refs = read(prefix, depth, limit)
        if limit is None or len(refs) < limit:
            whole.append((prefix, depth, refs))
        return refs

    counter = counting_by_reading(read_once) if count is None else count

    def count_once(prefix: int, depth: int, cap: int | None) -> RefCount:
        inside = held(prefix, depth)
        if inside is not None:
            return ref_count(inside, cap, True)
        counted = counter(prefix, depth, cap)
        if count is not None and counted.refs is not None:
            whole.append((prefix, depth, counted.refs))
        return counted

    return read_once, count_once


def _region(read: Reader, depth: int, prefix: int, extra: Sequence[RefState],
            root: bool = False) -> Region:
    own = read(prefix, depth, None)
    return Region(depth, tuple(own) + tuple(extra), root=root and not extra)


def _held(read: Reader, prefix: int, depth: int, limit: int, cap: int) -> tuple[list[RefState] | None, int]:
    """A group's refs when it holds at most ``limit`` of them or few live ones (a half full of
    tombstones is read whole: its live count must be exact), else None; and its live count,
    exact up to ``cap``."""
    refs = read(prefix, depth, limit + 1)
    live = sum(1 for r in refs if r.live)
    if len(refs) <= limit:
        return refs, live
    if live > cap:
        return None, live
    refs = read(prefix, depth, None)
    return refs, sum(1 for r in refs if r.live)


def stream_regions(read: Reader, n_bits: int, s_min: int, s_max: int, limit: int) -> Iterator[Region]:
    """The whole layer as disjoint regions of the rule's recursion over its live nodes, one at
    a time, each read as its parent group is counted and holding at most about
    ``limit`` refs (more only for an over-full exact-code bucket or a group of few live nodes
    among many tombstones). cut_region over them gives partition() of the live nodes. Memory
    holds at most two regions per bit of the code waiting their turn and the small halves
    carried along: bounded by the code length and ``limit``, not by the layer."""
    cap = count_cap(s_min, s_max)
    if cap is None:  # every count matters exactly: no group can be left uncounted
        yield whole_layer(read)
        return
    limit = max(limit, 2 * cap + 2)
    refs, _live = _held(read, 0, 0, limit, cap)
    if refs is not None:
        yield Region(0, tuple(refs), root=True)
        return
    # a group known to hold more than ``limit`` refs: (depth, prefix, carried refs), or a region
    stack: list[tuple[int, int, tuple[RefState, ...]] | Region] = [(0, 0, ())]
    while stack:
        item = stack.pop()
        if isinstance(item, Region):
            yield item
            continue
        depth, prefix, extra = item
        if depth >= n_bits:  # one exact code: the rule cuts it evenly
            yield _region(read, depth, prefix, extra)
            continue
        halves = [_held(read, prefix * 2 + b, depth + 1, limit, cap) for b in (0, 1)]
        carried = [tuple(e for e in extra if bit(e.code, depth, n_bits) == b) for b in (0, 1)]
        counts = [halves[b][1] + sum(e.live for e in carried[b]) for b in (0, 1)]
        decision = decide(counts[0], counts[1], depth, n_bits, s_min, s_max)
        if decision == "split":
            for b in (1, 0):
                own = halves[b][0]
                stack.append((depth + 1, prefix * 2 + b, carried[b]) if own is None
                             else Region(depth + 1, tuple(own) + carried[b]))
        elif decision == "skip":  # a half with at most K live nodes, held whole: carry it
            s = min((b for b in (0, 1) if halves[b][0] is not None and counts[b] <= cap),
                    key=lambda b: (counts[b], b))
            small = tuple(halves[s][0] or ())
            other = halves[1 - s][0]
            stack.append((depth + 1, prefix * 2 + 1 - s, extra + small) if other is None
                         else Region(depth + 1, tuple(other) + extra + small))
        else:  # terminal: both halves are held (a half that is not holds more than S_max)
            yield Region(depth, tuple(halves[0][0] or ()) + tuple(halves[1][0] or ()) + extra)


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
