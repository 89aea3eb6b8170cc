"""The StatusStore part of the SQLite graph store: the ``doc_status`` table, one record per
document, indexed by (source, doc id)."""

from __future__ import annotations

import json

from ...domain.doc_status import DocStatus
from .sqlite_db import SqliteDb


class SqliteStatusStore(SqliteDb):
    def put_doc_status(self, status: DocStatus) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO doc_status (doc_id, source, record) VALUES (?, ?, ?)",
                         (status.doc_id, status.source, json.dumps(status.to_json())))

    def get_doc_status(self, doc_id: str) -> DocStatus | None:
        rows = self._query("SELECT record FROM doc_status WHERE doc_id = ?", (doc_id,))
        return DocStatus.from_json(json.loads(rows[0][0])) if rows else None

    def doc_statuses(self, prefix: str = "") -> list[DocStatus]:
        # a range on the source index (not LIKE, whose wildcards a prefix could contain)
        if prefix:
            rows = self._query("SELECT record FROM doc_status WHERE source >= ? AND substr(source, 1, ?) = ? "
                               "ORDER BY source, doc_id", (prefix, len(prefix), prefix))
        else:
            rows = self._query("SELECT record FROM doc_status ORDER BY source, doc_id")
        return [DocStatus.from_json(json.loads(r[0])) for r in rows]

    def delete_doc_status(self, doc_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM doc_status WHERE doc_id = ?", (doc_id,))
