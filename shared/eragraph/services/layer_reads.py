"""What a reconcile reads of a layer (services.resummarize): domain.scoped's Reader and Counter
over the graph store's code-ordered ref index, each inside one access partition's code range
(domain.access.placed), and which partitions a layer or a message's codes touch."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ..domain.access import code_range, index_of, max_code
from ..domain.model import RefState
from ..domain.prefix_counts import PrefixCounts
from ..domain.scoped import Counter, RefCount, code_prefix, path_groups
from .engine import Engine

# a message of at most this many codes has its walk's counts made ahead, side by side, on a
# store whose requests each wait (counted_ahead); past it their paths share too much
AHEAD_CODES = 8
# a group of the store's prefix counts holding at most this many refs is read whole when a
# changed code lies in it (one Query of at most ~80 KB on DynamoDB), answering every count and
# read of the walk below it; a larger one is counted bit by bit below as before
WHOLE_GROUP_REFS = 1024


def reader(engine: Engine, layer: int, index: int = 0):
    """domain.scoped's Reader over the graph store's ref index of ``layer``, inside access
    partition ``index``'s code range (domain.access.placed)."""
    n_bits = engine.settings.n_planes
    base = index << n_bits

    def read(prefix: int, depth: int, limit: int | None):
        span = n_bits - depth
        return engine.graph.prefix_refs(layer, base + (prefix << span), base + ((prefix + 1) << span) - 1, limit)

    return read


def held_reader(refs, n_bits: int, index: int = 0):
    """A Reader answering every group from ``refs``, a whole layer read once (code order),
    inside access partition ``index``'s code range."""
    codes = [r.code for r in refs]
    base = index << n_bits

    def read(prefix: int, depth: int, limit: int | None):
        span = n_bits - depth
        start = bisect.bisect_left(codes, base + (prefix << span))
        end = bisect.bisect_left(codes, base + ((prefix + 1) << span))
        if limit is not None:
            end = min(end, start + limit)
        return list(refs[start:end])

    return read


def counter(engine: Engine, layer: int, index: int = 0):
    """domain.scoped's Counter over the graph store's capped counts of ``layer``'s ref index,
    inside access partition ``index``'s code range."""
    n_bits = engine.settings.n_planes
    base = index << n_bits

    def count(prefix: int, depth: int, cap: int | None):
        span = n_bits - depth
        return engine.graph.count_refs(layer, base + (prefix << span), base + ((prefix + 1) << span) - 1, cap)

    return count


def held_counts(engine: Engine, layer: int, index: int, codes: Sequence[int] = ()) -> PrefixCounts | None:
    """The prefix counts of ``layer`` (GraphStore ``held_prefix_counts``: DynamoDB, as read with
    the layer sizes of this reconcile, in a store created with them; SQLite, as they stand,
    kept by triggers, with the deeper counts of the groups the changed ``codes`` lie in; only
    the open partition's are kept), or None."""
    held = getattr(engine.graph, "held_prefix_counts", None)
    return held(layer, codes) if held is not None and index == 0 else None


def answered_from(held: PrefixCounts, below: Counter) -> Counter:
    """A Counter taking a group ``held`` answers (at most ``held.depth`` bits deep, or inside
    a group it holds the deeper counts of) from ``held``, another from ``below``."""
    def count(prefix: int, depth: int, cap: int | None) -> RefCount:
        return held.count(prefix, depth, cap) if held.answers(prefix, depth) else below(prefix, depth, cap)

    return count


def counted_ahead(engine: Engine, layer: int, index: int, codes: Sequence[int], layer_size: int,
                  cap: int | None, held: PrefixCounts | None = None
                  ) -> tuple[Counter, list[tuple[int, int, Sequence[RefState]]]]:
    """``counter`` of ``layer`` in access partition ``index``, answering a group ``held``
    answers from it (the store's prefix counts as this reconcile read them,
    domain.prefix_counts), with the groups (prefix, depth) the walk for ``codes`` will
    count with ``cap`` below that (domain.scoped.path_groups, for a message of at most
    AHEAD_CODES codes on a layer of about ``layer_size`` refs) made at once, side by side, by a
    store whose requests each wait a round trip (GraphStore ``count_refs_many``: DynamoDB), so
    the walk takes their counts instead of waiting for each in turn: a code's held group of at
    most WHOLE_GROUP_REFS refs is read whole instead of counted below; and the groups read whole
    (prefix, depth, refs), for the plan to answer every read and count inside them from
    (domain.scoped.plan_regions' ``read_whole``). A store without ``count_refs_many`` counts as
    it is asked."""
    count = counter(engine, layer, index) if held is None else answered_from(held, counter(engine, layer, index))
    many = getattr(engine.graph, "count_refs_many", None)
    if many is None or len(set(codes)) > AHEAD_CODES:
        return count, []
    n_bits = engine.settings.n_planes
    groups = path_groups(codes, n_bits, layer_size, cap)
    whole: list[tuple[int, int]] = []
    if held is not None:
        top = held.depth
        whole = sorted({(code_prefix(c, top, n_bits), top) for c in codes
                        if held.most_refs(code_prefix(c, top, n_bits), top) <= WHOLE_GROUP_REFS})
        inside = {p for p, _ in whole}
        groups = [(p, d) for p, d in groups if not held.answers(p, d) and (p >> (d - top)) not in inside]
    if not groups and not whole:
        return count, []
    base = index << n_bits

    def spans(of):
        return [(base + (p << (n_bits - d)), base + ((p + 1) << (n_bits - d)) - 1) for p, d in of]

    known = dict(zip(groups, many(layer, spans(groups), cap))) if groups else {}
    read = list(zip(whole, many(layer, spans(whole), None))) if whole else []

    def count_ahead(prefix: int, depth: int, asked: int | None) -> RefCount:
        ahead = known.get((prefix, depth)) if asked == cap else None
        return ahead if ahead is not None else count(prefix, depth, asked)

    return count_ahead, ([(p, d, c.refs) for (p, d), c in read if c.refs is not None]
                         + [(p, d, c.refs) for (p, d), c in known.items() if c.refs is not None])


def present_partitions(engine: Engine, layer: int) -> list[int]:
    """The access partitions (indexes) that hold refs of ``layer``, tombstones included: one
    read of one ref per partition, skipping from each to the next one's range."""
    n_bits = engine.settings.n_planes
    out, lo = [], 0
    while True:
        first = engine.graph.prefix_refs(layer, lo, max_code(), 1)
        if not first:
            return out or [0]
        index = index_of(first[0].code, n_bits)
        out.append(index)
        lo = code_range(index, n_bits)[1] + 1


def partition_codes(codes, n_bits: int) -> dict[int, list[int]]:
    """A message's codes by the access partition they lie in."""
    out: dict[int, list[int]] = {}
    for code in codes:
        out.setdefault(index_of(code, n_bits), []).append(code)
    return out
