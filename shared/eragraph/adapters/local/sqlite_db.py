"""What the SQLite graph store's parts share: the connection behind its lock, one write
transaction holding the write lock, a read, and the JSON and batching helpers."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


_IN_CHUNK = 500  # ids per "IN (...)" query, well under SQLite's variable limit


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def _chunks(items: list[str], size: int = _IN_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class SqliteDb:
    """The graph file as the store's parts (meta_sqlite, documents_sqlite, status_sqlite,
    nodes_sqlite, lexical_fts5.Fts5Leaves) use it; graph_sqlite.SqliteGraphStore opens it."""

    path: Path
    tenant: str
    _lock: threading.RLock
    _conn: sqlite3.Connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding SQLite's write lock from its start."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()
