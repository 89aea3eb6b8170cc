"""GraphStore in one SQLite file (the local mode's store).

WAL journal, foreign keys on, one connection guarded by a lock, every multi-row write in one
transaction. ``replace_segments`` is a conditional write: ``BEGIN IMMEDIATE`` takes the write
lock, the layer's version is checked against ``expected_version`` and only then are segments
deleted/inserted and the version bumped, so two processes reconciling the same layer cannot
both win. Behaviour (including the order of returned lists) matches ``adapters.memory``.

The schema version is kept in the ``store_info`` table (and ``PRAGMA user_version``) rather
than in the user-visible ``meta`` table, so ``meta_keys("")`` lists exactly what callers put.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...domain.bm25 import query_terms
from ...domain.model import (ConflictError, Document, EragraphError, LexicalIndexMissing, LshConfig, Node,
                             NodeRef, Segment)
from ...ports import Hit

SCHEMA_VERSION = 1
_IN_CHUNK = 500  # ids per "IN (...)" query, well under SQLite's variable limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS store_info (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
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
CREATE TABLE IF NOT EXISTS documents (
    doc_id       TEXT PRIMARY KEY,
    source       TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    title        TEXT NOT NULL,
    chunk_ids    TEXT NOT NULL,
    status       TEXT NOT NULL,
    meta         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_source ON documents (source);
CREATE TABLE IF NOT EXISTS nodes (
    node_id  TEXT PRIMARY KEY,
    layer    INTEGER NOT NULL,
    text     TEXT NOT NULL,
    tokens   INTEGER NOT NULL,
    code     INTEGER NOT NULL,
    doc_id   TEXT NOT NULL,
    source   TEXT NOT NULL,
    children TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_layer ON nodes (layer, node_id);
CREATE TABLE IF NOT EXISTS segment_versions (
    layer   INTEGER PRIMARY KEY,
    version INTEGER NOT NULL
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

# BM25 over the leaf chunks (FTS5 bm25(), k1 = 1.2, b = 0.75): one row per layer-0 node,
# written and deleted in the same transaction as the node. store_info 'lexical' = '1' marks a
# store whose every leaf is indexed (new stores; older ones after `eragraph reindex`).
_LEXICAL = """
CREATE VIRTUAL TABLE IF NOT EXISTS leaf_text USING fts5(
    node_id UNINDEXED, text, tokenize = 'unicode61 remove_diacritics 2'
)
"""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def _chunks(items: list[str], size: int = _IN_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _doc_row(doc: Document) -> tuple:
    return (doc.doc_id, doc.source, doc.content_hash, doc.title, _dumps(list(doc.chunk_ids)),
            doc.status, _dumps(doc.meta))


def _doc(row: sqlite3.Row | tuple) -> Document:
    doc_id, source, content_hash, title, chunk_ids, status, meta = row
    return Document(doc_id=doc_id, source=source, content_hash=content_hash, title=title,
                    chunk_ids=tuple(json.loads(chunk_ids)), status=status, meta=json.loads(meta))


def _node(row: tuple) -> Node:
    node_id, layer, text, tokens, code, doc_id, source, children = row
    return Node(node_id=node_id, layer=int(layer), text=text, tokens=int(tokens), code=int(code),
                doc_id=doc_id, source=source, children=tuple(json.loads(children)))


_DOC_COLS = "doc_id, source, content_hash, title, chunk_ids, status, meta"
_NODE_COLS = "node_id, layer, text, tokens, code, doc_id, source, children"


class SqliteGraphStore:
    """The graph (documents, nodes, segments, settings, ledger) in the SQLite file ``path``."""

    def __init__(self, path: Path | str, timeout: float = 30.0) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # autocommit mode: transactions are opened explicitly with BEGIN
        self._conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        self._migrate()

    # ------------------------------------------------------------------ plumbing
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

    def _migrate(self) -> None:
        with self._write() as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM store_info WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO store_info (key, value) VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            lexical_existed = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'leaf_text'").fetchone() is not None
            conn.execute(_LEXICAL)
            if not lexical_existed and conn.execute("SELECT 1 FROM nodes LIMIT 1").fetchone() is None:
                conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES ('lexical', '1')")
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise EragraphError(
                    f"{self.path} has graph schema version {row[0]}; this eragraph reads up to "
                    f"{SCHEMA_VERSION}: upgrade eragraph")
            # versions below SCHEMA_VERSION would be migrated here, step by step

    def schema_version(self) -> int:
        return int(self._query("SELECT value FROM store_info WHERE key = 'schema_version'")[0][0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ store-wide configuration
    def get_lsh(self) -> LshConfig | None:
        rows = self._query("SELECT config FROM lsh WHERE id = 1")
        if not rows:
            return None
        data = json.loads(rows[0][0])
        return LshConfig(embedder_id=data["embedder_id"], dim=int(data["dim"]),
                         n_planes=int(data["n_planes"]), seed=int(data["seed"]),
                         planes=tuple(tuple(float(x) for x in plane) for plane in data["planes"]))

    def put_lsh(self, config: LshConfig) -> LshConfig:
        data = {"embedder_id": config.embedder_id, "dim": config.dim, "n_planes": config.n_planes,
                "seed": config.seed, "planes": [list(p) for p in config.planes]}
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO lsh (id, config) VALUES (1, ?)", (_dumps(data),))
        stored = self.get_lsh()
        assert stored is not None
        return stored

    def get_meta(self, key: str) -> Any | None:
        rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def put_meta(self, key: str, value: Any) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, _dumps(value)))

    def delete_meta(self, key: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))

    def meta_keys(self, prefix: str) -> list[str]:
        rows = self._query("SELECT key FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key",
                           (len(prefix), prefix))
        return [r[0] for r in rows]

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO ledger (kind, calls, tokens_in, tokens_out, seconds) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (kind) DO UPDATE SET calls = calls + excluded.calls, "
                "tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out, "
                "seconds = seconds + excluded.seconds",
                (kind, int(calls), int(tokens_in), int(tokens_out), float(seconds)))

    def ledger(self) -> dict[str, dict[str, float]]:
        rows = self._query("SELECT kind, calls, tokens_in, tokens_out, seconds FROM ledger ORDER BY kind")
        return {kind: {"calls": calls, "tokens_in": t_in, "tokens_out": t_out, "seconds": float(sec)}
                for kind, calls, t_in, t_out, sec in rows}

    # ------------------------------------------------------------------ documents
    def get_document(self, doc_id: str) -> Document | None:
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE doc_id = ?", (doc_id,))
        return _doc(rows[0]) if rows else None

    def find_documents(self, source: str) -> list[Document]:
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE source = ? ORDER BY doc_id", (source,))
        return [_doc(r) for r in rows]

    def put_document(self, doc: Document) -> None:
        with self._write() as conn:
            conn.execute(f"INSERT OR REPLACE INTO documents ({_DOC_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         _doc_row(doc))

    def delete_document(self, doc_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))

    def list_documents(self) -> list[Document]:
        return [_doc(r) for r in self._query(f"SELECT {_DOC_COLS} FROM documents ORDER BY doc_id")]

    # ------------------------------------------------------------------ nodes
    def put_nodes(self, nodes: Sequence[Node]) -> None:
        rows = [(n.node_id, int(n.layer), n.text, int(n.tokens), int(n.code), n.doc_id, n.source,
                 _dumps(list(n.children))) for n in nodes]
        if not rows:
            return
        with self._write() as conn:
            conn.executemany(f"INSERT OR REPLACE INTO nodes ({_NODE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            leaves = [(n.node_id, n.text) for n in nodes if n.layer == 0]
            if leaves:
                conn.executemany("DELETE FROM leaf_text WHERE node_id = ?", [(i,) for i, _ in leaves])
                conn.executemany("INSERT INTO leaf_text (node_id, text) VALUES (?, ?)", leaves)

    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]:
        wanted = list(dict.fromkeys(node_ids))
        found: dict[str, Node] = {}
        with self._lock:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(f"SELECT {_NODE_COLS} FROM nodes WHERE node_id IN ({marks})", chunk):
                    found[row[0]] = _node(row)
        return {i: found[i] for i in wanted if i in found}

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        ids = [(i,) for i in dict.fromkeys(node_ids)]
        if not ids:
            return
        with self._write() as conn:
            conn.executemany("DELETE FROM nodes WHERE node_id = ?", ids)
            conn.executemany("DELETE FROM leaf_text WHERE node_id = ?", ids)

    # ------------------------------------------------------------------ lexical index (FTS5)
    def lexical_ready(self) -> bool:
        return bool(self._query("SELECT 1 FROM store_info WHERE key = 'lexical' AND value = '1'"))

    def lexical_search(self, text: str, k: int) -> list[Hit]:
        if not self.lexical_ready():
            raise LexicalIndexMissing(str(self.path.parent))
        terms = query_terms(text)
        if not terms or k <= 0:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        # FTS5's own "ORDER BY rank" (rank = bm25()) is its fast path; a few more rows than k
        # let equal scores at the cut be ordered by id, like every other index
        rows = self._query("SELECT node_id, -rank FROM leaf_text WHERE leaf_text MATCH ? ORDER BY rank LIMIT ?",
                           (match, int(k) + 20))
        hits = sorted((Hit(node_id, float(s)) for node_id, s in rows), key=lambda h: (-h.score, h.node_id))
        return hits[:int(k)]

    def lexical_rebuild(self, nodes: Iterable[Node]) -> int:
        rows = [(n.node_id, n.text) for n in nodes if n.layer == 0]
        with self._write() as conn:
            conn.execute("DELETE FROM leaf_text")
            conn.executemany("INSERT INTO leaf_text (node_id, text) VALUES (?, ?)", rows)
            conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES ('lexical', '1')")
        return len(rows)

    def layer_refs(self, layer: int) -> list[NodeRef]:
        rows = self._query("SELECT node_id, code FROM nodes WHERE layer = ? ORDER BY node_id", (int(layer),))
        return [NodeRef(node_id, int(code)) for node_id, code in rows]

    def layer_sizes(self) -> dict[int, int]:
        rows = self._query("SELECT layer, COUNT(*) FROM nodes GROUP BY layer ORDER BY layer")
        return {int(layer): int(n) for layer, n in rows}

    # ------------------------------------------------------------------ segments
    def get_segments(self, layer: int) -> list[Segment]:
        rows = self._query("SELECT segment_id, layer, members, summary_id FROM segments WHERE layer = ? "
                           "ORDER BY segment_id", (int(layer),))
        return [Segment(segment_id=sid, layer=int(lay), members=tuple(json.loads(members)), summary_id=summary)
                for sid, lay, members, summary in rows]

    def segments_version(self, layer: int) -> int:
        rows = self._query("SELECT version FROM segment_versions WHERE layer = ?", (int(layer),))
        return int(rows[0][0]) if rows else 0

    def replace_segments(self, layer: int, remove: Sequence[str], add: Sequence[Segment], expected_version: int) -> int:
        layer = int(layer)
        with self._write() as conn:
            row = conn.execute("SELECT version FROM segment_versions WHERE layer = ?", (layer,)).fetchone()
            current = int(row[0]) if row else 0
            if current != expected_version:
                raise ConflictError(f"segments of layer {layer} changed concurrently")
            if remove:
                conn.executemany("DELETE FROM segments WHERE layer = ? AND segment_id = ?",
                                 [(layer, sid) for sid in remove])
            if add:
                conn.executemany(
                    "INSERT OR REPLACE INTO segments (layer, segment_id, members, summary_id) VALUES (?, ?, ?, ?)",
                    [(layer, seg.segment_id, _dumps(list(seg.members)), seg.summary_id) for seg in add])
            conn.execute("INSERT OR REPLACE INTO segment_versions (layer, version) VALUES (?, ?)",
                         (layer, expected_version + 1))
        return expected_version + 1
