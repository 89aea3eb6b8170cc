"""The cost ledger's time buckets: each model call is counted in the totals of its
``<kind>|<model>`` and in the bucket of the hour it was made in (ports.graph.MetaStore)."""

from __future__ import annotations

HOUR = 3600  # seconds in a bucket


def bucket_start(at: float, size: int = HOUR) -> int:
    """The start (epoch seconds) of the bucket holding time ``at``."""
    return int(at) // size * size
