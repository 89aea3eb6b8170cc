"""The vector change log on its own, without FAISS: what one handle appends another reads and
replays into an index of its own (here a dict), a reader catching up gets only the new records,
a torn tail is ignored and cut off by the next append, a log of another snapshot is ignored and
replaced, and the compaction trigger follows ``COMPACT_FRACTION``."""

from __future__ import annotations

import numpy as np

from eragraph.adapters.local import vector_log
from eragraph.adapters.local.vector_log import LOG_FILE, ChangeLog, encode_record, entry, fold, new_generation

DIM = 4


class DictIndex:
    """The smallest index the log can be replayed into: id -> (int id, layer, doc, vector, attrs)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple] = {}
        self.next_id = 0

    def apply(self, records: list) -> None:
        net, next_id = fold(records)
        for s, value in net.items():
            if value is None:
                self.rows.pop(s, None)
            else:
                self.rows[s] = value
        self.next_id = max(self.next_id, next_id)


def record(next_id: int, deleted: list[str], rows: list[tuple], seed: int) -> tuple[bytes, np.ndarray]:
    vectors = np.random.default_rng(seed).standard_normal((len(rows), DIM)).astype(np.float32)
    return encode_record(next_id, deleted, [entry(*row) for row in rows], vectors), vectors


def test_appended_records_are_replayed_into_another_handles_index(tmp_path):
    generation = new_generation()
    writer = ChangeLog(tmp_path / LOG_FILE, DIM)
    first, v1 = record(2, [], [("a", 0, 0, "d", None), ("b", 1, 1, "d", '{"lang":"en"}')], 1)
    second, v2 = record(3, ["b"], [("a", 0, 2, "e", None), ("c", 2, 0, "d", None)], 2)
    writer.append(generation, first)
    writer.append(generation, second)

    index = DictIndex()
    index.apply(ChangeLog(tmp_path / LOG_FILE, DIM).read(generation))
    assert sorted(index.rows) == ["a", "c"] and index.next_id == 3
    i, layer, doc, vector, attrs = index.rows["a"]  # the later record wins
    assert (i, layer, doc, attrs) == (0, 2, "e", None)
    np.testing.assert_array_equal(vector, v2[0])
    decoded, _ = vector_log.decode_records((tmp_path / LOG_FILE).read_bytes(), vector_log._HEADER_LEN, DIM)
    assert decoded[0][2][1] == ["b", 1, 1, "d", {"lang": "en"}]  # attributes travel as JSON
    np.testing.assert_array_equal(decoded[0][3], v1)


def test_a_reader_catches_up_with_only_the_new_records(tmp_path):
    generation = new_generation()
    writer, reader = ChangeLog(tmp_path / LOG_FILE, DIM), ChangeLog(tmp_path / LOG_FILE, DIM)
    assert reader.read(generation) == [] and not reader.changed()
    writer.append(generation, record(1, [], [("a", 0, 0, "d", None)], 1)[0])
    assert reader.changed()
    assert [r[2][0][0] for r in reader.catch_up(generation)] == ["a"]
    assert not reader.changed() and reader.catch_up(generation) == []
    writer.append(generation, record(2, [], [("b", 1, 0, "d", None)], 2)[0])
    assert [r[2][0][0] for r in reader.catch_up(generation)] == ["b"]
    writer.delete()  # a compaction folded the log away
    assert reader.catch_up(generation) is None  # start over from the snapshot


def test_a_torn_tail_is_ignored_and_cut_off_by_the_next_append(tmp_path):
    generation = new_generation()
    path = tmp_path / LOG_FILE
    ChangeLog(path, DIM).append(generation, record(1, [], [("a", 0, 0, "d", None)], 1)[0])
    good = path.read_bytes()
    path.write_bytes(good + record(2, [], [("b", 1, 0, "d", None)], 2)[0][:-3])  # a crash mid-append
    writer = ChangeLog(path, DIM)
    assert len(writer.read(generation)) == 1 and writer.end == len(good)
    writer.append(generation, record(3, [], [("c", 2, 0, "d", None)], 3)[0])
    records, end = vector_log.decode_records(path.read_bytes(), vector_log._HEADER_LEN, DIM)
    assert [r[2][0][0] for r in records] == ["a", "c"] and end == len(path.read_bytes())


def test_a_log_of_another_snapshot_is_ignored_and_replaced(tmp_path):
    old, new = new_generation(), new_generation()
    path = tmp_path / LOG_FILE
    ChangeLog(path, DIM).append(old, record(1, [], [("a", 0, 0, "d", None)], 1)[0])
    log = ChangeLog(path, DIM)
    assert log.read(new) == [] and not log.live
    log.append(new, record(1, [], [("b", 0, 0, "d", None)], 2)[0])
    index = DictIndex()
    index.apply(ChangeLog(path, DIM).read(new))
    assert list(index.rows) == ["b"]


def test_the_compaction_trigger_follows_the_fraction(tmp_path, monkeypatch):
    log = ChangeLog(tmp_path / LOG_FILE, DIM)
    rec = record(1, [], [("a", 0, 0, "d", None)], 1)[0]
    size = vector_log._HEADER_LEN + len(rec)
    assert not log.too_long(rec, int(size / vector_log.COMPACT_FRACTION))
    assert log.too_long(rec, int(size / vector_log.COMPACT_FRACTION) - 4)
    monkeypatch.setattr(vector_log, "COMPACT_FRACTION", 0.0)
    assert log.too_long(rec, 10 ** 9)


def test_the_log_is_read_a_group_at_a_time_and_the_groups_replay_to_the_whole(tmp_path):
    """Opening holds a group or two of the log (about GROUP_BYTES each), not the whole file (up to a
    quarter of the index's vectors: about 290 MB at a million 256-d ones); the groups' net
    effects, applied in order, are the whole log's."""
    import tracemalloc

    dim, rows_per_record, records = 256, 2048, 12  # 2 MiB a record, 24 MiB of log
    generation = new_generation()
    log = ChangeLog(tmp_path / LOG_FILE, dim)
    rng = np.random.default_rng(0)
    for n in range(records):
        ids = [f"r{n}-{i}" if i % 3 else f"shared-{i}" for i in range(rows_per_record)]  # ids written again
        rows = [entry(s, n * rows_per_record + i, 0, "d", None) for i, s in enumerate(ids)]
        deleted = [f"r{n - 1}-1"] if n else []  # a delete of an id the record before added
        log.append(generation, encode_record((n + 1) * rows_per_record, deleted, rows,
                                             rng.standard_normal((rows_per_record, dim)).astype(np.float32)))
    whole, grouped = DictIndex(), DictIndex()
    whole.apply(ChangeLog(tmp_path / LOG_FILE, dim).read(generation))
    reader = ChangeLog(tmp_path / LOG_FILE, dim)
    groups = 0
    for group in reader.read_groups(generation, group_bytes=4 * 2**20):
        grouped.apply(group)
        groups += 1
    tracemalloc.start()  # what reading holds, the records dropped as an index that copies them would
    try:
        records_read = len(ChangeLog(tmp_path / LOG_FILE, dim).read(generation))
        _, whole_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for group in ChangeLog(tmp_path / LOG_FILE, dim).read_groups(generation, group_bytes=4 * 2**20):
            records_read += len(group)
        _, grouped_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert records_read == 2 * records
    assert groups == records // 2  # two 2 MiB records reach 4 MiB
    assert {s: (v[0], v[2]) for s, v in grouped.rows.items()} == {s: (v[0], v[2]) for s, v in whole.rows.items()}
    assert all(np.array_equal(grouped.rows[s][3], whole.rows[s][3]) for s in whole.rows)
    assert "r0-1" not in grouped.rows and grouped.next_id == whole.next_id == records * rows_per_record
    assert reader.end == (tmp_path / LOG_FILE).stat().st_size and reader.live  # read to its end
    assert whole_peak > 24 * 2**20  # the whole file at once
    # the group handed out and the one being read, with their rows parsed (measured 9.7 MiB)
    assert grouped_peak < 12 * 2**20, grouped_peak
