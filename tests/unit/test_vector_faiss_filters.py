"""The FAISS index's ``where`` filters: each id's attrs live in the id map (SQLite, not Python
containers) and persist with its vector (the snapshot's entries, the log's upsert rows; an index
written before attrs existed opens and takes them from then on), survive a change of shape and
other writers' records, and an IVF index answers a filtered query exactly when the filter allows
few vectors and never short when it allows many, alone or with layers and documents. The port's
contract (tests/contract/test_vector_index.py) checks the answers against brute force."""

from __future__ import annotations

import json
import random

import numpy as np
from random_filters import random_attrs, random_filters
from test_vector_faiss_ivf import DIM, clustered

from eragraph.adapters.local import vector_faiss_search, vector_log
from eragraph.adapters.local.vector_faiss import IDMAP_FILE, LOG_FILE, FaissVectorIndex
from eragraph.domain.filters import All, Cond, matches

N_DOCS = 100


def doc_attrs(seed: int = 3) -> dict[str, dict]:
    rng = random.Random(seed)
    return {f"d{d}": random_attrs(rng, f"d{d}") for d in range(N_DOCS)}


def metas(start: int, n: int, attrs: dict[str, dict]) -> list[dict]:
    """Layer i % 4 and document d(i % 100); the leaves (layer 0) carry their document's attrs."""
    out = []
    for i in range(start, start + n):
        doc = f"d{i % N_DOCS}"
        out.append({"layer": i % 4, "doc_id": doc, **({"attrs": attrs[doc]} if i % 4 == 0 else {})})
    return out


def fill(index: FaissVectorIndex, vecs: np.ndarray, attrs: dict[str, dict], start: int = 0, batch: int = 2000) -> None:
    for at in range(0, len(vecs), batch):
        rows = vecs[at:at + batch]
        index.upsert([f"n{start + at + j}" for j in range(len(rows))], rows, metas(start + at, len(rows), attrs))


def flushed(folder, n: int, seed: int) -> tuple[FaissVectorIndex, np.ndarray, dict[str, dict]]:
    """A flat index of n clustered vectors with their metas, flushed (a snapshot)."""
    vecs, attrs = clustered(n, seed), doc_attrs(seed)
    index = FaissVectorIndex(folder, DIM)
    fill(index, vecs, attrs)
    index.flush()
    return index, vecs, attrs


def allowed_rows(n: int, attrs: dict[str, dict], where, layers=None, docs=None) -> np.ndarray:
    return np.array([i % 4 == 0 and matches(where, attrs[f"d{i % N_DOCS}"])
                     and (layers is None or i % 4 in layers) and (docs is None or f"d{i % N_DOCS}" in docs)
                     for i in range(n)])


def exact(vecs: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray) -> list[str]:
    rows = np.flatnonzero(keep)
    scores = vecs[rows] @ q
    return [f"n{rows[j]}" for j in np.argsort(-scores, kind="stable")[:k]]


def test_ivf_where_is_exact_when_narrow_and_never_short_when_wide(tmp_path, monkeypatch):
    vecs = clustered(12_000, 4)
    attrs = doc_attrs()
    # a tiny nprobe: only the exact path and the scaled-up nprobe keep filtered answers right
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=5000, nprobe_fraction=0.01)
    fill(index, vecs, attrs)
    assert index.shape()["kind"] == "ivf" and index.shape()["nprobe"] <= 3
    queries = clustered(6, 5)
    checked = 0
    for n, where in enumerate(random_filters(9, 40)):
        keep = allowed_rows(len(vecs), attrs, where)
        if not 0 < keep.sum() <= vector_faiss_search.EXACT_MAX:
            continue
        q = queries[n % len(queries)]
        assert [h.node_id for h in index.search(q, 10, where=where)] == exact(vecs, q, 10, keep), where
        checked += 1
    assert checked >= 10
    monkeypatch.setattr(vector_faiss_search, "EXACT_MAX", 0)  # the IVF path for every filter
    scopes = [(None, None), ([0], None), (None, [f"d{d}" for d in range(0, N_DOCS, 3)]), ([0, 2], ["d4", "d8", "d40"])]
    for n, where in enumerate(random_filters(10, 40)):
        layers, docs = scopes[n % len(scopes)]
        keep = allowed_rows(len(vecs), attrs, where, layers, docs)
        hits = index.search(queries[n % len(queries)], 10, layers=layers, doc_ids=docs, where=where)
        assert len(hits) == min(10, int(keep.sum())), where  # never short
        assert all(keep[int(h.node_id[1:])] for h in hits)  # and nothing the filter does not allow


def test_attrs_persist_in_snapshot_and_log_and_survive_a_change_of_shape(tmp_path):
    vecs = clustered(2400, 6)
    attrs = doc_attrs(4)
    folder = tmp_path / "v"
    index = FaissVectorIndex(folder, DIM, ivf_min=2000)
    fill(index, vecs[:1900], attrs)
    index.flush()  # a flat snapshot
    entries = {e[0]: e for e in json.loads((folder / IDMAP_FILE).read_text())["entries"]}
    assert entries["n4"][4] == attrs["d4"] and len(entries["n5"]) == 4  # a leaf's attrs; a summary has none
    late = {**attrs["d8"], "lang": "late"}
    index.upsert(["n8", "n108"], vecs[8:9].repeat(2, axis=0), [{"layer": 0, "doc_id": "d8", "attrs": late}] * 2)
    index.flush()  # a log record
    data = (folder / LOG_FILE).read_bytes()
    records, _ = vector_log.decode_records(data, vector_log._HEADER_LEN, DIM)
    assert [row[4] for row in records[-1][2]] == [late, late]
    marked = Cond("equals", "lang", "late")
    q = vecs[8]
    assert [h.node_id for h in FaissVectorIndex(folder, DIM, ivf_min=2000).search(q, 5, where=marked)] == ["n108", "n8"]
    fill(index, vecs[1900:], attrs, start=1900)  # past ivf_min: IVF, and a new snapshot on flush
    assert index.shape()["kind"] == "ivf"
    index.flush()
    assert not (folder / LOG_FILE).exists()
    again = FaissVectorIndex(folder, DIM, ivf_min=2000)
    assert again.shape() == index.shape()
    assert again.meta("n108") == {"layer": 0, "doc_id": "d8", "attrs": late}
    for where in random_filters(11, 15) + [marked]:
        assert again.search(q, 12, where=where) == index.search(q, 12, where=where)


def test_an_index_written_before_attrs_opens_and_takes_them(tmp_path):
    folder = tmp_path / "v"
    index, vecs, attrs = flushed(folder, 600, 7)
    data = json.loads((folder / IDMAP_FILE).read_text())
    data["entries"] = [e[:4] for e in data["entries"]]  # what an older version wrote: no attrs
    (folder / IDMAP_FILE).write_text(json.dumps(data))
    old = FaissVectorIndex(folder, DIM)
    q = vecs[0]
    everything = Cond("notEquals", "absent", 1)
    assert old.count() == 600 and old.search(q, 5, where=everything) == []  # nothing has attrs yet
    assert old.search(q, 5, layers=[0]) == index.search(q, 5, layers=[0])
    old.upsert(["n0", "n4"], vecs[[0, 4]], metas(0, 1, attrs) + metas(4, 1, attrs))  # a metadata-only re-index
    old.flush()
    assert (folder / LOG_FILE).exists()
    again = FaissVectorIndex(folder, DIM)
    assert {h.node_id for h in again.search(q, 5, where=everything)} == {"n0", "n4"}


def test_a_where_selection_follows_another_writers_records(tmp_path):
    folder = tmp_path / "v"
    _, vecs, attrs = flushed(folder, 800, 8)
    one, two = FaissVectorIndex(folder, DIM), FaissVectorIndex(folder, DIM)
    marked = All((Cond("equals", "doc_id", "d12"), Cond("equals", "lang", "moved")))
    q = vecs[12]
    assert one.search(q, 5, where=marked) == []  # now cached in one
    two.upsert(["n12", "n112"], vecs[[12, 112]], [{"layer": 0, "doc_id": "d12", "attrs": {**attrs["d12"], "lang": "moved"}}] * 2)
    two.flush()
    one.upsert(["other"], vecs[:1], [{"layer": 1, "doc_id": ""}])
    one.flush()  # takes in two's record first
    assert {h.node_id for h in one.search(q, 5, where=marked)} == {"n12", "n112"}
    assert one.meta("n112")["attrs"]["lang"] == "moved"
