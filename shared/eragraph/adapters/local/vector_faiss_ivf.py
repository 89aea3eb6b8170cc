"""The FAISS index's shape, chosen by size (``ivf_min``, default ``IVF_MIN`` vectors):

* below it, exact inner-product search (``IndexIDMap2(IndexFlatIP(dim))``): brute force is both
  exact and fast (a 20k x 384 top-20 takes about a millisecond), but ``remove_ids`` moves the
  whole array and a query reads every vector, so neither scales to a million;
* from it on, ``IndexIVFFlat``: the vectors bucketed under ``nlist = 4 sqrt(n)`` k-means
  centroids (trained on a sample of the index itself), a query scanning the ``nprobe`` nearest
  buckets exactly (``nprobe`` is ``nprobe_fraction`` of the buckets, measured to keep recall@10
  at 0.98 of exact on hard data: the vector benchmark), and a hash-table direct map, so a delete
  takes the row out of its bucket in O(1) instead of moving the array.

A small add to an IVF index (an insert's vectors, a region's summaries, an ingest batch: fewer
than ``SERIAL_ADD_MAX`` rows) runs on one OpenMP thread (``add``): FAISS's add starts a thread
team whatever the batch, and waking it costs more than the work -- on two busy cores about 8 ms
for one vector against 0.03 ms on one thread, on every insert of a large store.

The centroids are retrained when the index has grown fourfold since they were trained, and the
index turns flat again below a quarter of ``ivf_min`` (``needs_reshape``). Each change of shape
costs one pass over the vectors (and k-means on a sample), so over a corpus's growth it runs
about log4(n) times. The vectors are copied a batch at a time through an unnamed spill file
(``spill``, 8192 rows a batch, written from the batch's own buffer), so a change of shape never
holds two indexes (or a copy of the vectors); what it frees goes back to the system
(``release_freed``), so the peak of a build that crosses a shape is the new index, not the new
index plus the old one's heap.

A writer fixes glibc's mmap threshold (``fixed_mmap_threshold``): by default glibc raises it to
the size of every mapped block freed (up to 32 MiB), after which the IVF lists' buffers (each
grown by doubling) come from the heap, and every doubling leaves the old buffer behind as a hole
that stays resident. Fixed at ``MMAP_THRESHOLD``, a buffer above it is a mapping of its own,
handed back whole when it is freed: 200k 256-d vectors added to an IVF index in batches of 256
took 350 MB of resident memory for 197 MB of vectors (peak 420 MB) with the moving threshold and
260 MB (peak 314 MB) with the fixed one (``docs/benchmarks/scale.md``).

A list's buffers below that threshold still come from the heap: each list's codes grow through
1, 2, 4 ... 128 KiB there before they are mappings of their own, and every outgrown buffer is a
hole that stays resident until ``malloc_trim`` (glibc gives back only the heap's top by itself).
Over a 1M-vector build (2,529 lists, 256-d) the holes summed to 88 MB beside 976 MB of vectors,
none of it held by the index (a trim handed it all back). So ``add`` hands the freed heap back
every ``RELEASE_BYTES`` of rows added to IVF indexes: the holes stay under about that much, at
one trim per 16 MiB added (a few milliseconds).
"""

from __future__ import annotations

import ctypes
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import faiss
import numpy as np

from .vector_log import VectorIndexCorruptError

IVF_MIN = 100_000  # from this many vectors on, an IVF index (a flat scan of 100k takes about 12-18 ms)
NPROBE_FRACTION = 0.08  # of the IVF buckets a query scans
TRAIN_PER_LIST = 64  # training sample per bucket (capped at the index's size)
_RESHAPE_BATCH = 8192  # vectors copied at a time when the index changes shape (12 MB at 384-d)
SERIAL_ADD_MAX = 4096  # an IVF add of fewer rows runs on one thread (see ``add``)
RELEASE_BYTES = 16 * 2**20  # rows added to IVF indexes between two hand-backs of the freed heap
_ADDED = 0  # bytes of rows added to IVF indexes since the last hand-back (process-wide, as the heap)


def flat(dim: int) -> Any:
    """An empty exact index."""
    return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))


def is_ivf(index: Any) -> bool:
    return isinstance(index, faiss.IndexIVFFlat)


def nlist(n: int) -> int:
    """Buckets for an IVF index of n vectors: the usual 4 sqrt(n), and at least 39 training
    vectors per bucket (FAISS's own minimum) for small n."""
    return max(1, min(int(4 * n ** 0.5), n // 39))


def nprobe(index: Any, fraction: float) -> int:
    """The buckets an unfiltered query of an IVF index scans."""
    return max(1, min(index.nlist, int(np.ceil(fraction * index.nlist))))


def needs_reshape(index: Any, ivf_min: int) -> bool:
    """Flat to IVF at ``ivf_min``; IVF retrained once it holds four times what its centroids
    were trained for; back to flat below a quarter of ``ivf_min``."""
    n = int(index.ntotal)
    if is_ivf(index):
        trained_for = max((index.nlist / 4) ** 2, 39 * index.nlist)  # the n that nlist() gives this nlist
        return not (ivf_min // 4 <= n < 4 * trained_for)
    return n >= ivf_min


@contextmanager
def one_thread() -> Iterator[None]:
    """FAISS's OpenMP calls made by this thread run on one thread (the setting is the calling
    thread's: other threads' searches keep theirs)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def add(index: Any, vectors: np.ndarray, ids: np.ndarray) -> None:
    """``index.add_with_ids``; on one thread for a small add to an IVF index. Every
    ``RELEASE_BYTES`` of rows added to IVF indexes, the heap's freed pages go back to the system
    (``release_freed``; see the module: the holes the lists' outgrown buffers leave)."""
    global _ADDED
    if is_ivf(index) and len(ids) < SERIAL_ADD_MAX:
        with one_thread():
            index.add_with_ids(vectors, ids)
    else:
        index.add_with_ids(vectors, ids)
    if is_ivf(index):
        _ADDED += int(np.asarray(vectors).nbytes)
        if _ADDED >= RELEASE_BYTES:
            _ADDED = 0
            release_freed()


def release_freed() -> None:
    """Hand the C heap's freed pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). A change of shape frees the old index, the training sample and k-means's scratch
    in many pieces, which the heap would otherwise keep resident beside the new index."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None  # libc's malloc_trim once looked up (False: there is none)

MMAP_THRESHOLD = 128 * 1024  # bytes: glibc's default starting value, kept from moving
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
_FIXED: bool | None = None  # whether this process's threshold was fixed (None: not tried yet)


def fixed_mmap_threshold() -> bool:
    """Fix this process's glibc mmap threshold at MMAP_THRESHOLD (see the module), once; True
    when it is fixed (False elsewhere than glibc)."""
    global _FIXED
    if _FIXED is None:
        try:
            _FIXED = ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        except (OSError, AttributeError):
            _FIXED = False
    return _FIXED


def spill(index: Any, ints: np.ndarray, directory: Path) -> IO[bytes]:
    """An unnamed file in ``directory`` holding the vectors of ``ints`` (in that order), written
    a batch at a time; the caller frees the index before filling the new one from it."""
    out = tempfile.TemporaryFile(dir=directory)
    try:
        for start in range(0, len(ints), _RESHAPE_BATCH):
            batch = np.ascontiguousarray(index.reconstruct_batch(ints[start:start + _RESHAPE_BATCH]))
            out.write(memoryview(batch).cast("B"))  # the batch's own buffer: no second copy
    except BaseException:
        out.close()
        raise
    return out


def new_shape(n: int, ints: np.ndarray, spilled: IO[bytes], dim: int, ivf_min: int) -> Any:
    """The index for n vectors (flat below a quarter of ``ivf_min``, else IVF trained on a
    sample of the spilled vectors), filled from the spill file."""
    if n < ivf_min // 4:
        return filled(flat(dim), ints, spilled, dim)
    buckets = nlist(n)
    # the Python wrapper keeps the quantizer alive as long as the index
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, buckets, faiss.METRIC_INNER_PRODUCT)
    rows = np.sort(np.random.default_rng(n).choice(n, size=min(n, TRAIN_PER_LIST * buckets), replace=False))
    sample = np.empty((len(rows), dim), dtype=np.float32)
    taken = 0
    for start, batch in _batches(len(ints), spilled, dim):
        pick = rows[(rows >= start) & (rows < start + len(batch))] - start
        sample[taken:taken + len(pick)] = batch[pick]
        taken += len(pick)
    index.train(sample)
    del sample
    release_freed()  # k-means's scratch, before the lists fill
    index.set_direct_map_type(faiss.DirectMap.Hashtable)
    return filled(index, ints, spilled, dim)


def filled(index: Any, ints: np.ndarray, spilled: IO[bytes], dim: int) -> Any:
    """``index`` with the spilled vectors added under ``ints``."""
    for start, batch in _batches(len(ints), spilled, dim):
        add(index, batch, ints[start:start + len(batch)])
    return index


def _batches(n: int, spilled: IO[bytes], dim: int) -> Iterable[tuple[int, np.ndarray]]:
    """The spilled vectors, _RESHAPE_BATCH rows at a time, with the row each batch starts at."""
    spilled.seek(0)
    for start in range(0, n, _RESHAPE_BATCH):
        rows = min(_RESHAPE_BATCH, n - start)
        batch = np.empty((rows, dim), dtype=np.float32)
        if spilled.readinto(memoryview(batch).cast("B")) != batch.nbytes:
            raise VectorIndexCorruptError("the vectors spilled for a change of shape were cut short")
        yield start, batch
