"""The ref index's prefix counts in the SQLite file (domain.prefix_counts): the old and live refs
of each 8-bit code prefix of a layer's open access partition, and of each 16-bit one, kept by
triggers on ``refs``.

The scoped reconcile's walk asks a capped count per bit of each changed code's path
(GraphStore.count_refs). On a large layer the top of that path is the costliest part: each count
walks an index B-tree that no longer fits the page cache. The counts of the top bits change only
where a ref is written, so the file keeps them in ``prefix_counts`` (layer, group) -> (old,
live), moved by triggers in the same transaction as every write of a ref, whatever code writes
it (an older eragraph too: the triggers live in the file). A reconcile reads a layer's at most
256 rows once (``held_prefix_counts``), with the at most 256 rows of ``prefix_counts_deep`` (16
bits) under each 8-bit group its changed codes lie in (up to DEEP_GROUPS such groups: a larger
message walks many paths, and counts them in the index as before), and the walk takes every
group on those paths at most 16 bits deep from them (services.layer_reads.answered_from),
counting deeper ones in the index. A ref write moves one row of each table.

The triggers need the code width, known once the store holds its hyperplanes: they are made
with it then (``put_lsh``), or when a store written before them is opened, with the counts
taken from its refs in the same transaction (``install``). The DynamoDB store keeps the same
counts on its layer counters (adapters.aws.ref_counts)."""

from __future__ import annotations

import sqlite3

from collections.abc import Iterable

from ...domain.model import RefState
from ...domain.prefix_counts import PrefixCounts, deep_depth, prefix_depth
from ...domain.scoped import code_prefix

TABLES = ("prefix_counts", "prefix_counts_deep")  # the 8-bit groups' counts, the 16-bit groups'
SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    layer INTEGER NOT NULL,
    grp   INTEGER NOT NULL,
    old   INTEGER NOT NULL,
    live  INTEGER NOT NULL,
    PRIMARY KEY (layer, grp)
) WITHOUT ROWID"""
MARK = "prefix_counts_bits"  # store_info key: "<code width>/<TRIGGERS_VERSION>" the triggers were made with
TRIGGERS = ("refs_prefix_insert", "refs_prefix_delete", "refs_prefix_update")
TRIGGERS_VERSION = 2  # a change of the triggers' text makes every store opened remake them (2: the deep table)
DEEP_GROUPS = 16  # at most this many 8-bit groups' deep counts read with a layer's (4,096 rows)


def _depths(n_bits: int) -> tuple[tuple[str, int], ...]:
    """(table, depth) of each level kept for codes of ``n_bits``."""
    return (TABLES[0], prefix_depth(n_bits)), (TABLES[1], deep_depth(n_bits))


def _add(row: str, sign: str, n_bits: int) -> str:
    """The statements adding (``sign`` "+") or taking away ("-") ref ``row`` (NEW or OLD) from
    its groups' counts, one row of each level, when it lies in the open partition."""
    return " ".join(
        f"INSERT INTO {table} (layer, grp, old, live) SELECT {row}.layer, {row}.code >> {n_bits - depth}, "
        f"{sign}({row}.seg IS NOT NULL), {sign}{row}.live WHERE ({row}.code >> {n_bits}) = 0 "
        f"ON CONFLICT (layer, grp) DO UPDATE SET old = old + excluded.old, live = live + excluded.live;"
        for table, depth in _depths(n_bits))


def install(conn: sqlite3.Connection, n_bits: int) -> None:
    """Make the triggers for codes of ``n_bits`` and take the counts from the refs, unless they
    are made already (inside the caller's write transaction)."""
    row = conn.execute("SELECT value FROM store_info WHERE key = ?", (MARK,)).fetchone()
    made = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    if row is not None and row[0] == f"{n_bits}/{TRIGGERS_VERSION}" and made >= set(TRIGGERS):
        return
    for table in TABLES:
        conn.execute(SCHEMA.format(table=table))
    for name in TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute(f"CREATE TRIGGER refs_prefix_insert AFTER INSERT ON refs BEGIN {_add('NEW', '+', n_bits)} END")
    conn.execute(f"CREATE TRIGGER refs_prefix_delete AFTER DELETE ON refs BEGIN {_add('OLD', '-', n_bits)} END")
    # an update that changes none of what is counted (a segment set to the one it has) moves nothing
    conn.execute(f"CREATE TRIGGER refs_prefix_update AFTER UPDATE OF layer, code, seg, live ON refs "
                 f"WHEN OLD.layer IS NOT NEW.layer OR OLD.code IS NOT NEW.code "
                 f"OR (OLD.seg IS NULL) IS NOT (NEW.seg IS NULL) OR OLD.live IS NOT NEW.live BEGIN "
                 f"{_add('OLD', '-', n_bits)} {_add('NEW', '+', n_bits)} END")
    recount(conn, n_bits)
    conn.execute("INSERT OR REPLACE INTO store_info (key, value) VALUES (?, ?)",
                 (MARK, f"{n_bits}/{TRIGGERS_VERSION}"))


def recount(conn: sqlite3.Connection, n_bits: int) -> None:
    """The counts taken again from the refs (one pass over the ref index a level)."""
    for table, depth in _depths(n_bits):
        conn.execute(f"DELETE FROM {table}")
        conn.execute(f"INSERT INTO {table} (layer, grp, old, live) SELECT layer, code >> {n_bits - depth}, "
                     f"SUM(seg IS NOT NULL), SUM(live) FROM refs WHERE (code >> {n_bits}) = 0 GROUP BY 1, 2")


def installed_bits(conn: sqlite3.Connection) -> int | None:
    """The code width the counts are kept for, or None: not kept (no hyperplanes yet)."""
    row = conn.execute("SELECT value FROM store_info WHERE key = ?", (MARK,)).fetchone()
    return None if row is None else int(str(row[0]).split("/")[0])


class SqlitePrefixCounts:
    """Mixed into the SQLite graph store: the counts of a layer, and their check."""

    def _counted_bits(self) -> int | None:
        bits = getattr(self, "_prefix_bits", None)
        if bits is None:
            with self._lock:  # type: ignore[attr-defined]
                bits = self._prefix_bits = installed_bits(self._conn)  # type: ignore[attr-defined]
        return bits

    def held_prefix_counts(self, layer: int, codes: Iterable[int] = ()) -> PrefixCounts | None:
        """The counts of ``layer`` as they stand (at most 256 rows), with the deep counts of the
        8-bit groups ``codes`` (open-partition codes) lie in when they are at most DEEP_GROUPS
        groups (at most 256 rows each), in one statement (one snapshot), or None before the
        store holds its hyperplanes. The deep rows are taken only while the store's triggers
        are this version's, which keep them (an older eragraph that opened the file since made
        its own, which do not)."""
        bits = self._counted_bits()
        if bits is None:
            return None
        top, deep = prefix_depth(bits), deep_depth(bits)
        tops = sorted({code_prefix(int(c), top, bits) for c in codes}) if deep > top else []
        if len(tops) > DEEP_GROUPS:
            tops = []
        sql = "SELECT 0, grp, old, live FROM prefix_counts WHERE layer = ?"
        params: list[int | str] = [int(layer)]
        if tops:  # level 1: one key range a group (an OR of ranges may scan the layer); 2: the
            # mark of triggers that keep the deep rows
            for t in tops:
                sql += " UNION ALL SELECT 1, grp, old, live FROM prefix_counts_deep WHERE layer = ? AND grp BETWEEN ? AND ?"
                params += [int(layer), t << (deep - top), ((t + 1) << (deep - top)) - 1]
            sql += " UNION ALL SELECT 2, 0, 0, 0 FROM store_info WHERE key = ? AND value = ?"
            params += [MARK, f"{bits}/{TRIGGERS_VERSION}"]
        size = 1 << top
        olds, lives, deep_rows, kept = [0] * size, [0] * size, [], False
        for level, group, old, live in self._query(sql, params):  # type: ignore[attr-defined]
            if level == 0:
                if 0 <= group < size:
                    olds[group], lives[group] = old, live
            elif level == 1:
                deep_rows.append((group, old, live))
            else:
                kept = True
        held = PrefixCounts(top, tuple(olds), tuple(lives))
        # no deep rows asked, or the triggers do not keep them: the top level alone
        return held.with_deep(bits, tops, deep_rows) if kept else held

    def prefix_counts_drift(self, layer: int, refs: list[RefState]) -> list[str]:
        """How the kept counts of ``layer`` (both levels) differ from those of ``refs`` (its
        every ref, tombstones included): nothing while the triggers keep them right."""
        held = self.held_prefix_counts(layer)
        bits = self._counted_bits()
        if held is None or bits is None:
            return []
        out = held.differences(PrefixCounts.of_refs(refs, bits))
        shift = bits - deep_depth(bits)
        want: dict[int, list[int]] = {}
        for ref in refs:
            if ref.code >> bits == 0 and (ref.old or ref.live):
                row = want.setdefault(ref.code >> shift, [0, 0])
                row[0] += ref.old
                row[1] += ref.live
        rows = self._query("SELECT grp, old, live FROM prefix_counts_deep WHERE layer = ?",  # type: ignore[attr-defined]
                           (int(layer),))
        have = {int(g): [int(o), int(n)] for g, o, n in rows if o or n}
        out += [f"deep group {g:x}: {have.get(g, [0, 0])} held, {want.get(g, [0, 0])} counted"
                for g in sorted(set(want) | set(have)) if have.get(g, [0, 0]) != want.get(g, [0, 0])]
        return out[:5]
