r"""The StatusStore part of the DynamoDB graph store: one record per document status.

The record at STATUS#<doc id> (one GetItem to read), and a copy in the listing partition
STATUSBY under SK <source>\0<doc id>, so that the statuses of a prefix are one Query
reading that prefix's items only (about 150 bytes each: ~27 per read unit). One listing
partition per namespace takes ~1000 writes/s (two writes per status change).
"""

from __future__ import annotations

import json

from ...domain.doc_status import DocStatus
from .dynamodb_table import DynamoTable


class DynamoStatusStore(DynamoTable):
    def put_doc_status(self, status: DocStatus) -> None:
        before = self.get_doc_status(status.doc_id)
        value = json.dumps(status.to_json())
        self.Item(PK="STATUSBY", SK=f"{status.source}\0{status.doc_id}", value=value).save()
        self.Item(PK=f"STATUS#{status.doc_id}", SK="STATUS", value=value).save()
        if before is not None and before.source != status.source:
            self.Item(PK="STATUSBY", SK=f"{before.source}\0{before.doc_id}").delete()

    def get_doc_status(self, doc_id: str) -> DocStatus | None:
        item = self._get(f"STATUS#{doc_id}", "STATUS")
        return None if item is None else DocStatus.from_json(json.loads(item.value))

    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        items = self.Item.query("STATUSBY", self.Item.SK.startswith(prefix) if prefix else None,
                                consistent_read=True)
        return [DocStatus.from_json(json.loads(i.value)) for i in items]

    def delete_doc_status(self, doc_id: str) -> None:
        before = self.get_doc_status(doc_id)
        if before is not None:
            self.Item(PK="STATUSBY", SK=f"{before.source}\0{doc_id}").delete()
            self.Item(PK=f"STATUS#{doc_id}", SK="STATUS").delete()
