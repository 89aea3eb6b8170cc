"""CachedEmbedder over memory and SQLite caches: misses then hits, no re-embedding, order and
duplicates, identity separation, persistence."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from eragraph.providers.embed_cache import (CachedEmbedder, MemoryEmbeddingCache, SqliteEmbeddingCache,
                                            text_key)
from eragraph.providers.hashing import HashingEmbedder


class CountingEmbedder(HashingEmbedder):
    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim)
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return super().embed(texts)

    @property
    def texts_embedded(self) -> int:
        return sum(len(c) for c in self.calls)


@pytest.fixture(params=["memory", "sqlite"])
def cache(request, tmp_path):
    c = MemoryEmbeddingCache() if request.param == "memory" else SqliteEmbeddingCache(tmp_path / "emb.sqlite")
    yield c
    c.close()


def test_misses_then_hits_without_reembedding(cache):
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, cache)
    assert emb.identity == inner.identity and emb.dim == inner.dim
    texts = ["alpha beta", "gamma delta", "epsilon"]
    first = emb.embed(texts)
    assert inner.calls == [texts]
    assert (emb.hits, emb.misses, emb.embedded) == (0, 3, 3)
    np.testing.assert_array_equal(first, HashingEmbedder(64).embed(texts))

    second = emb.embed(texts)
    assert len(inner.calls) == 1  # nothing re-embedded
    assert (emb.hits, emb.misses) == (3, 3)
    np.testing.assert_array_equal(first, second)
    assert second.dtype == np.float32

    # a mix: only the new text goes to the model, in one batched call
    third = emb.embed(["epsilon", "zeta eta", "alpha beta"])
    assert inner.calls[-1] == ["zeta eta"]
    assert len(inner.calls) == 2
    np.testing.assert_array_equal(third[0], first[2])
    np.testing.assert_array_equal(third[2], first[0])
    np.testing.assert_array_equal(third[1], HashingEmbedder(64).embed(["zeta eta"])[0])
    assert (emb.hits, emb.misses, emb.embedded) == (5, 4, 4)


def test_order_preserved_and_duplicates_embedded_once(cache):
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, cache)
    texts = ["b", "a", "b", "c", "a", "b"]
    out = emb.embed(texts)
    assert inner.calls == [["b", "a", "c"]]
    ref = HashingEmbedder(64).embed(texts)
    np.testing.assert_array_equal(out, ref)
    assert emb.misses == 6 and emb.embedded == 3
    assert cache.count(inner.identity) == 3


def test_empty_input_and_empty_text(cache):
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, cache)
    assert emb.embed([]).shape == (0, 64)
    assert inner.calls == []
    out = emb.embed(["", ""])
    assert out.shape == (2, 64) and inner.calls == [[""]]


def test_different_identity_uses_separate_keys(cache):
    small, large = CountingEmbedder(32), CountingEmbedder(48)
    a, b = CachedEmbedder(small, cache), CachedEmbedder(large, cache)
    va = a.embed(["same text"])
    vb = b.embed(["same text"])
    assert va.shape == (1, 32) and vb.shape == (1, 48)
    assert len(small.calls) == 1 and len(large.calls) == 1  # b did not reuse a's vector
    assert cache.count(small.identity) == 1 and cache.count(large.identity) == 1
    assert cache.count() == 2
    a.embed(["same text"])
    b.embed(["same text"])
    assert len(small.calls) == 1 and len(large.calls) == 1


def test_sqlite_persists_across_reopen(tmp_path):
    path = tmp_path / "sub" / "emb.sqlite"
    inner = CountingEmbedder()
    c1 = SqliteEmbeddingCache(path)
    v1 = CachedEmbedder(inner, c1).embed(["persist me", "and me"])
    c1.close()

    inner2 = CountingEmbedder()
    c2 = SqliteEmbeddingCache(path)
    emb2 = CachedEmbedder(inner2, c2)
    v2 = emb2.embed(["and me", "persist me"])
    assert inner2.calls == []
    assert emb2.hits == 2
    np.testing.assert_array_equal(v2, v1[::-1])
    mode = c2._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode.lower() == "wal"
    c2.close()

    # stored as float32 bytes keyed by (identity, sha256(text))
    con = sqlite3.connect(str(path))
    rows = con.execute("SELECT identity, key, dim, length(vec) FROM embeddings ORDER BY key").fetchall()
    con.close()
    assert sorted(rows) == sorted([(inner.identity, text_key("persist me"), 64, 256),
                                   (inner.identity, text_key("and me"), 64, 256)])


def test_sqlite_large_batch_over_query_chunk(tmp_path):
    cache = SqliteEmbeddingCache(tmp_path / "big.sqlite")
    inner = CountingEmbedder(16)
    emb = CachedEmbedder(inner, cache)
    texts = [f"text number {i}" for i in range(1200)]
    first = emb.embed(texts)
    again = emb.embed(texts)
    assert len(inner.calls) == 1 and emb.hits == 1200
    np.testing.assert_array_equal(first, again)
    cache.close()


def test_sqlite_holds_model_sized_vectors_inline(tmp_path):
    """384-d vectors (MiniLM's) take less than twice their size on disk; a row in the key's B-tree
    (WITHOUT ROWID) spills past ~1 KB to an overflow page of 4 KiB each: 4.7 KB a vector, 3x."""
    path = tmp_path / "wide.sqlite"
    cache = SqliteEmbeddingCache(path)
    rng = np.random.default_rng(0)
    n = 2000
    cache.put_many("minilm", {text_key(f"t{i}"): rng.standard_normal(384).astype(np.float32) for i in range(n)})
    got = cache.get_many("minilm", [text_key("t7"), text_key("t1999"), text_key("absent")])
    assert sorted(got) == sorted([text_key("t7"), text_key("t1999")]) and got[text_key("t7")].shape == (384,)
    pages, size = (cache._conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size"))
    cache.close()
    per_vector = pages * size / n
    assert per_vector < 2.0 * 384 * 4, per_vector  # 1,536 bytes of vector: about 2,140 stored


def test_sqlite_opens_a_cache_made_without_rowid(tmp_path):
    """A store made before keeps its table (made only when missing) and is read and written."""
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(str(path))
    con.execute("CREATE TABLE embeddings (identity TEXT NOT NULL, key TEXT NOT NULL, dim INTEGER NOT NULL,"
                " vec BLOB NOT NULL, PRIMARY KEY (identity, key)) WITHOUT ROWID")
    con.execute("INSERT INTO embeddings VALUES (?, ?, ?, ?)",
                ("e", text_key("old"), 4, np.arange(4, dtype="<f4").tobytes()))
    con.commit()
    con.close()
    cache = SqliteEmbeddingCache(path)
    cache.put_many("e", {text_key("new"): np.ones(4, dtype=np.float32)})
    got = cache.get_many("e", [text_key("old"), text_key("new")])
    assert got[text_key("old")].tolist() == [0, 1, 2, 3] and got[text_key("new")].tolist() == [1, 1, 1, 1]
    assert cache.count("e") == 2
    cache.close()


def test_sqlite_cache_shared_between_threads(tmp_path):
    cache = SqliteEmbeddingCache(tmp_path / "t.sqlite")
    emb = CachedEmbedder(CountingEmbedder(), cache)
    errors = []

    def work(offset):
        try:
            for i in range(20):
                emb.embed([f"t{(offset + i) % 30}", f"t{i}"])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 7,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.count() == 30
    np.testing.assert_array_equal(emb.embed(["t5"]), HashingEmbedder(64).embed(["t5"]))
    cache.close()
