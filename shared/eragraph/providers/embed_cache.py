"""A content-addressed embedding cache in front of any Embedder.

Vectors are keyed by (embedder identity, sha256 of the text), so re-ingesting unchanged
text, rebuilding a graph, or switching back to an earlier embedder costs no model calls, and
two embedders never read each other's vectors. The SQLite cache persists across runs (WAL
mode, safe for several processes); the memory cache lives for one process.

The SQLite table keeps its rows in rowid order with the (identity, key) key in an index beside
it. A ``WITHOUT ROWID`` table (what stores made before kept, and keep: the table is made only
when missing) holds its rows in the key's B-tree, whose pages take at most about 1 KB of a row
(SQLite's index payload limit at 4 KiB pages): every vector of 256 dimensions or more went to an
overflow page of its own, 4 KiB for 1-1.5 KB of vector, so the cache took 4.7 KB on disk a
vector. A rowid table holds such rows inline, two or three to a page."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..ports.providers import Embedder

_QUERY_CHUNK = 500  # bound on SQL variables per lookup (old SQLite builds allow 999)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@runtime_checkable
class EmbeddingCache(Protocol):
    def get_many(self, identity: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached float32 vectors of those ``keys`` found under ``identity``."""
        ...
    def put_many(self, identity: str, items: Mapping[str, np.ndarray]) -> None: ...
    def count(self, identity: str | None = None) -> int: ...
    def close(self) -> None: ...


def _to_bytes(vec: np.ndarray) -> bytes:
    return np.ascontiguousarray(vec, dtype="<f4").tobytes()


def _from_bytes(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


class MemoryEmbeddingCache:
    def __init__(self) -> None:
        self._data: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def get_many(self, identity: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            found = {k: self._data.get((identity, k)) for k in keys}
        return {k: _from_bytes(b) for k, b in found.items() if b is not None}

    def put_many(self, identity: str, items: Mapping[str, np.ndarray]) -> None:
        with self._lock:
            for k, v in items.items():
                self._data[(identity, k)] = _to_bytes(v)

    def count(self, identity: str | None = None) -> int:
        with self._lock:
            return sum(1 for ident, _ in self._data if identity is None or ident == identity)

    def close(self) -> None:
        pass


class SqliteEmbeddingCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False,
                                     isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings ("
            " identity TEXT NOT NULL, key TEXT NOT NULL, dim INTEGER NOT NULL, vec BLOB NOT NULL,"
            " PRIMARY KEY (identity, key))")

    def get_many(self, identity: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        keys = list(dict.fromkeys(keys))
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), _QUERY_CHUNK):
                part = keys[i:i + _QUERY_CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._conn.execute(
                    f"SELECT key, dim, vec FROM embeddings WHERE identity = ? AND key IN ({marks})",
                    [identity, *part]).fetchall()
                for key, dim, blob in rows:
                    if len(blob) == 4 * dim:  # a torn or foreign row is a miss, not a crash
                        out[key] = _from_bytes(blob)
        return out

    def put_many(self, identity: str, items: Mapping[str, np.ndarray]) -> None:
        rows = [(identity, k, int(np.asarray(v).size), _to_bytes(v)) for k, v in items.items()]
        if not rows:
            return
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (identity, key, dim, vec) VALUES (?, ?, ?, ?)", rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def count(self, identity: str | None = None) -> int:
        with self._lock:
            if identity is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings WHERE identity = ?",
                                          (identity,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class CachedEmbedder:
    """An Embedder that asks ``inner`` only for texts it has not embedded before.

    ``hits`` / ``misses`` count input rows served from / not found in the cache; ``embedded``
    counts the distinct texts actually sent to ``inner``."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.identity = inner.identity
        self.dim = inner.dim
        self.hits = 0
        self.misses = 0
        self.embedded = 0
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        keys = [text_key(t) for t in texts]
        found = self.cache.get_many(self.identity, keys)
        found = {k: v for k, v in found.items() if v.shape == (self.dim,)}
        todo: dict[str, str] = {}  # key -> text, first occurrence order, no duplicates
        for key, text in zip(keys, texts):
            if key not in found and key not in todo:
                todo[key] = text
        fresh: dict[str, np.ndarray] = {}
        if todo:
            vecs = np.asarray(self.inner.embed(list(todo.values())), dtype=np.float32)
            if vecs.shape != (len(todo), self.dim):
                raise ValueError(f"{self.identity} returned shape {vecs.shape} for {len(todo)} texts")
            fresh = dict(zip(todo, vecs))
            self.cache.put_many(self.identity, fresh)
        hit_rows = 0
        for row, key in enumerate(keys):
            vec = found.get(key)
            if vec is not None:
                hit_rows += 1
            else:
                vec = fresh[key]
            out[row] = vec
        with self._lock:
            self.hits += hit_rows
            self.misses += len(texts) - hit_rows
            self.embedded += len(todo)
        return out

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "embedded": self.embedded}


def cached(inner: Embedder, path: str | Path | None) -> CachedEmbedder:
    """``inner`` behind a SQLite cache at ``path``, or a memory cache when ``path`` is None."""
    cache: EmbeddingCache = SqliteEmbeddingCache(path) if path is not None else MemoryEmbeddingCache()
    return CachedEmbedder(inner, cache)


__all__ = ["CachedEmbedder", "EmbeddingCache", "MemoryEmbeddingCache",
                          "SqliteEmbeddingCache", "cached", "text_key"]
