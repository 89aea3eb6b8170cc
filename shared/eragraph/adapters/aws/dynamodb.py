"""DynamoDB graph store (single table, see ``models``).

* Reads of many nodes use BatchGetItem (pynamodb re-requests UnprocessedKeys until done);
  writes use BatchWriteItem (pynamodb re-sends UnprocessedItems up to ``max_retry_attempts``).
* Queries page through ``LastEvaluatedKey`` (pynamodb's result iterators follow it).
* ``replace_segments`` is one TransactWriteItems: an update of the layer's VERSION item
  conditioned on the expected version, the segment deletes and puts. A lost condition is a
  ``ConflictError``. A change larger than one transaction (100 items) first claims the version
  with the same conditional update, then applies the segment writes in batches: a consumer that
  dies in between leaves the layer dirty (the announce marker is only cleared after a
  successful reconcile), and the next reconcile diffs from the stored segments and repairs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pynamodb.exceptions import PutError, TransactWriteError, UpdateError

from ...domain.model import ANY_VERSION, ConflictError, Document, LshConfig, Node, NodeRef, Segment
from .models import TableModels, build_models

TRANSACT_LIMIT = 100
BATCH_GET = 100
LAYER_PROBE_GAP = 2  # layer_sizes stops after this many empty layers in a row


def _lsh_to_json(c: LshConfig) -> str:
    return json.dumps({"embedder_id": c.embedder_id, "dim": c.dim, "n_planes": c.n_planes,
                       "seed": c.seed, "planes": [list(p) for p in c.planes]})


def _lsh_from_json(raw: str) -> LshConfig:
    d = json.loads(raw)
    return LshConfig(embedder_id=d["embedder_id"], dim=int(d["dim"]), n_planes=int(d["n_planes"]),
                     seed=int(d["seed"]), planes=tuple(tuple(float(x) for x in p) for p in d["planes"]))


def _is_condition_failure(exc: Exception) -> bool:
    code = getattr(exc, "cause_response_code", None)
    if code in ("ConditionalCheckFailedException", "TransactionCanceledException"):
        reasons = getattr(exc, "cancellation_reasons", None) or []
        if code == "TransactionCanceledException" and reasons:
            return any(r is not None and r.code == "ConditionalCheckFailed" for r in reasons)
        return True
    return False


class DynamoGraphStore:
    def __init__(self, table_name: str, region: str | None = None, host: str | None = None,
                 models: TableModels | None = None) -> None:
        self.models = models or build_models(table_name, region, host)
        self.Item = self.models.item

    # ----- store-wide configuration -----
    def _get(self, pk: str, sk: str):
        try:
            return self.Item.get(pk, sk, consistent_read=True)
        except self.Item.DoesNotExist:
            return None

    def get_lsh(self) -> LshConfig | None:
        item = self._get("META", "LSH")
        return None if item is None else _lsh_from_json(item.value)

    def put_lsh(self, config: LshConfig) -> LshConfig:
        try:
            self.Item(PK="META", SK="LSH", value=_lsh_to_json(config)).save(
                condition=self.Item.PK.does_not_exist())
        except PutError as exc:
            if not _is_condition_failure(exc):
                raise
        stored = self.get_lsh()
        assert stored is not None
        return stored

    def get_meta(self, key: str) -> Any | None:
        item = self._get("META", f"KEY#{key}")
        return None if item is None else json.loads(item.value)

    def put_meta(self, key: str, value: Any) -> None:
        self.Item(PK="META", SK=f"KEY#{key}", value=json.dumps(value)).save()

    def delete_meta(self, key: str) -> None:
        self.Item(PK="META", SK=f"KEY#{key}").delete()

    def meta_keys(self, prefix: str) -> list[str]:
        items = self.Item.query("META", self.Item.SK.startswith(f"KEY#{prefix}"),
                                consistent_read=True, attributes_to_get=["PK", "SK"])
        return sorted(i.SK[len("KEY#"):] for i in items)

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float) -> None:
        item = self.Item(PK="LEDGER", SK=f"KIND#{kind}")
        item.update(actions=[self.Item.calls.add(calls), self.Item.tokens_in.add(tokens_in),
                             self.Item.tokens_out.add(tokens_out),
                             self.Item.seconds.add(round(float(seconds), 6))])

    def ledger(self) -> dict[str, dict[str, float]]:
        out = {}
        for i in self.Item.query("LEDGER", self.Item.SK.startswith("KIND#"), consistent_read=True):
            out[i.SK[len("KIND#"):]] = {"calls": int(i.calls or 0), "tokens_in": int(i.tokens_in or 0),
                                        "tokens_out": int(i.tokens_out or 0),
                                        "seconds": float(i.seconds or 0.0)}
        return out

    # ----- documents -----
    def _doc(self, item) -> Document:
        return Document(doc_id=item.PK[len("DOC#"):], source=item.source or "",
                        content_hash=item.content_hash or "", title=item.title or "",
                        chunk_ids=tuple(item.chunk_ids or ()), status=item.status or "indexed",
                        meta=json.loads(item.meta) if item.meta else {}, version=item.doc_version or "")

    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None:
        item = self._get(f"DOC#{doc_id}", "DOC")
        doc = None if item is None else self._doc(item)
        return doc if doc is not None and (include_deleted or not doc.is_tombstone) else None

    def find_documents(self, source: str) -> list[Document]:
        # the index is eventually consistent; re-read each hit strongly
        ids = sorted(i.GSI2SK for i in self.models.by_source.query(f"SRC#{source}"))
        docs = [self.get_document(i) for i in ids]
        return [d for d in docs if d is not None and d.source == source]

    def _stamp_condition(self, expected: Document | None):
        """The stored document still has ``expected``'s stamp (or, for None, there is none)."""
        Item = self.Item
        if expected is None:
            return Item.PK.does_not_exist()
        hash_, version, status = expected.stamp()
        condition = Item.PK.exists() & (Item.content_hash == hash_)
        condition &= (Item.doc_version == version) if version else Item.doc_version.does_not_exist()
        if status == "indexed":  # documents written before statuses were stored explicitly
            return condition & ((Item.status == status) | Item.status.does_not_exist())
        return condition & (Item.status == status)

    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        live = not doc.is_tombstone  # a tombstone stays out of the BySource index
        item = self.Item(PK=f"DOC#{doc.doc_id}", SK="DOC", GSI2PK=f"SRC#{doc.source}" if live else None,
                         GSI2SK=doc.doc_id if live else None, source=doc.source,
                         content_hash=doc.content_hash, title=doc.title or None,
                         chunk_ids=list(doc.chunk_ids), status=doc.status,
                         meta=json.dumps(doc.meta) if doc.meta else None, doc_version=doc.version or None)
        if expected is ANY_VERSION:
            item.save()
            return
        try:
            item.save(condition=self._stamp_condition(expected))
        except PutError as exc:
            if _is_condition_failure(exc):
                raise ConflictError(f"document {doc.doc_id} changed concurrently") from None
            raise

    def delete_document(self, doc_id: str) -> None:
        self.Item(PK=f"DOC#{doc_id}", SK="DOC").delete()

    def list_documents(self) -> list[Document]:
        items = self.Item.scan(self.Item.SK == "DOC", consistent_read=True)
        return sorted((d for d in map(self._doc, items) if not d.is_tombstone), key=lambda d: d.doc_id)

    # ----- nodes -----
    def put_nodes(self, nodes: Sequence[Node]) -> None:
        unique = {n.node_id: n for n in nodes}  # one batch may not name a key twice
        with self.Item.batch_write() as batch:
            for n in unique.values():
                batch.save(self.Item(
                    PK=f"NODE#{n.node_id}", SK="NODE", GSI1PK=f"LAYER#{n.layer}", GSI1SK=n.node_id,
                    layer=n.layer, text=n.text, tokens=n.tokens, code=n.code,
                    doc_id=n.doc_id or None, source=n.source or None, children=list(n.children)))

    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]:
        ids = list(dict.fromkeys(node_ids))
        out: dict[str, Node] = {}
        for start in range(0, len(ids), BATCH_GET):
            keys = [(f"NODE#{i}", "NODE") for i in ids[start:start + BATCH_GET]]
            for item in self.Item.batch_get(keys, consistent_read=True):
                node_id = item.PK[len("NODE#"):]
                out[node_id] = Node(node_id=node_id, layer=int(item.layer), text=item.text or "",
                                    tokens=int(item.tokens), code=int(item.code), doc_id=item.doc_id or "",
                                    source=item.source or "", children=tuple(item.children or ()))
        return {i: out[i] for i in ids if i in out}

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        with self.Item.batch_write() as batch:
            for i in dict.fromkeys(node_ids):
                batch.delete(self.Item(PK=f"NODE#{i}", SK="NODE"))

    def layer_refs(self, layer: int) -> list[NodeRef]:
        refs = [NodeRef(i.GSI1SK, int(i.code)) for i in self.models.by_layer.query(f"LAYER#{layer}")]
        return sorted(refs, key=lambda r: r.node_id)

    def _layer_count(self, layer: int) -> int:
        return self.models.by_layer.count(f"LAYER#{layer}")

    def layer_sizes(self) -> dict[int, int]:
        sizes: dict[int, int] = {}
        layer, empty_run = 0, 0
        while empty_run < LAYER_PROBE_GAP:
            n = self._layer_count(layer)
            if n:
                sizes[layer] = n
                empty_run = 0
            else:
                empty_run += 1
            layer += 1
        return sizes

    # ----- segments -----
    def get_segments(self, layer: int) -> list[Segment]:
        items = self.Item.query(f"SEGS#{layer}", self.Item.SK.startswith("SEG#"), consistent_read=True)
        return sorted((Segment(segment_id=i.SK[len("SEG#"):], layer=layer, members=tuple(i.members or ()),
                               summary_id=i.summary_id or "") for i in items),
                      key=lambda s: s.segment_id)

    def segments_version(self, layer: int) -> int:
        item = self._get(f"SEGS#{layer}", "VERSION")
        return 0 if item is None else int(item.version or 0)

    def _version_condition(self, expected: int):
        if expected == 0:
            return self.Item.version.does_not_exist() | (self.Item.version == 0)
        return self.Item.version == expected

    def _seg_item(self, seg: Segment):
        return self.Item(PK=f"SEGS#{seg.layer}", SK=f"SEG#{seg.segment_id}", members=list(seg.members),
                         summary_id=seg.summary_id)

    def replace_segments(self, layer: int, remove: Sequence[str], add: Sequence[Segment],
                         expected_version: int) -> int:
        if any(s.layer != layer for s in add):
            raise ValueError("every added segment must belong to the layer being replaced")
        new_version = expected_version + 1
        version_item = self.Item(PK=f"SEGS#{layer}", SK="VERSION")
        bump = [self.Item.version.set(new_version)]
        condition = self._version_condition(expected_version)
        if len(remove) + len(add) + 1 <= TRANSACT_LIMIT:
            from pynamodb.connection import Connection
            from pynamodb.transactions import TransactWrite

            meta = self.Item.Meta
            connection = Connection(region=getattr(meta, "region", None), host=getattr(meta, "host", None))
            try:
                with TransactWrite(connection=connection) as tx:
                    tx.update(version_item, actions=bump, condition=condition)
                    for sid in remove:
                        tx.delete(self.Item(PK=f"SEGS#{layer}", SK=f"SEG#{sid}"))
                    for seg in add:
                        tx.save(self._seg_item(seg))
            except TransactWriteError as exc:
                if _is_condition_failure(exc):
                    raise ConflictError(f"segments of layer {layer} changed concurrently") from None
                raise
            return new_version
        try:
            version_item.update(actions=bump, condition=condition)
        except UpdateError as exc:
            if _is_condition_failure(exc):
                raise ConflictError(f"segments of layer {layer} changed concurrently") from None
            raise
        with self.Item.batch_write() as batch:
            for sid in remove:
                batch.delete(self.Item(PK=f"SEGS#{layer}", SK=f"SEG#{sid}"))
            for seg in add:
                batch.save(self._seg_item(seg))
        return new_version
