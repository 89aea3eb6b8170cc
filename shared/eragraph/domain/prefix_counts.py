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
partition with an access list counts as before. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .access import index_of, lsh_part
from .model import RefState
from .scoped import RefCount

PREFIX_BITS = 8  # the depth kept: 256 groups, two counts each


def prefix_depth(n_bits: int) -> int:
    return min(PREFIX_BITS, n_bits)


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

    def _span(self, prefix: int, depth: int) -> slice:
        if not 0 <= depth <= self.depth:
            raise ValueError(f"depth {depth} is below the {self.depth} bits held")
        shift = self.depth - depth
        return slice(prefix << shift, (prefix + 1) << shift)

    def count(self, prefix: int, depth: int, cap: int | None) -> RefCount:
        """GraphStore.count_refs of the ``depth``-bit group ``prefix`` (depth <= self.depth)."""
        span = self._span(prefix, depth)
        old, new = sum(self.old[span]), sum(self.new[span])
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
