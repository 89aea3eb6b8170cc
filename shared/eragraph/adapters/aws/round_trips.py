"""Round trips: the sequential waits of an operation, apart from how many requests it sends.

A logical clock per thread: ``tick()`` (called once per request by whoever counts requests, e.g.
bench/counting.DynamoCounter's botocore hook) moves the calling thread's clock one wait on;
``fan_out(fn, items, workers)`` runs ``fn`` over ``items`` on ``workers`` lanes side by side,
each lane starting at the caller's clock and running its share in order, and moves the caller
to the slowest lane's clock when all are done. A batch of ``n`` requests fanned out over ``w``
lanes therefore costs ``ceil(n / w)`` round trips, as it does in wall time when every request
takes about as long as the others. ``now()`` reads the calling thread's clock.

The lanes are fixed (item ``i`` on lane ``i % w``), so the count does not depend on how the
threads were scheduled. Nothing here sends a request or costs one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_clock = threading.local()


def now() -> int:
    return int(getattr(_clock, "t", 0))


def _set(t: int) -> None:
    _clock.t = t


def tick() -> None:
    _clock.t = now() + 1


def fan_out(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]``, run on up to ``workers`` threads side by side (one lane each,
    in order within a lane); the results in the order of ``items``."""
    items = list(items)
    lanes = max(1, min(int(workers), len(items)))
    if lanes == 1:
        return [fn(x) for x in items]
    start = now()
    out: list = [None] * len(items)

    def lane(k: int) -> int:
        _set(start)
        for i in range(k, len(items), lanes):
            out[i] = fn(items[i])
        return now()

    with ThreadPoolExecutor(max_workers=lanes) as pool:
        ends = list(pool.map(lane, range(lanes)))
    _set(max(ends))
    return out
