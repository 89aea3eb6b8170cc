"""LexicalIndex over the SQLite graph store's FTS5 table ``leaf_text``: ``Fts5Leaves`` is the
store's part that owns the table (its rows are written and deleted in the graph store's own
node transactions, nodes_sqlite), and ``Fts5LexicalIndex`` the port, which only reads and
rebuilds. A ``where`` filter selects on the chunks' documents' attributes, in SQL."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence

from ...domain.bm25 import informative_terms, query_terms
from ...domain.filters import Filter
from ...domain.model import LexicalIndexMissing, Node
from ...domain.ranking import rank_key
from ...ports.records import Hit
from . import filter_sql
from .documents_sqlite import _CHUNK_ATTRS
from .sqlite_db import SqliteDb

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


class Fts5Leaves(SqliteDb):
    _vocab: bool

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


class Fts5LexicalIndex:
    def __init__(self, graph: Fts5Leaves) -> None:
        self.graph = graph

    def search(self, text: str, k: int, where: Filter | None = None) -> list[Hit]:
        return self.graph.lexical_search(text, k, where)

    def ready(self) -> bool:
        return self.graph.lexical_ready()

    def rebuild(self, nodes: Iterable[Node]) -> int:
        return self.graph.lexical_rebuild(nodes)
