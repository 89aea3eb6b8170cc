"""GraphStore in one SQLite file (the local mode's store).

WAL journal, foreign keys on, one connection guarded by a lock, every multi-row write in one
transaction. Each indexed node has a row in ``refs`` (its layer, LSH code, segment and whether
it is live), indexed by (layer, code, node_id) with the segment and liveness in the index
(``refs_range``, covering), so the scoped reconcile reads a code range from the index alone and
counts one without returning its rows (``count_refs``), never a layer; ``layer_counts`` keeps the live nodes per layer. ``apply_region`` is a conditional
write: ``BEGIN IMMEDIATE`` takes the write lock, the region's refs are compared with what the
reconcile read and only then is anything written, so two processes re-cutting one region
cannot both win. ``repair_layer_counts`` recounts the refs and rewrites ``layer_counts`` in one
such transaction. Behaviour (including the order of returned lists) matches ``adapters.memory``.

A document's ``metadata`` is a JSON column (added to older stores on open, empty for their
documents). ``lexical_search`` with a ``where`` filter joins the FTS5 rows to their node and
document and applies the filter, compiled to SQL (``filter_sql``), to the document's chunk
attributes (its metadata with ``source``, ``doc_id`` and ``title``) before the LIMIT.

The schema version is kept in the ``store_info`` table (and ``PRAGMA user_version``) rather
than in the user-visible ``meta`` table, so ``meta_keys("")`` lists exactly what callers put.

By port: meta_sqlite (MetaStore), documents_sqlite (DocumentStore), status_sqlite
(StatusStore), nodes_sqlite (NodeStore), lexical_fts5.Fts5Leaves (the FTS5 rows); sqlite_db holds
what they share. ``SqliteGraphStore`` combines them and opens, migrates and closes the file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from ...domain.model import EragraphError, LshConfig
from ...ports.graph import SizesAndMetasByParts
from .documents_sqlite import SqliteDocumentStore
from .lexical_fts5 import _LEXICAL, Fts5Leaves, _insert_leaves
from .meta_sqlite import SqliteMetaStore
from . import prefix_counts_sqlite as prefix_counts
from .nodes_sqlite import SqliteNodeStore
from .prefix_counts_sqlite import SqlitePrefixCounts
from .status_sqlite import STATUS_COUNTS_SCHEMA, SqliteStatusStore, count_statuses


SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS store_info (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta_expiry (
    key        TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS meta_expiry_at ON meta_expiry (expires_at);
CREATE TABLE IF NOT EXISTS lsh (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    config TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    kind       TEXT PRIMARY KEY,
    calls      INTEGER NOT NULL DEFAULT 0,
    tokens_in  INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    seconds    REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS ledger_hours (
    kind       TEXT NOT NULL,
    hour       INTEGER NOT NULL,
    calls      INTEGER NOT NULL DEFAULT 0,
    tokens_in  INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    seconds    REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, kind)
);
CREATE TABLE IF NOT EXISTS documents (
    doc_id       TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    title        TEXT NOT NULL,
    chunk_ids    TEXT NOT NULL,
    status       TEXT NOT NULL,
    meta         TEXT NOT NULL,
    version      TEXT NOT NULL DEFAULT '',
    metadata     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS documents_source ON documents (source);
CREATE TABLE IF NOT EXISTS doc_status (
    doc_id  TEXT PRIMARY KEY,
    source  TEXT NOT NULL,
    record  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS doc_status_source ON doc_status (source, doc_id);
CREATE TABLE IF NOT EXISTS nodes (
    node_id  TEXT PRIMARY KEY,
    layer    INTEGER NOT NULL,
    text     TEXT NOT NULL,
    tokens   INTEGER NOT NULL,
    code     INTEGER NOT NULL,
    doc_id   TEXT NOT NULL,
    source   TEXT NOT NULL,
    children TEXT NOT NULL,
    place    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS nodes_layer ON nodes (layer, node_id);
CREATE TABLE IF NOT EXISTS refs (
    node_id TEXT PRIMARY KEY,
    layer   INTEGER NOT NULL,
    code    INTEGER NOT NULL,
    seg     TEXT,
    live    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS refs_range ON refs (layer, code, node_id, live, seg);
CREATE TABLE IF NOT EXISTS layer_counts (
    layer INTEGER PRIMARY KEY,
    live  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS segments (
    layer      INTEGER NOT NULL,
    segment_id TEXT NOT NULL,
    members    TEXT NOT NULL,
    summary_id TEXT NOT NULL,
    PRIMARY KEY (layer, segment_id)
);
CREATE INDEX IF NOT EXISTS segments_layer ON segments (layer);
"""


def _migrate_to_refs(conn: sqlite3.Connection) -> None:
    """Version 1 -> 2: the ref index and layer counters from the nodes and segments."""
    conn.execute("INSERT OR IGNORE INTO refs (node_id, layer, code, seg, live) "
                 "SELECT node_id, layer, code, NULL, 1 FROM nodes")
    for layer, segment_id, members in conn.execute(
            "SELECT layer, segment_id, members FROM segments").fetchall():
        conn.executemany("UPDATE refs SET seg = ? WHERE node_id = ? AND layer = ?",
                         [(segment_id, m, layer) for m in json.loads(members)])
    conn.execute("DELETE FROM layer_counts")
    conn.execute("INSERT INTO layer_counts (layer, live) SELECT layer, COUNT(*) FROM refs GROUP BY layer")
    conn.execute("DROP TABLE IF EXISTS segment_versions")
    conn.execute("UPDATE store_info SET value = '2' WHERE key = 'schema_version'")
    conn.execute("PRAGMA user_version=2")


class SqliteGraphStore(SqliteMetaStore, SqliteDocumentStore, SqliteStatusStore, SqliteNodeStore, Fts5Leaves,
                       SqlitePrefixCounts, SizesAndMetasByParts):
    """The graph (documents, nodes, segments, settings, ledger) in the SQLite file ``path``."""

    def __init__(self, path: Path | str, timeout: float = 30.0, tenant: str = "") -> None:
        """``tenant``: the tenant this store belongs to (its chunks' built-in ``tenant`` attribute)."""
        self.tenant = tenant
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._lsh_parsed: tuple[str, LshConfig] | None = None  # (stored JSON, its parse): get_lsh
        self._vocab = False  # temp.leaf_vocab made on this connection (_leaf_df)
        # autocommit mode: transactions are opened explicitly with BEGIN
        self._conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        self._migrate()

    # ------------------------------------------------------------------ plumbing
    def _migrate(self) -> None:
        with self._write() as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            # the ref index covers what a range read returns and a count tests (refs_range):
            # a range is read from the index alone, never from rows spread over the table
            conn.execute("DROP INDEX IF EXISTS refs_code")
            columns = {r[1] for r in conn.execute("PRAGMA table_info(documents)")}
            if "version" not in columns:  # additive columns: older readers name their columns
                conn.execute("ALTER TABLE documents ADD COLUMN version TEXT NOT NULL DEFAULT ''")
            if "metadata" not in columns:
                conn.execute("ALTER TABLE documents ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'")
            if "place" not in {r[1] for r in conn.execute("PRAGMA table_info(nodes)")}:
                # a chunk's place (domain.places: "start,end[,first,last]"); '' for older chunks
                conn.execute("ALTER TABLE nodes ADD COLUMN place TEXT NOT NULL DEFAULT ''")
            row = conn.execute("SELECT value FROM store_info WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO store_info (key, value) VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            lexical_existed = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'leaf_text'").fetchone() is not None
            conn.execute(_LEXICAL)
            conn.execute(STATUS_COUNTS_SCHEMA)
            count_statuses(conn)  # once: a store written before the status counters
            if not lexical_existed and conn.execute("SELECT 1 FROM nodes LIMIT 1").fetchone() is None:
                conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES ('lexical', '1')")
            if conn.execute("SELECT 1 FROM store_info WHERE key = 'leaf_rowids'").fetchone() is None:
                # leaves written before their rowid was the hash of their id: rewrite them once
                leaves = conn.execute("SELECT node_id, text FROM leaf_text").fetchall()
                conn.execute("DELETE FROM leaf_text")
                _insert_leaves(conn, leaves)
                conn.execute("INSERT INTO store_info (key, value) VALUES ('leaf_rowids', '1')")
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise EragraphError(
                    f"{self.path} has graph schema version {row[0]}; this eragraph reads up to "
                    f"{SCHEMA_VERSION}: upgrade eragraph")
            elif row is not None and int(row[0]) < 2:
                _migrate_to_refs(conn)
            lsh = conn.execute("SELECT config FROM lsh WHERE id = 1").fetchone()
            if lsh is not None:  # the ref index's prefix counts (a store written before them: made now)
                prefix_counts.install(conn, int(json.loads(lsh[0])["n_planes"]))

    def schema_version(self) -> int:
        return int(self._query("SELECT value FROM store_info WHERE key = 'schema_version'")[0][0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
