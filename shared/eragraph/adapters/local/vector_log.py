"""A local vector index's change log: the file ``vectors.log`` beside its snapshot, and what one
handle last read of it. It knows nothing of FAISS: any local index whose vectors have a string id
and an int id (and a layer, a document and optional attributes) can keep its changes here.

The file starts with the generation of the snapshot it applies to (a 32-character random hex
name the snapshot's writer chose, ``new_generation``), then holds one record per flush: the net
effect of one handle's upserts and deletes since its previous flush (string id, int id, layer,
doc_id, attrs and vector of each id it wrote; the ids it deleted). A row without attrs (a
summary's, or any row an older version wrote) has none. Each record is framed by a magic, its
length and a CRC-32 and is fsynced; a torn last record (a crash mid-append, or a reader racing a
writer) fails the check and is ignored, and the next writer cuts it off before appending. A log
naming another generation (a crash after a compaction replaced the snapshot but before it
deleted the log) is ignored and later replaced.

The interface an index uses:

* ``ChangeLog.read`` (on open) and ``ChangeLog.catch_up`` (a writer under its lock, or a reader
  following the writers) return the records not yet read; ``fold`` turns records into their net
  effect, which the index replays into itself (id -> its row and vector, or None: deleted);
* ``encode_record`` and ``ChangeLog.append`` write a handle's own net effect;
* ``ChangeLog.too_long`` is the compaction trigger: the log would exceed ``COMPACT_FRACTION`` of
  the snapshot's bytes, so the index writes a new snapshot instead and ``ChangeLog.delete``
  deletes the log. The amortized cost of a flush stays proportional to the change.

A row (``entry``) is ``[id, int id, layer, doc_id]`` plus the attributes' object when there are
any: the same row the snapshot's id map holds.
"""

from __future__ import annotations

import json
import os
import secrets
import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ...domain.model import EragraphError
from .files import atomic_write

LOG_FILE = "vectors.log"
COMPACT_FRACTION = 0.25  # compact when the log would exceed this fraction of the snapshot's bytes
GROUP_BYTES = 8 * 2**20  # of the log read and replayed at a time on open (ChangeLog.read_groups)

_LOG_MAGIC = b"EGVLOG01"
_GEN_LEN = 32  # secrets.token_hex(16)
_HEADER_LEN = len(_LOG_MAGIC) + _GEN_LEN
_REC_MAGIC = b"EGVR"
_FRAME = struct.Struct("<4sQI")  # magic, payload length, CRC-32 of magic + length + payload

Record = tuple[int, list, list, np.ndarray]  # (next_id, deleted ids, upsert rows, their vectors)
Net = dict[str, "tuple | None"]  # id -> (int id, layer, doc_id, vector, attrs JSON), None: deleted


class VectorIndexCorruptError(EragraphError):
    """The files on disk do not belong together (e.g. a crash between the two renames)."""


# ------------------------------------------------------------------ rows
def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def attrs_json(meta: Mapping[str, Any]) -> str | None:
    """A meta's ``attrs`` as the JSON text the id map keeps (None: no attributes)."""
    attrs = meta.get("attrs")
    return None if attrs is None else dumps(attrs)


def entry(s: str, i: int, layer: int, doc: str, attrs: str | None) -> str:
    """One id map entry or log upsert row: ``[id, int id, layer, doc_id]``, plus the attributes'
    object when there are any (their stored JSON text, spliced in as it is)."""
    head = dumps([s, i, layer, doc])
    return head if attrs is None else head[:-1] + "," + attrs + "]"


def row_attrs(row: Sequence) -> str | None:
    """The attributes' JSON text of a decoded entry or log row (absent in rows written before)."""
    return dumps(row[4]) if len(row) > 4 and row[4] is not None else None


# ------------------------------------------------------------------ records
def new_generation() -> str:
    """A new snapshot's generation: the name its log's header carries."""
    return secrets.token_hex(_GEN_LEN // 2)


def _header(generation: str) -> bytes:
    return _LOG_MAGIC + generation.encode("ascii")


def encode_record(next_id: int, deleted: list[str], upserts: list[str], vectors: np.ndarray) -> bytes:
    """One framed log record; ``upserts`` are the rows' JSON (``entry``)."""
    meta = (dumps({"next_id": next_id, "delete": deleted})[:-1] + ',"upsert":[' + ",".join(upserts)
            + "]}").encode("utf-8")
    meta += b" " * (-(4 + len(meta)) % 4)  # the vectors start 4-byte aligned
    payload = struct.pack("<I", len(meta)) + meta + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    head = _REC_MAGIC + struct.pack("<Q", len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    return head + struct.pack("<I", crc) + payload


def decode_records(data: bytes | memoryview, pos: int, dim: int) -> tuple[list[Record], int]:
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
        records.append(_decode_payload(payload, dim))
        pos = body + length
    return records, pos


def _decode_payload(payload: memoryview, dim: int) -> Record:
    (meta_len,) = struct.unpack_from("<I", payload, 0)
    meta = json.loads(bytes(payload[4:4 + meta_len]))
    upserts = meta["upsert"]
    vectors = np.frombuffer(payload, dtype="<f4", offset=4 + meta_len)
    if vectors.size != len(upserts) * dim:
        raise VectorIndexCorruptError(f"a log record holds {vectors.size} floats for "
                                      f"{len(upserts)} {dim}-d vectors")
    return int(meta["next_id"]), meta["delete"], upserts, vectors.reshape(len(upserts), dim)


def _next_record(fh: IO[bytes], size: int, dim: int) -> tuple[Record, int] | None:
    """The record at ``fh``'s position in a file of ``size`` bytes and the offset after it, or
    None at the end or at a frame that is short or fails its check (a torn tail); one record's
    bytes are read, never more than the file holds."""
    head = fh.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    magic, length, crc = _FRAME.unpack(head)
    if magic != _REC_MAGIC or length > size - fh.tell():
        return None
    payload = fh.read(length)
    if len(payload) < length or zlib.crc32(payload, zlib.crc32(head[:12])) != crc:
        return None
    return _decode_payload(memoryview(payload), dim), fh.tell()


def fold(records: list[Record]) -> tuple[Net, int]:
    """The net effect of records applied in order: id -> (int id, layer, doc_id, vector, attrs
    JSON) or None (deleted), and the highest next_id they name."""
    net: Net = {}
    next_id = 0
    for rec_next, deleted, upserts, vectors in records:
        for s in deleted:
            net[s] = None
        for row, item in enumerate(upserts):
            s, i, layer, doc_id = item[:4]
            net[s] = (int(i), int(layer), str(doc_id), vectors[row], row_attrs(item))
        next_id = max(next_id, rec_next)
    return net, next_id


# ------------------------------------------------------------------ the file
class ChangeLog:
    """The log file of one index folder, and how far this handle has read it: the file's inode
    (None: no log), the offset after the last intact record read (or the size of a stale log),
    and whether it belongs to the snapshot the handle holds (else it is stale, or absent)."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path = path
        self.dim = dim
        self.reset()

    def reset(self) -> None:
        self.ino: int | None = None
        self.end = 0
        self.live = False

    def stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size)

    def changed(self) -> bool:
        """Whether the file differs from what this handle last read (two writers' appends or a
        new log): one ``stat``."""
        seen = None if self.ino is None else (self.ino, self.end)
        return self.stat() != seen

    def read(self, generation: str | None) -> list[Record]:
        """The whole log's records when it names the snapshot ``generation``; a stale one (or
        none) is noted and gives none."""
        return [record for group in self.read_groups(generation) for record in group]

    def read_groups(self, generation: str | None, group_bytes: int | None = None) -> Iterator[list[Record]]:
        """``read``'s records in groups of about ``group_bytes`` of the file, read a record at a
        time: what opening holds of the log is a group or two, not the whole file (up to
        ``COMPACT_FRACTION`` of the snapshot: a quarter of the index's vectors). Applied in
        order, the groups' net effects are the whole log's. Read it to its end."""
        group_bytes = GROUP_BYTES if group_bytes is None else group_bytes
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        with fh:
            size = os.fstat(fh.fileno()).st_size
            self.ino = os.fstat(fh.fileno()).st_ino
            if generation is None or fh.read(_HEADER_LEN) != _header(generation):
                self.end = size  # another snapshot's log: ignored, replaced by the next append
                return
            pos, group, held = _HEADER_LEN, [], 0
            while (found := _next_record(fh, size, self.dim)) is not None:
                record, end = found
                group.append(record)
                held, pos = held + end - pos, end
                if held >= group_bytes:
                    yield group
                    group, held = [], 0
            self.end, self.live = pos, True
            if group:
                yield group

    def catch_up(self, generation: str | None) -> list[Record] | None:
        """The records appended since this handle last read the log (of the same snapshot
        ``generation``), or None when the log this handle read was deleted or replaced under
        the same snapshot: the caller starts over from the snapshot."""
        st = self.stat()
        if st is None:
            return None if self.ino is not None else []  # vanished under the same snapshot
        ino, size = st
        if ino == self.ino:
            if size == self.end or not self.live:
                return []
            start = self.end
        elif self.ino is not None and self.live:
            return None  # our log was replaced under the same snapshot
        else:
            start = 0  # a log created (or a stale one replaced) since this handle looked
        with open(self.path, "rb") as fh:
            ino = os.fstat(fh.fileno()).st_ino
            if start == 0:
                data = fh.read()
                if generation is None or data[:_HEADER_LEN] != _header(generation):
                    self.ino, self.end, self.live = ino, len(data), False
                    return []
                records, end = decode_records(data, _HEADER_LEN, self.dim)
            else:
                fh.seek(start)
                records, end = decode_records(fh.read(), 0, self.dim)
                end += start
        self.ino, self.end, self.live = ino, end, True
        return records

    def too_long(self, record: bytes, snapshot_bytes: int) -> bool:
        """The compaction trigger: appending ``record`` would carry the log past
        ``COMPACT_FRACTION`` of the snapshot's bytes."""
        size = (self.end if self.live else _HEADER_LEN) + len(record)
        return size > COMPACT_FRACTION * snapshot_bytes

    def append(self, generation: str, record: bytes) -> None:
        """Under the writer lock: add ``record`` after the last intact one (a new file when the
        snapshot has no log yet, or only a stale one), fsynced."""
        if not self.live:
            atomic_write(self.path, _header(generation) + record)
            self.end = _HEADER_LEN + len(record)
        else:
            with open(self.path, "r+b") as fh:
                if os.fstat(fh.fileno()).st_size > self.end:
                    fh.truncate(self.end)  # a torn record a crashed writer left (we hold the lock)
                fh.seek(self.end)
                fh.write(record)
                fh.flush()
                os.fsync(fh.fileno())
            self.end += len(record)
        self.ino = os.stat(self.path).st_ino
        self.live = True

    def delete(self) -> None:
        """Delete the file (a compaction folded it into a new snapshot) and forget it."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.reset()
