"""VectorIndex on FAISS, persisted in a folder beside the graph store: a snapshot plus an
append-only change log. Its parts, each in a module of its own:

* ``vector_faiss_snapshot``: the snapshot files (``vectors.faiss`` + ``vectors.json``), read on
  open and written by a compaction, and the recovery of a compaction that died midway;
* ``vector_log``: the change log (``vectors.log``) and its records, not tied to FAISS;
* ``vector_faiss_ivf``: the shape (exact below ``ivf_min`` vectors, IVF from it on, retrained as
  it grows) and the change from one shape to another;
* ``vector_faiss_search``: top-k search, and the selectors of a filtered search.

This module holds the index in memory and keeps it in step with the disk. String ids map to
int64 faiss ids; in memory nothing per vector is a Python object: the map, the documents and the
attributes (JSON text) are a handle-private SQLite table on disk (``id_map.IdMap``, a constant
page cache) and the layers a numpy column, so a writer's memory is the faiss index plus a
constant (plus four bytes per id).

The shape changes inside a writer's ``upsert``/``delete`` (or its ``flush``, when other writers'
records carried the index past a threshold), and the flush after a change of shape compacts, so
the snapshot readers open has the new shape; the change log is the same for both. A reader never
reshapes (training is a writer's cost).

Opening reads the snapshot and replays the log. ``flush()`` appends one record, so it costs what
the handle changed, not what the index holds; when the log would grow too long for the snapshot
(``ChangeLog.too_long``, or there is no snapshot yet), it compacts instead: it writes a new
snapshot with a new generation and deletes the log.

Several processes may write one index (two ``eragraph ingest`` runs on one store): ``flush()``
holds an inter-process lock (``filelock``, the file ``.writer.lock`` in the folder) and first
catches up with the disk. Records that other writers appended since this handle last read the log
(it keeps the log's inode and the offset it read up to) are replayed before this handle's own
changes: the net effect of its changes since its last flush (the ids it touched: their current
vectors and metas, read back from its index, or their absence) is taken aside, its own new ids
taken out, the records applied, and that net effect replayed on top. When another writer
compacted (the id map was replaced), the handle re-reads snapshot and log and replays its own
changes the same way. So no writer's vectors are lost. Readers take no lock: the snapshot is
replaced atomically, a record appears whole or not at all, and a reader that opened while a
compaction replaced the files (the id map changed during the read, or the index file did not
match it yet) reads them again.

A long-lived reader follows the writers (``refresh``, called by every read): it compares the id
map's stamp and the log's (inode, size) with what it last read (two ``stat`` calls), replays
only the log's new records, and re-reads the snapshot only after a compaction.
"""

from __future__ import annotations

import json
import threading
from array import array
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from ...domain.filters import Filter
from ...domain.ranking import below_floor, rank_key, top_hits
from ...ports.records import Hit
from . import vector_faiss_ivf as ivf
from . import vector_faiss_snapshot as snapshot
from .files import file_stamp, writer_lock
from .id_map import IdMap
from .vector_faiss_search import NO_LAYER, Selectors, top_pairs, top_pairs_many
from .vector_faiss_snapshot import IDMAP_FILE, INDEX_FILE, NEXT_INDEX_FILE
from .vector_log import (LOG_FILE, ChangeLog, Net, Record, VectorIndexCorruptError, attrs_json, encode_record, entry,
                         fold, row_attrs)

__all__ = ["FaissVectorIndex", "VectorIndexCorruptError", "INDEX_FILE", "NEXT_INDEX_FILE", "IDMAP_FILE",
           "LOG_FILE", "LOCK_FILE"]

LOCK_FILE = ".writer.lock"
_LOAD_ATTEMPTS = 4

OwnNet = tuple[list[str], list[str], np.ndarray, list[dict]]


class FaissVectorIndex:
    """Top-k inner product over normalized vectors, with layer/doc filters: exact below
    ``ivf_min`` vectors, IVF from it on (see ``vector_faiss_ivf``)."""

    def __init__(self, directory: Path | str, dim: int, *, ivf_min: int | None = None,
                 nprobe_fraction: float | None = None) -> None:
        ivf_min = ivf.IVF_MIN if ivf_min is None else ivf_min
        nprobe_fraction = ivf.NPROBE_FRACTION if nprobe_fraction is None else nprobe_fraction
        if int(dim) < 1:
            raise ValueError("dim must be positive")
        if ivf_min < 1 or not 0 < nprobe_fraction <= 1:
            raise ValueError("ivf_min must be positive and nprobe_fraction in (0, 1]")
        self.directory = Path(directory)
        self.dim = int(dim)
        self.ivf_min = int(ivf_min)
        self.nprobe_fraction = float(nprobe_fraction)
        self._lock = threading.RLock()
        ivf.fixed_mmap_threshold()  # the lists' buffers leave no holes behind as they grow
        # the ids this handle upserted or deleted since it last synced with disk, in first-touch
        # order: their net effect (their current vector and meta, or their absence) is what a
        # flush writes and what is replayed over other writers' records
        self._touched: dict[str, None] = {}
        self._reshaped = False  # the shape changed since this handle's last compaction
        self._ids: IdMap | None = None
        self._log = ChangeLog(self.directory / LOG_FILE, self.dim)
        self._selectors = Selectors()
        self._reset()
        self._load()

    def _reset(self) -> None:
        self._index = ivf.flat(self.dim)
        if self._ids is not None:
            self._ids.close()
        self._ids = IdMap()  # string id <-> int id, and each id's doc_id: on disk, not in dicts
        # each int id's layer, one int32 per id ever assigned (NO_LAYER: none): what a layer
        # filter's bitmap is computed from, without a Python container per vector
        self._layer_of = np.full(0, NO_LAYER, dtype=np.int32)
        self._next_id = 0
        self._synced_next_id = 0  # next_id when this handle last synced: its own new ids are above
        self._dirty = False
        self._selectors.clear()
        # what this handle last read or wrote on disk
        self._snap_stamp = None  # file_stamp of the id map
        self._generation: str | None = None  # the snapshot's generation (None: no snapshot, or format 1)
        self._snap_bytes = 0  # size of the two snapshot files
        self._log.reset()

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        """Read the snapshot and replay the log (no lock): retried when a writer's compaction
        replaced the files during the read."""
        idmap_path = self.directory / IDMAP_FILE
        for attempt in range(_LOAD_ATTEMPTS):
            self._reset()
            stamp = file_stamp(idmap_path)
            try:
                self._read_snapshot()
                # none when it names another snapshot; a group at a time (the log can be a
                # quarter of the index): the groups' net effects in order are the whole log's
                for records in self._log.read_groups(self._generation):
                    self._apply(*fold(records))
            except VectorIndexCorruptError:
                if attempt == _LOAD_ATTEMPTS - 1:
                    raise
                time.sleep(0.02 * 2 ** attempt)  # a compaction may be between its two renames
                continue
            self._snap_stamp = stamp
            self._synced_next_id = self._next_id
            if file_stamp(idmap_path) == stamp:
                return
        # the id map kept changing: keep the last consistent read; the stamp taken before it
        # differs from the disk, so the next flush re-reads the files under the writer lock

    def _read_snapshot(self) -> None:
        snap = snapshot.read(self.directory, self.dim)
        if snap is None:
            return
        self._index = snap.index
        entries, snap.entries = snap.entries, None
        ints, layers = array("q"), array("i")  # taken as the entries pass: they are read once

        def rows():
            for e in entries:
                ints.append(int(e[1]))
                layers.append(int(e[2]))
                yield e[0], int(e[1]), str(e[3]), row_attrs(e)

        try:
            self._ids.load(rows())
        except ValueError as exc:
            raise VectorIndexCorruptError(f"{self.directory / IDMAP_FILE}: {exc}") from None
        finally:
            close = getattr(entries, "close", None)  # the id map file, when the load stopped early
            if close is not None:
                close()
        self._set_layers(np.frombuffer(ints, dtype=np.int64), np.frombuffer(layers, dtype=np.int32))
        del ints, layers
        self._next_id = snap.next_id
        if self._index.ntotal != len(self._ids):
            raise VectorIndexCorruptError(f"{self.directory}: {self._index.ntotal} vectors but "
                                          f"{len(self._ids)} ids")
        self._generation = snap.generation
        self._snap_bytes = snap.nbytes

    def _disk_changed(self) -> bool:
        """Whether another writer compacted or appended since this handle last synced."""
        if file_stamp(self.directory / IDMAP_FILE) != self._snap_stamp:
            return True
        return self._log.changed()

    def refresh(self) -> bool:
        """A reader's catch-up with other processes (``eragraph serve`` beside ``eragraph ingest``):
        two ``stat`` calls when nothing changed; otherwise the log's new records are replayed (what
        the writers changed, not the index), or, after a writer's compaction, the new snapshot is
        read. A handle holding unflushed changes of its own leaves them to its next flush. Every
        read (``search``, ``count``, ``get_vectors``, ``meta``, ``ids``) calls it, so a reader sees
        each record committed before the read began. True when something was read."""
        with self._lock:
            if self._touched or self._dirty or not self._disk_changed():
                return False
            self._sync()  # no writer lock: a record appears whole or not at all (its CRC)
            self._synced_next_id = self._next_id  # ids above it are this handle's own again
            return True

    def flush(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            with writer_lock(self.directory / LOCK_FILE):
                snapshot.finish_compaction(self.directory)
                self._sync()
                self._maybe_reshape()  # what another writer flushed may carry the index past a threshold
                record = None
                if self._generation is not None and not self._reshaped:  # a new shape: a new snapshot
                    record = self._own_record()
                    if self._log.too_long(record, self._snap_bytes):
                        record = None
                if record is None:
                    self._compact()
                else:
                    self._log.append(self._generation, record)
                self._synced_next_id = self._next_id
            self._dirty = False
            self._touched.clear()

    def close(self) -> None:
        """Flush what is unflushed, then release the index and the id map (their memory, and
        the id map's temporary file). The handle is not used again."""
        with self._lock:
            self.flush()
            self._index = ivf.flat(self.dim)
            self._layer_of = np.full(0, NO_LAYER, dtype=np.int32)
            self._selectors.clear()
            self._ids.close()

    def _sync(self) -> None:
        """Under the writer lock: bring in what other writers flushed since this handle last
        read or wrote the files, then this handle's own changes on top."""
        if file_stamp(self.directory / IDMAP_FILE) != self._snap_stamp:
            self._merge_from_disk()  # another writer compacted: a new snapshot
            return
        records = self._log.catch_up(self._generation)
        if records is None:
            self._merge_from_disk()  # the log vanished or was replaced under the same snapshot
        elif records:
            self._replay_over(records)

    def _replay_over(self, records: list[Record]) -> None:
        """Other writers' records go before this handle's unflushed changes: take out the ids
        this handle added (its int ids may collide with theirs), apply the records, replay."""
        own = self._own_net()
        self._delete(self._ids.strs_between(self._synced_next_id, self._next_id))
        self._next_id = self._synced_next_id
        self._apply(*fold(records))
        self._replay_own(own)

    def _merge_from_disk(self) -> None:
        """Another writer replaced the files: read them and replay this handle's changes."""
        own = self._own_net()
        self._load()
        self._replay_own(own)

    def _own_net(self) -> OwnNet:
        """The net effect of this handle's unflushed changes: the touched ids it holds, the ones
        it does not (deleted), the held ones' vectors and metas (with their int ids; ``attrs``
        as the map's JSON text, which ``_upsert`` takes as it is)."""
        touched = list(self._touched)
        rows = self._ids.rows_of(touched)
        present = [s for s in touched if s in rows]
        ints = np.asarray([rows[s][0] for s in present], dtype=np.int64)
        if len(ints):
            vectors = self._index.reconstruct_batch(ints)
        else:
            vectors = np.zeros((0, self.dim), dtype=np.float32)
        metas = [{"layer": int(self._layer_of[i]), "doc_id": rows[s][1], "int_id": i, "attrs_json": rows[s][2]}
                 for s, i in zip(present, ints.tolist())]
        return present, [s for s in touched if s not in rows], vectors, metas

    def _replay_own(self, own: OwnNet) -> None:
        present, deleted, vectors, metas = own
        self._delete(deleted)
        if present:
            self._upsert(present, vectors, metas)

    def _apply(self, net: Net, next_id: int) -> None:
        """Apply folded log records (ids, int ids and vectors as their writer assigned them)."""
        held = self._ids.ints(list(net))
        remove = list(held.values())
        kept = {s for s, i in held.items() if net[s] is not None and net[s][0] == i}  # same int id
        self._clear_layers(self._ids.remove([s for s in held if s not in kept]))
        adds = [(s, value) for s, value in net.items() if value is not None]
        holders = self._ids.strs(value[0] for _, value in adds)
        for s, (i, *_) in adds:
            holder = holders.get(i)
            if holder is not None and holder != s:
                raise VectorIndexCorruptError(f"{self.directory}: the log gives int id {i} to "
                                              f"{s!r}, which {holder!r} holds")
        self._remove_int(remove)
        if adds:
            add_ids = np.asarray([value[0] for _, value in adds], dtype=np.int64)
            self._ids.add([(s, i, doc_id, attrs) for s, (i, _, doc_id, _, attrs) in adds if s not in kept])
            self._ids.set_meta([(i, doc_id, attrs) for s, (i, _, doc_id, _, attrs) in adds if s in kept])
            self._set_layers(add_ids, np.asarray([value[1] for _, value in adds], dtype=np.int32))
            ivf.add(self._index, np.vstack([value[3] for _, value in adds]).astype(np.float32), add_ids)
            next_id = max(next_id, int(add_ids.max()) + 1)
        self._next_id = max(self._next_id, next_id)
        self._selectors.clear()

    def _own_record(self) -> bytes:
        """One log record: the net effect of this handle's changes (current vector and meta of
        each id it wrote and still holds; the ids it deleted)."""
        present, deleted, vectors, metas = self._own_net()
        upserts = [entry(s, m["int_id"], m["layer"], m["doc_id"], m["attrs_json"]) for s, m in zip(present, metas)]
        return encode_record(self._next_id, deleted, upserts, vectors)

    def _compact(self) -> None:
        """Write a new snapshot (new generation) holding everything, then delete the log. A
        crash before the id map: the old snapshot stands; after it: the old log names the old
        generation, so it is ignored (``vector_faiss_snapshot.write``)."""
        generation, nbytes = snapshot.write(self.directory, self.dim, self._index, self._ids, self._layer_of,
                                            self._next_id)
        self._log.delete()
        self._reshaped = False
        self._generation = generation
        self._snap_stamp = file_stamp(self.directory / IDMAP_FILE)
        self._snap_bytes = nbytes

    # ------------------------------------------------------------------ writes
    def _set_layers(self, ints: np.ndarray, layers: np.ndarray) -> None:
        ints = np.asarray(ints, dtype=np.int64)
        if not len(ints):
            return
        top = int(ints.max())
        if top >= len(self._layer_of):  # grown by doubling: amortized O(1) per id
            grown = np.full(max(top + 1, 2 * len(self._layer_of), 1024), NO_LAYER, dtype=np.int32)
            grown[:len(self._layer_of)] = self._layer_of
            self._layer_of = grown
        self._layer_of[ints] = layers

    def _clear_layers(self, ints: list[int]) -> None:
        if ints:
            self._layer_of[np.asarray(ints, dtype=np.int64)] = NO_LAYER

    def _changed(self) -> None:
        self._dirty = True
        self._selectors.clear()

    def _remove_int(self, int_ids: list[int]) -> None:
        if not int_ids:
            return
        arr = np.ascontiguousarray(int_ids, dtype=np.int64)
        if ivf.is_ivf(self._index):  # the hash-table direct map finds each row: O(change), not O(index)
            self._index.remove_ids(faiss.IDSelectorArray(len(arr), faiss.swig_ptr(arr)))
        else:
            self._index.remove_ids(arr)

    def shape(self) -> dict[str, Any]:
        """The index's current shape: ``{"kind": "flat"}`` or ``{"kind": "ivf", "nlist", "nprobe"}``."""
        with self._lock:
            if not ivf.is_ivf(self._index):
                return {"kind": "flat"}
            return {"kind": "ivf", "nlist": int(self._index.nlist),
                    "nprobe": ivf.nprobe(self._index, self.nprobe_fraction)}

    def _maybe_reshape(self) -> None:
        """Change the shape when the size calls for it (``vector_faiss_ivf.needs_reshape``)."""
        if not ivf.needs_reshape(self._index, self.ivf_min):
            return
        n = int(self._index.ntotal)
        ints = self._ids.all_ints()
        self.directory.mkdir(parents=True, exist_ok=True)
        with ivf.spill(self._index, ints, self.directory) as spilled:
            # the old index is freed before the new one is filled, so a change of shape never
            # holds two indexes (or a copy of the vectors)
            self._index = None
            try:
                self._index = ivf.new_shape(n, ints, spilled, self.dim, self.ivf_min)
            except BaseException:
                self._index = ivf.filled(ivf.flat(self.dim), ints, spilled, self.dim)
                raise
        ivf.release_freed()
        self._selectors.clear()
        self._reshaped = True  # the next flush writes a snapshot of this shape, so readers open it

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(ids) != len(vectors) or len(ids) != len(metas):
            raise ValueError("ids, vectors and metas must have the same length")
        if not len(ids):
            return
        vectors = vectors.reshape(len(ids), -1)
        if vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have {vectors.shape[1]} dimensions, the index {self.dim}")
        ids = list(ids)
        metas = [dict(m) for m in metas]
        with self._lock:
            self._upsert(ids, vectors, metas)
            self._touched.update(dict.fromkeys(ids))
            self._maybe_reshape()

    def _upsert(self, ids: list[str], vectors: np.ndarray, metas: list[dict]) -> None:
        # a later duplicate in the batch wins, as in the memory adapter
        last = {s: n for n, s in enumerate(ids)}
        order = sorted(last.values())
        held = self._ids.ints([ids[n] for n in order])
        self._remove_int(list(held.values()))
        new, kept, int_ids = [], [], []
        for n in order:
            s, doc_id = ids[n], str(metas[n].get("doc_id", ""))
            attrs = metas[n]["attrs_json"] if "attrs_json" in metas[n] else attrs_json(metas[n])
            i = held.get(s)
            if i is None:
                i = self._next_id
                self._next_id += 1
                new.append((s, i, doc_id, attrs))
            else:
                kept.append((i, doc_id, attrs))  # an upsert replaces the attributes too
            int_ids.append(i)
        ints = np.asarray(int_ids, dtype=np.int64)
        self._ids.add(new)
        self._ids.set_meta(kept)
        self._set_layers(ints, np.asarray([int(metas[n].get("layer", -1)) for n in order], dtype=np.int32))
        ivf.add(self._index, np.ascontiguousarray(vectors[order]), ints)
        self._changed()

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(dict.fromkeys(ids))
        with self._lock:
            if self._delete(ids):
                self._touched.update(dict.fromkeys(ids))
                self._maybe_reshape()
            elif ids and self._disk_changed():
                # another writer may have added them since this handle read the files
                self._touched.update(dict.fromkeys(ids))
                self._dirty = True

    def _delete(self, ids: list[str]) -> bool:
        gone = self._ids.remove(ids)
        if not gone:
            return False
        self._remove_int(gone)
        self._clear_layers(gone)
        self._changed()
        return True

    # ------------------------------------------------------------------ reads
    def search(self, vector: np.ndarray, k: int, layers: Sequence[int] | None = None,
               doc_ids: Sequence[str] | None = None, where: Filter | None = None) -> list[Hit]:
        if k <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.dim:
            raise ValueError(f"query has {q.shape[1]} dimensions, the index {self.dim}")
        with self._lock:
            self.refresh()
            if layers is None and doc_ids is None and where is None:
                allowed = (self._index.ntotal, None, None)
            else:
                allowed = self._selectors.get(layers, doc_ids, where, self._ids, self._layer_of, self._index.ntotal)
            if allowed[0] == 0:
                return []
            return self._hits(top_pairs(self._index, q, k, allowed, self.nprobe_fraction), k)

    def search_many(self, vectors: np.ndarray, k: int, layers: Sequence[int] | None = None,
                    min_score: float | None = None) -> list[list[Hit]]:
        """One FAISS search for all the rows (vector_faiss_search.top_pairs_many) and one
        lookup of the names of all their neighbours."""
        if not len(vectors):
            return []
        qs = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if qs.shape[1] != self.dim:
            raise ValueError(f"queries have {qs.shape[1]} dimensions, the index {self.dim}")
        if k <= 0:
            return [[] for _ in range(len(qs))]
        with self._lock:
            self.refresh()
            if layers is None:
                allowed = (self._index.ntotal, None, None)
            else:
                allowed = self._selectors.get(layers, None, None, self._ids, self._layer_of, self._index.ntotal)
            if allowed[0] == 0:
                return [[] for _ in range(len(qs))]
            rows = top_pairs_many(self._index, qs, k, allowed, self.nprobe_fraction, min_score)
            # only the names of neighbours that can pass the floor are looked up
            rows = [[p for p in pairs if not below_floor(p[0], min_score)] for pairs in rows]
            names = self._ids.strs({i for pairs in rows for _, i in pairs})
        return [top_hits([Hit(names[i], s) for s, i in pairs], k, min_score) for pairs in rows]

    def _hits(self, pairs: list[tuple[float, int]], k: int) -> list[Hit]:
        """The top k of (score, int id) pairs as hits, ties ordered by id."""
        names = self._ids.strs(i for _, i in pairs)
        hits = [Hit(names[i], s) for s, i in pairs]
        hits.sort(key=rank_key)
        return hits[:k]

    def ids(self) -> set[str]:
        with self._lock:
            self.refresh()
            return self._ids.all_strs()

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            self.refresh()
            held = self._ids.ints(list(dict.fromkeys(ids)))
            present = [s for s in dict.fromkeys(ids) if s in held]
            if not present:
                return {}
            keys = np.asarray([held[s] for s in present], dtype=np.int64)
            rows = self._index.reconstruct_batch(keys)
        return {s: np.array(row, dtype=np.float32) for s, row in zip(present, rows)}

    def count(self) -> int:
        with self._lock:
            self.refresh()
            return int(self._index.ntotal)

    def meta(self, node_id: str) -> dict[str, Any] | None:
        """The ``layer``/``doc_id`` (and ``attrs``, when it has any) recorded for ``node_id``
        (None when absent)."""
        with self._lock:
            self.refresh()
            row = self._ids.rows_of([node_id]).get(node_id)
            if row is None:
                return None
            out: dict[str, Any] = {"layer": int(self._layer_of[row[0]]), "doc_id": row[1]}
            if row[2] is not None:
                out["attrs"] = json.loads(row[2])
            return out
