"""The message queue that carries SegmentsAffected from ingest to the reconcile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..domain.model import SegmentsAffected


@runtime_checkable
class MessageQueue(Protocol):
    def send(self, messages: Sequence[SegmentsAffected]) -> None: ...
    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        """Up to max_messages (receipt, message) pairs, oldest first."""
        ...
    def ack(self, receipts: Sequence[str]) -> None: ...
    def pending(self) -> int: ...
