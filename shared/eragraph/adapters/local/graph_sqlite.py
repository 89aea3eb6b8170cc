"""GraphStore in one SQLite file (the local mode's store).

WAL journal, foreign keys on, one connection guarded by a lock, every multi-row write in one
transaction. Each indexed node has a row in ``refs`` (its layer, LSH code, segment and whether
it is live), indexed by (layer, code) so the scoped reconcile reads a code range, never a
layer; ``layer_counts`` keeps the live nodes per layer. ``apply_region`` is a conditional
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
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...domain.bm25 import informative_terms, query_terms
from ...domain.filters import Filter
from ...domain.doc_status import DocStatus
from ...domain.model import (ANY_VERSION, DELETED, ConflictError, Document, EragraphError, LexicalIndexMissing,
                             LshConfig, Node,
                             NodeRef, RefState, RegionChange, Segment)
from ...domain.ranking import rank_key
from ...ports.records import Hit
from . import filter_sql

SCHEMA_VERSION = 2
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
    children TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_layer ON nodes (layer, node_id);
CREATE TABLE IF NOT EXISTS refs (
    node_id TEXT PRIMARY KEY,
    layer   INTEGER NOT NULL,
    code    INTEGER NOT NULL,
    seg     TEXT,
    live    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS refs_code ON refs (layer, code, node_id);
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

# BM25 over the leaf chunks (FTS5 bm25(), k1 = 1.2, b = 0.75): one row per layer-0 node,
# written and deleted in the same transaction as the node. store_info 'lexical' = '1' marks a
# store whose every leaf is indexed (new stores; older ones after `eragraph reindex`).
_LEXICAL = """
CREATE VIRTUAL TABLE IF NOT EXISTS leaf_text USING fts5(
    node_id UNINDEXED, text, tokenize = 'unicode61 remove_diacritics 2'
)
"""


def _leaf_rowid(node_id: str) -> int:
    """The FTS5 rowid of a leaf: 63 bits of a hash of its id. ``node_id`` is an UNINDEXED
    column, so a delete by it scans the whole table (a bulk build was quadratic); by rowid it
    is a b-tree lookup."""
    return int.from_bytes(hashlib.blake2b(node_id.encode("utf-8"), digest_size=8).digest(), "big") >> 1


def _insert_leaves(conn: sqlite3.Connection, leaves: Sequence[tuple[str, str]]) -> None:
    conn.executemany("DELETE FROM leaf_text WHERE rowid = ?", [(_leaf_rowid(i),) for i, _ in leaves])
    conn.executemany("INSERT INTO leaf_text (rowid, node_id, text) VALUES (?, ?, ?)",
                     [(_leaf_rowid(i), i, t) for i, t in leaves])


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)


def _chunks(items: list[str], size: int = _IN_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


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


def _doc_row(doc: Document) -> tuple:
    return (doc.doc_id, doc.source, doc.content_hash, doc.title, _dumps(list(doc.chunk_ids)),
            doc.status, _dumps(doc.meta), doc.version, _dumps(doc.metadata))


def _doc(row: sqlite3.Row | tuple) -> Document:
    doc_id, source, content_hash, title, chunk_ids, status, meta, version, metadata = row
    return Document(doc_id=doc_id, source=source, content_hash=content_hash, title=title,
                    chunk_ids=tuple(json.loads(chunk_ids)), status=status, meta=json.loads(meta),
                    version=version, metadata=json.loads(metadata))


def _node(row: tuple) -> Node:
    node_id, layer, text, tokens, code, doc_id, source, children = row
    return Node(node_id=node_id, layer=int(layer), text=text, tokens=int(tokens), code=int(code),
                doc_id=doc_id, source=source, children=tuple(json.loads(children)))


_DOC_COLS = "doc_id, source, content_hash, title, chunk_ids, status, meta, version, metadata"
_DOC_MARKS = ", ".join("?" * len(_DOC_COLS.split(",")))
_LIVE = f"status != '{DELETED}'"
# each live document's chunk attributes (domain.filters.chunk_attrs) as one JSON object: its
# metadata and the built-in source, doc_id and title (title only when it has one)
_CHUNK_ATTRS = ("SELECT doc_id, CASE WHEN title = '' "
                "THEN json_set(metadata, '$.source', source, '$.doc_id', doc_id) "
                "ELSE json_set(metadata, '$.source', source, '$.doc_id', doc_id, '$.title', title) END AS attrs "
                f"FROM documents WHERE {_LIVE}")
_NODE_COLS = "node_id, layer, text, tokens, code, doc_id, source, children"


class SqliteGraphStore:
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
            columns = {r[1] for r in conn.execute("PRAGMA table_info(documents)")}
            if "version" not in columns:  # additive columns: older readers name their columns
                conn.execute("ALTER TABLE documents ADD COLUMN version TEXT NOT NULL DEFAULT ''")
            if "metadata" not in columns:
                conn.execute("ALTER TABLE documents ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'")
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
        cached = self._lsh_parsed  # every query reads it: parsing n x dim floats is most of a fast query
        if cached is not None and cached[0] == rows[0][0]:
            return cached[1]
        data = json.loads(rows[0][0])
        config = LshConfig(embedder_id=data["embedder_id"], dim=int(data["dim"]),
                           n_planes=int(data["n_planes"]), seed=int(data["seed"]),
                           planes=tuple(tuple(float(x) for x in plane) for plane in data["planes"]))
        self._lsh_parsed = (rows[0][0], config)
        return config

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
    def get_document(self, doc_id: str, include_deleted: bool = False) -> Document | None:
        where = "doc_id = ?" if include_deleted else f"doc_id = ? AND {_LIVE}"
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE {where}", (doc_id,))
        return _doc(rows[0]) if rows else None

    def find_documents(self, source: str) -> list[Document]:
        rows = self._query(f"SELECT {_DOC_COLS} FROM documents WHERE source = ? AND {_LIVE} ORDER BY doc_id",
                           (source,))
        return [_doc(r) for r in rows]

    def put_document(self, doc: Document, expected: Document | None = ANY_VERSION) -> None:
        with self._write() as conn:
            if expected is not ANY_VERSION:
                row = conn.execute("SELECT content_hash, version, status FROM documents WHERE doc_id = ?",
                                   (doc.doc_id,)).fetchone()
                if (row is None) != (expected is None) or (
                        row is not None and tuple(row) != expected.stamp()):
                    raise ConflictError(f"document {doc.doc_id} changed concurrently")
            conn.execute(f"INSERT OR REPLACE INTO documents ({_DOC_COLS}) VALUES ({_DOC_MARKS})", _doc_row(doc))

    def delete_document(self, doc_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))

    def list_documents(self) -> list[Document]:
        return [_doc(r) for r in self._query(f"SELECT {_DOC_COLS} FROM documents WHERE {_LIVE} ORDER BY doc_id")]

    # ------------------------------------------------------------------ document statuses
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

    # ------------------------------------------------------------------ nodes and refs
    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        rows = [(n.node_id, int(n.layer), n.text, int(n.tokens), int(n.code), n.doc_id, n.source,
                 _dumps(list(n.children))) for n in nodes]
        if not rows:
            return
        with self._write() as conn:
            conn.executemany(f"INSERT OR REPLACE INTO nodes ({_NODE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            if index:
                for n in nodes:
                    _make_live(conn, int(n.layer), n.node_id, int(n.code))
            leaves = [(n.node_id, n.text) for n in nodes if n.layer == 0]
            if leaves:
                _insert_leaves(conn, leaves)

    def check_fits(self, doc: Document | None = None, nodes: Sequence[Node] = ()) -> None:
        """No item limit here (only DynamoDB has one)."""

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
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return
        with self._write() as conn:
            conn.executemany("DELETE FROM nodes WHERE node_id = ?", [(i,) for i in ids])
            for i in ids:
                _make_gone(conn, i)
            conn.executemany("DELETE FROM leaf_text WHERE rowid = ?", [(_leaf_rowid(i),) for i in ids])

    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        sql = ("SELECT node_id, code, seg, live FROM refs WHERE layer = ? AND code BETWEEN ? AND ? "
               "ORDER BY code, node_id")
        params: list[Any] = [int(layer), int(lo), int(hi)]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [RefState(node_id, int(code), seg, bool(live)) for node_id, code, seg, live in self._query(sql, params)]

    # ------------------------------------------------------------------ lexical index (FTS5)
    def lexical_ready(self) -> bool:
        return bool(self._query("SELECT 1 FROM store_info WHERE key = 'lexical' AND value = '1'"))

    def lexical_search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        """Top-k leaves by BM25; with ``where``, of the leaves whose document's attributes match
        it (the filter compiled to SQL over the documents, joined in before the LIMIT)."""
        if not self.lexical_ready():
            raise LexicalIndexMissing(str(self.path.parent))
        terms = query_terms(text)
        if not terms or k <= 0:
            return []
        df, n_rows = self._leaf_df(terms)
        terms = informative_terms(terms, df, n_rows)
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        # FTS5's own "ORDER BY rank" (rank = bm25()) is its fast path; a few more rows than k
        # let equal scores at the cut be ordered by id, like every other index
        if where is None:
            rows = self._query("SELECT node_id, -rank FROM leaf_text WHERE leaf_text MATCH ? ORDER BY rank LIMIT ?",
                               (match, int(k) + 20))
        else:
            allowed, params = filter_sql.compile(where, "d.attrs")
            # the filter is evaluated on the matching rows' documents only (looked up by key),
            # not on every document of the store
            attrs = _CHUNK_ATTRS
            if self.tenant:  # a tenant's store: every chunk carries the built-in tenant attribute
                attrs = attrs.replace(" END AS attrs ", " END AS base ")
                attrs = f"SELECT doc_id, json_set(base, '$.tenant', ?) AS attrs FROM ({attrs})"
            rows = self._query(
                "SELECT f.node_id, -f.rank FROM leaf_text AS f JOIN nodes AS n ON n.node_id = f.node_id "
                f"JOIN ({attrs}) AS d ON d.doc_id = n.doc_id "
                f"WHERE f.leaf_text MATCH ? AND {allowed} "
                "ORDER BY f.rank LIMIT ?", (*([self.tenant] if self.tenant else []), match, *params, int(k) + 20))
        hits = sorted((Hit(node_id, float(s)) for node_id, s in rows), key=rank_key)
        return hits[:int(k)]

    def _leaf_df(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """(how many leaves hold each term, how many leaves there are), both as FTS5's bm25()
        counts them: the first from an fts5vocab table of this connection (a lookup walks each
        term's posting list once, without scoring), the second from FTS5's one-row-per-row
        ``leaf_text_docsize`` table (a b-tree count)."""
        with self._lock:
            if not self._vocab:
                self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.leaf_vocab "
                                   "USING fts5vocab(main, leaf_text, 'row')")
                self._vocab = True
            marks = ",".join("?" * len(terms))
            df = dict(self._conn.execute(f"SELECT term, doc FROM temp.leaf_vocab WHERE term IN ({marks})",
                                         list(terms)).fetchall())
            return df, int(self._conn.execute("SELECT count(*) FROM leaf_text_docsize").fetchone()[0])

    def lexical_rebuild(self, nodes: Iterable[Node]) -> int:
        rows = [(n.node_id, n.text) for n in nodes if n.layer == 0]
        with self._write() as conn:
            conn.execute("DELETE FROM leaf_text")
            _insert_leaves(conn, rows)
            conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES ('lexical', '1')")
        return len(rows)

    def layer_refs(self, layer: int) -> list[NodeRef]:
        rows = self._query("SELECT node_id, code FROM refs WHERE layer = ? AND live = 1 ORDER BY node_id",
                           (int(layer),))
        return [NodeRef(node_id, int(code)) for node_id, code in rows]

    def layer_sizes(self) -> dict[int, int]:
        rows = self._query("SELECT layer, live FROM layer_counts WHERE live > 0 ORDER BY layer")
        return {int(layer): int(n) for layer, n in rows}

    def repair_layer_counts(self) -> dict[int, int]:
        with self._write() as conn:  # the write lock: no counter moves while we recount
            live = {int(layer): int(n) for layer, n in conn.execute(
                "SELECT layer, COUNT(*) FROM refs WHERE live = 1 GROUP BY layer")}
            have = {int(layer): int(n) for layer, n in conn.execute("SELECT layer, live FROM layer_counts")}
            fixed = {}
            for layer in sorted(set(live) | set(have)):
                want = live.get(layer, 0)
                if want != have.get(layer, 0):
                    fixed[layer] = want - have.get(layer, 0)
                if want == 0:
                    conn.execute("DELETE FROM layer_counts WHERE layer = ?", (layer,))
                elif want != have.get(layer):
                    conn.execute("INSERT OR REPLACE INTO layer_counts (layer, live) VALUES (?, ?)", (layer, want))
        return fixed

    # ------------------------------------------------------------------ segments
    def get_segments(self, layer: int) -> list[Segment]:
        rows = self._query("SELECT segment_id, layer, members, summary_id FROM segments WHERE layer = ? "
                           "ORDER BY segment_id", (int(layer),))
        return [Segment(segment_id=sid, layer=int(lay), members=tuple(json.loads(members)), summary_id=summary)
                for sid, lay, members, summary in rows]

    def get_segments_by_id(self, layer: int, segment_ids: Iterable[str]) -> dict[str, Segment]:
        wanted = list(dict.fromkeys(segment_ids))
        found: dict[str, Segment] = {}
        with self._lock:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                for sid, lay, members, summary in self._conn.execute(
                        f"SELECT segment_id, layer, members, summary_id FROM segments WHERE layer = ? "
                        f"AND segment_id IN ({marks})", [int(layer), *chunk]):
                    found[sid] = Segment(segment_id=sid, layer=int(lay), members=tuple(json.loads(members)),
                                         summary_id=summary)
        return {i: found[i] for i in wanted if i in found}

    def apply_region(self, change: RegionChange) -> None:
        layer = int(change.layer)
        with self._write() as conn:
            for ref in change.expected:
                row = conn.execute("SELECT layer, code, seg, live FROM refs WHERE node_id = ?",
                                   (ref.node_id,)).fetchone()
                if row is None or (int(row[0]), int(row[1]), row[2], bool(row[3])) != (
                        layer, ref.code, ref.seg, ref.live):
                    raise ConflictError(f"layer {layer}: node {ref.node_id} changed concurrently")
            if change.remove:
                conn.executemany("DELETE FROM segments WHERE layer = ? AND segment_id = ?",
                                 [(layer, sid) for sid in change.remove])
            if change.add:
                conn.executemany(
                    "INSERT OR REPLACE INTO segments (layer, segment_id, members, summary_id) VALUES (?, ?, ?, ?)",
                    [(layer, seg.segment_id, _dumps(list(seg.members)), seg.summary_id) for seg in change.add])
            conn.executemany("UPDATE refs SET seg = ? WHERE node_id = ?", [(sid, i) for i, sid in change.assign])
            conn.executemany("DELETE FROM refs WHERE node_id = ? AND live = 0", [(i,) for i in change.drop])
            for ref in change.above_add:
                _make_live(conn, layer + 1, ref.node_id, ref.code)
            for ref in change.above_remove:
                _make_gone(conn, ref.node_id)


def _count(conn: sqlite3.Connection, layer: int, delta: int) -> None:
    conn.execute("INSERT INTO layer_counts (layer, live) VALUES (?, ?) "
                 "ON CONFLICT (layer) DO UPDATE SET live = live + excluded.live", (layer, delta))


def _make_live(conn: sqlite3.Connection, layer: int, node_id: str, code: int) -> None:
    row = conn.execute("SELECT layer, code, seg, live FROM refs WHERE node_id = ?", (node_id,)).fetchone()
    if row is not None and int(row[0]) != layer:  # re-put in another layer: a new node there
        _make_gone(conn, node_id)
        conn.execute("DELETE FROM refs WHERE node_id = ?", (node_id,))
        row = None
    if row is None:
        conn.execute("INSERT INTO refs (node_id, layer, code, seg, live) VALUES (?, ?, ?, NULL, 1)",
                     (node_id, layer, code))
        _count(conn, layer, 1)
        return
    if not row[3]:
        _count(conn, layer, 1)
    conn.execute("UPDATE refs SET code = ?, live = 1 WHERE node_id = ?", (code, node_id))


def _make_gone(conn: sqlite3.Connection, node_id: str) -> None:
    row = conn.execute("SELECT layer, seg, live FROM refs WHERE node_id = ?", (node_id,)).fetchone()
    if row is None:
        return
    if row[2]:
        _count(conn, int(row[0]), -1)
    if row[1] is None:
        conn.execute("DELETE FROM refs WHERE node_id = ?", (node_id,))
    else:
        conn.execute("UPDATE refs SET live = 0 WHERE node_id = ?", (node_id,))
