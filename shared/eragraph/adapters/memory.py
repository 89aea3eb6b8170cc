"""In-memory adapters: the reference behaviour of every port, used by unit tests."""

from __future__ import annotations

import copy
import itertools
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..domain.bm25 import Bm25Corpus
from ..domain.model import ConflictError, Document, LshConfig, Node, NodeRef, Segment, SegmentsAffected
from ..ports import Hit


class MemoryBlobStore:
    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        self._data[key] = bytes(data)

    def get(self, key: str) -> bytes:
        return self._data[key]

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def list(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._data if k.startswith(prefix))


class MemoryGraphStore:
    def __init__(self) -> None:
        self._lsh: LshConfig | None = None
        self._meta: dict[str, Any] = {}
        self._ledger: dict[str, dict[str, float]] = {}
        self._docs: dict[str, Document] = {}
        self._nodes: dict[str, Node] = {}
        self._leaf_text = Bm25Corpus()  # the lexical index of the leaves, kept with the nodes
        self._segments: dict[int, dict[str, Segment]] = {}
        self._versions: dict[int, int] = {}

    def get_lsh(self) -> LshConfig | None:
        return self._lsh

    def put_lsh(self, config: LshConfig) -> LshConfig:
        if self._lsh is None:
            self._lsh = config
        return self._lsh

    def get_meta(self, key: str) -> Any | None:
        return copy.deepcopy(self._meta.get(key))

    def put_meta(self, key: str, value: Any) -> None:
        self._meta[key] = copy.deepcopy(value)

    def delete_meta(self, key: str) -> None:
        self._meta.pop(key, None)

    def meta_keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self._meta if k.startswith(prefix))

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float) -> None:
        row = self._ledger.setdefault(kind, {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0})
        row["calls"] += calls
        row["tokens_in"] += tokens_in
        row["tokens_out"] += tokens_out
        row["seconds"] += seconds

    def ledger(self) -> dict[str, dict[str, float]]:
        return copy.deepcopy(self._ledger)

    def get_document(self, doc_id: str) -> Document | None:
        return self._docs.get(doc_id)

    def find_documents(self, source: str) -> list[Document]:
        return sorted((d for d in self._docs.values() if d.source == source), key=lambda d: d.doc_id)

    def put_document(self, doc: Document) -> None:
        self._docs[doc.doc_id] = doc

    def delete_document(self, doc_id: str) -> None:
        self._docs.pop(doc_id, None)

    def list_documents(self) -> list[Document]:
        return [self._docs[k] for k in sorted(self._docs)]

    def put_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self._nodes[node.node_id] = node
            if node.layer == 0:
                self._leaf_text.add(node.node_id, node.text)

    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]:
        return {i: self._nodes[i] for i in node_ids if i in self._nodes}

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        for i in node_ids:
            self._nodes.pop(i, None)
            self._leaf_text.remove(i)

    def layer_refs(self, layer: int) -> list[NodeRef]:
        return sorted(
            (NodeRef(n.node_id, n.code) for n in self._nodes.values() if n.layer == layer),
            key=lambda r: r.node_id,
        )

    def layer_sizes(self) -> dict[int, int]:
        sizes: dict[int, int] = {}
        for n in self._nodes.values():
            sizes[n.layer] = sizes.get(n.layer, 0) + 1
        return dict(sorted(sizes.items()))

    def get_segments(self, layer: int) -> list[Segment]:
        return sorted(self._segments.get(layer, {}).values(), key=lambda s: s.segment_id)

    def segments_version(self, layer: int) -> int:
        return self._versions.get(layer, 0)

    def replace_segments(self, layer: int, remove: Sequence[str], add: Sequence[Segment], expected_version: int) -> int:
        if self._versions.get(layer, 0) != expected_version:
            raise ConflictError(f"segments of layer {layer} changed concurrently")
        segs = self._segments.setdefault(layer, {})
        for sid in remove:
            segs.pop(sid, None)
        for seg in add:
            segs[seg.segment_id] = seg
        self._versions[layer] = expected_version + 1
        return expected_version + 1


class MemoryLexicalIndex:
    """BM25 (FTS5's formula, domain.bm25) over the memory graph store's leaves."""

    def __init__(self, graph: MemoryGraphStore) -> None:
        self.graph = graph

    def search(self, text: str, k: int) -> list[Hit]:
        return [Hit(i, s) for i, s in self.graph._leaf_text.search(text, k)]

    def ready(self) -> bool:
        return True

    def rebuild(self, nodes: Iterable[Node]) -> int:
        corpus = Bm25Corpus()
        for n in nodes:
            if n.layer == 0:
                corpus.add(n.node_id, n.text)
        self.graph._leaf_text = corpus
        return len(corpus)


class MemoryVectorIndex:
    """Exact inner-product search over a dict of vectors."""

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}
        self._metas: dict[str, dict[str, Any]] = {}

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(ids) != len(vectors) or len(ids) != len(metas):
            raise ValueError("ids, vectors and metas must have the same length")
        for i, v, m in zip(ids, vectors, metas):
            self._vectors[i] = v.copy()
            self._metas[i] = dict(m)

    def delete(self, ids: Iterable[str]) -> None:
        for i in ids:
            self._vectors.pop(i, None)
            self._metas.pop(i, None)

    def search(self, vector: np.ndarray, k: int, layers: Sequence[int] | None = None,
               doc_ids: Sequence[str] | None = None) -> list[Hit]:
        layer_set = None if layers is None else set(layers)
        doc_set = None if doc_ids is None else set(doc_ids)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        hits = []
        for i, v in self._vectors.items():
            m = self._metas[i]
            if layer_set is not None and m.get("layer") not in layer_set:
                continue
            if doc_set is not None and m.get("doc_id") not in doc_set:
                continue
            hits.append(Hit(i, float(v @ q)))
        hits.sort(key=lambda h: (-h.score, h.node_id))
        return hits[: max(k, 0)]

    def ids(self) -> set[str]:
        return set(self._vectors)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: self._vectors[i].copy() for i in ids if i in self._vectors}

    def count(self) -> int:
        return len(self._vectors)

    def flush(self) -> None:
        return None


class MemoryQueue:
    """FIFO queue; a message whose dedup key is already pending is coalesced into it
    (its added/removed ids are merged), as a burst into one layer needs one reconcile."""

    def __init__(self) -> None:
        self._pending: OrderedDict[str, SegmentsAffected] = OrderedDict()
        self._inflight: dict[str, SegmentsAffected] = {}
        self._receipts = itertools.count(1)
        self.sent = 0

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        for msg in messages:
            self.sent += 1
            key = msg.dedup_key()
            if key in self._pending:
                old = self._pending[key]
                self._pending[key] = SegmentsAffected(
                    layer=msg.layer,
                    added=tuple(dict.fromkeys(old.added + msg.added)),
                    removed=tuple(dict.fromkeys(old.removed + msg.removed)),
                    reason=old.reason if old.reason == msg.reason else f"{old.reason}+{msg.reason}",
                )
            else:
                self._pending[key] = msg

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        out = []
        while self._pending and len(out) < max_messages:
            _, msg = self._pending.popitem(last=False)
            receipt = f"r{next(self._receipts)}"
            self._inflight[receipt] = msg
            out.append((receipt, msg))
        return out

    def ack(self, receipts: Sequence[str]) -> None:
        for r in receipts:
            self._inflight.pop(r, None)

    def pending(self) -> int:
        return len(self._pending)
