"""VectorIndex contract: every backend in factories.VECTOR_INDEX_FACTORIES; searches must equal
brute-force numpy top-k (ids exactly, scores to float32 precision), filtered ones (``layers``,
``doc_ids``, ``where`` on the leaves' ``attrs``) the brute-force top-k of the allowed set."""

from __future__ import annotations

import random

import numpy as np
import pytest
from random_filters import random_attrs, random_filters

from eragraph.domain.filters import AnyOf, Cond, matches
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


def allowed(m, layers=None, doc_ids=None, where=None) -> bool:
    """Whether a vector with meta ``m`` passes the filters (a vector without attrs: no ``where``)."""
    return ((layers is None or m["layer"] in layers) and (doc_ids is None or m["doc_id"] in doc_ids)
            and (where is None or (m.get("attrs") is not None and matches(where, m["attrs"]))))


def brute_force(ids, vecs, metas_, q, k, layers=None, doc_ids=None, where=None):
    keep = [i for i, m in enumerate(metas_) if allowed(m, layers, doc_ids, where)]
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


# --- metadata filters (where) ----------------------------------------------------------------

@pytest.fixture
def attr_corpus():
    """480 vectors: the leaves of 40 documents (layer 0, each document's chunks carrying its
    random attrs), and summaries (layers 1 and 2) without attrs, some tagged with a document."""
    rng = random.Random(21)
    doc_attrs = {f"doc{d}": random_attrs(rng, f"doc{d}") for d in range(40)}
    ids, ms = [], []
    for n in range(400):
        doc = f"doc{n % 40}"
        ids.append(f"c{n:03d}")
        ms.append({"layer": 0, "doc_id": doc, "attrs": doc_attrs[doc]})
    for n in range(80):
        ids.append(f"s{n:03d}")
        ms.append({"layer": 1 + n % 2, "doc_id": f"doc{n % 40}" if n % 3 == 0 else ""})
    return ids, unit(len(ids), 31), ms


FILTER_SCOPES = [(None, None), ([0], None), ([0, 1], None), ([1, 2], None),
                 (None, ["doc1", "doc2", "doc3", "doc5", "doc8", "doc13", "doc21", "doc34"]),
                 ([0], ["doc0", "doc7", "doc14", "doc33"])]


def test_where_search_equals_brute_force(vector_index, attr_corpus):
    """Random filters of every operator and nesting, alone and with layers and doc_ids: the
    true top-k of the allowed leaves, summaries never among them, never short."""
    ids, vecs, ms = attr_corpus
    vector_index.upsert(ids, vecs, ms)
    queries = unit(3, 41)
    matched_some = 0
    for n, where in enumerate(random_filters(17, 60)):
        layers, docs = FILTER_SCOPES[n % len(FILTER_SCOPES)]
        q = queries[n % len(queries)]
        for k in (1, 8, 60):
            hits = vector_index.search(q, k, layers=layers, doc_ids=docs, where=where)
            want_ids, want_scores = brute_force(ids, vecs, ms, q, k, layers, docs, where)
            assert [h.node_id for h in hits] == want_ids, (where, layers, docs, k)
            assert [h.score for h in hits] == pytest.approx(want_scores, abs=1e-5)
            assert not any(h.node_id.startswith("s") for h in hits)
        matched_some += bool(want_ids)
    assert matched_some >= 20  # the filters are not all empty


def test_where_never_returns_vectors_without_attrs(vector_index, attr_corpus):
    ids, vecs, ms = attr_corpus
    vector_index.upsert(ids, vecs, ms)
    every = Cond("notEquals", "absent", "x")  # matches every vector that has attrs
    hits = vector_index.search(unit(1, 42)[0], len(ids), where=every)
    assert sorted(h.node_id for h in hits) == sorted(i for i in ids if i.startswith("c"))
    assert vector_index.search(unit(1, 43)[0], 10, layers=[1, 2], where=every) == []


def test_an_upsert_with_new_attrs_replaces_them(vector_index, attr_corpus):
    """A metadata-only change re-upserts the same vectors with new attrs: filters see the new
    ones at once (no stale cached selection) and the old ones no longer match."""
    ids, vecs, ms = attr_corpus
    vector_index.upsert(ids, vecs, ms)
    q = unit(1, 44)[0]
    marked = Cond("equals", "lang", "zz-new")
    old_doc3 = Cond("equals", "doc_id", "doc3")
    assert vector_index.search(q, 10, where=marked) == []
    assert vector_index.search(q, 10, where=AnyOf((marked, old_doc3)))  # a selection the index may cache
    changed = [n for n, m in enumerate(ms) if m["doc_id"] == "doc3" and m["layer"] == 0]
    new_ms = [dict(m) for m in ms]
    for n in changed:
        new_ms[n] = {**ms[n], "attrs": {**ms[n]["attrs"], "lang": "zz-new", "doc_id": "doc3b"}}
    vector_index.upsert([ids[n] for n in changed], vecs[changed], [new_ms[n] for n in changed])
    for where in (marked, old_doc3, AnyOf((marked, old_doc3)), Cond("notEquals", "lang", "zz-new")):
        hits = vector_index.search(q, 50, where=where)
        want_ids, _ = brute_force(ids, vecs, new_ms, q, 50, where=where)
        assert [h.node_id for h in hits] == want_ids, where
    assert {h.node_id for h in vector_index.search(q, 50, where=marked)} == {ids[n] for n in changed}
    # an upsert without attrs takes them away: the vector no longer matches any filter
    vector_index.upsert([ids[changed[0]]], vecs[changed[:1]], [{"layer": 0, "doc_id": "doc3"}])
    assert ids[changed[0]] not in {h.node_id for h in vector_index.search(q, 50, where=marked)}
    assert vector_index.count() == len(ids)


@pytest.mark.persistent
def test_attrs_survive_flush_and_reopen(vector_index_backend, attr_corpus):
    ids, vecs, ms = attr_corpus
    index = vector_index_backend.open()
    index.upsert(ids, vecs, ms)
    index.flush()
    index.upsert(ids[:5], vecs[:5], [{**m, "attrs": {**m["attrs"], "kind": "late"}} for m in ms[:5]])
    index.flush()
    q = unit(1, 45)[0]
    filters = random_filters(23, 12) + [Cond("equals", "kind", "late")]
    before = [index.search(q, 15, where=f) for f in filters]
    again = vector_index_backend.reopen(index)
    assert [again.search(q, 15, where=f) for f in filters] == before
    assert {h.node_id for h in again.search(q, 15, where=filters[-1])} == set(ids[:5])


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


def _python_lines(call):
    """(lines of Python executed by ``call()`` in this thread, its result): a count of work that a
    loaded machine cannot change, where a clock could."""
    import sys

    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        count += event == "line"
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = call()
    finally:
        sys.settrace(previous)
    return count, result


def test_faiss_filtered_search_is_fast_at_20k(tmp_path):
    """The rule: a layer filter costs about what the unfiltered search costs (a cached selector,
    no Python loop over 20k ids, which took tens of ms). Stated as work, not time: the Python
    lines a search runs (the first after a write builds the selector again) do not grow with the
    number of ids, from 2k to 20k; a loop over the ids would add at least 18k. Latency itself is
    measured by `eragraph bench vectors`, not gated here."""
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    dim = 384
    q = unit(1, 4, dim)[0]
    lines: dict[str, dict[int, int]] = {}
    for n in (2_000, 20_000):
        index = FaissVectorIndex(tmp_path / f"v{n}", dim)
        vecs = unit(n, 3, dim)
        index.upsert([f"n{i}" for i in range(n)], vecs, [{"layer": i % 4, "doc_id": f"d{i % 500}"} for i in range(n)])
        index.search(q, 20, layers=[1])  # builds the cached selector
        index.upsert(["n0"], vecs[:1], [{"layer": 2, "doc_id": "d0"}])  # a write drops it again
        for label, layers in (("collapsed", None), ("layers", [0, 1, 2, 3]), ("one layer", [1])):
            first, hits = _python_lines(lambda: index.search(q, 20, layers=layers))
            again, hits_again = _python_lines(lambda: index.search(q, 20, layers=layers))
            assert len(hits) == 20 and hits_again == hits
            assert again < first if layers else again == first  # the second reuses the selector the first built
            lines.setdefault(label, {})[n] = first
    for label, by_size in lines.items():
        assert by_size[20_000] - by_size[2_000] < 2_000, (label, lines)


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


@pytest.mark.parametrize("layers", [None, [1], [0, 2]])
@pytest.mark.parametrize("min_score", [None, 0.05])
def test_search_many_equals_one_search_per_row(vector_index, corpus, layers, min_score):
    """search_many is search per row, with the hits below min_score dropped: ids exactly,
    scores to float32 precision."""
    ids, vecs, metas_ = corpus
    vector_index.upsert(ids, vecs, metas_)
    vector_index.flush()
    qs = unit(9, 11)
    for k in (1, 7, 40):
        many = vector_index.search_many(qs, k, layers=layers, min_score=min_score)
        assert len(many) == len(qs)
        for q, got in zip(qs, many):
            one = [h for h in vector_index.search(q, k, layers=layers)
                   if min_score is None or h.score >= min_score]
            assert [h.node_id for h in got] == [h.node_id for h in one]
            np.testing.assert_allclose([h.score for h in got], [h.score for h in one], atol=1e-5)
            assert all(h.score >= min_score for h in got) if min_score is not None else len(got) == len(one)


def test_search_many_orders_ties_like_search(vector_index):
    """Ties at the cut are ordered by id as search orders them when they reach min_score, and
    dropped (not ordered) below it; an empty batch and an empty layer give empty rows."""
    base = unit(1, 3)[0]
    other = unit(1, 4)[0]
    other = other - (other @ base) * base
    other /= np.linalg.norm(other)
    ids = [f"t{i:03d}" for i in range(60)]
    vecs = np.stack([base] * 30 + [other] * 30)
    vector_index.upsert(ids, vecs, metas(60, layer=5))
    vector_index.flush()
    assert vector_index.search_many(np.zeros((0, DIM), np.float32), 3) == []
    assert vector_index.search_many(np.stack([base]), 3, layers=[9]) == [[]]
    got = vector_index.search_many(np.stack([base, other]), 4, layers=[5])
    assert [[h.node_id for h in row] for row in got] == [ids[:4], ids[30:34]]
    # the query orthogonal to both groups: every vector ties at 0, below the floor
    third = unit(1, 5)[0]
    third = third - (third @ base) * base - (third @ other) * other
    third /= np.linalg.norm(third)
    got = vector_index.search_many(np.stack([third, base]), 4, min_score=0.5)
    assert got[0] == [] and [h.node_id for h in got[1]] == ids[:4]
    assert [h.node_id for h in vector_index.search_many(np.stack([third]), 3)[0]] == \
        [h.node_id for h in vector_index.search(third, 3)]
