"""VectorIndex on FAISS, persisted in a folder beside the graph store.

Exact inner-product search (``IndexIDMap2(IndexFlatIP(dim))``): the local mode's collections are
small enough that brute force is both exact and fast (a 20k x 384 top-20 takes about a millisecond).
String ids map to int64 faiss ids; the map and each vector's ``layer``/``doc_id`` live in
``vectors.json`` next to ``vectors.faiss``. Filtered searches pass an ``IDSelectorBatch`` of the
allowed ids to faiss, so they return the true top-k of the filtered set (not a post-filtered
top-k). Selectors are cached per filter and dropped whenever the index changes.

``flush()`` writes both files atomically (temporary file, fsync, ``os.replace``); the id map
records the SHA-256 of the index file it belongs to, so a crash between the two renames is
detected on open instead of silently pairing vectors with the wrong ids.

Several processes may write one index (two ``eragraph ingest`` runs on one store): ``flush()``
holds an inter-process lock (``filelock``, the file ``.writer.lock`` in the folder), and when
another writer replaced the files since this handle read or wrote them, it re-reads them under
the lock and replays this handle's own upserts and deletes (kept since its last flush) on top,
so no writer's vectors are lost. Readers take no lock: they see the old files or the new ones.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from ...domain.model import EragraphError
from ...ports import Hit
from .files import atomic_write, file_stamp, writer_lock

INDEX_FILE = "vectors.faiss"
IDMAP_FILE = "vectors.json"
LOCK_FILE = ".writer.lock"
FORMAT = 1
_TIE_PAD = 8  # extra neighbours fetched so ties at the k-th score are ordered by id, as in memory


class VectorIndexCorruptError(EragraphError):
    """The files on disk do not belong together (e.g. a crash between the two renames)."""


class FaissVectorIndex:
    """Exact top-k inner product over normalized vectors, with layer/doc filters."""

    def __init__(self, directory: Path | str, dim: int) -> None:
        if int(dim) < 1:
            raise ValueError("dim must be positive")
        self.directory = Path(directory)
        self.dim = int(dim)
        self._lock = threading.RLock()
        self._journal: list[tuple] = []  # this handle's upserts/deletes since it last synced with disk
        self._reset()
        self._load()

    def _reset(self) -> None:
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        self._to_int: dict[str, int] = {}
        self._to_str: dict[int, str] = {}
        self._layer: dict[int, int] = {}
        self._doc: dict[int, str] = {}
        self._by_layer: dict[int, set[int]] = {}  # postings for filtered searches
        self._by_doc: dict[str, set[int]] = {}
        self._layer_arrays: dict[int, np.ndarray] = {}  # per-layer id arrays, rebuilt when a layer changes
        self._next_id = 0
        self._dirty = False
        self._selectors: dict[tuple, tuple[int, Any, Any]] = {}
        self._disk_stamp = None  # the id map file this handle last read or wrote

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        idmap_path = self.directory / IDMAP_FILE
        index_path = self.directory / INDEX_FILE
        self._disk_stamp = file_stamp(idmap_path)
        if not idmap_path.exists() and not index_path.exists():
            return
        if not idmap_path.exists() or not index_path.exists():
            raise VectorIndexCorruptError(f"{self.directory}: one of {INDEX_FILE}/{IDMAP_FILE} is missing")
        data = json.loads(idmap_path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise VectorIndexCorruptError(f"{idmap_path}: unknown format {data.get('format')!r}")
        if int(data["dim"]) != self.dim:
            raise EragraphError(f"{self.directory} holds {data['dim']}-d vectors, not {self.dim}-d: "
                                "the store was built with another embedder")
        raw = index_path.read_bytes()
        if hashlib.sha256(raw).hexdigest() != data["index_sha256"]:
            raise VectorIndexCorruptError(f"{index_path} does not match {IDMAP_FILE}: rebuild the vector index")
        index = faiss.deserialize_index(np.frombuffer(raw, dtype=np.uint8))
        if not isinstance(index, faiss.IndexIDMap2):
            raise VectorIndexCorruptError(f"{index_path} is not an IndexIDMap2")
        self._index = index
        for str_id, int_id, layer, doc_id in data["entries"]:
            self._to_int[str_id] = int(int_id)
            self._to_str[int(int_id)] = str_id
            self._set_meta(int(int_id), int(layer), doc_id)
        self._next_id = int(data["next_id"])
        if self._index.ntotal != len(self._to_int):
            raise VectorIndexCorruptError(f"{self.directory}: {self._index.ntotal} vectors but "
                                          f"{len(self._to_int)} ids")

    def flush(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            with writer_lock(self.directory / LOCK_FILE):
                if file_stamp(self.directory / IDMAP_FILE) != self._disk_stamp:
                    self._merge_from_disk()
                raw = faiss.serialize_index(self._index).tobytes()
                entries = [[s, i, self._layer[i], self._doc[i]] for s, i in sorted(self._to_int.items())]
                idmap = {"format": FORMAT, "dim": self.dim, "next_id": self._next_id,
                         "index_sha256": hashlib.sha256(raw).hexdigest(), "entries": entries}
                atomic_write(self.directory / INDEX_FILE, raw)
                atomic_write(self.directory / IDMAP_FILE,
                              json.dumps(idmap, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
                self._disk_stamp = file_stamp(self.directory / IDMAP_FILE)
            self._dirty = False
            self._journal.clear()

    def _merge_from_disk(self) -> None:
        """Another writer replaced the files: read them and replay this handle's changes."""
        journal = self._journal
        self._journal = []
        self._reset()
        self._load()
        for op in journal:
            if op[0] == "upsert":
                self._upsert(*op[1:])
            else:
                self._delete(op[1])
        self._journal = journal

    # ------------------------------------------------------------------ writes
    def _set_meta(self, i: int, layer: int, doc_id: str) -> None:
        if i in self._layer:
            if self._layer[i] == layer and self._doc[i] == doc_id:
                return
            self._drop_meta(i)
        self._layer[i] = layer
        self._doc[i] = doc_id
        self._by_layer.setdefault(layer, set()).add(i)
        self._by_doc.setdefault(doc_id, set()).add(i)
        self._layer_arrays.pop(layer, None)

    def _drop_meta(self, i: int) -> None:
        layer, doc_id = self._layer.pop(i), self._doc.pop(i)
        for postings, key in ((self._by_layer, layer), (self._by_doc, doc_id)):
            members = postings[key]
            members.discard(i)
            if not members:
                del postings[key]
        self._layer_arrays.pop(layer, None)

    def _layer_array(self, layer: int) -> np.ndarray:
        arr = self._layer_arrays.get(layer)
        if arr is None:
            arr = np.fromiter(self._by_layer.get(layer, ()), dtype=np.int64)
            self._layer_arrays[layer] = arr
        return arr

    def _allowed(self, layers: tuple[int, ...] | None, doc_ids: tuple[str, ...] | None) -> np.ndarray:
        if doc_ids is not None:
            layer_set = None if layers is None else set(layers)
            return np.fromiter(
                (i for d in doc_ids for i in self._by_doc.get(d, ())
                 if layer_set is None or self._layer[i] in layer_set), dtype=np.int64)
        assert layers is not None
        parts = [self._layer_array(layer) for layer in layers]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def _changed(self) -> None:
        self._dirty = True
        self._selectors.clear()

    def _remove_int(self, int_ids: list[int]) -> None:
        if int_ids:
            self._index.remove_ids(np.asarray(int_ids, dtype=np.int64))

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
            self._journal.append(("upsert", ids, vectors.copy(), metas))

    def _upsert(self, ids: list[str], vectors: np.ndarray, metas: list[dict]) -> None:
        # a later duplicate in the batch wins, as in the memory adapter
        last = {s: n for n, s in enumerate(ids)}
        order = sorted(last.values())
        existing = [self._to_int[ids[n]] for n in order if ids[n] in self._to_int]
        self._remove_int(existing)
        int_ids = []
        for n in order:
            s = ids[n]
            i = self._to_int.get(s)
            if i is None:
                i = self._next_id
                self._next_id += 1
                self._to_int[s] = i
                self._to_str[i] = s
            self._set_meta(i, int(metas[n].get("layer", -1)), str(metas[n].get("doc_id", "")))
            int_ids.append(i)
        self._index.add_with_ids(np.ascontiguousarray(vectors[order]), np.asarray(int_ids, dtype=np.int64))
        self._changed()

    def delete(self, ids: Iterable[str]) -> None:
        ids = list(dict.fromkeys(ids))
        with self._lock:
            if self._delete(ids):
                self._journal.append(("delete", ids))
            elif ids and file_stamp(self.directory / IDMAP_FILE) != self._disk_stamp:
                # another writer may have added them since this handle read the files
                self._journal.append(("delete", ids))
                self._dirty = True

    def _delete(self, ids: list[str]) -> bool:
        gone = [self._to_int.pop(s) for s in ids if s in self._to_int]
        if not gone:
            return False
        self._remove_int(gone)
        for i in gone:
            del self._to_str[i]
            self._drop_meta(i)
        self._changed()
        return True

    # ------------------------------------------------------------------ reads
    def _selector(self, layers: Sequence[int] | None, doc_ids: Sequence[str] | None) -> tuple[int, Any, Any]:
        """(number of allowed vectors, faiss SearchParameters, the selector they point to) for a
        filter; cached (the selector is held so the C++ object outlives the parameters)."""
        key = (None if layers is None else tuple(sorted(set(int(x) for x in layers))),
               None if doc_ids is None else tuple(sorted(set(doc_ids))))
        cached = self._selectors.get(key)
        if cached is not None:
            return cached
        allowed = self._allowed(*key)
        if len(allowed) == 0:
            result: tuple[int, Any, Any] = (0, None, None)
        elif len(allowed) == self._index.ntotal:  # the filter lets everything through
            result = (len(allowed), None, None)
        else:
            selector = faiss.IDSelectorBatch(allowed)
            result = (len(allowed), faiss.SearchParameters(sel=selector), selector)
        if len(self._selectors) > 256:
            self._selectors.clear()
        self._selectors[key] = result
        return result

    def search(self, vector: np.ndarray, k: int, layers: Sequence[int] | None = None,
               doc_ids: Sequence[str] | None = None) -> list[Hit]:
        if k <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != self.dim:
            raise ValueError(f"query has {q.shape[1]} dimensions, the index {self.dim}")
        with self._lock:
            if layers is None and doc_ids is None:
                n_allowed, params = self._index.ntotal, None
            else:
                n_allowed, params, _selector = self._selector(layers, doc_ids)
            if n_allowed == 0:
                return []
            fetch = min(n_allowed, k + _TIE_PAD)
            # One query gains little from OpenMP threads, and on a busy machine their spin-waits
            # cost tens of ms; the thread count is a per-calling-thread OpenMP setting.
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)
            try:
                while True:
                    scores, labels = self._index.search(q, fetch, params=params)
                    pairs = [(float(s), int(i)) for s, i in zip(scores[0], labels[0]) if i >= 0]
                    # keep fetching while the k-th score ties with the last fetched one
                    if fetch >= n_allowed or len(pairs) <= k or pairs[-1][0] < pairs[k - 1][0]:
                        break
                    fetch = min(n_allowed, fetch * 2)
            finally:
                faiss.omp_set_num_threads(threads)
            hits = [Hit(self._to_str[i], s) for s, i in pairs]
        hits.sort(key=lambda h: (-h.score, h.node_id))
        return hits[:k]

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._to_int)

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            present = [s for s in dict.fromkeys(ids) if s in self._to_int]
            if not present:
                return {}
            keys = np.asarray([self._to_int[s] for s in present], dtype=np.int64)
            rows = self._index.reconstruct_batch(keys)
        return {s: np.array(row, dtype=np.float32) for s, row in zip(present, rows)}

    def count(self) -> int:
        with self._lock:
            return int(self._index.ntotal)

    def meta(self, node_id: str) -> dict[str, Any] | None:
        """The ``layer``/``doc_id`` recorded for ``node_id`` (None when absent)."""
        with self._lock:
            i = self._to_int.get(node_id)
            return None if i is None else {"layer": self._layer[i], "doc_id": self._doc[i]}
