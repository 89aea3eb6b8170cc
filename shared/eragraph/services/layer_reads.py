"""What a reconcile reads of a layer (services.resummarize): domain.scoped's Reader and Counter
over the graph store's code-ordered ref index, each inside one access partition's code range
(domain.access.placed), and which partitions a layer or a message's codes touch."""

from __future__ import annotations

import bisect

from ..domain.access import code_range, index_of, max_code
from .engine import Engine


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
