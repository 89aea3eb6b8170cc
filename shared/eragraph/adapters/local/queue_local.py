"""The local mode's in-process message bus.

It is ``MemoryQueue`` (FIFO; a pending message whose dedup key is already queued is coalesced
into it) made safe to share between threads — e.g. a file watcher that ingests while the main
thread drains. Nothing is persisted: a process that dies with messages queued leaves its
``dirty:<layer>`` marks in the graph store, and every CLI ingest starts by announcing those
layers again (``services.resummarize.requeue_dirty``, as reindex does), before its own drain.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ...domain.model import SegmentsAffected
from ..memory.queue_memory import MemoryQueue


class LocalQueue(MemoryQueue):
    """``MemoryQueue`` behind a lock; ordering and coalescing are MemoryQueue's."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        with self._lock:
            super().send(messages)

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        with self._lock:
            return super().receive(max_messages)

    def ack(self, receipts: Sequence[str]) -> None:
        with self._lock:
            super().ack(receipts)

    def pending(self) -> int:
        with self._lock:
            return super().pending()
