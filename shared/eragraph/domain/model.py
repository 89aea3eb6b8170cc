"""The records the engine keeps: documents, nodes, segments, the LSH configuration, messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class EragraphError(Exception):
    """Base class of the errors Eragraph reports to its users."""


class EmbedderMismatchError(EragraphError):
    """A store built with one embedder was opened with another."""


class ConflictError(EragraphError):
    """A conditional write lost against a concurrent writer; retry."""


class BadInputError(EragraphError):
    """A document could not be read (empty, binary, not UTF-8, too large...)."""


DELETED = "deleted"  # the status of a tombstone: a document removed by a versioned delete


@dataclass(frozen=True)
class Document:
    """A document, or (``status == DELETED``) the tombstone a versioned delete leaves: its
    source and ``version`` only, so that an older event arriving later is recognized as stale.

    ``version`` orders the writes of one source: the S3 ``sequencer`` of the event that wrote it
    (domain.sequencer compares them), empty when the source has none (local files: the last
    call wins)."""

    doc_id: str
    source: str
    content_hash: str
    title: str = ""
    chunk_ids: tuple[str, ...] = ()
    status: str = "indexed"
    meta: dict[str, Any] = field(default_factory=dict)
    version: str = ""

    @property
    def is_tombstone(self) -> bool:
        return self.status == DELETED

    def stamp(self) -> tuple[str, str, str]:
        """What a conditional write compares: (content hash, version, status)."""
        return (self.content_hash, self.version, self.status)


class _AnyVersion:
    def __repr__(self) -> str:
        return "ANY_VERSION"


ANY_VERSION: Any = _AnyVersion()  # put_document(expected=ANY_VERSION): an unconditional write


@dataclass(frozen=True)
class Node:
    """A node of the summary graph: a chunk (layer 0) or a summary (layer >= 1)."""

    node_id: str
    layer: int
    text: str
    tokens: int
    code: int
    doc_id: str = ""
    source: str = ""
    children: tuple[str, ...] = ()

    @property
    def is_summary(self) -> bool:
        return self.layer > 0


@dataclass(frozen=True)
class NodeRef:
    """The part of a node that partitioning needs."""

    node_id: str
    code: int


@dataclass(frozen=True)
class Segment:
    """A group of nodes of one layer; it owns exactly one summary node in the layer above."""

    segment_id: str
    layer: int
    members: tuple[str, ...]
    summary_id: str


@dataclass(frozen=True)
class LshConfig:
    """Hyperplanes drawn once and reused for every layer and every later insert."""

    embedder_id: str
    dim: int
    n_planes: int
    seed: int
    planes: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class SegmentsAffected:
    """Message: the node set of ``layer`` changed; reconcile its segments."""

    layer: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    reason: str = ""

    def dedup_key(self) -> str:
        """Pending messages for the same layer coalesce: one reconcile covers them all."""
        return f"layer:{self.layer}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "SegmentsAffected",
            "layer": self.layer,
            "added": list(self.added),
            "removed": list(self.removed),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SegmentsAffected:
        if not isinstance(data, dict) or data.get("type") != "SegmentsAffected":
            raise ValueError("not a SegmentsAffected message")
        layer = data.get("layer")
        if not isinstance(layer, int) or isinstance(layer, bool) or layer < 0:
            raise ValueError(f"bad layer in message: {layer!r}")
        return cls(
            layer=layer,
            added=tuple(str(x) for x in data.get("added", ())),
            removed=tuple(str(x) for x in data.get("removed", ())),
            reason=str(data.get("reason", "")),
        )
