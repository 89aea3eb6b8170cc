"""Open streams per tenant in this process (``eragraph serve``: one process serves every stream),
the arithmetic domain.stream_slots'."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from ...domain.stream_slots import SlotDecision, open_slot

LEASE_SECONDS = 3600.0  # in one process a stream always releases its slot; the lease is a backstop


class MemoryStreamSlots:
    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic,
                 lease_seconds: float = LEASE_SECONDS) -> None:
        self.limit, self.clock, self.lease_seconds = limit, clock, lease_seconds
        self._leases: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, tenant: str) -> tuple[SlotDecision, str]:
        """(the decision, the lease id to release when the stream ends)."""
        lease = uuid.uuid4().hex
        with self._lock:
            decision = open_slot(self._leases.get(tenant, {}), self.clock(), self.limit, lease, self.lease_seconds)
            self._leases[tenant] = decision.leases
        return decision, lease

    def release(self, tenant: str, lease: str) -> None:
        with self._lock:
            self._leases.get(tenant, {}).pop(lease, None)
