"""The NodeStore part of the SQLite graph store: ``nodes``, the ref index ``refs`` (layer,
code, segment, live), the ``layer_counts`` kept in the same transactions, ``segments`` and
the regions' conditional writes. A leaf's FTS5 row (lexical_fts5) is written and deleted with
its node."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from ...domain.model import ConflictError, Document, Node, NodeRef, RefState, RegionApplied, RegionChange, Segment
from ...domain.segment_stats import SegmentStats
from ...domain.scoped import RefCount
from . import prefix_counts_sqlite as prefix_counts
from .lexical_fts5 import _insert_leaves, _leaf_rowid
from .meta_sqlite import add_ledger_row, write_meta, write_metas
from .sqlite_db import SqliteDb, _chunks, _dumps


_NODE_COLS = "node_id, layer, text, tokens, code, doc_id, source, children, place"


def _node(row: tuple) -> Node:
    node_id, layer, text, tokens, code, doc_id, source, children, place = row
    return Node(node_id=node_id, layer=int(layer), text=text, tokens=int(tokens), code=int(code),
                doc_id=doc_id, source=source, children=tuple(json.loads(children)),
                place=tuple(int(v) for v in place.split(",")) if place else ())


class SqliteNodeStore(SqliteDb):
    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        if not nodes:
            return
        with self._write() as conn:
            _store_nodes(conn, nodes)
            if index:
                for n in nodes:
                    _make_live(conn, int(n.layer), n.node_id, int(n.code))

    def keep_nodes(self, nodes: Sequence[Node]) -> None:
        if not nodes:
            return
        with self._write() as conn:
            _store_nodes(conn, nodes, replace=False)

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

    def delete_dead_nodes(self, node_ids: Iterable[str]) -> list[str]:
        ids = list(dict.fromkeys(node_ids))
        dead = []
        with self._write() as conn:  # the liveness read and the deletes under the write lock
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                live = {r[0] for r in conn.execute(f"SELECT node_id FROM refs WHERE live = 1 AND node_id IN ({marks})",
                                                   chunk)}
                dead += [i for i in chunk if i not in live]
            conn.executemany("DELETE FROM nodes WHERE node_id = ?", [(i,) for i in dead])
            for i in dead:
                _make_gone(conn, i)
            conn.executemany("DELETE FROM leaf_text WHERE rowid = ?", [(_leaf_rowid(i),) for i in dead])
        return dead

    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        sql = ("SELECT node_id, code, seg, live FROM refs WHERE layer = ? AND code BETWEEN ? AND ? "
               "ORDER BY code, node_id")
        params: list[Any] = [int(layer), int(lo), int(hi)]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [RefState(node_id, int(code), seg, bool(live)) for node_id, code, seg, live in self._query(sql, params)]

    def count_refs(self, layer: int, lo: int, hi: int, cap: int | None = None) -> RefCount:
        """Two capped counts over the covering index, each scanning until it holds cap + 1."""
        stop = -1 if cap is None else int(cap) + 1
        rng = [int(layer), int(lo), int(hi)]
        sql = ("SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM refs WHERE layer = ? AND code BETWEEN ? AND ? "
               "AND seg IS NOT NULL LIMIT ?)), (SELECT COUNT(*) FROM (SELECT 1 FROM refs WHERE layer = ? "
               "AND code BETWEEN ? AND ? AND live = 1 LIMIT ?))")
        old, new = self._query(sql, [*rng, stop, *rng, stop])[0]
        return RefCount(int(old), int(new))

    def refs_page(self, layer: int, after: tuple[int, str] | None, limit: int) -> list[RefState]:
        if after is None:
            sql, params = "SELECT node_id, code, seg, live FROM refs WHERE layer = ? AND live = 1", [int(layer)]
        else:  # the row value comparison walks the (layer, code, node_id) index from the cursor
            sql = ("SELECT node_id, code, seg, live FROM refs WHERE layer = ? AND live = 1 "
                   "AND (code, node_id) > (?, ?)")
            params = [int(layer), int(after[0]), str(after[1])]
        rows = self._query(sql + " ORDER BY code, node_id LIMIT ?", [*params, max(int(limit), 0)])
        return [RefState(node_id, int(code), seg, bool(live)) for node_id, code, seg, live in rows]

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
            bits = prefix_counts.installed_bits(conn)
            if bits is not None:  # the prefix counts too (kept by triggers: taken again, in case)
                prefix_counts.recount(conn, bits)
        return fixed

    # ------------------------------------------------------------------ segments
    def get_segments(self, layer: int) -> list[Segment]:
        rows = self._query("SELECT segment_id, layer, members, summary_id FROM segments WHERE layer = ? "
                           "ORDER BY segment_id", (int(layer),))
        return [Segment(segment_id=sid, layer=int(lay), members=tuple(json.loads(members)), summary_id=summary)
                for sid, lay, members, summary in rows]

    def segment_stats(self) -> dict[int, SegmentStats]:
        """One aggregate over the segments table (a local read of its rows, no JSON parsed in
        Python)."""
        rows = self._query("SELECT layer, COUNT(*), MIN(json_array_length(members)), "
                           "MAX(json_array_length(members)) FROM segments GROUP BY layer ORDER BY layer")
        return {int(layer): SegmentStats(int(n), lo, hi) for layer, n, lo, hi in rows}

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

    def apply_region(self, change: RegionChange) -> RegionApplied:
        layer = int(change.layer)
        with self._write() as conn:
            written = {n.node_id for n in change.nodes}  # stored by this write
            for ref in change.above_add:  # a summary deleted since it was stored (delete_dead_nodes)
                if ref.node_id not in written and conn.execute(
                        "SELECT 1 FROM nodes WHERE node_id = ?", (ref.node_id,)).fetchone() is None:
                    raise ConflictError(f"layer {layer}: summary {ref.node_id} is gone")
            for ref in change.expected:
                row = conn.execute("SELECT layer, code, seg, live FROM refs WHERE node_id = ?",
                                   (ref.node_id,)).fetchone()
                if row is None or (int(row[0]), int(row[1]), row[2], bool(row[3])) != (
                        layer, ref.code, ref.seg, ref.live):
                    raise ConflictError(f"layer {layer}: node {ref.node_id} changed concurrently")
            _store_nodes(conn, change.nodes)
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
            for key, value in change.marks:
                write_meta(conn, key, value)
            gone = [r.node_id for r in change.above_remove]
            states = {}
            for i in gone:
                row = conn.execute("SELECT live FROM refs WHERE node_id = ?", (i,)).fetchone()
                states[i] = None if row is None else bool(row[0])
            kept = tuple(i for i in gone if states[i] is False)
            for i, key, value in change.keep_texts:
                if i in kept:
                    write_meta(conn, key, value)
            deleted: tuple[str, ...] = ()
            if change.delete_removed:
                deleted = tuple(i for i in gone if not states[i])
                conn.executemany("DELETE FROM nodes WHERE node_id = ?", [(i,) for i in deleted])
                conn.executemany("DELETE FROM leaf_text WHERE rowid = ?", [(_leaf_rowid(i),) for i in deleted])
            for row in change.ledger:
                add_ledger_row(conn, *row)
            finish = change.finish
            gone = () if finish is None else tuple(
                write_metas(conn, finish.puts, finish.deletes, finish.clear, finish.present))
        return RegionApplied(deleted, kept, gone)


def _store_nodes(conn: sqlite3.Connection, nodes: Sequence[Node], replace: bool = True) -> None:
    """The node rows (and a leaf's text for the lexical index), outside the ref index;
    ``replace`` False: only those of ids not stored."""
    if not replace:
        stored = {n.node_id for n in nodes
                  if conn.execute("SELECT 1 FROM nodes WHERE node_id = ?", (n.node_id,)).fetchone() is not None}
        nodes = [n for n in nodes if n.node_id not in stored]
    rows = [(n.node_id, int(n.layer), n.text, int(n.tokens), int(n.code), n.doc_id, n.source,
             _dumps(list(n.children)), ",".join(str(int(v)) for v in n.place)) for n in nodes]
    if not rows:
        return
    conn.executemany(f"INSERT OR REPLACE INTO nodes ({_NODE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    leaves = [(n.node_id, n.text) for n in nodes if n.layer == 0]
    if leaves:
        _insert_leaves(conn, leaves)


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
