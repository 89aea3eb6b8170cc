"""A per-tenant token bucket (the query API's rate limit), as a pure step: the stored state and
the time in, the decision and the state to store out. The store (adapters/aws/rate_limit_dynamodb.py)
keeps the state and writes it back conditionally, so concurrent requests of one tenant
never spend the same token twice."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    tokens: float
    at: float  # seconds (the clock of the stored state)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    bucket: Bucket  # the state to store (unchanged when refused)
    retry_after: int  # whole seconds until a token is there (0 when allowed)


def take(bucket: Bucket | None, now: float, rate: float, burst: int) -> Decision:
    """One request against ``bucket`` (None: a full one) refilled at ``rate`` per second up to
    ``burst`` tokens."""
    if rate <= 0:
        raise ValueError("rate must be > 0 (0 turns the limit off before any bucket)")
    if bucket is None:
        tokens = float(burst)
    else:  # a clock that went back refills nothing
        tokens = min(float(burst), bucket.tokens + max(0.0, now - bucket.at) * rate)
    if tokens >= 1.0:
        return Decision(True, Bucket(tokens - 1.0, now), 0)
    return Decision(False, Bucket(tokens, now), max(1, math.ceil((1.0 - tokens) / rate)))


class LimitStoreUnavailable(Exception):
    """The store of the per-tenant limits failed with something other than throttling (a
    missing table, access denied, an outage): the request is refused for now (503 with
    Retry-After), never served unlimited and never a 500. The cause stays in the log."""

    retry_after = 5
