"""The FAISS index's snapshot: ``vectors.faiss`` (the index, as ``faiss.write_index`` writes it;
an IVF one without its direct map, built again on open) and ``vectors.json`` (its id map), read
on open and written by a compaction.

The id map holds ``format``, ``dim``, the snapshot's ``generation`` (the name its change log's
header carries: ``vector_log``), ``next_id``, the SHA-256 of the index file it belongs to (so
files that do not belong together are detected on open instead of silently pairing vectors with
the wrong ids) and ``entries``, one row per vector (``vector_log.entry``: ``[id, int id, layer,
doc_id(, attrs)]``).

Both files are written atomically (temporary file, fsync, ``os.replace``). A compaction writes
the new index as ``vectors.next.faiss``, then the id map (the commit point), then renames the
index over ``vectors.faiss``: a process killed anywhere in between leaves either the old
snapshot whole or the new id map with its index under the next name, which readers use and the
next writer renames (``finish_compaction``). The files are hashed, read and written in pieces of
``_IO_CHUNK`` bytes, never held whole in memory: an id map of the current format (``entries``
last, as ``write`` puts it) is parsed an entry at a time as its reader takes them (``entries``:
an iterator), so opening a million-vector index does not hold a million decoded rows.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import faiss
import numpy as np

from ...domain.model import EragraphError
from .files import atomic_write
from .id_map import IdMap
from .vector_log import VectorIndexCorruptError, dumps, entry, new_generation

INDEX_FILE = "vectors.faiss"
NEXT_INDEX_FILE = "vectors.next.faiss"  # a compaction's new index file until its id map is written
IDMAP_FILE = "vectors.json"
FORMAT = 2  # 1: no change log (no generation in the id map); still read, and compacted on the next flush
_IO_CHUNK = 1 << 22  # files are hashed, read and written in pieces of this size, never whole


@dataclass
class Snapshot:
    """What ``read`` found: the index, the id map's entries and header fields, and the size of
    the two files (what the change log's length is measured against)."""
    index: Any
    entries: Iterator[list]  # read once; from the open id map file as they are taken
    next_id: int
    generation: str | None  # None: format 1
    nbytes: int


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
    """A writer for ``atomic_write`` that streams ``index`` into the file and ``digest``.

    An IVF index is written without its direct map (``without_direct_map``): faiss writes a
    hashtable direct map by first copying it whole into a vector (16 bytes a vector, 18 MB at
    1.1M), the largest transient of a large build's compaction; ``_read`` builds the map again
    from the lists, as it does for any file written without one."""
    def write(fh) -> None:
        def piece(data: bytes) -> int:
            digest.update(data)
            fh.write(data)
            return len(data)
        with without_direct_map(index):
            faiss.write_index(index, faiss.PyCallbackIOWriter(piece, _IO_CHUNK))
    return write


@contextmanager
def without_direct_map(index: Any) -> Iterator[None]:
    """``index`` seen as having no direct map while inside (an IVF index: its ``type`` field
    alone is set to NoMap and set back after, the map itself untouched; the caller holds the
    handle's lock, so no lookup of this process sees it in between)."""
    direct = getattr(index, "direct_map", None)
    kept = None if direct is None else direct.type
    if kept is not None and kept != faiss.DirectMap.NoMap:
        direct.type = faiss.DirectMap.NoMap
    try:
        yield
    finally:
        if kept is not None:
            direct.type = kept


def _idmap_writer(header: dict, ids: IdMap, layer_of: np.ndarray):
    """A writer for ``atomic_write`` of the id map: the header's fields, then ``entries`` (each
    ``[id, int id, layer, doc_id(, attrs)]``, by id), streamed a batch at a time from the map."""
    def write(fh) -> None:
        head = dumps(header)
        fh.write(head[:-1].encode("utf-8") + b',"entries":[')
        first = True
        for batch in ids.rows():
            text = ",".join(entry(s, i, int(layer_of[i]), d, a) for s, i, d, a in batch)
            fh.write((text if first else "," + text).encode("utf-8"))
            first = False
        fh.write(b"]}")
    return write


def read(directory: Path, dim: int) -> Snapshot | None:
    """The snapshot in ``directory`` (None: none yet). Raises ``VectorIndexCorruptError`` when
    the files do not belong together (a reader racing a compaction retries)."""
    idmap_path = directory / IDMAP_FILE
    index_path = directory / INDEX_FILE
    if not idmap_path.exists() and not index_path.exists():
        return None  # no snapshot yet (a first compaction that died before its id map: never flushed)
    try:
        fh = open(idmap_path, "rb")  # read from this open file to the end: a rename cannot swap it
    except FileNotFoundError:
        raise VectorIndexCorruptError(f"{directory}: one of {INDEX_FILE}/{IDMAP_FILE} is missing") from None
    try:
        return _read(directory, dim, fh)
    except BaseException:
        fh.close()
        raise


_ENTRIES = b'"entries":['
_HEAD_MAX = 1 << 16  # the header fields come first, well within this


def _header(fh: IO[bytes]) -> tuple[dict, Iterator[list]]:
    """The id map's fields and its entries: parsed as they are taken when ``entries`` comes last
    (the current format, as ``write`` streams it), else (an older file) the whole file at once."""
    head = fh.read(_HEAD_MAX)
    at = head.find(_ENTRIES)
    if at > 0 and head[:at].rstrip().endswith(b","):
        try:
            data = json.loads(head[:at].rstrip()[:-1] + b"}")
        except json.JSONDecodeError:
            data = {}
        if data.get("format") == FORMAT:
            return data, _entries(fh, head[at + len(_ENTRIES):])
    data = json.loads(head + fh.read())
    entries = data.pop("entries")
    fh.close()
    return data, iter(entries)


def _entries(fh: IO[bytes], rest: bytes) -> Iterator[list]:
    """The entries of an id map's ``[...]`` whose text after the ``[`` begins with ``rest`` and
    goes on in ``fh``, one at a time, read ``_IO_CHUNK`` bytes at a time; the file is closed at
    the end. Raises ``VectorIndexCorruptError`` on a file cut short or not of the format."""
    decoder, utf8 = json.JSONDecoder(), codecs.getincrementaldecoder("utf-8")()
    text, pos, eof = utf8.decode(rest), 0, False

    def more() -> bool:
        nonlocal text, pos, eof
        if eof:
            return False
        chunk = fh.read(_IO_CHUNK)
        eof = not chunk
        text, pos = text[pos:] + utf8.decode(chunk, final=eof), 0
        return True

    def token() -> str:
        """The next character that is not blank ("" at the end of the file)."""
        nonlocal pos
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos < len(text):
                return text[pos]
            if not more():
                return ""

    def corrupt(why: str) -> VectorIndexCorruptError:
        return VectorIndexCorruptError(f"{fh.name}: the id map {why}")

    try:
        first = True
        while True:
            mark = token()
            if mark == "]":
                if (text[pos + 1:] + utf8.decode(fh.read(), final=True)).strip() != "}":
                    raise corrupt("does not end after its entries")
                return
            if not first:
                if mark != ",":
                    raise corrupt("is cut short" if not mark else "has entries that are not a list")
                pos += 1
                token()
            while True:
                try:
                    value, end = decoder.raw_decode(text, pos)
                    break
                except json.JSONDecodeError:
                    if not more():
                        raise corrupt("is cut short") from None
            if not isinstance(value, list):
                raise corrupt("has an entry that is not a list")
            yield value
            pos, first = end, False
    finally:
        fh.close()


def _read(directory: Path, dim: int, fh: IO[bytes]) -> Snapshot:
    idmap_path, index_path = directory / IDMAP_FILE, directory / INDEX_FILE
    idmap_bytes = os.fstat(fh.fileno()).st_size
    data, entries = _header(fh)
    if data.get("format") not in (1, FORMAT):
        raise VectorIndexCorruptError(f"{idmap_path}: unknown format {data.get('format')!r}")
    if int(data["dim"]) != dim:
        raise EragraphError(f"{directory} holds {data['dim']}-d vectors, not {dim}-d: "
                            "the store was built with another embedder")
    found = _matching(data, index_path, directory / NEXT_INDEX_FILE)
    if found is None:
        raise VectorIndexCorruptError(f"{index_path} does not match {IDMAP_FILE}: rebuild the vector index")
    index, index_bytes = found
    if isinstance(index, faiss.IndexIVFFlat):
        if index.direct_map.type != faiss.DirectMap.Hashtable:
            index.set_direct_map_type(faiss.DirectMap.Hashtable)
    elif not isinstance(index, faiss.IndexIDMap2):
        raise VectorIndexCorruptError(f"{index_path} is neither an IndexIDMap2 nor an IndexIVFFlat")
    return Snapshot(index, entries, int(data["next_id"]), data.get("generation"), index_bytes + idmap_bytes)


def write(directory: Path, dim: int, index: Any, ids: IdMap, layer_of: np.ndarray, next_id: int) -> tuple[str, int]:
    """A compaction's new snapshot, with a new generation: (the generation, the two files'
    size). A crash before the id map: the old snapshot stands (the next writer deletes the
    unnamed index file); after it: its index is found under NEXT_INDEX_FILE."""
    generation = new_generation()
    digest = hashlib.sha256()
    # the id map is the commit point: the index file it names goes beside the old one first,
    # and takes its name after (a reader, or the next writer, finds it there until then);
    # both are streamed to disk, neither is ever whole in memory
    atomic_write(directory / NEXT_INDEX_FILE, _index_writer(index, digest))
    index_bytes = (directory / NEXT_INDEX_FILE).stat().st_size
    header = {"format": FORMAT, "dim": dim, "generation": generation, "next_id": next_id,
              "index_sha256": digest.hexdigest()}
    atomic_write(directory / IDMAP_FILE, _idmap_writer(header, ids, layer_of))
    idmap_bytes = (directory / IDMAP_FILE).stat().st_size
    os.replace(directory / NEXT_INDEX_FILE, directory / INDEX_FILE)
    return generation, index_bytes + idmap_bytes


def finish_compaction(directory: Path) -> None:
    """Under the writer lock: a compaction that died after its id map leaves the index file it
    names under NEXT_INDEX_FILE: give it its name. One that died before its id map leaves a file
    no id map names: delete it."""
    next_path = directory / NEXT_INDEX_FILE
    if not next_path.exists():
        return
    try:
        data = json.loads((directory / IDMAP_FILE).read_bytes())
    except FileNotFoundError:
        data = {}
    with open(next_path, "rb") as fh:
        names_it = data.get("index_sha256") == _sha256_of(fh)
    if names_it:
        os.replace(next_path, directory / INDEX_FILE)
    else:
        next_path.unlink()
