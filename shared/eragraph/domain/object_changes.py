"""A change to one stored object (created or removed), whatever notification carried it, and
the error of a notification record nothing can be done with. The AWS adapter
(adapters.aws.s3_events) parses envelopes into these; services.object_events applies them."""

from __future__ import annotations

from dataclasses import dataclass


class UnusableRecord(ValueError):
    """An event record the function cannot act on; ``reason`` is a short fixed tag."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class ObjectChange:
    """One S3 object created or removed, whatever envelope carried it."""

    bucket: str
    key: str  # decoded
    removed: bool
    sequencer: str | None  # as the event gave it
    shape: str  # s3 | sns | eventbridge
    size: int | None = None  # the created object's bytes, as the event gave them (None: not given)
