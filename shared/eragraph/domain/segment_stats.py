"""A layer's segments in numbers (GET /stats): how many, and the fewest and most members one
has. Kept by each graph store (NodeStore.segment_stats) so that the statistics never read the
segments themselves."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SegmentStats:
    count: int
    smallest: int | None  # None: the layer has no segment
    largest: int | None

    @classmethod
    def of(cls, sizes: Iterable[int]) -> SegmentStats:
        sizes = list(sizes)
        return cls(len(sizes), min(sizes) if sizes else None, max(sizes) if sizes else None)
