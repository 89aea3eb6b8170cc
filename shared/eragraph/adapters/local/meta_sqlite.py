"""The MetaStore part of the SQLite graph store: the hyperplanes (``lsh``), the ``meta`` table
and the cost ``ledger``. A meta key that lapses (domain.expiry: ingestion jobs, clientToken
records) has a ``meta_expiry`` row: a read past it sees no record, and each write of such a key
deletes up to SWEEP lapsed ones (a bounded sweep, as DynamoDB's TTL deletes them there)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ...domain.expiry import SWEEP, life_of, mark_key, may_lapse
from ...domain.ledger import bucket_start
from ...domain.model import LshConfig
from .prefix_counts_sqlite import install as install_prefix_counts
from .sqlite_db import SqliteDb, _dumps


_ADD = ("calls = calls + excluded.calls, tokens_in = tokens_in + excluded.tokens_in, "
        "tokens_out = tokens_out + excluded.tokens_out, seconds = seconds + excluded.seconds")


class SqliteMetaStore(SqliteDb):
    _lsh_parsed: tuple[str, LshConfig] | None

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
            # the ref index's prefix counts, kept from the first ref on (the stored code width)
            stored_bits = json.loads(conn.execute("SELECT config FROM lsh WHERE id = 1").fetchone()[0])["n_planes"]
            install_prefix_counts(conn, int(stored_bits))
        stored = self.get_lsh()
        assert stored is not None
        return stored

    def get_meta(self, key: str) -> Any | None:
        if life_of(key) is None:
            rows = self._query("SELECT value FROM meta WHERE key = ?", (key,))
        else:  # unseen once lapsed
            rows = self._query("SELECT m.value FROM meta m LEFT JOIN meta_expiry e ON e.key = m.key "
                               "WHERE m.key = ? AND (e.expires_at IS NULL OR e.expires_at >= ?)", (key, int(time.time())))
        return json.loads(rows[0][0]) if rows else None

    def put_meta(self, key: str, value: Any) -> None:
        with self._write() as conn:
            write_meta(conn, key, value)

    def claim_meta(self, key: str, value: Any) -> Any:
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (key, _dumps(value)))
        return self.get_meta(key)

    def delete_meta(self, key: str) -> None:
        with self._write() as conn:
            _delete_key(conn, key)

    def write_meta(self, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                   clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> list[str]:
        with self._write() as conn:
            return write_metas(conn, puts, deletes, clear, present)

    def get_metas(self, keys: Sequence[str]) -> dict[str, Any]:
        out = {}
        for key in dict.fromkeys(keys):
            value = self.get_meta(key)
            if value is not None:
                out[key] = value
        return out

    def delete_meta_if_older(self, key: str, at_most: float) -> None:
        with self._write() as conn:  # the read and the delete under the write lock
            write_metas(conn, (), (), [(key, at_most)])

    def meta_keys(self, prefix: str) -> list[str]:
        if not may_lapse(prefix):
            rows = self._query("SELECT key FROM meta WHERE substr(key, 1, ?) = ? ORDER BY key",
                               (len(prefix), prefix))
        else:
            rows = self._query("SELECT m.key FROM meta m LEFT JOIN meta_expiry e ON e.key = m.key "
                               "WHERE substr(m.key, 1, ?) = ? AND (e.expires_at IS NULL OR e.expires_at >= ?) "
                               "ORDER BY m.key", (len(prefix), prefix, int(time.time())))
        return [r[0] for r in rows]

    def add_within(self, key: str, period: str, amount: int, limit: int, mark: str | None = None) -> int | None:
        marked = None if mark is None else mark_key(key, period, mark)
        with self._write() as conn:  # BEGIN IMMEDIATE: the reads and the writes under the write lock
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            stored = json.loads(row[0]) if row else {}
            total = int(stored.get("total", 0)) if stored.get("period") == period else 0
            if marked is not None and conn.execute("SELECT 1 FROM meta WHERE key = ?", (marked,)).fetchone():
                return total  # this version was charged already
            if total + amount > limit:
                return None
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                         (key, _dumps({"period": period, "total": total + amount})))
            if marked is not None:
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (marked,))
                conn.execute("INSERT OR REPLACE INTO meta_expiry (key, expires_at) VALUES (?, ?)",
                             (marked, int(time.time()) + (life_of(marked) or 0)))
            return total + amount

    def add_ledger(self, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
        with self._write() as conn:  # the totals and the hour's bucket in one transaction
            add_ledger_row(conn, kind, calls, tokens_in, tokens_out, seconds, at)

    def ledger_series(self, since: float = 0.0) -> list[tuple[str, int, dict[str, float]]]:
        rows = self._query("SELECT kind, hour, calls, tokens_in, tokens_out, seconds FROM ledger_hours "
                           "WHERE hour >= ? ORDER BY kind, hour", (bucket_start(since),))
        return [(kind, int(hour), {"calls": calls, "tokens_in": t_in, "tokens_out": t_out, "seconds": float(sec)})
                for kind, hour, calls, t_in, t_out, sec in rows]

    def ledger(self) -> dict[str, dict[str, float]]:
        rows = self._query("SELECT kind, calls, tokens_in, tokens_out, seconds FROM ledger ORDER BY kind")
        return {kind: {"calls": calls, "tokens_in": t_in, "tokens_out": t_out, "seconds": float(sec)}
                for kind, calls, t_in, t_out, sec in rows}


def add_ledger_row(conn: Any, kind: str, calls: int, tokens_in: int, tokens_out: int, seconds: float,
                   at: float | None = None) -> None:
    """add_ledger in the open write transaction ``conn`` (a region's apply: RegionChange.ledger)."""
    hour = bucket_start(time.time() if at is None else at)
    values = (int(calls), int(tokens_in), int(tokens_out), float(seconds))
    conn.execute(
        "INSERT INTO ledger (kind, calls, tokens_in, tokens_out, seconds) VALUES (?, ?, ?, ?, ?) "
        f"ON CONFLICT (kind) DO UPDATE SET {_ADD}", (kind, *values))
    conn.execute(
        "INSERT INTO ledger_hours (kind, hour, calls, tokens_in, tokens_out, seconds) "
        f"VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hour, kind) DO UPDATE SET {_ADD}", (kind, hour, *values))


def write_metas(conn: Any, puts: Sequence[tuple[str, Any]], deletes: Sequence[str],
                clear: Sequence[tuple[str, float]] = (), present: Sequence[str] = ()) -> list[str]:
    """MetaStore.write_meta inside the caller's transaction (``conn``: its write; a region's
    apply carries a reconcile's end so, RegionChange.finish)."""
    for key, value in puts:
        write_meta(conn, key, value)
    for key in deletes:
        _delete_key(conn, key)
    for key, at_most in clear:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is not None and float(json.loads(row[0])) <= at_most:
            _delete_key(conn, key)
    wanted = list(dict.fromkeys(present))
    stored: set[str] = set()
    for start in range(0, len(wanted), 500):  # a whole-layer pass looks for thousands
        chunk = wanted[start:start + 500]
        stored.update(r[0] for r in conn.execute(  # live in its layer's ref index
            f"SELECT node_id FROM refs WHERE live = 1 AND node_id IN ({','.join('?' * len(chunk))})", chunk))
    return [i for i in wanted if i not in stored]


def _delete_key(conn: Any, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))
    if life_of(key) is not None:
        conn.execute("DELETE FROM meta_expiry WHERE key = ?", (key,))


def write_meta(conn: Any, key: str, value: Any) -> None:
    """Store ``value`` under ``key`` in the open write transaction ``conn`` (put_meta, and the
    marks a region's apply writes with it), sweeping a few lapsed keys when it may lapse."""
    life = life_of(key)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, _dumps(value)))
    if life is not None:
        now = int(time.time())
        conn.execute("INSERT OR REPLACE INTO meta_expiry (key, expires_at) VALUES (?, ?)", (key, now + life))
        lapsed = [r[0] for r in conn.execute("SELECT key FROM meta_expiry WHERE expires_at < ? "
                                             "ORDER BY expires_at LIMIT ?", (now, SWEEP))]
        if lapsed:
            marks = ",".join("?" * len(lapsed))
            conn.execute(f"DELETE FROM meta WHERE key IN ({marks})", lapsed)
            conn.execute(f"DELETE FROM meta_expiry WHERE key IN ({marks})", lapsed)
