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


class LexicalIndexMissing(EragraphError):
    """The store was built before it had a lexical (BM25) index; `eragraph reindex` builds it."""

    def __init__(self, where: str = "this store") -> None:
        super().__init__(f"{where} has no lexical (BM25) index yet (built before it existed): "
                         "run `eragraph reindex` to build it")


@dataclass(frozen=True)
class Document:
    doc_id: str
    source: str
    content_hash: str
    title: str = ""
    chunk_ids: tuple[str, ...] = ()
    status: str = "indexed"
    meta: dict[str, Any] = field(default_factory=dict)


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
