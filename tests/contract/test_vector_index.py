"""VectorIndex contract: every backend in factories.VECTOR_INDEX_FACTORIES; searches must equal
brute-force numpy top-k (ids exactly, scores to float32 precision)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from eragraph.domain.ranking import rank_score

from .factories import CONTRACT_DIM

DIM = CONTRACT_DIM


def unit(rows: int, seed: int, dim: int = DIM) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def metas(n: int, layer: int = 0, doc: str = "d") -> list[dict]:
    return [{"layer": layer, "doc_id": doc} for _ in range(n)]


@pytest.fixture
def corpus():
    """600 vectors over layers 0-3 and 25 documents."""
    n = 600
    rng = np.random.default_rng(7)
    ids = [f"n{i:04d}" for i in range(n)]
    vecs = unit(n, 1)
    layers = rng.integers(0, 4, n)
    docs = [f"doc{d}" for d in rng.integers(0, 25, n)]
    return ids, vecs, [{"layer": int(l), "doc_id": d} for l, d in zip(layers, docs)]


def brute_force(ids, vecs, metas_, q, k, layers=None, doc_ids=None):
    keep = [i for i, m in enumerate(metas_)
            if (layers is None or m["layer"] in layers) and (doc_ids is None or m["doc_id"] in doc_ids)]
    scores = vecs[keep] @ q
    # the ranking rule of every index: scores equal to SCORE_DIGITS decimals tie, broken by id
    order = sorted(range(len(keep)), key=lambda j: (-rank_score(float(scores[j])), ids[keep[j]]))[:k]
    return [ids[keep[j]] for j in order], [float(scores[j]) for j in order]


def test_empty_index(vector_index):
    assert vector_index.count() == 0
    assert vector_index.ids() == set()
    assert vector_index.search(unit(1, 0)[0], 5) == []
    assert vector_index.get_vectors(["x"]) == {}
    vector_index.delete(["x"])
    vector_index.flush()


def test_upsert_count_ids_get_vectors(vector_index):
    v = unit(3, 1)
    vector_index.upsert(["a", "b", "c"], v, metas(3))
    assert vector_index.count() == 3
    assert vector_index.ids() == {"a", "b", "c"}
    got = vector_index.get_vectors(["c", "a", "zz"])
    assert set(got) == {"c", "a"}
    np.testing.assert_array_equal(got["a"], v[0])
    np.testing.assert_array_equal(got["c"], v[2])
    assert got["a"].dtype == np.float32
    vector_index.upsert([], np.zeros((0, DIM), np.float32), [])
    assert vector_index.count() == 3


def test_upsert_replaces_vector_and_meta(vector_index):
    v = unit(4, 2)
    vector_index.upsert(["a", "b"], v[:2], [{"layer": 0, "doc_id": "d1"}, {"layer": 0, "doc_id": "d1"}])
    vector_index.upsert(["a"], v[2:3], [{"layer": 1, "doc_id": ""}])
    assert vector_index.count() == 2
    np.testing.assert_array_equal(vector_index.get_vectors(["a"])["a"], v[2])
    hits = vector_index.search(v[2], 5)
    assert hits[0].node_id == "a" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.node_id for h in vector_index.search(v[2], 5, layers=[0])] == ["b"]
    assert [h.node_id for h in vector_index.search(v[2], 5, layers=[1])] == ["a"]
    assert [h.node_id for h in vector_index.search(v[2], 5, doc_ids=["d1"])] == ["b"]


def test_upsert_rejects_mismatched_lengths(vector_index):
    with pytest.raises(ValueError):
        vector_index.upsert(["a", "b"], unit(1, 0), metas(2))
    with pytest.raises(ValueError):
        vector_index.upsert(["a"], unit(1, 0), metas(2))
    assert vector_index.count() == 0


def test_delete(vector_index):
    v = unit(4, 3)
    vector_index.upsert(["a", "b", "c", "d"], v, metas(4))
    vector_index.delete(["b", "nope"])
    vector_index.delete(x for x in ["d"])
    assert vector_index.count() == 2
    assert vector_index.ids() == {"a", "c"}
    assert vector_index.get_vectors(["b"]) == {}
    assert {h.node_id for h in vector_index.search(v[1], 10)} == {"a", "c"}
    vector_index.upsert(["b"], v[1:2], metas(1))  # a deleted id can come back
    assert vector_index.search(v[1], 1)[0].node_id == "b"


def test_search_equals_brute_force(vector_index, corpus):
    ids, vecs, ms = corpus
    vector_index.upsert(ids[:300], vecs[:300], ms[:300])  # two batches
    vector_index.upsert(ids[300:], vecs[300:], ms[300:])
    queries = unit(8, 99)
    filters = [(None, None), ([0], None), ([1, 3], None), (None, ["doc3", "doc11", "doc20"]),
               ([2], ["doc1", "doc2", "doc3", "doc4", "doc5"]), ([0, 1, 2, 3], None), ([], None), (None, [])]
    for q in queries:
        for layers, docs in filters:
            for k in (1, 10, 50):
                hits = vector_index.search(q, k, layers=layers, doc_ids=docs)
                want_ids, want_scores = brute_force(ids, vecs, ms, q, k, layers, docs)
                assert [h.node_id for h in hits] == want_ids, (layers, docs, k)
                assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-5)


def test_search_k_bounds_and_filtered_small_sets(vector_index, corpus):
    ids, vecs, ms = corpus
    vector_index.upsert(ids, vecs, ms)
    q = unit(1, 5)[0]
    assert vector_index.search(q, 0) == []
    assert len(vector_index.search(q, 10_000)) == len(ids)
    only = [i for i, m in zip(ids, ms) if m["doc_id"] == "doc7" and m["layer"] == 1]
    hits = vector_index.search(q, 100, layers=[1], doc_ids=["doc7"])
    assert sorted(h.node_id for h in hits) == sorted(only)
    assert vector_index.search(q, 5, layers=[42]) == []
    assert vector_index.search(q, 5, doc_ids=["no-such-doc"]) == []


def test_search_results_best_first_ties_by_id(vector_index):
    v = unit(2, 4)
    same = np.repeat(v[:1], 12, axis=0)
    names = [f"t{i:02d}" for i in (5, 3, 11, 0, 9, 1, 7, 2, 10, 4, 8, 6)]
    vector_index.upsert(names, same, metas(12))
    vector_index.upsert(["other"], v[1:2], metas(1))
    hits = vector_index.search(v[0], 4)
    assert [h.node_id for h in hits] == ["t00", "t01", "t02", "t03"]
    hits = vector_index.search(v[0], 13)
    assert [h.node_id for h in hits] == sorted(names) + ["other"]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


AXIS = np.eye(DIM, dtype=np.float32)[0]  # the query of the near-tie tests


def at_cosine(cos: float) -> np.ndarray:
    """A unit vector whose inner product with AXIS is ``cos`` (computed in float64)."""
    v = np.zeros(DIM, dtype=np.float64)
    v[0], v[1] = cos, np.sqrt(1.0 - cos * cos)
    return v.astype(np.float32)


def test_a_near_tie_at_the_cut_keeps_the_lower_id(vector_index):
    """Two scores apart only in the 7th decimal (float32 and float64 indexes may order them
    either way) are a tie: the k-th place goes to the lower id on every backend."""
    q = AXIS

    vector_index.upsert(["best", "z_higher", "a_lower", "far"],
                        np.stack([at_cosine(c) for c in (0.9, 0.6000004, 0.6, 0.1)]), metas(4))
    assert [h.node_id for h in vector_index.search(q, 2)] == ["best", "a_lower"]
    assert [h.node_id for h in vector_index.search(q, 3)] == ["best", "a_lower", "z_higher"]


def test_near_ties_beyond_the_first_fetch_are_fetched(vector_index):
    """Sixty scores within 6e-6 of each other (one tie under the ranking rule), the higher ids
    scoring higher: an index that fetches a window past k must keep fetching while the window's
    last score still ties the k-th, or the lowest ids (the lowest raw scores) never reach it."""
    q = AXIS

    names = [f"t{i:02d}" for i in range(60)]
    vector_index.upsert(["best", *names], np.stack([at_cosine(0.9)] + [at_cosine(0.099996 + i * 1e-7) for i in range(60)]),
                        metas(61))
    assert [h.node_id for h in vector_index.search(q, 4)] == ["best", "t00", "t01", "t02"]


def test_filter_reflects_later_writes(vector_index):
    v = unit(3, 6)
    vector_index.upsert(["a", "b"], v[:2], metas(2, layer=1))
    assert {h.node_id for h in vector_index.search(v[0], 5, layers=[1])} == {"a", "b"}
    vector_index.upsert(["c"], v[2:3], metas(1, layer=1))
    vector_index.delete(["a"])
    assert {h.node_id for h in vector_index.search(v[0], 5, layers=[1])} == {"b", "c"}


@pytest.mark.persistent
def test_flush_then_reopen(vector_index_backend, corpus):
    ids, vecs, ms = corpus
    index = vector_index_backend.open()
    index.upsert(ids, vecs, ms)
    index.delete(ids[:50])
    index.upsert(ids[50:60], vecs[:10], ms[:10])  # replaced vectors (and metas)
    index.flush()
    q = unit(1, 11)[0]
    before = [index.search(q, 20), index.search(q, 20, layers=[2]), index.search(q, 20, doc_ids=["doc4"])]
    again = vector_index_backend.reopen(index)
    assert again.count() == len(ids) - 50
    assert again.ids() == set(ids[50:])
    np.testing.assert_array_equal(again.get_vectors([ids[55]])[ids[55]], vecs[5])
    after = [again.search(q, 20), again.search(q, 20, layers=[2]), again.search(q, 20, doc_ids=["doc4"])]
    assert after == before
    again.upsert(["new"], unit(1, 12), metas(1))  # ids keep being assigned after a reopen
    again.flush()
    third = vector_index_backend.reopen(again)
    assert third.count() == len(ids) - 49 and "new" in third.ids()


# --- FAISS specifics -------------------------------------------------------------------------

def test_faiss_refuses_other_dimension_and_mismatched_files(tmp_path):
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex, VectorIndexCorruptError
    from eragraph.domain.model import EragraphError

    index = FaissVectorIndex(tmp_path / "v", DIM)
    index.upsert(["a"], unit(1, 0), metas(1))
    index.flush()
    saved = (tmp_path / "v" / "vectors.faiss").read_bytes()
    with pytest.raises(EragraphError):
        FaissVectorIndex(tmp_path / "v", DIM + 1)
    index.upsert(["b"], unit(1, 1), metas(1))
    index.flush()
    (tmp_path / "v" / "vectors.faiss").write_bytes(saved)  # as if a crash left the old index file
    with pytest.raises(VectorIndexCorruptError):
        FaissVectorIndex(tmp_path / "v", DIM)


def test_faiss_flush_is_atomic_and_unflushed_writes_stay_in_memory(tmp_path):
    from eragraph.adapters.local.vector_faiss import LOCK_FILE, FaissVectorIndex

    index = FaissVectorIndex(tmp_path / "v", DIM)
    index.upsert(["a"], unit(1, 0), metas(1))
    index.flush()
    index.upsert(["b"], unit(1, 1), metas(1))
    assert FaissVectorIndex(tmp_path / "v", DIM).ids() == {"a"}
    assert sorted(p.name for p in (tmp_path / "v").iterdir() if p.name != LOCK_FILE) == ["vectors.faiss", "vectors.json"]


def test_faiss_filtered_search_is_fast_at_20k(tmp_path):
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    n, dim = 20_000, 384
    index = FaissVectorIndex(tmp_path / "v", dim)
    vecs = unit(n, 3, dim)
    index.upsert([f"n{i}" for i in range(n)], vecs, [{"layer": i % 4, "doc_id": f"d{i % 500}"} for i in range(n)])
    q = unit(1, 4, dim)[0]
    index.search(q, 20, layers=[1])  # builds the cached selector
    index.upsert(["n0"], vecs[:1], [{"layer": 2, "doc_id": "d0"}])  # a write drops it again
    timings = {}
    for label, layers in (("collapsed", None), ("layers", [0, 1, 2, 3]), ("one layer", [1])):
        runs = []
        for _ in range(15):
            started = time.perf_counter()
            hits = index.search(q, 20, layers=layers)
            runs.append(time.perf_counter() - started)
        assert len(hits) == 20
        timings[label] = sorted(runs)[3]  # a low percentile: robust to a busy machine's preemptions
    assert max(timings.values()) < 0.02, timings  # about 1-2 ms on a laptop; generous for CI


# --- several writer processes on one FAISS folder --------------------------------------------

def test_faiss_writers_merge_instead_of_overwriting(tmp_path):
    """Two handles opened on the same folder (as two processes would) write and flush in turn:
    the second flush re-reads the first one's files under the writer lock and keeps them."""
    import numpy as np

    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    from .factories import CONTRACT_DIM

    rng = np.random.default_rng(1)

    def vecs(n):
        v = rng.normal(size=(n, CONTRACT_DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    folder = tmp_path / "vectors"
    seed = FaissVectorIndex(folder, CONTRACT_DIM)
    seed.upsert(["shared", "gone"], vecs(2), [{"layer": 0, "doc_id": "s"}] * 2)
    seed.flush()
    one, two = FaissVectorIndex(folder, CONTRACT_DIM), FaissVectorIndex(folder, CONTRACT_DIM)
    one.upsert([f"a{i}" for i in range(30)], vecs(30), [{"layer": 0, "doc_id": "a"}] * 30)
    two.upsert([f"b{i}" for i in range(20)], vecs(20), [{"layer": 1, "doc_id": "b"}] * 20)
    one.delete(["gone"])
    one.flush()
    two.delete(["a3"])        # written by the other handle after this one read the files
    b5 = vecs(1)
    two.upsert(["b5"], b5, [{"layer": 2, "doc_id": "b"}])
    two.flush()
    one.upsert(["a31"], vecs(1), [{"layer": 0, "doc_id": "a"}])
    one.flush()
    final = FaissVectorIndex(folder, CONTRACT_DIM)
    expected = {"shared", "a31"} | {f"a{i}" for i in range(30) if i != 3} | {f"b{i}" for i in range(20)}
    assert final.ids() == expected
    assert final.count() == len(expected)
    assert final.meta("b5") == {"layer": 2, "doc_id": "b"}
    assert np.allclose(final.get_vectors(["b5"])["b5"], b5[0])
    assert [h.node_id for h in final.search(b5[0], 1, layers=[2])] == ["b5"]
