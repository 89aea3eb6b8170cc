"""VectorIndex on FAISS, persisted in a folder beside the graph store.

Two shapes, chosen by size (``ivf_min``, default ``IVF_MIN`` vectors):

* below it, exact inner-product search (``IndexIDMap2(IndexFlatIP(dim))``): brute force is both
  exact and fast (a 20k x 384 top-20 takes about a millisecond), but ``remove_ids`` moves the
  whole array and a query reads every vector, so neither scales to a million;
* from it on, ``IndexIVFFlat``: the vectors bucketed under ``nlist = 4 sqrt(n)`` k-means
  centroids (trained on a sample of the index itself), a query scanning the ``nprobe`` nearest
  buckets exactly (``nprobe`` is ``nprobe_fraction`` of the buckets, measured to keep recall@10
  at 0.98 of exact on hard data: BENCHMARKS.md), and a hash-table direct map, so a delete takes
  the row out of its bucket in O(1) instead of moving the array. A filtered search scans
  proportionally more buckets (nprobe divided by the share of vectors the filter allows, so it
  sees as many allowed vectors as an unfiltered one), and a filter allowing at most
  ``EXACT_MAX`` vectors is answered exactly from their stored vectors. The centroids are
  retrained when the index has grown fourfold since they were trained, and the index turns flat
  again below a quarter of ``ivf_min``.

The shape changes inside a writer's ``upsert``/``delete`` (or its ``flush``, when other writers'
records carried the index past a threshold), and the flush after a change of shape compacts, so
the snapshot readers open has the new shape; the change log is the same for both. A reader never
reshapes (training is a writer's cost).

String ids map to int64 faiss ids; on disk the map and each vector's ``layer``/``doc_id`` (and
a leaf chunk's ``attrs``, what a ``where`` filter selects on) live in ``vectors.json`` next to
``vectors.faiss``. In memory nothing per vector is a Python object: the map, the documents and
the attributes (JSON text) are a handle-private SQLite table on disk (``id_map.IdMap``, a
constant page cache) and the layers a numpy column, so a writer's memory is the faiss index plus
a constant (plus four bytes per id). Filtered searches pass a selector of the allowed ids to
faiss (a bitmap over the layer column for layers, an ``IDSelectorBatch`` for documents, a bitmap
of the ids whose attributes match for ``where``: the filter compiled to SQL over the map's
attrs column by ``filter_sql``), so they return the true top-k of the filtered set (not a
post-filtered top-k). Selectors are cached per filter and dropped whenever the index changes.
The snapshot's files are hashed, read and written in pieces, never held whole in memory, and a
change of shape copies the vectors a batch at a time.

On disk the index is a snapshot plus an append-only change log:

* ``vectors.faiss`` + ``vectors.json``, the snapshot, are written atomically (temporary file,
  fsync, ``os.replace``); the id map records the SHA-256 of the index file it belongs to (so
  files that do not belong together are detected on open instead of silently pairing vectors
  with the wrong ids) and a random ``generation`` naming this snapshot. A compaction writes the
  new index as ``vectors.next.faiss``, then the id map (the commit point), then renames the
  index over ``vectors.faiss``: a process killed anywhere in between leaves either the old
  snapshot whole or the new id map with its index under the next name, which readers use and
  the next writer renames.
* ``vectors.log`` starts with the generation of the snapshot it applies to, then holds one
  record per ``flush()``: the net effect of that handle's upserts and deletes since its previous
  flush (string id, int id, layer, doc_id, attrs and vector of each id it wrote; the ids it
  deleted). A row without attrs (a summary's, or any row an older version wrote) has none.
  Each record is framed by a magic, its length and a CRC-32 and is fsynced; a torn last record
  (a crash mid-append, or a reader racing a writer) fails the check and is ignored, and the next
  writer cuts it off before appending. A log naming another generation (a crash after a
  compaction replaced the snapshot but before it removed the log) is ignored and later replaced.

Opening reads the snapshot and replays the log. ``flush()`` appends one record, so it costs what
the handle changed, not what the index holds; when the log would exceed ``COMPACT_FRACTION`` of
the snapshot's bytes (or there is no snapshot yet), it compacts instead: it writes a new snapshot
with a new generation and removes the log, so the amortized cost stays proportional to the change.

Several processes may write one index (two ``eragraph ingest`` runs on one store): ``flush()``
holds an inter-process lock (``filelock``, the file ``.writer.lock`` in the folder) and first
catches up with the disk. Records that other writers appended since this handle last read the log
(it keeps the log's inode and the offset it read up to) are replayed before this handle's own
changes: the net effect of its changes since its last flush (the ids it touched: their current
vectors and metas, read back from its index, or their absence) is taken aside, its own new ids
taken out, the records applied, and that net effect replayed on top. When another writer
compacted (the id map was replaced), the handle re-reads snapshot and log and replays its own
changes the same way. So no writer's vectors are lost. Readers take no lock: the snapshot is replaced atomically, a record appears
whole or not at all, and a reader that opened while a compaction replaced the files (the id map
changed during the read, or the index file did not match it yet) reads them again.

A long-lived reader follows the writers (``refresh``, called by every read): it compares the id
map's stamp and the log's (inode, size) with what it last read (two ``stat`` calls), replays
only the log's new records, and re-reads the snapshot only after a compaction.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from ...domain.filters import Filter, cache_key
from ...domain.model import EragraphError
from ...domain.ranking import rank_key, rank_score
from ...ports.records import Hit
from .files import atomic_write, file_stamp, writer_lock
from .id_map import IdMap

INDEX_FILE = "vectors.faiss"
NEXT_INDEX_FILE = "vectors.next.faiss"  # a compaction's new index file until its id map is written
IDMAP_FILE = "vectors.json"
LOG_FILE = "vectors.log"
LOCK_FILE = ".writer.lock"
FORMAT = 2  # 1: no change log (no generation in the id map); still read, and compacted on the next flush
COMPACT_FRACTION = 0.25  # compact when the log would exceed this fraction of the snapshot's bytes
_TIE_PAD = 8  # extra neighbours fetched so ties at the k-th score are ordered by id, as in memory
IVF_MIN = 100_000  # from this many vectors on, an IVF index (a flat scan of 100k takes about 12-18 ms)
NPROBE_FRACTION = 0.08  # of the IVF buckets a query scans
TRAIN_PER_LIST = 64  # training sample per bucket (capped at the index's size)
_NO_LAYER = np.iinfo(np.int32).min
_RESHAPE_BATCH = 65536  # vectors copied at a time when the index changes shape
EXACT_MAX = 4096  # a filter allowing at most this many vectors is answered from their vectors, exactly

_LOG_MAGIC = b"EGVLOG01"
_GEN_LEN = 32  # secrets.token_hex(16)
_HEADER_LEN = len(_LOG_MAGIC) + _GEN_LEN
_REC_MAGIC = b"EGVR"
_FRAME = struct.Struct("<4sQI")  # magic, payload length, CRC-32 of magic + length + payload
_LOAD_ATTEMPTS = 4
_IO_CHUNK = 1 << 22  # files are hashed, read and written in pieces of this size, never whole


def _sha256_of(fh) -> str:
    digest = hashlib.sha256()
    for piece in iter(lambda: fh.read(_IO_CHUNK), b""):
        digest.update(piece)
    return digest.hexdigest()


def _matching(idmap: dict, index_path: Path, next_path: Path) -> tuple[Any, int] | None:
    """(the index, its file's size) of the index file the id map names: the current one, or
    the one a compaction wrote beside it and had not yet renamed when it died (or is renaming
    now). Read from the same open file that was hashed (a rename cannot swap it in between),
    in pieces: no copy of the whole file in memory."""
    for path in (index_path, next_path):
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            continue
        with fh:
            if _sha256_of(fh) != idmap["index_sha256"]:
                continue
            size = fh.tell()
            fh.seek(0)
            return faiss.read_index(faiss.PyCallbackIOReader(fh.read, _IO_CHUNK)), size
    return None


def _index_writer(index: Any, digest: Any):
    """A writer for ``atomic_write`` that streams ``index`` into the file and ``digest``."""
    def write(fh) -> None:
        def piece(data: bytes) -> int:
            digest.update(data)
            fh.write(data)
            return len(data)
        faiss.write_index(index, faiss.PyCallbackIOWriter(piece, _IO_CHUNK))
    return write


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _attrs_json(meta: Mapping[str, Any]) -> str | None:
    """A meta's ``attrs`` as the JSON text the id map keeps (None: no attributes)."""
    attrs = meta.get("attrs")
    return None if attrs is None else _dumps(attrs)


def _entry(s: str, i: int, layer: int, doc: str, attrs: str | None) -> str:
    """One id map entry or log upsert row: ``[id, int id, layer, doc_id]``, plus the attributes'
    object when there are any (their stored JSON text, spliced in as it is)."""
    head = _dumps([s, i, layer, doc])
    return head if attrs is None else head[:-1] + "," + attrs + "]"


def _row_attrs(row: Sequence) -> str | None:
    """The attributes' JSON text of a decoded entry or log row (absent in rows written before)."""
    return _dumps(row[4]) if len(row) > 4 and row[4] is not None else None


def _idmap_writer(header: dict, ids: IdMap, layer_of: np.ndarray):
    """A writer for ``atomic_write`` of the id map: the header's fields, then ``entries`` (each
    ``[id, int id, layer, doc_id(, attrs)]``, by id), streamed a batch at a time from the map."""
    def write(fh) -> None:
        head = _dumps(header)
        fh.write(head[:-1].encode("utf-8") + b',"entries":[')
        first = True
        for batch in ids.rows():
            text = ",".join(_entry(s, i, int(layer_of[i]), d, a) for s, i, d, a in batch)
            fh.write((text if first else "," + text).encode("utf-8"))
            first = False
        fh.write(b"]}")
    return write


class VectorIndexCorruptError(EragraphError):
    """The files on disk do not belong together (e.g. a crash between the two renames)."""


def _log_header(generation: str) -> bytes:
    return _LOG_MAGIC + generation.encode("ascii")


def _encode_record(next_id: int, deleted: list[str], upserts: list[str], vectors: np.ndarray) -> bytes:
    """One framed log record; ``upserts`` are the rows' JSON (``_entry``)."""
    meta = (_dumps({"next_id": next_id, "delete": deleted})[:-1] + ',"upsert":[' + ",".join(upserts)
            + "]}").encode("utf-8")
    meta += b" " * (-(4 + len(meta)) % 4)  # the vectors start 4-byte aligned
    payload = struct.pack("<I", len(meta)) + meta + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    head = _REC_MAGIC + struct.pack("<Q", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + struct.pack("<I", crc) + payload


def _decode_records(data: bytes | memoryview, pos: int, dim: int) -> tuple[list[tuple], int]:
    """The complete, intact records of ``data`` from ``pos`` on, and the offset after the last
    one; parsing stops at the first frame that is short or fails its check (a torn tail)."""
    records = []
    view = memoryview(data)
    while len(view) - pos >= _FRAME.size:
        magic, length, crc = _FRAME.unpack_from(view, pos)
        body = pos + _FRAME.size
        if magic != _REC_MAGIC or len(view) - body < length:
            break
        payload = view[body:body + length]
        if zlib.crc32(payload, zlib.crc32(view[pos:pos + 12])) != crc:
            break
        (meta_len,) = struct.unpack_from("<I", payload, 0)
        meta = json.loads(bytes(payload[4:4 + meta_len]))
        upserts = meta["upsert"]
        vectors = np.frombuffer(payload, dtype="<f4", offset=4 + meta_len)
        if vectors.size != len(upserts) * dim:
            raise VectorIndexCorruptError(f"a log record holds {vectors.size} floats for "
                                          f"{len(upserts)} {dim}-d vectors")
        records.append((int(meta["next_id"]), meta["delete"], upserts, vectors.reshape(len(upserts), dim)))
        pos = body + length
    return records, pos


def _fold(records: list[tuple]) -> tuple[dict[str, tuple | None], int]:
    """The net effect of records applied in order: id -> (int id, layer, doc_id, vector, attrs
    JSON) or None (deleted), and the highest next_id they name."""
    net: dict[str, tuple | None] = {}
    next_id = 0
    for rec_next, deleted, upserts, vectors in records:
        for s in deleted:
            net[s] = None
        for row, entry in enumerate(upserts):
            s, i, layer, doc_id = entry[:4]
            net[s] = (int(i), int(layer), str(doc_id), vectors[row], _row_attrs(entry))
        next_id = max(next_id, rec_next)
    return net, next_id


def _nlist(n: int) -> int:
    """Buckets for an IVF index of n vectors: the usual 4 sqrt(n), and at least 39 training
    vectors per bucket (FAISS's own minimum) for small n."""
    return max(1, min(int(4 * n ** 0.5), n // 39))


class FaissVectorIndex:
    """Top-k inner product over normalized vectors, with layer/doc filters: exact below
    ``ivf_min`` vectors, IVF from it on (see the module)."""

    def __init__(self, directory: Path | str, dim: int, *, ivf_min: int | None = None,
                 nprobe_fraction: float | None = None) -> None:
        ivf_min = IVF_MIN if ivf_min is None else ivf_min
        nprobe_fraction = NPROBE_FRACTION if nprobe_fraction is None else nprobe_fraction
        if int(dim) < 1:
            raise ValueError("dim must be positive")
        if ivf_min < 1 or not 0 < nprobe_fraction <= 1:
            raise ValueError("ivf_min must be positive and nprobe_fraction in (0, 1]")
        self.directory = Path(directory)
        self.dim = int(dim)
        self.ivf_min = int(ivf_min)
        self.nprobe_fraction = float(nprobe_fraction)
        self._lock = threading.RLock()
        # the ids this handle upserted or deleted since it last synced with disk, in first-touch
        # order: their net effect (their current vector and meta, or their absence) is what a
        # flush writes and what is replayed over other writers' records
        self._touched: dict[str, None] = {}
        self._reshaped = False  # the shape changed since this handle's last compaction
        self._ids: IdMap | None = None
        self._reset()
        self._load()

    def _reset(self) -> None:
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        if self._ids is not None:
            self._ids.close()
        self._ids = IdMap()  # string id <-> int id, and each id's doc_id: on disk, not in dicts
        # each int id's layer, one int32 per id ever assigned (_NO_LAYER: none): what a layer
        # filter's bitmap is computed from, without a Python container per vector
        self._layer_of = np.full(0, _NO_LAYER, dtype=np.int32)
        self._next_id = 0
        self._synced_next_id = 0  # next_id when this handle last synced: its own new ids are above
        self._dirty = False
        self._selectors: dict[tuple, tuple[int, Any, Any]] = {}
        # what this handle last read or wrote on disk
        self._snap_stamp = None  # file_stamp of the id map
        self._generation: str | None = None  # the snapshot's generation (None: no snapshot, or format 1)
        self._snap_bytes = 0  # size of the two snapshot files
        self._log_ino: int | None = None  # inode of the log file read (None: no log)
        self._log_end = 0  # offset after the last intact record read (or the size of a stale log)
        self._log_live = False  # the log belongs to the snapshot (else it is stale, or absent)

    # ------------------------------------------------------------------ persistence
    @property
    def _log_path(self) -> Path:
        return self.directory / LOG_FILE

    def _load(self) -> None:
        """Read the snapshot and replay the log (no lock): retried when a writer's compaction
        replaced the files during the read."""
        idmap_path = self.directory / IDMAP_FILE
        for attempt in range(_LOAD_ATTEMPTS):
            self._reset()
            stamp = file_stamp(idmap_path)
            try:
                self._read_snapshot()
                self._read_log()
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
        idmap_path = self.directory / IDMAP_FILE
        index_path = self.directory / INDEX_FILE
        if not idmap_path.exists() and not index_path.exists():
            return  # no snapshot yet (a first compaction that died before its id map: never flushed)
        try:
            idmap_raw = idmap_path.read_bytes()
        except FileNotFoundError:
            raise VectorIndexCorruptError(f"{self.directory}: one of {INDEX_FILE}/{IDMAP_FILE} is missing") from None
        data = json.loads(idmap_raw)
        if data.get("format") not in (1, FORMAT):
            raise VectorIndexCorruptError(f"{idmap_path}: unknown format {data.get('format')!r}")
        if int(data["dim"]) != self.dim:
            raise EragraphError(f"{self.directory} holds {data['dim']}-d vectors, not {self.dim}-d: "
                                "the store was built with another embedder")
        found = _matching(data, index_path, self.directory / NEXT_INDEX_FILE)
        if found is None:
            raise VectorIndexCorruptError(f"{index_path} does not match {IDMAP_FILE}: rebuild the vector index")
        index, index_bytes = found
        if isinstance(index, faiss.IndexIVFFlat):
            if index.direct_map.type != faiss.DirectMap.Hashtable:
                index.set_direct_map_type(faiss.DirectMap.Hashtable)
        elif not isinstance(index, faiss.IndexIDMap2):
            raise VectorIndexCorruptError(f"{index_path} is neither an IndexIDMap2 nor an IndexIVFFlat")
        self._index = index
        entries = data.pop("entries")
        idmap_bytes = len(idmap_raw)
        del idmap_raw
        try:
            self._ids.load((e[0], int(e[1]), str(e[3]), _row_attrs(e)) for e in entries)
        except ValueError as exc:
            raise VectorIndexCorruptError(f"{idmap_path}: {exc}") from None
        self._set_layers(np.fromiter((e[1] for e in entries), dtype=np.int64, count=len(entries)),
                         np.fromiter((e[2] for e in entries), dtype=np.int32, count=len(entries)))
        del entries
        self._next_id = int(data["next_id"])
        if self._index.ntotal != len(self._ids):
            raise VectorIndexCorruptError(f"{self.directory}: {self._index.ntotal} vectors but "
                                          f"{len(self._ids)} ids")
        self._generation = data.get("generation")
        self._snap_bytes = index_bytes + idmap_bytes

    def _read_log(self) -> None:
        """Replay the whole log when it names this snapshot's generation; note a stale one."""
        try:
            with open(self._log_path, "rb") as fh:
                ino = os.fstat(fh.fileno()).st_ino
                data = fh.read()
        except FileNotFoundError:
            return
        self._log_ino = ino
        if self._generation is None or data[:_HEADER_LEN] != _log_header(self._generation):
            self._log_end = len(data)  # another snapshot's log: ignored, replaced by the next append
            return
        records, self._log_end = _decode_records(data, _HEADER_LEN, self.dim)
        self._log_live = True
        self._apply(*_fold(records))

    def _log_stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._log_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size)

    def _disk_changed(self) -> bool:
        """Whether another writer compacted or appended since this handle last synced."""
        if file_stamp(self.directory / IDMAP_FILE) != self._snap_stamp:
            return True
        seen = None if self._log_ino is None else (self._log_ino, self._log_end)
        return self._log_stat() != seen

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
                self._finish_compaction()
                self._sync()
                self._maybe_reshape()  # what another writer flushed may carry the index past a threshold
                record = None
                if self._generation is not None and not self._reshaped:  # a new shape: a new snapshot
                    record = self._own_record()
                    log_size = (self._log_end if self._log_live else _HEADER_LEN) + len(record)
                    if log_size > COMPACT_FRACTION * self._snap_bytes:
                        record = None
                if record is None:
                    self._compact()
                else:
                    self._append(record)
                self._synced_next_id = self._next_id
            self._dirty = False
            self._touched.clear()

    def close(self) -> None:
        """Flush what is unflushed, then release the index and the id map (their memory, and
        the id map's temporary file). The handle is not used again."""
        with self._lock:
            self.flush()
            self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
            self._layer_of = np.full(0, _NO_LAYER, dtype=np.int32)
            self._selectors.clear()
            self._ids.close()

    def _sync(self) -> None:
        """Under the writer lock: bring in what other writers flushed since this handle last
        read or wrote the files, then this handle's own changes on top."""
        if file_stamp(self.directory / IDMAP_FILE) != self._snap_stamp:
            self._merge_from_disk()  # another writer compacted: a new snapshot
            return
        st = self._log_stat()
        if st is None:
            if self._log_ino is not None:  # the log vanished under the same snapshot: start over
                self._merge_from_disk()
            return
        ino, size = st
        if ino == self._log_ino:
            if size == self._log_end or not self._log_live:
                return
            start = self._log_end
        elif self._log_ino is not None and self._log_live:
            self._merge_from_disk()  # our log was replaced under the same snapshot: start over
            return
        else:
            start = 0  # a log created (or a stale one replaced) since this handle looked
        with open(self._log_path, "rb") as fh:
            ino = os.fstat(fh.fileno()).st_ino
            if start == 0:
                data = fh.read()
                if self._generation is None or data[:_HEADER_LEN] != _log_header(self._generation):
                    self._log_ino, self._log_end, self._log_live = ino, len(data), False
                    return
                records, end = _decode_records(data, _HEADER_LEN, self.dim)
            else:
                fh.seek(start)
                records, end = _decode_records(fh.read(), 0, self.dim)
                end += start
        self._log_ino, self._log_end, self._log_live = ino, end, True
        if records:
            self._replay_over(records)

    def _replay_over(self, records: list[tuple]) -> None:
        """Other writers' records go before this handle's unflushed changes: take out the ids
        this handle added (its int ids may collide with theirs), apply the records, replay."""
        own = self._own_net()
        self._delete(self._ids.strs_between(self._synced_next_id, self._next_id))
        self._next_id = self._synced_next_id
        self._apply(*_fold(records))
        self._replay_own(own)

    def _merge_from_disk(self) -> None:
        """Another writer replaced the files: read them and replay this handle's changes."""
        own = self._own_net()
        self._load()
        self._replay_own(own)

    def _own_net(self) -> tuple[list[str], list[str], np.ndarray, list[dict]]:
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

    def _replay_own(self, own: tuple[list[str], list[str], np.ndarray, list[dict]]) -> None:
        present, deleted, vectors, metas = own
        self._delete(deleted)
        if present:
            self._upsert(present, vectors, metas)

    def _apply(self, net: dict[str, tuple | None], next_id: int) -> None:
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
            self._index.add_with_ids(np.vstack([value[3] for _, value in adds]).astype(np.float32), add_ids)
            next_id = max(next_id, int(add_ids.max()) + 1)
        self._next_id = max(self._next_id, next_id)
        self._selectors.clear()

    def _own_record(self) -> bytes:
        """One log record: the net effect of this handle's changes (current vector and meta of
        each id it wrote and still holds; the ids it deleted)."""
        present, deleted, vectors, metas = self._own_net()
        upserts = [_entry(s, m["int_id"], m["layer"], m["doc_id"], m["attrs_json"]) for s, m in zip(present, metas)]
        return _encode_record(self._next_id, deleted, upserts, vectors)

    def _append(self, record: bytes) -> None:
        path = self._log_path
        if not self._log_live:  # no log for this snapshot yet (or a stale one): a new file
            atomic_write(path, _log_header(self._generation) + record)
            self._log_end = _HEADER_LEN + len(record)
        else:
            with open(path, "r+b") as fh:
                if os.fstat(fh.fileno()).st_size > self._log_end:
                    fh.truncate(self._log_end)  # a torn record a crashed writer left (we hold the lock)
                fh.seek(self._log_end)
                fh.write(record)
                fh.flush()
                os.fsync(fh.fileno())
            self._log_end += len(record)
        self._log_ino = os.stat(path).st_ino
        self._log_live = True

    def _compact(self) -> None:
        """Write a new snapshot (new generation) holding everything, then remove the log. A crash
        before the id map: the old snapshot stands (the next writer removes the unnamed index
        file); after it: its index is found under NEXT_INDEX_FILE, and the old log names the
        old generation, so it is ignored."""
        generation = secrets.token_hex(_GEN_LEN // 2)
        digest = hashlib.sha256()
        # the id map is the commit point: the index file it names goes beside the old one first,
        # and takes its name after (a reader, or the next writer, finds it there until then);
        # both are streamed to disk, neither is ever whole in memory
        atomic_write(self.directory / NEXT_INDEX_FILE, _index_writer(self._index, digest))
        index_bytes = (self.directory / NEXT_INDEX_FILE).stat().st_size
        header = {"format": FORMAT, "dim": self.dim, "generation": generation, "next_id": self._next_id,
                  "index_sha256": digest.hexdigest()}
        atomic_write(self.directory / IDMAP_FILE, _idmap_writer(header, self._ids, self._layer_of))
        idmap_bytes = (self.directory / IDMAP_FILE).stat().st_size
        os.replace(self.directory / NEXT_INDEX_FILE, self.directory / INDEX_FILE)
        self._remove_log()
        self._reshaped = False
        self._generation = generation
        self._snap_stamp = file_stamp(self.directory / IDMAP_FILE)
        self._snap_bytes = index_bytes + idmap_bytes
        self._log_ino, self._log_end, self._log_live = None, 0, False

    def _finish_compaction(self) -> None:
        """Under the writer lock: a compaction that died after its id map leaves the index file
        it names under NEXT_INDEX_FILE: give it its name. One that died before its id map leaves
        a file no id map names: remove it."""
        next_path = self.directory / NEXT_INDEX_FILE
        if not next_path.exists():
            return
        try:
            data = json.loads((self.directory / IDMAP_FILE).read_bytes())
        except FileNotFoundError:
            data = {}
        with open(next_path, "rb") as fh:
            names_it = data.get("index_sha256") == _sha256_of(fh)
        if names_it:
            os.replace(next_path, self.directory / INDEX_FILE)
        else:
            next_path.unlink()

    def _remove_log(self) -> None:
        try:
            os.unlink(self._log_path)
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ writes
    def _set_layers(self, ints: np.ndarray, layers: np.ndarray) -> None:
        ints = np.asarray(ints, dtype=np.int64)
        if not len(ints):
            return
        top = int(ints.max())
        if top >= len(self._layer_of):  # grown by doubling: amortized O(1) per id
            grown = np.full(max(top + 1, 2 * len(self._layer_of), 1024), _NO_LAYER, dtype=np.int32)
            grown[:len(self._layer_of)] = self._layer_of
            self._layer_of = grown
        self._layer_of[ints] = layers

    def _clear_layers(self, ints: list[int]) -> None:
        if ints:
            self._layer_of[np.asarray(ints, dtype=np.int64)] = _NO_LAYER

    def _layer_mask(self, layers: tuple[int, ...]) -> np.ndarray:
        """One bool per int id: its vector is present and in one of ``layers`` (vectorized over
        the layer column, about a millisecond per million ids)."""
        return np.isin(self._layer_of, np.asarray(layers, dtype=np.int32))

    def _in_layers(self, ints: np.ndarray, layers: tuple[int, ...] | None) -> np.ndarray:
        """Those of ``ints`` whose vector is in ``layers`` (all of them for None)."""
        if layers is None or not len(ints):
            return ints
        return ints[np.isin(self._layer_of[ints], np.asarray(layers, dtype=np.int32))]

    def _in_docs(self, doc_ids: tuple[str, ...], layers: tuple[int, ...] | None) -> np.ndarray:
        """The int ids of the documents' vectors (in ``layers`` when given): from the map's
        document index, at the cost of those documents, not of the index."""
        return self._in_layers(self._ids.in_docs(doc_ids), layers)

    def _where(self, where: Filter, doc_ids: tuple[str, ...] | None, layers: tuple[int, ...] | None) -> np.ndarray:
        """The int ids whose attributes match ``where`` (one SQL scan of the map's attrs column),
        in ``doc_ids`` and ``layers`` when given, ascending."""
        ints = self._ids.matching(where)
        if doc_ids is not None:
            ints = np.intersect1d(ints, self._ids.in_docs(doc_ids), assume_unique=True)
        return self._in_layers(ints, layers)

    def _changed(self) -> None:
        self._dirty = True
        self._selectors.clear()

    def _remove_int(self, int_ids: list[int]) -> None:
        if not int_ids:
            return
        arr = np.ascontiguousarray(int_ids, dtype=np.int64)
        if self._ivf:  # the hash-table direct map finds each row: O(change), not O(index)
            self._index.remove_ids(faiss.IDSelectorArray(len(arr), faiss.swig_ptr(arr)))
        else:
            self._index.remove_ids(arr)

    # ------------------------------------------------------------------ shape
    @property
    def _ivf(self) -> bool:
        return isinstance(self._index, faiss.IndexIVFFlat)

    def shape(self) -> dict[str, Any]:
        """The index's current shape: ``{"kind": "flat"}`` or ``{"kind": "ivf", "nlist", "nprobe"}``."""
        with self._lock:
            if not self._ivf:
                return {"kind": "flat"}
            return {"kind": "ivf", "nlist": int(self._index.nlist), "nprobe": self._nprobe()}

    def _nprobe(self) -> int:
        return max(1, min(self._index.nlist, int(np.ceil(self.nprobe_fraction * self._index.nlist))))

    def _maybe_reshape(self) -> None:
        """Flat to IVF at ``ivf_min``; IVF retrained once it holds four times what its centroids
        were trained for; back to flat below a quarter of ``ivf_min``. Each costs one pass over
        the vectors (and k-means on a sample), so over a corpus's growth it runs about log4(n)
        times."""
        n = int(self._index.ntotal)
        if self._ivf:
            nlist = self._index.nlist
            trained_for = max((nlist / 4) ** 2, 39 * nlist)  # the n that _nlist gives this nlist
            if self.ivf_min // 4 <= n < 4 * trained_for:
                return
        elif n < self.ivf_min:
            return
        ints = self._ids.all_ints()
        self.directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=self.directory) as spill:
            # the vectors go to an unnamed file and the old index is freed before the new one is
            # filled, so a change of shape never holds two indexes (or a copy of the vectors)
            for start in range(0, len(ints), _RESHAPE_BATCH):
                spill.write(self._index.reconstruct_batch(ints[start:start + _RESHAPE_BATCH]).tobytes())
            old, self._index = self._index, None
            del old
            try:
                self._index = self._new_shape(n, ints, spill)
            except BaseException:
                self._index = self._filled(faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim)), ints, spill)
                raise
        self._selectors.clear()
        self._reshaped = True  # the next flush writes a snapshot of this shape, so readers open it

    def _new_shape(self, n: int, ints: np.ndarray, spill: Any) -> Any:
        """The index for n vectors (flat below a quarter of ``ivf_min``, else IVF trained on a
        sample of the spilled vectors), filled from the spill file."""
        if n < self.ivf_min // 4:
            return self._filled(faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim)), ints, spill)
        nlist = _nlist(n)
        # the Python wrapper keeps the quantizer alive as long as the index
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rows = np.sort(np.random.default_rng(n).choice(n, size=min(n, TRAIN_PER_LIST * nlist), replace=False))
        sample = np.empty((len(rows), self.dim), dtype=np.float32)
        taken = 0
        for start, batch in self._spilled(len(ints), spill):
            pick = rows[(rows >= start) & (rows < start + len(batch))] - start
            sample[taken:taken + len(pick)] = batch[pick]
            taken += len(pick)
        index.train(sample)
        del sample
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
        return self._filled(index, ints, spill)

    def _filled(self, index: Any, ints: np.ndarray, spill: Any) -> Any:
        for start, batch in self._spilled(len(ints), spill):
            index.add_with_ids(batch, ints[start:start + len(batch)])
        return index

    def _spilled(self, n: int, spill: Any) -> Iterable[tuple[int, np.ndarray]]:
        """The spilled vectors, _RESHAPE_BATCH rows at a time, with the row each batch starts at."""
        spill.seek(0)
        for start in range(0, n, _RESHAPE_BATCH):
            rows = min(_RESHAPE_BATCH, n - start)
            batch = np.empty((rows, self.dim), dtype=np.float32)
            if spill.readinto(memoryview(batch).cast("B")) != batch.nbytes:
                raise VectorIndexCorruptError("the vectors spilled for a change of shape were cut short")
            yield start, batch

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
            attrs = metas[n]["attrs_json"] if "attrs_json" in metas[n] else _attrs_json(metas[n])
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
        self._index.add_with_ids(np.ascontiguousarray(vectors[order]), ints)
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
    @staticmethod
    def _filter_key(layers: Sequence[int] | None, doc_ids: Sequence[str] | None,
                    where: Filter | None = None) -> tuple:
        return (None if layers is None else tuple(sorted(set(int(x) for x in layers))),
                None if doc_ids is None else tuple(sorted(set(doc_ids))),
                None if where is None else cache_key(where))

    def _selector(self, layers: Sequence[int] | None, doc_ids: Sequence[str] | None,
                  where: Filter | None = None) -> tuple[int, Any, Any]:
        """(number of allowed vectors, faiss SearchParameters, (the selector they point to, its
        bits, the allowed int ids)) for a filter; cached until the index changes (the selector and
        its bits are held so the C++ object outlives the parameters). A layer filter is a bitmap
        over the int ids (one bit test per scanned vector); a document filter, a batch of ids; a
        ``where`` filter (with any layers and documents), a bitmap of the ids it allows."""
        key = self._filter_key(layers, doc_ids, where)
        cached = self._selectors.get(key)
        if cached is not None:
            return cached
        if where is not None:
            allowed = self._where(where, key[1], key[0])
            mask = np.zeros(len(self._layer_of), dtype=bool)
            mask[allowed] = True
        elif key[1] is None:
            mask = self._layer_mask(key[0])
            allowed = np.flatnonzero(mask).astype(np.int64)
        else:
            mask, allowed = None, self._in_docs(key[1], key[0])
        if len(allowed) == 0:
            result: tuple[int, Any, Any] = (0, None, None)
        elif len(allowed) == self._index.ntotal:  # the filter lets everything through
            result = (len(allowed), None, None)
        elif mask is not None:
            bits = np.packbits(mask, bitorder="little")
            selector = faiss.IDSelectorBitmap(len(bits), faiss.swig_ptr(bits))
            result = (len(allowed), faiss.SearchParameters(sel=selector), (selector, bits, allowed))
        else:
            selector = faiss.IDSelectorBatch(allowed)
            result = (len(allowed), faiss.SearchParameters(sel=selector), (selector, None, allowed))
        if len(self._selectors) > 256:
            self._selectors.clear()
        self._selectors[key] = result
        return result

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
                n_allowed, params = self._index.ntotal, None
            else:
                n_allowed, params, held = self._selector(layers, doc_ids, where)
            if n_allowed == 0:
                return []
            if self._ivf:
                if params is not None and n_allowed <= EXACT_MAX:
                    pairs = self._exact_among(q[0], held[2])
                    if len(pairs) > k:  # names are looked up for the top k and its ties only
                        pairs.sort(key=lambda p: rank_score(p[0]), reverse=True)
                        pairs = [p for p in pairs if rank_score(p[0]) >= rank_score(pairs[k - 1][0])]
                    return self._hits(pairs, k)
                # as many allowed vectors as an unfiltered query sees: more buckets for a filter
                share = n_allowed / max(1, self._index.ntotal)
                nprobe = min(self._index.nlist, int(np.ceil(self._nprobe() / share)))
                sel = None if params is None else params.sel
                params = faiss.SearchParametersIVF(nprobe=nprobe, sel=sel)
            fetch = min(n_allowed, k + _TIE_PAD)
            # One query gains little from OpenMP threads, and on a busy machine their spin-waits
            # cost tens of ms; the thread count is a per-calling-thread OpenMP setting.
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)
            try:
                while True:
                    scores, labels = self._index.search(q, fetch, params=params)
                    pairs = [(float(s), int(i)) for s, i in zip(scores[0], labels[0]) if i >= 0]
                    if len(pairs) < min(k, n_allowed) and self._ivf and params.nprobe < self._index.nlist:
                        # the scanned buckets held fewer than k allowed vectors: scan them all
                        params = faiss.SearchParametersIVF(nprobe=self._index.nlist, sel=params.sel)
                        continue
                    # keep fetching while the k-th score ties with the last fetched one
                    if fetch >= n_allowed or len(pairs) < fetch or len(pairs) <= k or \
                            rank_score(pairs[-1][0]) < rank_score(pairs[k - 1][0]):
                        break
                    fetch = min(n_allowed, fetch * 2)
            finally:
                faiss.omp_set_num_threads(threads)
            return self._hits(pairs, k)

    def _hits(self, pairs: list[tuple[float, int]], k: int) -> list[Hit]:
        """The top k of (score, int id) pairs as hits, ties ordered by id."""
        names = self._ids.strs(i for _, i in pairs)
        hits = [Hit(names[i], s) for s, i in pairs]
        hits.sort(key=rank_key)
        return hits[:k]

    def _exact_among(self, q: np.ndarray, allowed: np.ndarray) -> list[tuple[float, int]]:
        """(score, int id) of every allowed vector, from their stored rows: a narrow filter's
        exact answer, at a cost of the allowed set, not the index."""
        scores = self._index.reconstruct_batch(allowed) @ q
        return [(float(s), int(i)) for s, i in zip(scores, allowed)]

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
