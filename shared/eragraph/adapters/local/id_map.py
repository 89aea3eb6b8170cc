"""The vector index's id map, outside Python containers: string id <-> int64 faiss id, and each
id's document and attributes (the JSON of a leaf chunk's ``attrs``, what a ``where`` filter
selects on: ``matching`` runs the filter compiled by ``filter_sql`` over them), in a private
SQLite database.

The database is SQLite's private temporary one (``sqlite3.connect("")``): on disk in the
temporary folder, deleted when the handle closes, with a page cache of ``CACHE_KIB``, so the map
costs a writer a constant of memory however many ids it holds (a million ids in Python dicts
took about a gigabyte). It holds what one handle sees (the snapshot, the log and its own
unflushed changes); what is durable is the vector index's snapshot and log.

Batches pass as one JSON array parameter (``json_each``), so a lookup of any size is one
statement. A row is ``(string id, int id, doc, attrs)``, ``attrs`` a JSON object's text or None
(a vector without attributes: a summary, an entity)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ...domain.filters import Filter
from . import filter_sql

CACHE_KIB = 16 * 1024  # page cache of the map: a constant, whatever the corpus
# rows a batch of ``rows`` (a snapshot's id map is written a batch at a time): a batch as Python
# tuples and their entries' text costs about 0.6 KB a row at once, so 65,536 rows held 42 MB
# beside the index at every compaction of a large store; 2,048 hold about 1 MB, as fast
ROWS_BATCH = 2048


def _arr(values: Iterable) -> str:
    return json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))


Row = tuple[str, int, str, "str | None"]  # (string id, int id, doc, attrs JSON or None)


class IdMap:
    """``s`` (string id) <-> ``i`` (int id), and ``doc`` (document id) and ``attrs`` (JSON text,
    or NULL) per int id. The caller keeps string and int ids one-to-one: it adds only ids that
    are absent, under int ids no other id holds."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        # the rollback journal stays (journal_mode=OFF would make a failed batch half-applied)
        for pragma in ("synchronous=OFF", f"cache_size=-{CACHE_KIB}", "temp_store=FILE"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("CREATE TABLE ids (i INTEGER PRIMARY KEY, s TEXT NOT NULL, doc TEXT NOT NULL, attrs TEXT)")
        self._create_indexes()
        self._count = 0

    def _create_indexes(self) -> None:
        self._db.execute("CREATE UNIQUE INDEX ids_s ON ids (s)")
        self._db.execute("CREATE INDEX ids_doc ON ids (doc)")

    def close(self) -> None:
        self._db.close()

    def __len__(self) -> int:
        return self._count

    # ------------------------------------------------------------------ lookups
    def ints(self, strs: Sequence[str]) -> dict[str, int]:
        """The int id of each of ``strs`` that is present."""
        if not strs:
            return {}
        rows = self._db.execute("SELECT s, i FROM ids WHERE s IN (SELECT value FROM json_each(?))",
                                (_arr(strs),))
        return {s: int(i) for s, i in rows}

    def strs(self, ints: Iterable[int]) -> dict[int, str]:
        """The string id of each of ``ints`` that is present."""
        ints = [int(i) for i in ints]
        if not ints:
            return {}
        rows = self._db.execute("SELECT i, s FROM ids WHERE i IN (SELECT value FROM json_each(?))",
                                (_arr(ints),))
        return {int(i): s for i, s in rows}

    def rows_of(self, strs: Sequence[str]) -> dict[str, tuple[int, str, str | None]]:
        """(int id, doc, attrs) of each of ``strs`` that is present."""
        if not strs:
            return {}
        rows = self._db.execute("SELECT s, i, doc, attrs FROM ids WHERE s IN (SELECT value FROM json_each(?))",
                                (_arr(strs),))
        return {s: (int(i), doc, attrs) for s, i, doc, attrs in rows}

    def in_docs(self, docs: Sequence[str]) -> np.ndarray:
        """The int ids of the documents' vectors, from the document index: at the cost of those
        documents, not of the map."""
        rows = self._db.execute("SELECT i FROM ids WHERE doc IN (SELECT value FROM json_each(?)) ORDER BY i",
                                (_arr(docs),))
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def matching(self, where: Filter) -> np.ndarray:
        """The int ids whose attributes match ``where`` (domain.filters.matches; ids without
        attributes never do), ascending: one scan of the map, in SQLite."""
        sql, params = filter_sql.compile(where, "attrs")
        rows = self._db.execute(f"SELECT i FROM ids WHERE {sql} ORDER BY i", params)
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def strs_between(self, lo: int, hi: int) -> list[str]:
        """The string ids of the int ids in [lo, hi)."""
        return [r[0] for r in self._db.execute("SELECT s FROM ids WHERE i >= ? AND i < ?", (lo, hi))]

    def all_ints(self) -> np.ndarray:
        """Every int id, ascending."""
        rows = self._db.execute("SELECT i FROM ids ORDER BY i")
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=self._count)

    def all_strs(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT s FROM ids")}

    def rows(self, batch: int = ROWS_BATCH) -> Iterator[list[Row]]:
        """Every (string id, int id, doc, attrs), ordered by string id, a batch at a time."""
        cur = self._db.execute("SELECT s, i, doc, attrs FROM ids ORDER BY s")
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return
            yield chunk

    # ------------------------------------------------------------------ writes
    def load(self, rows: Iterable[Row]) -> None:
        """Fill an empty map with (string id, int id, doc, attrs) rows in one transaction; the indexes
        are rebuilt after the rows (a sort, faster than a million index inserts). Rows that
        repeat an id leave the map empty."""
        if self._count:
            raise ValueError("load fills an empty map")
        self._db.execute("BEGIN")
        try:
            self._db.execute("DROP INDEX ids_s")
            self._db.execute("DROP INDEX ids_doc")
            self._db.executemany("INSERT INTO ids (s, i, doc, attrs) VALUES (?, ?, ?, ?)", rows)
            self._create_indexes()
        except BaseException as exc:
            self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError):  # a repeated int id, or (the index) string id
                raise ValueError(f"the rows repeat an id: {exc}") from exc
            raise
        self._db.execute("COMMIT")
        self._count = int(self._db.execute("SELECT count(*) FROM ids").fetchone()[0])

    def add(self, rows: Sequence[Row]) -> None:
        """Add (string id, int id, doc, attrs) rows of absent ids."""
        self._write("INSERT INTO ids (s, i, doc, attrs) VALUES (?, ?, ?, ?)", rows)
        self._count += len(rows)

    def set_meta(self, rows: Sequence[tuple[int, str, str | None]]) -> None:
        """(int id, doc, attrs): the document and attributes of ids present (replacing theirs)."""
        self._write("UPDATE ids SET doc = ?2, attrs = ?3 WHERE i = ?1", rows)

    def remove(self, strs: Sequence[str]) -> list[int]:
        """Remove those string ids; the int ids they held, in the order given."""
        held = self.ints(list(dict.fromkeys(strs)))
        if held:
            self._db.execute("DELETE FROM ids WHERE s IN (SELECT value FROM json_each(?))", (_arr(held),))
            self._count -= len(held)
        return [held[s] for s in dict.fromkeys(strs) if s in held]

    def _write(self, sql: str, rows: Iterable) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany(sql, rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
