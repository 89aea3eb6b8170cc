"""The FAISS index's change log: a small flush appends a record instead of rewriting the
snapshot, reopening replays it exactly, a torn tail is ignored, compaction folds the log into a
new snapshot, several handles writing in turn lose nothing, and a crash between the steps of a
compaction is detected or recovered (a compaction killed before or after its id map leaves an
index that opens). The leaves (layer 0) carry ``attrs``, so every one of these checks also holds
for them and for ``where`` searches over them."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.adapters.local import vector_faiss, vector_faiss_ivf, vector_faiss_snapshot, vector_log
from eragraph.adapters.local.files import file_stamp
from eragraph.adapters.local.vector_faiss import INDEX_FILE, IDMAP_FILE, LOCK_FILE, LOG_FILE, FaissVectorIndex
from eragraph.domain.filters import AnyOf, Cond

DIM = 32
ROW = DIM * 4  # bytes of one vector


@pytest.fixture(autouse=True, params=["flat", "ivf"])
def shape(request):
    """Every test of the log, the compactions and the crashes runs on both shapes of the index:
    flat, and IVF from the first vector on (scanning every bucket, so answers stay exact). Set
    directly, not through monkeypatch: several tests call ``monkeypatch.undo()`` mid-way."""
    saved = vector_faiss_ivf.IVF_MIN, vector_faiss_ivf.NPROBE_FRACTION
    if request.param == "ivf":
        vector_faiss_ivf.IVF_MIN, vector_faiss_ivf.NPROBE_FRACTION = 1, 1.0
    yield request.param
    vector_faiss_ivf.IVF_MIN, vector_faiss_ivf.NPROBE_FRACTION = saved


def unit(rows: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


LANGS = ("en", "de", "fr")


def meta(layer: int, doc: str) -> dict:
    """A leaf's meta carries attrs (a language drawn from its document's name); a summary's none."""
    if layer != 0:
        return {"layer": layer, "doc_id": doc}
    return {"layer": layer, "doc_id": doc, "attrs": {"doc_id": doc, "lang": LANGS[sum(map(ord, doc)) % 3]}}


def snapshot_stamps(folder):
    return file_stamp(folder / INDEX_FILE), file_stamp(folder / IDMAP_FILE)


def log_size(folder) -> int:
    path = folder / LOG_FILE
    return path.stat().st_size if path.exists() else 0


def seeded(folder, n: int = 2000, seed: int = 1) -> FaissVectorIndex:
    index = FaissVectorIndex(folder, DIM)
    index.upsert([f"n{i}" for i in range(n)], unit(n, seed), [meta(i % 4, f"d{i % 50}") for i in range(n)])
    index.flush()
    return index


def state(index: FaissVectorIndex) -> dict:
    """Everything a reader can observe: id -> (vector bytes, meta)."""
    ids = sorted(index.ids())
    vectors = index.get_vectors(ids)
    return {s: (vectors[s].tobytes(), index.meta(s)) for s in ids}


def searches(index: FaissVectorIndex, queries: np.ndarray) -> list:
    out = []
    for q in queries:
        for layers, docs, where in ((None, None, None), ([1], None, None), ([0, 3], None, None),
                                    (None, ["d3", "d7"], None), ([2], ["d2", "late"], None),
                                    (None, None, Cond("equals", "lang", "en")),
                                    ([0, 1], ["d3", "d4", "d5", "late"], Cond("notEquals", "lang", "de")),
                                    (None, None, AnyOf((Cond("in", "doc_id", ("late", "x", "a")),
                                                        Cond("startsWith", "lang", "f"))))):
            out.append([(h.node_id, round(h.score, 5))
                        for h in index.search(q, 15, layers=layers, doc_ids=docs, where=where)])
    return out


# --- appends instead of rewrites -------------------------------------------------------------

def test_small_flush_appends_o_change_bytes_and_keeps_the_snapshot(tmp_path):
    folder = tmp_path / "v"
    index = seeded(folder)
    snap = snapshot_stamps(folder)
    snapshot_bytes = (folder / INDEX_FILE).stat().st_size + (folder / IDMAP_FILE).stat().st_size
    assert not (folder / LOG_FILE).exists()

    index.upsert(["new0", "new1", "n5"], unit(3, 2), [meta(1, "late")] * 3)
    index.delete(["n6"])
    index.flush()
    first = log_size(folder)
    assert snapshot_stamps(folder) == snap  # the snapshot was not rewritten
    assert 0 < first < 3 * ROW + 400  # the header and one record of 3 vectors and a delete
    assert first < snapshot_bytes / 100

    index.upsert(["new2"], unit(1, 3), [meta(0, "late")])
    index.flush()
    assert snapshot_stamps(folder) == snap
    assert 0 < log_size(folder) - first < ROW + 150  # one vector's worth

    index.flush()  # nothing changed: nothing written
    assert snapshot_stamps(folder) == snap and log_size(folder) - first < ROW + 150


def test_reopen_replays_the_log_exactly(tmp_path):
    folder = tmp_path / "v"
    index = seeded(folder)
    snap = snapshot_stamps(folder)
    v = unit(12, 4)
    index.upsert(["a", "b", "c"], v[:3], [meta(1, "late"), meta(2, "late"), meta(5, "x")])
    index.flush()
    index.upsert(["n1", "n2"], v[3:5], [meta(2, "d2"), meta(0, "late")])  # replaced vectors and metas
    index.delete(["n3", "b", "n4"])
    index.flush()
    index.upsert(["b", "a", "a"], v[5:8], [meta(3, "d3")] * 3)  # a deleted id comes back; a batch duplicate
    index.delete(["c"])
    index.upsert(["c"], v[8:9], [meta(1, "d7")])
    index.flush()
    assert snapshot_stamps(folder) == snap and log_size(folder) > 0  # all three flushes went to the log

    again = FaissVectorIndex(folder, DIM)
    assert again.count() == index.count() == 2000 + 3 - 2
    assert state(again) == state(index)
    queries = unit(4, 5)
    assert searches(again, queries) == searches(index, queries)
    np.testing.assert_array_equal(again.get_vectors(["a"])["a"], v[7])
    assert again.meta("c") == meta(1, "d7")
    assert again.meta("n2") == meta(0, "late")  # a summary's row replaced by a leaf's: attrs from the log
    assert again.get_vectors(["n3", "n4"]) == {}
    again.upsert(["z"], v[9:10], [meta(0, "z")])  # int ids keep being assigned after a replay
    again.flush()
    third = FaissVectorIndex(folder, DIM)
    assert state(third) == state(again) and "z" in third.ids()


def test_reopen_replays_the_log_a_record_at_a_time_to_the_same_index(tmp_path, monkeypatch):
    """Opening replays the log in groups (vector_log.GROUP_BYTES): with a group per record,
    deletes, re-added ids and replaced metas across records reopen to the index the writer holds."""
    folder = tmp_path / "v"
    index = seeded(folder)
    v = unit(12, 6)
    index.upsert(["a", "b", "c"], v[:3], [meta(1, "late"), meta(2, "late"), meta(5, "x")])
    index.flush()
    index.delete(["b", "n4"])
    index.upsert(["n1"], v[3:4], [meta(2, "d2")])
    index.flush()
    index.upsert(["b", "a"], v[4:6], [meta(3, "d3")] * 2)  # a deleted id comes back, one replaced
    index.delete(["c"])
    index.flush()
    assert log_size(folder) > 0
    monkeypatch.setattr(vector_log, "GROUP_BYTES", 1)
    again = FaissVectorIndex(folder, DIM)
    assert state(again) == state(index) and again.count() == index.count()
    assert searches(again, unit(4, 7)) == searches(index, unit(4, 7))
    np.testing.assert_array_equal(again.get_vectors(["a"])["a"], v[5])
    assert again.meta("b") == meta(3, "d3") and again.get_vectors(["c", "n4"]) == {}


def test_a_torn_log_tail_is_ignored_and_cut_by_the_next_writer(tmp_path):
    folder = tmp_path / "v"
    index = seeded(folder, n=1000)
    index.upsert(["a"], unit(1, 6), [meta(0, "x")])
    index.flush()
    before = state(index)
    good = log_size(folder)
    index.upsert(["b", "c"], unit(2, 7), [meta(0, "x")] * 2)
    index.flush()
    full = (folder / LOG_FILE).read_bytes()
    assert len(full) > good
    for torn in (full[:good + 10], full[:len(full) - 1], full[:good] + b"\0" * (len(full) - good),
                 full[:-5] + bytes([full[-5] ^ 0xFF]) + full[-4:]):  # short frame, short body, zeros, bad CRC
        (folder / LOG_FILE).write_bytes(torn)
        assert state(FaissVectorIndex(folder, DIM)) == before

    writer = FaissVectorIndex(folder, DIM)
    writer.upsert(["d"], unit(1, 8), [meta(1, "y")])
    writer.flush()  # appends after the last intact record, not after the garbage
    reopened = FaissVectorIndex(folder, DIM)
    assert reopened.ids() == set(before) | {"d"}
    data = (folder / LOG_FILE).read_bytes()
    records, end = vector_log.decode_records(data, vector_log._HEADER_LEN, DIM)
    assert len(records) == 2 and end == len(data)  # the garbage was cut off, not left behind the record


# --- compaction ------------------------------------------------------------------------------

def test_compaction_triggers_and_preserves_the_content(tmp_path):
    folder = tmp_path / "v"
    index = seeded(folder, n=400)
    snap = snapshot_stamps(folder)
    snapshot_bytes = (folder / INDEX_FILE).stat().st_size + (folder / IDMAP_FILE).stat().st_size
    appended = 0
    for step in range(60):
        index.upsert([f"x{step}", f"n{step}"], unit(2, 100 + step), [meta(step % 3, f"s{step}")] * 2)
        index.delete([f"n{200 + step}"])
        index.flush()
        if snapshot_stamps(folder) != snap:
            break
        appended += 1
        assert log_size(folder) <= vector_log.COMPACT_FRACTION * snapshot_bytes
    else:
        pytest.fail("the log was never compacted")
    assert appended > 5  # several appends before the compaction
    assert not (folder / LOG_FILE).exists()  # the compaction removed the log
    assert sorted(p.name for p in folder.iterdir() if p.name != LOCK_FILE) == [INDEX_FILE, IDMAP_FILE]
    again = FaissVectorIndex(folder, DIM)
    assert state(again) == state(index)
    queries = unit(3, 9)
    assert searches(again, queries) == searches(index, queries)
    index.upsert(["after"], unit(1, 10), [meta(0, "x")])  # the log starts again for the new snapshot
    index.flush()
    assert log_size(folder) > 0
    assert state(FaissVectorIndex(folder, DIM)) == state(index)


# --- several writers -------------------------------------------------------------------------

def test_two_handles_writing_alternately_lose_nothing(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    seeded(folder, n=3000)
    snap = snapshot_stamps(folder)
    one, two = FaissVectorIndex(folder, DIM), FaissVectorIndex(folder, DIM)
    # each handle must catch up from the log alone (by offset), not by re-reading the snapshot
    for handle in (one, two):
        monkeypatch.setattr(handle, "_merge_from_disk", lambda: pytest.fail("re-read the snapshot"))
    expected: dict[str, tuple[bytes, dict]] = {}
    base = FaissVectorIndex(folder, DIM)
    expected.update(state(base))
    rng = np.random.default_rng(11)
    for step in range(40):
        handle, name = (one, "a") if step % 2 == 0 else (two, "b")
        new = [f"{name}{step}-{k}" for k in range(3)]  # both handles assign the same fresh int ids
        old = [f"n{int(i)}" for i in rng.integers(0, 3000, 2)]
        ids = new + old
        vecs = unit(len(ids), 1000 + step)
        metas = [meta(step % 4, f"{name}{step % 5}") for _ in ids]
        handle.upsert(ids, vecs, metas)
        gone = [f"{'b' if name == 'a' else 'a'}{step - 1}-0"] if step else []  # written by the other handle
        gone.append(f"n{int(rng.integers(0, 3000))}")
        handle.delete(gone)
        handle.flush()
        for s, v, m in zip(ids, vecs, metas):
            expected[s] = (v.tobytes(), m)
        for s in gone:
            expected.pop(s, None)
        assert state(handle) == expected, step
    assert snapshot_stamps(folder) == snap  # every flush appended
    final = FaissVectorIndex(folder, DIM)
    assert state(final) == expected
    assert final.count() == len(expected)
    queries = unit(3, 12)
    assert searches(final, queries) == searches(two, queries)


def test_handles_merge_across_a_compaction_by_another_writer(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    seeded(folder, n=500)
    one, two = FaissVectorIndex(folder, DIM), FaissVectorIndex(folder, DIM)
    one.upsert(["a"], unit(1, 13), [meta(0, "a")])
    one.flush()  # appended
    two.upsert(["b"], unit(1, 14), [meta(1, "b")])
    monkeypatch.setattr(vector_log, "COMPACT_FRACTION", 0.0)
    two.flush()  # catches up with one's record, then compacts
    monkeypatch.setattr(vector_log, "COMPACT_FRACTION", 0.25)
    assert not (folder / LOG_FILE).exists()
    one.upsert(["c"], unit(1, 15), [meta(2, "c")])
    one.delete(["b"])  # written by two, which compacted since
    one.flush()  # re-reads the new snapshot, then appends
    assert (folder / LOG_FILE).exists()
    final = FaissVectorIndex(folder, DIM)
    assert final.ids() == {f"n{i}" for i in range(500)} | {"a", "c"}
    assert state(final) == state(one)


# --- crashes between the steps of a compaction --------------------------------------------------

def _compacting_flush(index, monkeypatch):
    monkeypatch.setattr(vector_log, "COMPACT_FRACTION", 0.0)
    try:
        index.flush()
    finally:
        monkeypatch.setattr(vector_log, "COMPACT_FRACTION", 0.25)


def test_crash_before_the_id_map_of_a_compaction_leaves_the_old_snapshot_and_log(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    index = seeded(folder, n=300)
    index.upsert(["a"], unit(1, 16), [meta(0, "a")])
    index.flush()  # a log record
    real = vector_faiss_snapshot.atomic_write

    def crash_before_the_id_map(path, data, *args):
        if path.name == IDMAP_FILE:
            raise KeyboardInterrupt("crash")
        real(path, data, *args)

    monkeypatch.setattr(vector_faiss_snapshot, "atomic_write", crash_before_the_id_map)
    monkeypatch.setattr(vector_faiss.time, "sleep", lambda s: None)
    index.upsert(["b"], unit(1, 17), [meta(0, "b")])
    with pytest.raises(KeyboardInterrupt):
        _compacting_flush(index, monkeypatch)
    monkeypatch.undo()
    # the new index file waits under its own name; the old id map, its index and its log stand
    assert FaissVectorIndex(folder, DIM).ids() == {f"n{i}" for i in range(300)} | {"a"}


def test_crash_before_a_compaction_removes_the_log_is_recovered(tmp_path, monkeypatch):
    """The new snapshot holds everything; the old log names the old generation and must not be
    replayed over it (it would bring back "gone" and the old vector of "a")."""
    folder = tmp_path / "v"
    index = seeded(folder, n=300)
    old_a, new_a = unit(2, 18)
    index.upsert(["a", "gone"], np.stack([old_a, old_a]), [meta(0, "a")] * 2)
    index.flush()  # a log record
    stale_log = (folder / LOG_FILE).read_bytes()
    monkeypatch.setattr(index._log, "delete", lambda: (_ for _ in ()).throw(KeyboardInterrupt("crash")))
    index.upsert(["a"], new_a[None], [meta(3, "new")])
    index.delete(["gone"])
    with pytest.raises(KeyboardInterrupt):
        _compacting_flush(index, monkeypatch)
    assert (folder / LOG_FILE).read_bytes() == stale_log  # the crash left the old log

    reopened = FaissVectorIndex(folder, DIM)
    assert "gone" not in reopened.ids()
    np.testing.assert_array_equal(reopened.get_vectors(["a"])["a"], new_a)
    assert reopened.meta("a") == meta(3, "new")
    reopened.upsert(["c"], unit(1, 19), [meta(1, "c")])
    reopened.flush()  # replaces the stale log with one for the current snapshot
    assert (folder / LOG_FILE).read_bytes() != stale_log
    final = FaissVectorIndex(folder, DIM)
    assert state(final) == state(reopened)
    assert "gone" not in final.ids() and "c" in final.ids()


def test_a_log_of_an_older_snapshot_is_ignored(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    index = seeded(folder, n=300)
    index.upsert(["x"], unit(1, 20), [meta(0, "x")])
    index.flush()
    old_log = (folder / LOG_FILE).read_bytes()
    index.delete(["x"])
    _compacting_flush(index, monkeypatch)
    (folder / LOG_FILE).write_bytes(old_log)  # e.g. restored from an older copy of the folder
    assert "x" not in FaissVectorIndex(folder, DIM).ids()


def test_a_reader_racing_a_compaction_reads_again(tmp_path, monkeypatch):
    """A reader that finds the index file already replaced but the id map not yet retries."""
    folder = tmp_path / "v"
    index = seeded(folder, n=300)
    good_idmap = (folder / IDMAP_FILE).read_bytes()
    index.upsert(["a"], unit(1, 21), [meta(0, "a")])
    _compacting_flush(index, monkeypatch)
    new_idmap = (folder / IDMAP_FILE).read_bytes()
    (folder / IDMAP_FILE).write_bytes(good_idmap)  # the moment between the two renames
    sleeps = []

    def writer_finishes(seconds):
        sleeps.append(seconds)
        (folder / IDMAP_FILE).write_bytes(new_idmap)

    monkeypatch.setattr(vector_faiss.time, "sleep", writer_finishes)
    reader = FaissVectorIndex(folder, DIM)
    assert sleeps and "a" in reader.ids()


def test_a_format_1_snapshot_opens_and_is_compacted_on_the_next_flush(tmp_path):
    import json

    folder = tmp_path / "v"
    seeded(folder, n=200)
    data = json.loads((folder / IDMAP_FILE).read_text())
    data["format"] = 1
    del data["generation"]
    (folder / IDMAP_FILE).write_text(json.dumps(data))
    old = FaissVectorIndex(folder, DIM)
    assert old.count() == 200
    old.upsert(["a"], unit(1, 22), [meta(0, "a")])
    old.flush()
    assert json.loads((folder / IDMAP_FILE).read_text())["format"] == vector_faiss_snapshot.FORMAT
    assert not (folder / LOG_FILE).exists()
    assert FaissVectorIndex(folder, DIM).ids() == old.ids()


class Died(RuntimeError):
    """The process died here."""


def _die_on(monkeypatch, name: str, target: str) -> None:
    """Make ``vector_faiss_snapshot.<name>`` (atomic_write or os.replace) die when it writes ``target``."""
    if name == "atomic_write":
        real = vector_faiss_snapshot.atomic_write

        def fake(path, data, *a, **k):
            if path.name == target:
                raise Died(target)
            return real(path, data, *a, **k)
        monkeypatch.setattr(vector_faiss_snapshot, "atomic_write", fake)
    else:
        real_replace = vector_faiss_snapshot.os.replace

        def replace(src, dst):
            if str(src).endswith(target):
                raise Died(target)
            return real_replace(src, dst)
        monkeypatch.setattr(vector_faiss_snapshot.os, "replace", replace)


@pytest.mark.parametrize("first", [True, False], ids=["first-snapshot", "later-snapshot"])
def test_a_compaction_killed_before_its_id_map_leaves_the_old_snapshot(tmp_path, monkeypatch, first):
    folder = tmp_path / "v"
    if not first:
        old = seeded(folder, n=20)
        old.flush()
    index = FaissVectorIndex(folder, DIM)
    index.upsert([f"x{i}" for i in range(5000)], unit(5000, 9), [meta(0, "d")] * 5000)  # too big for the log
    _die_on(monkeypatch, "atomic_write", IDMAP_FILE)
    with pytest.raises(Died):
        index.flush()
    monkeypatch.undo()
    assert (folder / vector_faiss.NEXT_INDEX_FILE).exists()
    reopened = FaissVectorIndex(folder, DIM)  # opens: the old snapshot (or none), not an error
    assert reopened.ids() == (set() if first else {f"n{i}" for i in range(20)})
    reopened.upsert(["y"], unit(1, 3), [meta(0, "d")])
    reopened.flush()  # the next writer removes the file no id map names
    assert not (folder / vector_faiss.NEXT_INDEX_FILE).exists()
    assert "y" in FaissVectorIndex(folder, DIM).ids()


def test_a_compaction_killed_after_its_id_map_is_read_whole_and_finished_by_the_next_writer(tmp_path, monkeypatch):
    folder = tmp_path / "v"
    seeded(folder, n=20).flush()
    index = FaissVectorIndex(folder, DIM)
    index.upsert([f"x{i}" for i in range(5000)], unit(5000, 9), [meta(0, "d")] * 5000)
    _die_on(monkeypatch, "replace", vector_faiss.NEXT_INDEX_FILE)
    with pytest.raises(Died):
        index.flush()
    monkeypatch.undo()
    want = {f"n{i}" for i in range(20)} | {f"x{i}" for i in range(5000)}
    reopened = FaissVectorIndex(folder, DIM)  # the id map's index is found under the next name
    assert reopened.ids() == want
    reopened.upsert(["y"], unit(1, 3), [meta(0, "d")])
    reopened.flush()
    assert not (folder / vector_faiss.NEXT_INDEX_FILE).exists()
    assert FaissVectorIndex(folder, DIM).ids() == want | {"y"}


def test_the_id_map_is_read_an_entry_at_a_time_and_a_cut_one_is_corrupt(tmp_path, monkeypatch):
    """Opening parses the id map's entries as the id map takes them, a few bytes at a time here
    (ids and attributes split mid-character included), to the same index; an id map cut short
    or trailing something after its entries is corrupt, not half-read."""
    folder = tmp_path / "v"
    index = FaissVectorIndex(folder, DIM)
    ids = [f"née-{i}-∑" for i in range(40)]
    index.upsert(ids, unit(40, 3), [{"layer": i % 3, "doc_id": f"d{i}", "attrs": {"title": "Ærø ☃", "n": i}}
                                    for i in range(40)])
    index.flush()
    monkeypatch.setattr(vector_faiss_snapshot, "_IO_CHUNK", 7)
    again = FaissVectorIndex(folder, DIM)
    assert again.count() == 40 and again.get_vectors(ids).keys() == set(ids)
    assert again.meta(ids[5]) == index.meta(ids[5]) and again.meta(ids[5])["attrs"]["title"] == "Ærø ☃"
    assert [h.node_id for h in again.search(unit(40, 3)[7], 1, layers=[1])] == [ids[7]]
    whole = (folder / IDMAP_FILE).read_bytes()
    for bad in (whole[:-40], whole[:-1], whole + b"[]"):
        (folder / IDMAP_FILE).write_bytes(bad)
        with pytest.raises(vector_faiss.VectorIndexCorruptError):
            list(vector_faiss_snapshot.read(folder, DIM).entries)
