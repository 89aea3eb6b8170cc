"""The SQLite store's FTS5 leaf table is keyed by a hash of the node id, so writing or deleting
a leaf is a rowid lookup, not a scan of every leaf (which made a bulk build quadratic), and a
store whose leaves were written the old way is rewritten once when opened."""

from __future__ import annotations

import sqlite3

from eragraph.adapters.local.graph_sqlite import SqliteGraphStore
from eragraph.adapters.local.lexical_fts5 import _leaf_rowid
from eragraph.domain.model import Node


def leaf(i: int) -> Node:
    return Node(node_id=f"chk-{i}", layer=0, text=f"harbour ferry number {i}", tokens=4, code=i % 64,
                doc_id=f"d{i}", source=f"s{i}")


def test_deleting_a_leaf_looks_it_up_by_rowid(tmp_path):
    store = SqliteGraphStore(tmp_path / "g.sqlite")
    store.put_nodes([leaf(i) for i in range(50)])
    def plan(where: str, value) -> str:
        return " ".join(str(r[-1]) for r in store._query(f"EXPLAIN QUERY PLAN DELETE FROM leaf_text WHERE {where}",
                                                          (value,)))
    # FTS5 reports the constraint it was given: "INDEX 0:=" is a rowid lookup, "INDEX 0:" a scan
    assert plan("rowid = ?", _leaf_rowid("chk-3")).endswith("INDEX 0:=")
    assert plan("node_id = ?", "chk-3").endswith("INDEX 0:")
    store.delete_nodes(["chk-3", "chk-7"])
    assert store._query("SELECT count(*) FROM leaf_text")[0][0] == 48
    assert {h.node_id for h in store.lexical_search("ferry number", 100)} == {f"chk-{i}" for i in range(50)} - {"chk-3", "chk-7"}
    store.put_nodes([leaf(5)])  # written again: one row, not two
    assert store._query("SELECT count(*) FROM leaf_text WHERE node_id = 'chk-5'")[0][0] == 1


def test_leaves_of_an_older_store_are_rewritten_on_open(tmp_path):
    path = tmp_path / "g.sqlite"
    store = SqliteGraphStore(path)
    store.put_nodes([leaf(i) for i in range(20)])
    store.close()
    conn = sqlite3.connect(path)  # as the older code wrote them: rowids in insertion order
    rows = conn.execute("SELECT node_id, text FROM leaf_text").fetchall()
    conn.execute("DELETE FROM leaf_text")
    conn.executemany("INSERT INTO leaf_text (node_id, text) VALUES (?, ?)", rows)
    conn.execute("DELETE FROM store_info WHERE key = 'leaf_rowids'")
    conn.commit()
    conn.close()
    store = SqliteGraphStore(path)
    assert sorted(r for r, in store._query("SELECT rowid FROM leaf_text")) == sorted(_leaf_rowid(f"chk-{i}") for i in range(20))
    store.delete_nodes(["chk-1"])
    assert "chk-1" not in {h.node_id for h in store.lexical_search("harbour", 100)}
    assert len(store.lexical_search("harbour", 100)) == 19
