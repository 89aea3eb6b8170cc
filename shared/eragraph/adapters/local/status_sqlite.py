"""The StatusStore part of the SQLite graph store: the ``doc_status`` table, one record per
document, indexed by (source, doc id), and ``status_counts`` (domain.status_counts: prefix,
counter key, documents) changed in the same transaction as the record. A store written before
the counters is counted once when opened (graph_sqlite: ``count_statuses``)."""

from __future__ import annotations

import json
import sqlite3

from ...domain.doc_status import DocStatus
from ...domain.status_counts import add_into, deltas, is_counted
from .sqlite_db import SqliteDb

STATUS_COUNTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS status_counts (
    prefix TEXT NOT NULL,
    key    TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (prefix, key)
)"""


def _add_counts(conn: sqlite3.Connection, changes: dict[str, dict[str, int]]) -> None:
    conn.executemany("INSERT INTO status_counts (prefix, key, n) VALUES (?, ?, ?) "
                     "ON CONFLICT (prefix, key) DO UPDATE SET n = n + excluded.n",
                     [(p, k, n) for p, row in changes.items() for k, n in row.items()])
    conn.execute("DELETE FROM status_counts WHERE n = 0")


def count_statuses(conn: sqlite3.Connection) -> None:
    """Count every stored status into ``status_counts`` once (a store written before the
    counters), inside the caller's transaction; marked done in ``store_info``."""
    if conn.execute("SELECT 1 FROM store_info WHERE key = 'status_counts'").fetchone() is not None:
        return
    conn.execute("DELETE FROM status_counts")
    totals: dict[str, dict[str, int]] = {}
    cursor = conn.execute("SELECT record FROM doc_status")
    while rows := cursor.fetchmany(1000):
        add_into(totals, (DocStatus.from_json(json.loads(r[0])) for r in rows))
    _add_counts(conn, totals)
    conn.execute("INSERT INTO store_info (key, value) VALUES ('status_counts', '1')")


class SqliteStatusStore(SqliteDb):
    def _stored_status(self, conn: sqlite3.Connection, doc_id: str) -> DocStatus | None:
        row = conn.execute("SELECT record FROM doc_status WHERE doc_id = ?", (doc_id,)).fetchone()
        return DocStatus.from_json(json.loads(row[0])) if row else None

    def put_doc_status(self, status: DocStatus, count: bool = True) -> None:  # counted at once (one writer)
        with self._write() as conn:
            before = self._stored_status(conn, status.doc_id)
            conn.execute("INSERT OR REPLACE INTO doc_status (doc_id, source, record) VALUES (?, ?, ?)",
                         (status.doc_id, status.source, json.dumps(status.to_json())))
            _add_counts(conn, deltas(before, status))

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

    def doc_statuses_page(self, prefix: str, after: tuple[str, str] | None, limit: int
                          ) -> tuple[list[DocStatus], tuple[str, str] | None]:
        if limit <= 0:
            return [], None
        where, params = ["substr(source, 1, ?) = ?", "source >= ?"], [len(prefix), prefix, prefix]
        if after is not None:
            where.append("(source, doc_id) > (?, ?)")
            params += list(after)
        rows = self._query(f"SELECT record FROM doc_status WHERE {' AND '.join(where)} "
                           "ORDER BY source, doc_id LIMIT ?", (*params, limit + 1))
        shown = [DocStatus.from_json(json.loads(r[0])) for r in rows[:limit]]
        return shown, (shown[-1].source, shown[-1].doc_id) if len(rows) > limit else None

    def status_counts(self, prefix: str = "") -> dict[str, int] | None:
        if not is_counted(prefix):
            return None
        return dict(self._query("SELECT key, n FROM status_counts WHERE prefix = ? AND n != 0", (prefix,)))

    def delete_doc_status(self, doc_id: str) -> None:
        with self._write() as conn:
            before = self._stored_status(conn, doc_id)
            conn.execute("DELETE FROM doc_status WHERE doc_id = ?", (doc_id,))
            _add_counts(conn, deltas(before, None))
