"""GraphStore in dicts: the reference behaviour of the graph store's ports (documents, statuses,
nodes and refs, segments, meta), with the leaves' lexical corpus kept beside the nodes
(lexical_memory reads it)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ...domain.bm25 import Bm25Corpus
from ...domain.doc_status import DocStatus
from ...domain.expiry import mark_key
from ...domain.filters import Filter, chunk_attrs, matches
from ...domain.ledger import bucket_start
from ...domain.segment_stats import SegmentStats
from ...domain.status_counts import deltas, is_counted
from ...domain.model import (ANY_VERSION, ConflictError, Document, LshConfig, Node, NodeRef, RefState, RegionApplied, RegionChange,
                             Segment)
from ...domain.scoped import RefCount, ref_count
from ...ports.graph import SizesAndMetasByParts


def _ledger_row() -> dict[str, float]:
    return {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0}


class MemoryGraphStore(SizesAndMetasByParts):
    def __init__(self, tenant: str = "") -> None:
        self.tenant = tenant  # the tenant this store belongs to (its chunks' built-in attribute)
        self._lsh: LshConfig | None = None
        self._meta: dict[str, Any] = {}
        self._meta_lock = threading.Lock()  # add_within's read and write as one step
        # apply_region, delete_dead_nodes and the ref changes of put_nodes and delete_nodes, each
        # one step (a ref made live or gone between a region's check and its write would be
        # undone by it, its layer's counter not); reentrant: delete_dead_nodes deletes inside it
        self._region_lock = threading.RLock()
        self._ledger: dict[str, dict[str, float]] = {}
        self._ledger_hours: dict[tuple[str, int], dict[str, float]] = {}
        self._docs: dict[str, Document] = {}
        self._statuses: dict[str, DocStatus] = {}
        self._status_counts: dict[str, dict[str, int]] = {}  # prefix -> counter key -> n
        self._nodes: dict[str, Node] = {}
        self._leaf_text = Bm25Corpus()  # the lexical index of the leaves, kept with the nodes
        self._segments: dict[int, dict[str, Segment]] = {}
        self._refs: dict[str, tuple[int, RefState]] = {}  # node id -> (layer, ref)
        self._sizes: dict[int, int] = {}

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

    def claim_meta(self, key: str, value: Any) -> Any:
        return copy.deepcopy(self._meta.setdefault(key, copy.deepcopy(value)))  # one dict operation

    def delete_meta(self, key: str) -> None:
        self._meta.pop(key, None)

    def write_meta(self, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                   clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> list[str]:
        for key, value in puts:
            self.put_meta(key, value)
        for key in deletes:
            self.delete_meta(key)
        for key, at_most in clear:
            self.delete_meta_if_older(key, at_most)
        return [i for i in dict.fromkeys(present) if not (i in self._refs and self._refs[i][1].live)]

    def get_metas(self, keys: Sequence[str]) -> dict[str, Any]:
        return {k: copy.deepcopy(self._meta[k]) for k in keys if k in self._meta}

    def delete_meta_if_older(self, key: str, at_most: float) -> None:
        with self._meta_lock:
            stamp = self._meta.get(key)
            if stamp is not None and float(stamp) <= at_most:
                del self._meta[key]

    def meta_keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self._meta if k.startswith(prefix))

    def add_within(self, key: str, period: str, amount: int, limit: int, mark: str | None = None) -> int | None:
        with self._meta_lock:
            stored = self._meta.get(key) or {}
            total = int(stored.get("total", 0)) if stored.get("period") == period else 0
            marked = None if mark is None else mark_key(key, period, mark)
            if marked is not None and marked in self._meta:
                return total
            if total + amount > limit:
                return None
            self._meta[key] = {"period": period, "total": total + amount}
            if marked is not None:
                self._meta[marked] = 1
            return total + amount

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
        hour = bucket_start(time.time() if at is None else at)
        for row in (self._ledger.setdefault(kind, _ledger_row()),
                    self._ledger_hours.setdefault((kind, hour), _ledger_row())):
            row["calls"] += calls
            row["tokens_in"] += tokens_in
            row["tokens_out"] += tokens_out
            row["seconds"] += seconds

    def ledger(self) -> dict[str, dict[str, float]]:
        return copy.deepcopy(self._ledger)

    def ledger_series(self, since: float = 0.0) -> list[tuple[str, int, dict[str, float]]]:
        start = bucket_start(since)
        return [(kind, hour, dict(row)) for (kind, hour), row in sorted(self._ledger_hours.items()) if hour >= start]

    # documents are copied in and out (their meta and metadata dicts), as a store would
    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None:
        doc = self._docs.get(doc_id)
        return copy.deepcopy(doc) if doc is not None and (include_deleted or not doc.is_tombstone) else None

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        got = {i: self.get_document(i) for i in dict.fromkeys(doc_ids)}
        return {i: d for i, d in got.items() if d is not None}

    def find_documents(self, source: str) -> list[Document]:
        return sorted((copy.deepcopy(d) for d in self._docs.values() if d.source == source and not d.is_tombstone),
                      key=lambda d: d.doc_id)

    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        if expected is not ANY_VERSION:
            stored = self._docs.get(doc.doc_id)
            if (stored is None) != (expected is None) or (
                    stored is not None and stored.stamp() != expected.stamp()):
                raise ConflictError(f"document {doc.doc_id} changed concurrently")
        self._docs[doc.doc_id] = copy.deepcopy(doc)

    def delete_document(self, doc_id: str) -> None:
        self._docs.pop(doc_id, None)

    def list_documents(self) -> list[Document]:
        return [copy.deepcopy(self._docs[k]) for k in sorted(self._docs) if not self._docs[k].is_tombstone]

    def documents_page(self, after: str | None, limit: int) -> tuple[list[Document], str | None]:
        ids = [k for k in sorted(self._docs) if (after is None or k > after) and not self._docs[k].is_tombstone]
        page = [copy.deepcopy(self._docs[k]) for k in ids[:max(limit, 0)]]
        return page, (page[-1].doc_id if len(ids) > len(page) and page else None)

    def _count_status(self, before: DocStatus | None, after: DocStatus | None) -> None:
        for prefix, row in deltas(before, after).items():
            mine = self._status_counts.setdefault(prefix, {})
            for key, n in row.items():
                mine[key] = mine.get(key, 0) + n

    def put_doc_status(self, status: DocStatus, count: bool = True) -> None:  # counted at once (one writer)
        self._count_status(self._statuses.get(status.doc_id), status)
        self._statuses[status.doc_id] = status

    def get_doc_status(self, doc_id: str) -> DocStatus | None:
        return self._statuses.get(doc_id)

    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        return sorted((s for s in self._statuses.values() if s.source.startswith(prefix)),
                      key=lambda s: (s.source, s.doc_id))

    def doc_statuses_page(self, prefix: str, after: tuple[str, str] | None, limit: int
                          ) -> tuple[list[DocStatus], tuple[str, str] | None]:
        ordered = [s for s in self.doc_statuses(prefix) if after is None or (s.source, s.doc_id) > after]
        shown = ordered[:max(0, limit)]
        more = len(ordered) > len(shown) and bool(shown)
        return shown, (shown[-1].source, shown[-1].doc_id) if more else None

    def status_counts(self, prefix: str = "") -> dict[str, int] | None:
        if not is_counted(prefix):
            return None
        return {k: n for k, n in self._status_counts.get(prefix, {}).items() if n}

    def delete_doc_status(self, doc_id: str) -> None:
        self._count_status(self._statuses.pop(doc_id, None), None)

    def _leaf_matches(self, node_id: str, where: Filter) -> bool:
        """Whether a leaf chunk's attributes (domain.filters.chunk_attrs of its document) match
        ``where``; a chunk whose document is not stored has none, and matches no filter."""
        node = self._nodes.get(node_id)
        doc = None if node is None else self._docs.get(node.doc_id)
        if doc is None or doc.is_tombstone:
            return False
        return matches(where, chunk_attrs(doc.metadata, doc.source, doc.doc_id, doc.title, self.tenant))

    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        with self._region_lock:
            self._store_nodes(nodes)
            if index:
                for node in nodes:
                    self._make_live(node.layer, NodeRef(node.node_id, node.code))

    def keep_nodes(self, nodes: Sequence[Node]) -> None:
        with self._region_lock:
            self._store_nodes([n for n in nodes if n.node_id not in self._nodes])

    def _store_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self._nodes[node.node_id] = node
            if node.layer == 0:
                self._leaf_text.add(node.node_id, node.text)

    def _make_live(self, layer: int, ref: NodeRef) -> None:
        held = self._refs.get(ref.node_id)
        if held is not None and held[0] != layer:  # re-put in another layer: a new node there
            self._make_gone(ref.node_id)
            self._refs.pop(ref.node_id, None)
            held = None
        seg = held[1].seg if held is not None else None
        if held is None or not held[1].live:
            self._sizes[layer] = self._sizes.get(layer, 0) + 1
        self._refs[ref.node_id] = (layer, RefState(ref.node_id, ref.code, seg, True))

    def _make_gone(self, node_id: str) -> None:
        held = self._refs.get(node_id)
        if held is None:
            return
        layer, ref = held
        if ref.live:
            self._sizes[layer] -= 1
        if ref.seg is None:
            del self._refs[node_id]
        else:
            self._refs[node_id] = (layer, RefState(node_id, ref.code, ref.seg, False))

    def check_fits(self, doc: Document | None = None, nodes: Sequence[Node] = ()) -> None:
        """No item limit here (only DynamoDB has one)."""

    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]:
        return {i: self._nodes[i] for i in node_ids if i in self._nodes}

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        with self._region_lock:
            for i in node_ids:
                self._nodes.pop(i, None)
                self._make_gone(i)
                self._leaf_text.delete(i)

    def _held_refs(self) -> list[tuple[int, RefState]]:
        """The ref index as it stands, read in one step (a writer changes it under the lock)."""
        with self._region_lock:
            return list(self._refs.values())

    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        rows = sorted((r for lay, r in self._held_refs() if lay == layer and lo <= r.code <= hi),
                      key=lambda r: (r.code, r.node_id))
        return rows if limit is None else rows[:limit]

    def count_refs(self, layer: int, lo: int, hi: int, cap: int | None = None) -> RefCount:
        refs = [r for lay, r in self._held_refs() if lay == layer and lo <= r.code <= hi]
        return ref_count(refs, cap, False)

    def refs_page(self, layer: int, after: tuple[int, str] | None, limit: int) -> list[RefState]:
        rows = sorted((r for lay, r in self._held_refs()
                       if lay == layer and r.live and (after is None or (r.code, r.node_id) > tuple(after))),
                      key=lambda r: (r.code, r.node_id))
        return rows[:max(int(limit), 0)]

    def layer_refs(self, layer: int) -> list[NodeRef]:
        return sorted((NodeRef(r.node_id, r.code) for lay, r in self._held_refs() if lay == layer and r.live),
                      key=lambda r: r.node_id)

    def layer_sizes(self) -> dict[int, int]:
        with self._region_lock:
            sizes = list(self._sizes.items())
        return {layer: n for layer, n in sorted(sizes) if n}

    def repair_layer_counts(self) -> dict[int, int]:
        with self._region_lock:
            live: dict[int, int] = {}
            for layer, ref in self._refs.values():
                if ref.live:
                    live[layer] = live.get(layer, 0) + 1
            fixed = {}
            for layer in sorted(set(live) | set(self._sizes)):
                want, have = live.get(layer, 0), self._sizes.get(layer, 0)
                if want != have:
                    fixed[layer] = want - have
                if want:
                    self._sizes[layer] = want
                else:
                    self._sizes.pop(layer, None)
            return fixed

    def get_segments(self, layer: int) -> list[Segment]:
        return sorted(self._segments.get(layer, {}).values(), key=lambda s: s.segment_id)

    def segment_stats(self) -> dict[int, SegmentStats]:
        return {layer: SegmentStats.of(len(s.members) for s in segs.values())
                for layer, segs in sorted(self._segments.items()) if segs}

    def get_segments_by_id(self, layer: int, segment_ids: Iterable[str]) -> dict[str, Segment]:
        segs = self._segments.get(layer, {})
        return {i: segs[i] for i in segment_ids if i in segs}

    def delete_dead_nodes(self, node_ids: Iterable[str]) -> list[str]:
        with self._region_lock:
            dead = [i for i in dict.fromkeys(node_ids) if not (i in self._refs and self._refs[i][1].live)]
            self.delete_nodes(dead)
        return dead

    def apply_region(self, change: RegionChange) -> RegionApplied:
        with self._region_lock:
            self._apply_region(change)
            gone = [r.node_id for r in change.above_remove]
            kept = tuple(i for i in gone if i in self._refs and not self._refs[i][1].live)
            texts = {i: (key, value) for i, key, value in change.keep_texts}
            for i in kept:
                if i in texts:
                    self._meta[texts[i][0]] = copy.deepcopy(texts[i][1])
            deleted: tuple[str, ...] = ()
            if change.delete_removed:
                deleted = tuple(i for i in gone if not (i in self._refs and self._refs[i][1].live))
                for i in deleted:
                    self._nodes.pop(i, None)
                    self._leaf_text.delete(i)
            for row in change.ledger:
                self.add_ledger(*row)
            gone = () if change.finish is None else tuple(self.write_meta(
                change.finish.puts, change.finish.deletes, change.finish.clear, change.finish.present))
            return RegionApplied(deleted, kept, gone)

    def _apply_region(self, change: RegionChange) -> None:
        written = {n.node_id for n in change.nodes}  # stored by this write
        missing = [r.node_id for r in change.above_add if r.node_id not in self._nodes and r.node_id not in written]
        if missing:  # deleted since the reconcile stored or read it (delete_dead_nodes)
            raise ConflictError(f"layer {change.layer}: summary {missing[0]} is gone")
        for ref in change.expected:
            held = self._refs.get(ref.node_id)
            if held is None or held[0] != change.layer or held[1] != ref:
                raise ConflictError(f"layer {change.layer}: node {ref.node_id} changed concurrently")
        self._store_nodes(change.nodes)
        segs = self._segments.setdefault(change.layer, {})
        for sid in change.remove:
            segs.pop(sid, None)
        for seg in change.add:
            segs[seg.segment_id] = seg
        for node_id, sid in change.assign:
            layer, ref = self._refs[node_id]
            self._refs[node_id] = (layer, RefState(node_id, ref.code, sid, ref.live))
        for node_id in change.drop:
            self._refs.pop(node_id, None)
        for ref in change.above_add:
            self._make_live(change.layer + 1, ref)
        for ref in change.above_remove:
            self._make_gone(ref.node_id)
        for key, value in change.marks:
            self._meta[key] = copy.deepcopy(value)
