"""Content-derived identifiers: re-delivering the same content yields the same ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def content_hash(text: str | bytes) -> str:
    """SHA-256 hex digest of text (UTF-8) or bytes."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def short_hash(*parts: str, length: int = 16) -> str:
    """A short stable hash of several string parts (separated unambiguously)."""
    h = hashlib.sha256()
    for part in parts:
        encoded = part.encode("utf-8")
        h.update(len(encoded).to_bytes(8, "big"))
        h.update(encoded)
    return h.hexdigest()[:length]


def document_id_for_source(source: str) -> str:
    """Id of a document that has no id of its own: derived from its source key."""
    return "doc-" + short_hash("source", source)


def chunk_id(doc_id: str, index: int, text: str, partition: str = "") -> str:
    """``partition``: the access partition of a document with an access list (domain.access):
    a document that moves to another partition gets new chunks, placed anew."""
    return "chk-" + short_hash("chunk", doc_id, str(index), text, *((partition,) if partition else ()))


def segment_id(layer: int, members: Iterable[str]) -> str:
    return "seg-" + short_hash("segment", str(layer), *sorted(members))


def summary_id(layer: int, children: Iterable[str]) -> str:
    """Id of the summary node at ``layer`` (>= 1) that summarizes ``children``."""
    return "sum-" + short_hash("summary", str(layer), *sorted(children))
