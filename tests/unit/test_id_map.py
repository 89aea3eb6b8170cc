"""The vector index's id map (string id <-> int id, document and attributes per id) in a private SQLite table,
and the promise it exists for: the index's ids cost no Python memory per vector."""

from __future__ import annotations

import json
import random
import tracemalloc

import numpy as np
import pytest
from random_filters import random_attrs, random_filters

from eragraph.adapters.local.id_map import IdMap
from eragraph.adapters.local.vector_faiss import FaissVectorIndex
from eragraph.domain.filters import Cond, matches


def test_lookups_both_ways_and_by_document():
    m = IdMap()
    rows = [("a", 0, "d1", None), ("b", 1, "d2", '{"lang":"en"}'), ("c", 2, "d1", None)]
    m.add(rows)
    assert len(m) == 3
    assert m.ints(["c", "a", "z"]) == {"c": 2, "a": 0}
    assert m.strs([2, 7, 0]) == {2: "c", 0: "a"}
    assert m.rows_of(["b", "z"]) == {"b": (1, "d2", '{"lang":"en"}')}
    assert m.in_docs(["d1", "nope"]).tolist() == [0, 2]
    assert m.strs_between(1, 3) == ["b", "c"] and m.all_ints().tolist() == [0, 1, 2]
    assert [r for batch in m.rows(batch=2) for r in batch] == rows


def test_set_meta_moves_an_id_to_another_document_and_replaces_its_attributes():
    m = IdMap()
    m.add([("a", 0, "d1", '{"v":1}'), ("b", 1, "d1", '{"v":1}')])
    m.set_meta([(0, "d2", '{"v":2}'), (1, "d1", None), (7, "d9", "{}")])  # an absent int id changes nothing
    assert len(m) == 2 and m.strs([7]) == {}
    assert m.in_docs(["d1"]).tolist() == [1] and m.in_docs(["d2"]).tolist() == [0]
    assert m.matching(Cond("equals", "v", 2)).tolist() == [0]
    assert m.matching(Cond("notEquals", "v", 2)).tolist() == []  # b has no attributes any more
    with pytest.raises(Exception):
        m.add([("a", 5, "d3", None)])  # the caller adds only absent ids: a repeat is refused whole
    assert len(m) == 2 and m.rows_of(["a"]) == {"a": (0, "d2", '{"v":2}')}


def test_matching_is_the_filter_over_the_attributes():
    rng = random.Random(4)
    attrs = [None if n % 7 == 0 else random_attrs(rng, f"doc{n}") for n in range(200)]
    m = IdMap()
    m.load((f"s{n}", n, f"doc{n}", None if a is None else json.dumps(a)) for n, a in enumerate(attrs))
    for f in random_filters(8, 300):
        want = [n for n, a in enumerate(attrs) if a is not None and matches(f, a)]
        assert m.matching(f).tolist() == want, f


def test_remove_returns_the_int_ids_held_in_order_once():
    m = IdMap()
    m.add([(s, i, "d", None) for i, s in enumerate("abcd")])
    assert m.remove(["c", "zz", "a", "c"]) == [2, 0]
    assert len(m) == 2 and m.all_strs() == {"b", "d"} and m.remove(["a"]) == []


EDGE_ATTRS = [{"n": 2 ** 70, "my-key": "é✓x", "b": True, "l": ["", "ab"]}, {"n": 2 ** 63, "b": 1, "l": "ab"},
              {"n": -(2 ** 70), "b": False, "my-key": "é"}, {"n": 1.5, "l": []}, {"n": 9007199254740993, "b": "true"},
              {"n": "x", "my-key": 1}, {"n": 2020.0}, {"n": 2020, "l": ["2020"]}, {"n": "2020"}]
EDGE_FILTERS = [Cond("greaterThan", "n", 2 ** 64), Cond("equals", "n", 2 ** 70), Cond("in", "n", (2 ** 63, 1.5)),
                Cond("lessThan", "n", 0), Cond("equals", "n", 9007199254740993), Cond("equals", "n", 9007199254740992),
                Cond("notEquals", "n", 2 ** 63), Cond("equals", "n", 2020), Cond("equals", "n", "2020"),
                Cond("in", "l", ("2020", 2020)), Cond("startsWith", "my-key", "é"), Cond("startsWith", "my-key", "é✓"),
                Cond("equals", "b", True), Cond("equals", "b", 1), Cond("notIn", "b", (True, "true")),
                Cond("equals", "l", ""), Cond("startsWith", "l", "a"), Cond("lessThanOrEquals", "b", 1),
                Cond("greaterThanOrEquals", "n", 2020.0)]


@pytest.mark.parametrize("f", EDGE_FILTERS, ids=str)
def test_matching_agrees_on_the_edges(f):
    """Integers beyond int64 and float precision, a number against its string, bools against
    numbers, lists, unicode prefixes, a key with a dash."""
    m = IdMap()
    m.load((f"s{n}", n, "d", json.dumps(a)) for n, a in enumerate(EDGE_ATTRS))
    assert m.matching(f).tolist() == [n for n, a in enumerate(EDGE_ATTRS) if matches(f, a)]


def test_load_fills_an_empty_map_and_refuses_duplicates():
    m = IdMap()
    m.load((f"s{i}", i, f"d{i % 3}", None) for i in range(1000))
    assert len(m) == 1000 and m.ints(["s999"]) == {"s999": 999} and len(m.in_docs(["d0"])) == 334
    with pytest.raises(ValueError):
        m.load([("x", 5000, "d", None)])
    for repeated in ([("x", 1, "d", None), ("x", 2, "d", None)], [("x", 1, "d", None), ("y", 1, "d", None)]):
        bad = IdMap()
        with pytest.raises(ValueError, match="repeat"):
            bad.load(repeated)
        assert len(bad) == 0 and bad.all_strs() == set()
        bad.add([("x", 1, "d", None)])
        with pytest.raises(Exception):
            bad.add([("x", 2, "d", None)])  # the unique index stands after a failed load


def test_a_large_batch_is_one_lookup():
    m = IdMap()
    m.load((f"s{i}", i, "d", None) for i in range(50_000))
    assert len(m.ints([f"s{i}" for i in range(0, 50_000, 2)])) == 25_000  # beyond any SQL variable limit


def test_the_index_holds_no_python_object_per_vector(tmp_path):
    """100k ids (with attrs) upserted, flushed, searched (with a ``where`` filter too): the
    Python heap (and numpy's, which tracemalloc also traces) grows by the layer column's four
    bytes per id and a constant, where the dicts this replaced kept about 450 bytes per id (four
    maps of strings and ints)."""
    dim, n = 8, 100_000
    rng = np.random.default_rng(0)
    index = FaissVectorIndex(tmp_path / "v", dim)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for start in range(0, n, 10_000):
            ids = [f"chunk:{i:032x}" for i in range(start, start + 10_000)]
            vectors = rng.standard_normal((10_000, dim)).astype(np.float32)
            index.upsert(ids, vectors, [{"layer": i % 4, "doc_id": f"doc{i // 20}",
                                         "attrs": {"doc_id": f"doc{i // 20}", "year": 2000 + i % 25}}
                                        for i in range(start, start + 10_000)])
            index.flush()
        index.search(rng.standard_normal(dim).astype(np.float32), 10, doc_ids=["doc7"])
        assert len(index.search(rng.standard_normal(dim).astype(np.float32), 10, where=Cond("equals", "year", 2003))) == 10
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert index.count() == n and len(index.search(rng.standard_normal(dim).astype(np.float32), 5, layers=[2])) == 5
    # a constant of 4 MiB: the filter's cached selector and what other tests' threads allocate
    # meanwhile (tracemalloc counts every thread) come to about 3 MB in a whole-suite run; the
    # dicts this replaced cost about 45 MB here
    assert grown < 8 * n + (4 << 20), f"{grown / n:.0f} bytes per id stayed in Python"


class _Discard:
    def write(self, data: bytes) -> int:
        return len(data)


def _writing_peak(m: IdMap, n: int, batch: int | None) -> int:
    """Bytes the Python heap held at most beyond its start while a snapshot's id map of ``m``
    was written (``batch``: rows read at a time; None: the writer's own)."""
    from eragraph.adapters.local import vector_faiss_snapshot as snap

    ids = m if batch is None else type("Batched", (), {"rows": lambda self: m.rows(batch)})()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        snap._idmap_writer({"format": 2}, ids, np.zeros(n, dtype=np.int32))(_Discard())
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_a_snapshot_s_id_map_is_written_a_small_batch_at_a_time():
    """A compaction streams the id map to its file from the map's rows: a batch of rows and its
    entries' text are what it holds at once, about 0.6 KB a row (65,536-row batches held 42 MB
    beside a large store's index at every compaction)."""
    n = 100_000
    m = IdMap()
    m.load((f"chunk:{i:032x}", i, f"doc{i // 20}", '{"year":2003}' if i % 2 else None) for i in range(n))
    peak = _writing_peak(m, n, None)
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MiB held at once"
    assert _writing_peak(m, n, 65_536) > 4 * peak  # the control: what a large batch holds


def test_an_id_map_file_repeating_an_id_is_refused_as_corrupt(tmp_path):
    import json

    from eragraph.adapters.local.vector_faiss import IDMAP_FILE, VectorIndexCorruptError

    index = FaissVectorIndex(tmp_path / "v", 4)
    index.upsert(["a", "b"], np.eye(2, 4, dtype=np.float32), [{"layer": 0, "doc_id": "d"}] * 2)
    index.flush()
    path = tmp_path / "v" / IDMAP_FILE
    data = json.loads(path.read_text())
    data["entries"][1][0] = data["entries"][0][0]  # two int ids under one string id
    path.write_text(json.dumps(data))
    with pytest.raises(VectorIndexCorruptError, match="repeat"):
        FaissVectorIndex(tmp_path / "v", 4)
