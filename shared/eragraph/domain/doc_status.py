"""A document's ingestion status: what its owner reads to know whether it is in yet.

States, in order: ``received`` (seen, not yet indexed) -> ``indexed`` (its chunks are
queryable; the summaries of the layer-0 shards it touched are still to be built, read as
``summaries_pending``) -> ``done`` (every shard it touched was reconciled since). Or
``failed``, with ``reason`` in words (unreadable, binary, empty or too-large file, an
extraction error, a record given up on). ``done`` is never stored: a reader derives it from
``pending_shards`` and the shards' dirty markers (services.doc_status), so the summarize
pass writes nothing per document and a shard shared by many documents is one marker.

Counts per prefix use Bedrock's ingestion-job statistic names where one fits:
numberOfDocumentsScanned = every status, numberOfDocumentsFailed = failed,
numberOfNewDocumentsIndexed = indexed + summaries_pending + done."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

RECEIVED = "received"
INDEXED = "indexed"
SUMMARIES_PENDING = "summaries_pending"
DONE = "done"
FAILED = "failed"
STORED_STATES = (RECEIVED, INDEXED, FAILED)
STATES = (RECEIVED, INDEXED, SUMMARIES_PENDING, DONE, FAILED)


@dataclass(frozen=True)
class DocStatus:
    """The stored status of one document (keyed by ``doc_id``, listed by ``source``)."""

    doc_id: str
    source: str
    state: str
    reason: str = ""
    received_at: float = 0.0
    updated_at: float = 0.0
    pending_shards: tuple[int, ...] = ()  # layer-0 shards its chunks fell in, announced at indexing
    content_hash: str = ""

    def __post_init__(self) -> None:
        if self.state not in STORED_STATES:
            raise ValueError(f"unknown stored document state {self.state!r}")
        if self.state == FAILED and not self.reason:
            raise ValueError("a failed status needs a reason")

    def to_json(self) -> dict:
        return {"doc_id": self.doc_id, "source": self.source, "state": self.state, "reason": self.reason,
                "received_at": self.received_at, "updated_at": self.updated_at,
                "pending_shards": list(self.pending_shards), "content_hash": self.content_hash}

    @classmethod
    def from_json(cls, data: dict) -> DocStatus:
        return cls(doc_id=data["doc_id"], source=data.get("source", ""), state=data["state"],
                   reason=data.get("reason", ""), received_at=float(data.get("received_at", 0.0)),
                   updated_at=float(data.get("updated_at", 0.0)),
                   pending_shards=tuple(int(s) for s in data.get("pending_shards", ())),
                   content_hash=data.get("content_hash", ""))


def effective_state(status: DocStatus, dirty_shards: set[int]) -> str:
    """What the owner sees: an indexed document is ``summaries_pending`` while any shard it
    touched is still dirty, ``done`` once none is."""
    if status.state != INDEXED:
        return status.state
    return SUMMARIES_PENDING if dirty_shards.intersection(status.pending_shards) else DONE


@dataclass
class StatusCounts:
    """Counts of each state under a prefix; ``approximate``: of its first records only (a prefix
    without counters is counted from at most one page of its records)."""

    prefix: str
    counts: dict[str, int] = field(default_factory=lambda: {s: 0 for s in STATES})
    approximate: bool = False

    def add(self, states: Iterable[str]) -> StatusCounts:
        for state in states:
            self.counts[state] = self.counts.get(state, 0) + 1
        return self

    def to_json(self) -> dict:
        c = self.counts
        total = sum(c.values())
        return {"prefix": self.prefix, "total": total, **{s: c.get(s, 0) for s in STATES},
                "bedrock": {"numberOfDocumentsScanned": total,
                            "numberOfNewDocumentsIndexed": c[INDEXED] + c[SUMMARIES_PENDING] + c[DONE],
                            "numberOfDocumentsFailed": c[FAILED]},
                **({"approximate": True} if self.approximate else {})}
