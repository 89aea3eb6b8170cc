"""The FAISS index's IVF shape: it takes over at ``ivf_min``, retrains as the index grows fourfold,
turns flat again when most of it is deleted, keeps recall on clustered data with the default
nprobe, answers narrow filters exactly and wide ones in full (never a short top-k), and persists
and replays like the flat shape. The port's contract tests run on it too (``faiss-ivf`` in
tests/contract/factories.py, every bucket scanned); its speed and recall at a million vectors
are measured by ``eragraph bench vectors`` (docs/benchmarks/vectors.md)."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.adapters.local import vector_faiss, vector_faiss_ivf, vector_faiss_search
from eragraph.adapters.local.vector_faiss import FaissVectorIndex

DIM = 32


def clustered(n: int, seed: int, clusters: int = 40) -> np.ndarray:
    """Topic centres plus noise, unit norm: what text embeddings look like to an IVF index."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM)).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fill(index: FaissVectorIndex, vecs: np.ndarray, start: int = 0, batch: int = 500) -> None:
    for at in range(0, len(vecs), batch):
        rows = vecs[at:at + batch]
        ids = [f"n{start + at + j}" for j in range(len(rows))]
        index.upsert(ids, rows, [{"layer": (start + at + j) % 4, "doc_id": f"d{(start + at + j) % 100}"}
                                 for j in range(len(rows))])


def exact(vecs: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray | None = None) -> list[str]:
    rows = np.arange(len(vecs)) if keep is None else np.flatnonzero(keep)
    scores = vecs[rows] @ q
    return [f"n{rows[j]}" for j in np.argsort(-scores, kind="stable")[:k]]


def test_flat_below_ivf_min_then_ivf_then_retrained_then_flat_again(tmp_path):
    vecs = clustered(9000, 1)
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(index, vecs[:1500])
    assert index.shape() == {"kind": "flat"}
    fill(index, vecs[1500:2000], start=1500)
    first = index.shape()
    assert first["kind"] == "ivf" and first["nlist"] == vector_faiss_ivf.nlist(2000)
    fill(index, vecs[2000:4000], start=2000)
    assert index.shape() == first  # grown 2x: the same centroids
    fill(index, vecs[4000:], start=4000)
    grown = index.shape()
    assert grown["kind"] == "ivf" and grown["nlist"] > first["nlist"]  # grown 4x: retrained
    assert index.count() == 9000
    index.delete([f"n{i}" for i in range(8600)])
    assert index.shape() == {"kind": "flat"} and index.count() == 400
    q = vecs[8700]
    assert [h.node_id for h in index.search(q, 5)] == [f"n{8600 + i}" for i in
                                                       np.argsort(-(vecs[8600:] @ q), kind="stable")[:5]]


def test_default_nprobe_keeps_recall_on_clustered_vectors(tmp_path):
    vecs = clustered(20_000, 2)
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=5000)
    fill(index, vecs, batch=5000)
    assert index.shape()["kind"] == "ivf"
    queries = clustered(60, 3)
    recall = np.mean([len({h.node_id for h in index.search(q, 10)} & set(exact(vecs, q, 10))) / 10
                      for q in queries])
    assert recall >= 0.95, recall


def test_narrow_filters_are_exact_and_wide_ones_never_short(tmp_path, monkeypatch):
    vecs = clustered(12_000, 4)
    # a tiny nprobe: only the exact path for narrow filters and the scaled-up nprobe keep these right
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=5000, nprobe_fraction=0.01)
    fill(index, vecs, batch=4000)
    assert index.shape()["kind"] == "ivf" and index.shape()["nprobe"] <= 3
    doc = np.array([i % 100 == 7 for i in range(len(vecs))])
    for q in clustered(20, 5):
        hits = index.search(q, 10, doc_ids=["d7"])
        assert [h.node_id for h in hits] == exact(vecs, q, 10, keep=doc)  # 120 allowed: exact
    monkeypatch.setattr(vector_faiss_search, "EXACT_MAX", 0)  # force the IVF path for a narrow filter too
    layer3 = np.array([i % 4 == 3 for i in range(len(vecs))])
    for q in clustered(20, 6):
        hits = index.search(q, 10, layers=[3], doc_ids=["d7", "d11"])
        assert len(hits) == 10  # 60 allowed among 12,000: no short top-k
        assert all(int(h.node_id[1:]) % 4 == 3 and int(h.node_id[1:]) % 100 in (7, 11) for h in hits)


def test_ivf_snapshot_and_log_reopen_to_the_same_answers(tmp_path):
    vecs = clustered(6000, 7)
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=3000)
    fill(index, vecs[:5000])
    index.flush()  # the first flush compacts: an IVF snapshot
    index.delete(["n1", "n2"])
    index.upsert(["n3"], vecs[5000:5001], [{"layer": 1, "doc_id": "d3"}])
    fill(index, vecs[5001:5200], start=5001)
    index.flush()  # a log record over it
    assert (tmp_path / "v" / vector_faiss.LOG_FILE).exists()
    again = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=3000)
    assert again.shape() == index.shape() and again.count() == index.count() == 5197
    assert "n1" not in again.ids() and "n5100" in again.ids()
    np.testing.assert_array_equal(again.get_vectors(["n3"])["n3"], vecs[5000])
    for q in clustered(10, 8):
        assert again.search(q, 10) == index.search(q, 10)
        assert again.search(q, 5, layers=[1]) == index.search(q, 5, layers=[1])


def test_the_flush_after_a_change_of_shape_writes_a_snapshot_readers_open_in_it(tmp_path):
    vecs = clustered(3000, 9)
    writer = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(writer, vecs[:1900])
    writer.flush()  # a flat snapshot
    fill(writer, vecs[1900:2100], start=1900)  # crosses ivf_min: IVF in the writer
    assert writer.shape()["kind"] == "ivf"
    writer.flush()  # small enough for a log record, but the shape changed: a new snapshot
    assert not (tmp_path / "v" / vector_faiss.LOG_FILE).exists()
    reader = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    assert reader.shape() == writer.shape() and reader.count() == 2100
    fill(writer, vecs[2100:2150], start=2100)
    writer.flush()  # no change of shape: a log record again
    assert (tmp_path / "v" / vector_faiss.LOG_FILE).exists()


def test_a_writer_reshapes_when_other_writers_records_carry_the_index_past_ivf_min(tmp_path):
    vecs = clustered(2200, 10)
    one = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(one, vecs[:1500])
    one.flush()
    two = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(one, vecs[1500:1900], start=1500)
    one.flush()
    fill(two, vecs[1900:2200], start=1900)  # 1,800 in this handle's view: still flat
    assert two.shape()["kind"] == "flat"
    two.flush()  # takes in one's records: 2,200, past ivf_min
    assert two.shape()["kind"] == "ivf"
    reader = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    assert reader.shape()["kind"] == "ivf" and reader.count() == 2200


def test_rejects_bad_shape_settings(tmp_path):
    with pytest.raises(ValueError):
        FaissVectorIndex(tmp_path / "v", DIM, ivf_min=0)
    with pytest.raises(ValueError):
        FaissVectorIndex(tmp_path / "v", DIM, nprobe_fraction=0)


_RESHAPE_PEAK = r"""
import sys, tempfile
import numpy as np
from eragraph.adapters.local.vector_faiss import FaissVectorIndex
n, dim = 200_000, 128
index = FaissVectorIndex(tempfile.mkdtemp(), dim, ivf_min=n)
rng = np.random.default_rng(0)
for start in range(0, n - 1, 20_000):
    rows = min(20_000, n - 1 - start)
    v = rng.standard_normal((rows, dim)).astype(np.float32)
    index.upsert([f"v{start + i}" for i in range(rows)], v / np.linalg.norm(v, axis=1, keepdims=True),
                 [{"layer": 0, "doc_id": "d"}] * rows)
del v
resident = int(open("/proc/self/statm").read().split()[1]) * 4096
index.upsert(["last"], np.full((1, dim), dim ** -0.5, np.float32), [{"layer": 0, "doc_id": "d"}])
assert index.shape()["kind"] == "ivf" and index.count() == n
# this process's own peak (VmHWM); ru_maxrss would also count the parent's size at the fork
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) * 1024
print((peak - resident) / (n * dim * 4))
"""


def test_a_change_of_shape_never_holds_the_old_and_the_new_index_at_once():
    """Flat to IVF at 200k vectors (98 MiB): the peak grows by less than the old and the new
    index together would over what the process held before (building the new index beside the
    old one, as before, grew it by 1.37x). Measured 0.92x since a writer fixes the mmap
    threshold (vector_faiss_ivf.fixed_mmap_threshold: what the process held before is the index,
    without heap holes; peak 296 MiB), 0.56x before it, from 48 MiB more held (peak 309 MiB)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _RESHAPE_PEAK], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 1.15, out.stdout


def test_a_failed_change_of_shape_keeps_every_vector(tmp_path, monkeypatch):
    vecs = clustered(2000, 5)
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(index, vecs[:1999])

    def fail(*_a, **_kw):
        raise MemoryError("no room for the new index")

    monkeypatch.setattr(vector_faiss_ivf, "new_shape", fail)
    with pytest.raises(MemoryError):
        fill(index, vecs[1999:], start=1999)
    assert index.shape() == {"kind": "flat"} and index.count() == 2000  # the vectors, back from the spill
    q = vecs[7]
    assert [h.node_id for h in index.search(q, 5)] == exact(vecs, q, 5)
    monkeypatch.undo()
    index.upsert(["n0"], vecs[:1], [{"layer": 0, "doc_id": "d0"}])  # the next change reshapes
    assert index.shape()["kind"] == "ivf" and index.count() == 2000
    index.flush()
    again = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    assert again.count() == 2000 and [h.node_id for h in again.search(q, 5)] == exact(vecs, q, 5)


def test_a_small_ivf_add_runs_on_one_thread_and_leaves_the_thread_setting_as_it_was(tmp_path, monkeypatch):
    """FAISS starts an OpenMP team for every add: for an insert's few vectors waking it costs
    milliseconds (more on a busy machine) against microseconds of work, so a small IVF add runs
    on one thread; the caller's setting is restored, also when the add fails."""
    index = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=2000)
    fill(index, clustered(2400, 3))
    assert vector_faiss_ivf.is_ivf(index._index)
    seen = []
    real = vector_faiss_ivf.faiss.omp_set_num_threads
    monkeypatch.setattr(vector_faiss_ivf.faiss, "omp_set_num_threads", lambda n: (seen.append(n), real(n)))
    threads = vector_faiss_ivf.faiss.omp_get_max_threads()
    index.upsert(["one"], clustered(1, 4), [{"layer": 0, "doc_id": "d"}])
    assert seen == [1, threads] and vector_faiss_ivf.faiss.omp_get_max_threads() == threads
    assert index.search(clustered(1, 4)[0], 1)[0].node_id == "one"
    seen.clear()
    with pytest.raises(AssertionError):  # FAISS's wrapper checks the shapes
        vector_faiss_ivf.add(index._index, clustered(2, 5), np.arange(1, dtype=np.int64))  # 2 rows, 1 id
    assert seen[0] == 1 and vector_faiss_ivf.faiss.omp_get_max_threads() == threads
    seen.clear()
    big = vector_faiss_ivf.SERIAL_ADD_MAX
    vector_faiss_ivf.add(index._index, clustered(big, 6), np.arange(10**6, 10**6 + big, dtype=np.int64))
    assert seen == []  # a large add keeps the threads


@pytest.mark.parametrize("ivf_min, layers, searches", [(10**9, [1, 2], [25]), (500, None, [25]), (500, [1, 2], [])])
def test_search_many_is_one_faiss_search_for_all_rows(tmp_path, ivf_min, layers, searches, monkeypatch):
    """Flat and IVF alike: the batch is one faiss search call over every row (none for a
    narrow filter on IVF: one product with the allowed vectors), and it answers what one
    search per row answers."""
    index = FaissVectorIndex(tmp_path, DIM, ivf_min=ivf_min, nprobe_fraction=1.0)
    vecs = clustered(3000, 1)
    fill(index, vecs)
    qs = clustered(25, 2)
    expected = [[h.node_id for h in index.search(q, 5, layers=layers)] for q in qs]
    calls = []
    kind = type(index._index)  # its search, counted (the class's own: the index keeps its type)
    inner = kind.search

    def search(self, q, k, *a, **kw):
        calls.append(len(q))
        return inner(self, q, k, *a, **kw)

    monkeypatch.setattr(kind, "search", search)
    got = index.search_many(qs, 5, layers=layers)
    assert calls == searches
    assert [[h.node_id for h in row] for row in got] == expected


_HEAP_PROBE = """
import sys, numpy as np
if sys.argv[1] == "fixed":
    from eragraph.adapters.local.vector_faiss import FaissVectorIndex
    FaissVectorIndex(sys.argv[2], 8)  # a writer's handle fixes the threshold
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4
for _ in range(2):  # the first free of a mapped block is what makes glibc's threshold move
    before = rss()
    x = np.ones(1 << 20)  # 8 MiB, touched
    del x
print(rss() - before)
"""


def test_a_writer_fixes_the_mmap_threshold_so_a_freed_buffer_goes_back(tmp_path):
    """With glibc's moving threshold a large buffer freed once makes the next of its size come
    from the heap, where it stays resident after it is freed (an IVF list's old buffer, each time
    it doubles); once a writer's handle fixed the threshold, it is a mapping handed back whole."""
    import subprocess
    import sys

    if not vector_faiss_ivf.fixed_mmap_threshold():
        pytest.skip("not glibc: no mmap threshold to fix")
    kept = {mode: int(subprocess.run([sys.executable, "-c", _HEAP_PROBE, mode, str(tmp_path / mode)], check=True,
                                     capture_output=True, text=True).stdout) for mode in ("moving", "fixed")}
    assert kept["moving"] >= 4096  # KiB: the control shows the hole this prevents
    assert kept["fixed"] < 1024


_HOLES_PROBE = r"""
import ctypes, sys
import faiss, numpy as np
from eragraph.adapters.local import vector_faiss_ivf as ivf
ivf.fixed_mmap_threshold()
if sys.argv[1] == "never":
    ivf.RELEASE_BYTES = 1 << 62  # the control: no hand-back while the lists grow
n, dim, nlist = 100_000, 256, 512  # 98 MiB of vectors; a list ends near 195 KiB, past the threshold
rng = np.random.default_rng(0)
index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
index.train(rng.standard_normal((nlist * 39, dim)).astype(np.float32))
trim = ctypes.CDLL("libc.so.6").malloc_trim
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4
trim(0)
for start in range(0, n, 256):  # an ingest's batches
    ivf.add(index, rng.standard_normal((256, dim)).astype(np.float32), np.arange(start, start + 256))
before = rss()
trim(0)
print(before - rss())  # KiB of freed heap the process still held: the holes
"""


def test_adds_to_an_ivf_index_hand_the_lists_outgrown_buffers_back():
    """An IVF list's buffers below the mmap threshold come from the heap; each one it outgrows
    is a hole that stays resident until malloc_trim (measured: 88 MB of holes beside 976 MB of
    vectors over a 1M-vector fill, none of it in the index). ``add`` hands the freed heap back
    every RELEASE_BYTES of rows: measured 0.2 MiB of holes after 98 MiB of vectors, against
    9.5 MiB without (the control)."""
    import subprocess
    import sys

    if not vector_faiss_ivf.fixed_mmap_threshold():
        pytest.skip("not glibc: no malloc_trim")
    holes = {mode: int(subprocess.run([sys.executable, "-c", _HOLES_PROBE, mode], check=True,
                                      capture_output=True, text=True).stdout) for mode in ("never", "default")}
    assert holes["never"] >= 6 * 1024, holes  # KiB: the control shows what the hand-back removes
    assert holes["default"] < 3 * 1024, holes  # about a tenth of RELEASE_BYTES at most


def test_an_ivf_snapshot_is_written_without_its_direct_map_and_opens_with_one(tmp_path):
    import faiss

    vecs = clustered(4000, 11)
    writer = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=3000)
    fill(writer, vecs)
    writer.flush()  # the first flush compacts: an IVF snapshot
    with open(tmp_path / "v" / "vectors.faiss", "rb") as fh:
        on_disk = faiss.read_index(faiss.PyCallbackIOReader(fh.read, 1 << 20))
    assert isinstance(on_disk, faiss.IndexIVFFlat) and on_disk.ntotal == 4000
    assert on_disk.direct_map.type == faiss.DirectMap.NoMap  # no copy of the map was written
    # the writer's own map is as it was, and a reader builds one from the lists
    np.testing.assert_array_equal(writer.get_vectors(["n17"])["n17"], vecs[17])
    reader = FaissVectorIndex(tmp_path / "v", DIM, ivf_min=3000)
    np.testing.assert_array_equal(reader.get_vectors(["n3999"])["n3999"], vecs[3999])
    reader.delete(["n5"])  # a removal finds its vector through the map
    assert reader.count() == 3999 and "n5" not in reader.ids()


_DIRECT_MAP_PROBE = r"""
import ctypes, hashlib, sys
import faiss, numpy as np
from eragraph.adapters.local import vector_faiss_snapshot as snap
ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # a freed copy is handed back whole
n, dim = 400_000, 16
rng = np.random.default_rng(0)
index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, 256, faiss.METRIC_INNER_PRODUCT)
index.train(rng.standard_normal((256 * 39, dim)).astype(np.float32))
index.set_direct_map_type(faiss.DirectMap.Hashtable)
index.add_with_ids(rng.standard_normal((n, dim)).astype(np.float32), np.arange(n))
def kib(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))
ctypes.CDLL("libc.so.6").malloc_trim(0)
open("/proc/self/clear_refs", "w").write("5")
before = kib("VmRSS:")
class Discard:  # the file: what is written is dropped, so only the writer's own memory shows
    def write(self, data):
        return len(data)
if sys.argv[1] == "plain":  # the control: faiss's own write, its map copied first
    faiss.write_index(index, faiss.PyCallbackIOWriter(Discard().write, 1 << 16))
else:
    snap._index_writer(index, hashlib.sha256())(Discard())
print(kib("VmHWM:") - before, int(index.direct_map.type == faiss.DirectMap.Hashtable))
"""


def test_writing_an_ivf_snapshot_makes_no_copy_of_its_direct_map():
    """faiss writes a hashtable direct map by copying it into a vector first: 16 bytes a
    vector at once (18 MB at a 1M build's 1.1M vectors, the largest transient of its last
    compaction). The snapshot's writer leaves the map out: the control's peak shows the copy."""
    import subprocess
    import sys

    if not vector_faiss_ivf.fixed_mmap_threshold():
        pytest.skip("not glibc")
    out = {}
    for mode in ("plain", "snapshot"):
        extra, has_map = subprocess.run([sys.executable, "-c", _DIRECT_MAP_PROBE, mode], check=True,
                                        capture_output=True, text=True).stdout.split()
        out[mode] = int(extra)
        assert has_map == "1"  # the map is there again after the write
    assert out["plain"] >= 5 * 1024, out  # KiB: 400k x 16 bytes = 6.1 MiB copied by faiss
    assert out["snapshot"] < 2 * 1024, out
