"""The DocumentStore part of the DynamoDB graph store: documents and tombstones under
``DOC#<doc id>`` (live ones in the BySource index), and the live-document counter."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pynamodb.exceptions import PutError

from ...domain.model import ANY_VERSION, ConflictError, Document
from .dynamodb_table import DynamoTable, _is_condition_failure


def _metadata_json(metadata: dict[str, Any]) -> str | None:
    """A document's metadata as the item's ``metadata`` string: JSON rather than a map attribute,
    so that it reads back exactly as written (a DynamoDB number loses int/float, 2020.0 comes
    back 2020), its stored size is its UTF-8 length (what ``check_fits`` counts), and nothing
    queries it in DynamoDB (filters run in the vector and lexical indexes). None when empty."""
    if not metadata:
        return None
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class DynamoDocumentStore(DynamoTable):
    def _doc(self, item) -> Document:
        return Document(doc_id=item.PK[len("DOC#"):], source=item.source or "",
                        content_hash=item.content_hash or "", title=item.title or "",
                        chunk_ids=tuple(item.chunk_ids or ()), status=item.status or "indexed",
                        meta=json.loads(item.meta) if item.meta else {}, version=item.doc_version or "",
                        metadata=json.loads(item.metadata) if item.metadata else {})

    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None:
        item = self._get(f"DOC#{doc_id}", "DOC")
        doc = None if item is None else self._doc(item)
        return doc if doc is not None and (include_deleted or not doc.is_tombstone) else None

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        """BatchGetItem, 100 keys a request (strongly consistent, as get_document)."""
        ids = list(dict.fromkeys(doc_ids))
        docs = (self._doc(item) for item in self._batch_get([(f"DOC#{i}", "DOC") for i in ids]))
        out = {doc.doc_id: doc for doc in docs if not doc.is_tombstone}
        return {i: out[i] for i in ids if i in out}

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

    @staticmethod
    def _document_attrs(doc: Document) -> dict[str, Any]:
        live = not doc.is_tombstone  # a tombstone stays out of the BySource index
        return dict(PK=f"DOC#{doc.doc_id}", SK="DOC", GSI2PK=f"SRC#{doc.source}" if live else None,
                    GSI2SK=doc.doc_id if live else None, source=doc.source,
                    content_hash=doc.content_hash, title=doc.title or None,
                    chunk_ids=list(doc.chunk_ids), status=doc.status,
                    meta=json.dumps(doc.meta) if doc.meta else None, doc_version=doc.version or None,
                    metadata=_metadata_json(doc.metadata))

    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        self.check_fits(doc)
        item = self.Item(**self._document_attrs(doc))
        if expected is ANY_VERSION:
            before = self.get_document(doc.doc_id)  # live or not: what the counter had
            item.save()
            self._count_documents(int(not doc.is_tombstone) - int(before is not None))
            return
        try:
            item.save(condition=self._stamp_condition(expected))
        except PutError as exc:
            if _is_condition_failure(exc):
                raise ConflictError(f"document {doc.doc_id} changed concurrently") from None
            raise
        # the condition held: the stored record was ``expected``
        self._count_documents(int(not doc.is_tombstone) - int(expected is not None and not expected.is_tombstone))

    def delete_document(self, doc_id: str) -> None:
        before = self.get_document(doc_id)
        self.Item(PK=f"DOC#{doc_id}", SK="DOC").delete()
        self._count_documents(-int(before is not None))

    def list_documents(self) -> list[Document]:
        items = self.Item.scan((self.Item.SK == "DOC") & self.models.in_namespace(), consistent_read=True)
        return sorted((d for d in map(self._doc, items) if not d.is_tombstone), key=lambda d: d.doc_id)

    def documents_page(self, after: str | None, limit: int) -> tuple[list[Document], str | None]:
        """A page of the same Scan as list_documents (the table's order), resumed from the
        cursor (the Scan's LastEvaluatedKey, as JSON): a bounded read per page, where the
        listing read the whole table at once."""
        start = json.loads(after) if after else None
        items = self.Item.scan((self.Item.SK == "DOC") & self.models.in_namespace(), consistent_read=True,
                               limit=max(limit, 1), page_size=max(limit, 1), last_evaluated_key=start)
        page = [d for d in map(self._doc, items) if not d.is_tombstone]
        last = items.last_evaluated_key
        return page, (json.dumps(last, sort_keys=True) if last else None)

    # ----- the live-document counter (GET /stats reads it: no scan on the query path) -----
    def _count_documents(self, delta: int) -> None:
        """ADD ``delta`` to this namespace's live-document counter (COUNT / DOCS), written
        after the document: a crash in between, or two unconditional writers of one document
        at once, leaves it off by one until the reindex recounts (repair_document_count)."""
        if delta:
            self.Item(PK="COUNT", SK="DOCS").update(actions=[self.Item.version.add(delta)])

    def document_count(self) -> int | None:
        """Live documents of this namespace, from the counter (one GetItem). Without a counter:
        0 for a namespace without chunks (no layer counter either: one Query), None for a store
        written before the counter existed, until the reindex counts it."""
        item = self._get("COUNT", "DOCS")
        if item is None or item.version is None:
            return 0 if not self.layer_sizes() else None
        return max(0, int(item.version))

    def repair_document_count(self, live: int) -> int:
        """Set the counter to ``live`` (the reindex's listing); the correction made."""
        stored = self.document_count()
        if stored != live:
            self.Item(PK="COUNT", SK="DOCS", version=live).save()
        return live - (stored or 0)
