"""A layer's ref counts by code prefix: what the scoped reconcile's walk asks of the top of a
large layer, answered without reading it.

domain.scoped's walk decides each group of its path from the old and live counts of the
group's halves (GraphStore.count_refs). A store whose every read is a request (DynamoDB) pays
one request a count, about one per bit of the path: 16 for one code of a 100k-chunk layer.
The counts of the top ``depth`` bits change only where a ref is written, so the store keeps
them beside the layer counter, moved by the same transactions that write the refs
(adapters.aws.ref_counts), and a reconcile reads them with the layer sizes it reads anyway.
A group at most ``depth`` bits deep is then a sum of held counts; one deeper lies inside one
depth-bit group, which a small layer holds few enough refs in to be read whole.

Only the open access partition (index 0, documents without an access list) is kept: its
counts are at most 2 * 2^PREFIX_BITS numbers on one item whatever the store holds; a
partition with an access list counts as before.

A store whose reads are cheap range reads of its own table (SQLite) keeps a second level too,
the counts of every DEEP_BITS-bit group, and returns with a layer's top counts those of the
deep groups inside the top groups of the codes a reconcile walks (``deep``: 2^(DEEP_BITS -
PREFIX_BITS) numbers of each kind a top group). A walk's path is then counted from held counts
down to DEEP_BITS bits, about 16 bits of the 20-bit code: at 1M chunks a layer-0 group of
DEEP_BITS bits holds about 15 refs, so little of the path is left to count in the ref index.
On DynamoDB the counts' item is written by every ref write's transaction and read whole with
the layer sizes, so it keeps the top level alone. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .access import index_of, lsh_part
from .model import RefState
from .scoped import RefCount

PREFIX_BITS = 8  # the depth kept: 256 groups, two counts each
DEEP_BITS = 16  # the second level a store with cheap range reads keeps (SQLite): 256 groups a top group


def prefix_depth(n_bits: int) -> int:
    return min(PREFIX_BITS, n_bits)


def deep_depth(n_bits: int) -> int:
    return min(DEEP_BITS, n_bits)


def bucket_of(code: int, n_bits: int) -> int | None:
    """The depth-bit group of a stored code (None: not in the open partition, not kept)."""
    if index_of(code, n_bits) != 0:
        return None
    return lsh_part(code, n_bits) >> (n_bits - prefix_depth(n_bits))


def tally(code: int, n_bits: int, before: tuple[bool, bool], after: tuple[bool, bool]) -> dict[tuple[str, int], int]:
    """The count changes of one ref write: ``before`` and ``after`` are (old, live) of the ref
    (old: a stored segment names it; (False, False): absent). Keys ("old" | "new", group)."""
    group = bucket_of(code, n_bits)
    out: dict[tuple[str, int], int] = {}
    if group is None:
        return out
    for kind, b, a in (("old", before[0], after[0]), ("new", before[1], after[1])):
        if a != b:
            out[(kind, group)] = int(a) - int(b)
    return out


def merge(into: dict[tuple[str, int], int], more: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    for key, delta in more.items():
        into[key] = into.get(key, 0) + delta
    return into


@dataclass(frozen=True)
class PrefixCounts:
    """The old and live refs of each depth-bit code prefix of a layer's open partition."""

    depth: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    # the second level's counts of some top groups: top group -> (old, live) counts of each of
    # its 2^(deep_depth - depth) deep groups (a store that keeps them: SQLite)
    deep_depth: int = 0
    deep: Mapping[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    @classmethod
    def of(cls, n_bits: int, counts: dict[tuple[str, int], int]) -> PrefixCounts:
        """From held counts keyed ("old" | "new", group); absent groups hold none."""
        depth = prefix_depth(n_bits)
        old, new = [0] * (1 << depth), [0] * (1 << depth)
        for (kind, group), n in counts.items():
            if 0 <= group < len(old):
                (old if kind == "old" else new)[group] = int(n)
        return cls(depth, tuple(old), tuple(new))

    @classmethod
    def of_refs(cls, refs: Iterable[RefState], n_bits: int) -> PrefixCounts:
        """What the counts of a layer holding ``refs`` (tombstones included) are."""
        counts: dict[tuple[str, int], int] = {}
        for ref in refs:
            merge(counts, tally(ref.code, n_bits, (False, False), (ref.old, ref.live)))
        return cls.of(n_bits, counts)

    def with_deep(self, n_bits: int, tops: Iterable[int], rows: Iterable[tuple[int, int, int]]) -> PrefixCounts:
        """These counts with the second level of each top group in ``tops``: ``rows`` are the
        held (deep group, old, live) counts inside them (an absent deep group holds none)."""
        depth = deep_depth(n_bits)
        shift = depth - self.depth
        width = 1 << shift
        deep = {top: ([0] * width, [0] * width) for top in tops}
        for group, old, live in rows:
            kept = deep.get(group >> shift)
            if kept is not None:
                kept[0][group & (width - 1)] = int(old)
                kept[1][group & (width - 1)] = int(live)
        return PrefixCounts(self.depth, self.old, self.new, depth,
                            {top: (tuple(o), tuple(n)) for top, (o, n) in deep.items()})

    def answers(self, prefix: int, depth: int) -> bool:
        """Whether ``count`` answers the ``depth``-bit group ``prefix`` from held counts."""
        if depth <= self.depth:
            return True
        return depth <= self.deep_depth and (prefix >> (depth - self.depth)) in self.deep

    def _span(self, prefix: int, depth: int) -> slice:
        if not 0 <= depth <= self.depth:
            raise ValueError(f"depth {depth} is below the {self.depth} bits held")
        shift = self.depth - depth
        return slice(prefix << shift, (prefix + 1) << shift)

    def count(self, prefix: int, depth: int, cap: int | None) -> RefCount:
        """GraphStore.count_refs of the ``depth``-bit group ``prefix`` (``answers`` it)."""
        if depth <= self.depth:
            span = self._span(prefix, depth)
            old, new = sum(self.old[span]), sum(self.new[span])
        else:
            if not self.answers(prefix, depth):
                raise ValueError(f"the {depth}-bit group {prefix:x} is not held")
            top = prefix >> (depth - self.depth)
            olds, news = self.deep[top]
            shift = self.deep_depth - depth
            local = prefix - (top << (depth - self.depth))
            span = slice(local << shift, (local + 1) << shift)
            old, new = sum(olds[span]), sum(news[span])
        if cap is not None:
            old, new = min(old, cap + 1), min(new, cap + 1)
        return RefCount(old, new)

    def most_refs(self, prefix: int, depth: int) -> int:
        """At most how many refs in a segment or live the group holds (old + live): what a read
        of it returns where, as on DynamoDB, a tombstone no segment names is not kept."""
        span = self._span(prefix, depth)
        return sum(self.old[span]) + sum(self.new[span])

    def differences(self, other: PrefixCounts) -> list[str]:
        """Where two counts differ (a check's words), at most 5."""
        out = [f"{kind} refs of prefix {group:0{(self.depth + 3) // 4}x}: {a} held, {b} counted"
               for kind, mine, theirs in (("old", self.old, other.old), ("live", self.new, other.new))
               for group, (a, b) in enumerate(zip(mine, theirs)) if a != b]
        return out[:5]
