"""A long-lived FAISS reader follows the writers: every read checks the files' stamps and
replays only the log's new records (a compaction: the new snapshot), so additions, deletions
and replacements flushed by another handle (another process, in `eragraph serve`) are seen by
the next read; a handle that then writes loses none of what it caught up with."""

from __future__ import annotations

import numpy as np

from eragraph.adapters.local import vector_faiss
from eragraph.adapters.local.vector_faiss import FaissVectorIndex

DIM = 16


def unit(rows: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def seeded(folder, n: int = 300) -> FaissVectorIndex:
    index = FaissVectorIndex(folder, DIM)
    index.upsert([f"n{i}" for i in range(n)], unit(n, 1), [{"layer": i % 3, "doc_id": f"d{i % 9}"} for i in range(n)])
    index.flush()
    return index


def test_a_reader_sees_appends_deletes_and_replacements_by_replaying_the_tail(tmp_path, monkeypatch):
    seeded(tmp_path).close()
    reader = FaissVectorIndex(tmp_path, DIM)
    writer = FaissVectorIndex(tmp_path, DIM)
    new = unit(1, 99)
    writer.upsert(["fresh"], new, [{"layer": 0, "doc_id": "dnew"}])
    writer.delete(["n5"])
    writer.upsert(["n7"], -unit(1, 7), [{"layer": 0, "doc_id": "d7"}])
    writer.flush()
    assert (tmp_path / vector_faiss.LOG_FILE).exists()  # a small change: one record appended

    loads = []
    real_load = FaissVectorIndex._load
    monkeypatch.setattr(FaissVectorIndex, "_load", lambda self: (loads.append(1), real_load(self)))
    hits = reader.search(new[0], 1)
    assert hits[0].node_id == "fresh" and hits[0].score > 0.99
    assert loads == []  # the tail was replayed, the snapshot not re-read
    assert reader.meta("n5") is None and reader.count() == 300
    assert np.allclose(reader.get_vectors(["n7"])["n7"], -unit(1, 7)[0], atol=1e-6)
    assert reader.meta("fresh") == {"layer": 0, "doc_id": "dnew"}
    assert reader.refresh() is False  # nothing new: no read


def test_a_reader_reads_the_new_snapshot_after_a_compaction(tmp_path):
    seeded(tmp_path).close()
    reader = FaissVectorIndex(tmp_path, DIM)
    writer = FaissVectorIndex(tmp_path, DIM)
    n = 400  # more than COMPACT_FRACTION of the snapshot: the flush compacts
    writer.upsert([f"m{i}" for i in range(n)], unit(n, 5), [{"layer": 0, "doc_id": "dm"} for _ in range(n)])
    writer.delete([f"n{i}" for i in range(100)])
    writer.flush()
    assert not (tmp_path / vector_faiss.LOG_FILE).exists()
    assert reader.count() == 600
    assert reader.search(unit(n, 5)[3], 1)[0].node_id == "m3"
    assert reader.ids() == writer.ids()


def test_a_handle_that_caught_up_then_writes_loses_nothing(tmp_path):
    seeded(tmp_path).close()
    first = FaissVectorIndex(tmp_path, DIM)
    second = FaissVectorIndex(tmp_path, DIM)
    second.upsert(["b1", "b2"], unit(2, 11), [{"layer": 0, "doc_id": "db"}] * 2)
    second.flush()
    assert first.count() == 302  # caught up by a read
    first.upsert(["a1"], unit(1, 12), [{"layer": 0, "doc_id": "da"}])
    second.upsert(["b3"], unit(1, 13), [{"layer": 0, "doc_id": "db"}])
    second.flush()
    first.flush()  # replays second's b3 under its own a1
    reopened = FaissVectorIndex(tmp_path, DIM)
    assert {"a1", "b1", "b2", "b3"} <= reopened.ids() and reopened.count() == 304
    for name, seed in (("a1", 12), ("b3", 13)):
        assert np.allclose(reopened.get_vectors([name])[name], unit(1, seed)[0], atol=1e-6)
