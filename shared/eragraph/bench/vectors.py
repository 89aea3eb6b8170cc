"""`eragraph bench vectors`: candidate local vector indexes on the same vectors, at each size.

    eragraph bench vectors --sizes 100000,1000000 --backends faiss-flat,faiss-hnsw,usearch,hnswlib \\
        --out bench-results/vectors-synthetic.json

The question it answers: which index can replace the local profile's exact FAISS index
(``IndexIDMap2(IndexFlatIP)``, whose ``remove_ids`` moves the whole array) at a million chunks.
Per backend and size, each in a process of its own (so its peak RSS is its own):

* build: the N vectors added in batches of 10,000 (seconds, vectors per second; 2 threads);
* query: ``--queries`` questions, top-10, one thread, one question at a time (p50/p95 ms), and
  recall@10 against the exact top-10 (numpy brute force over the same vectors);
* delete and replace one id (median and p95 of 200 single operations) -- what a summary
  replacement costs -- and whether the space is reclaimed or only tombstoned;
* save (seconds, bytes on disk) and open again (seconds; memory-mapped where the library can);
* RSS: the process's peak minus its resident size once the raw vectors were made.

The vectors: a seeded mixture of ``--clusters`` unit-norm topic centres in ``--dim`` dimensions
(384, as all-MiniLM-L6-v2), each vector a centre plus Gaussian noise, normalized; the queries are
perturbed copies of stored vectors (noise norms 0.8 and 0.5). Text embeddings cluster by topic; uniform random vectors,
the worst case for every graph index, would understate recall. The same seed gives every
backend the same vectors."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .common import finish, percentile

BACKENDS = ("faiss-flat", "faiss-hnsw", "usearch", "hnswlib")
BATCH = 10_000
K = 10
OPS = 200
DATA_NOISE = 0.8   # noise norm around a unit centre: same-topic cosine about 0.6, as MiniLM neighbours
QUERY_NOISE = 0.5  # a query is a stored vector moved by this norm


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("vectors", help="candidate local vector indexes on the same vectors",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100000", help="comma-separated vector counts (default 100000)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated, of {', '.join(BACKENDS)}")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=2000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", metavar="FILE.json", help="also write the result to this file")
    p.add_argument("--no-progress", action="store_true", help="(accepted for symmetry; prints per backend)")
    return p


def make_vectors(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        block = centres[rng.integers(0, clusters, stop - start)]
        block = block + DATA_NOISE * rng.standard_normal(block.shape, dtype=np.float32) / np.sqrt(dim)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


def make_queries(data: np.ndarray, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    picks = data[rng.integers(0, len(data), count)]
    q = picks + QUERY_NOISE * rng.standard_normal(picks.shape, dtype=np.float32) / np.sqrt(data.shape[1])
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def exact_top(data: np.ndarray, queries: np.ndarray, k: int = K) -> np.ndarray:
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(data), 200_000):
        scores = queries @ data[start:start + 200_000].T
        top = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
        s = np.take_along_axis(scores, top, axis=1)
        cand_s = np.concatenate([best_s, s], axis=1)
        cand_i = np.concatenate([best_i, top + start], axis=1)
        order = np.argsort(-cand_s, axis=1)[:, :k]
        best_s, best_i = np.take_along_axis(cand_s, order, axis=1), np.take_along_axis(cand_i, order, axis=1)
    return best_i


def status_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    """Start VmHWM (peak RSS) afresh at the current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:  # not Linux, or not allowed: the peak then includes the set-up
        pass


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- the candidates: each a small adapter with the same five operations --------------------------

class FaissFlat:
    reclaims = True  # remove_ids compacts the array: O(n) per call

    def __init__(self, dim: int, threads: int) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        self.faiss = faiss
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))

    def for_queries(self) -> None:
        """One thread per query, as the other libraries are asked (OpenMP threads on one
        question only wait on each other)."""
        self.faiss.omp_set_num_threads(1)

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        self.index.add_with_ids(vecs, ids)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(q[None, :], k)[1][0]

    def remove(self, ids: np.ndarray) -> None:
        self.index.remove_ids(np.asarray(ids, dtype=np.int64))

    def save(self, folder: Path) -> None:
        self.faiss.write_index(self.index, str(folder / "index.faiss"))

    def open(self, folder: Path) -> None:
        self.index = self.faiss.read_index(str(folder / "index.faiss"))


class FaissHnsw(FaissFlat):
    """HNSW cannot remove: a delete is a tombstone, skipped at search through an IDSelector."""
    reclaims = False

    def __init__(self, dim: int, threads: int) -> None:
        super().__init__(dim, threads)
        hnsw = self.faiss.IndexHNSWFlat(dim, 32, self.faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = 80
        self.index = self.faiss.IndexIDMap2(hnsw)
        self.deleted: set[int] = set()
        self.selector: tuple = ()

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        if not self.deleted:
            return self.index.search(q[None, :], k, params=self.faiss.SearchParametersHNSW(efSearch=96))[1][0]
        batch = self.faiss.IDSelectorBatch(np.fromiter(self.deleted, dtype=np.int64))
        skip = self.faiss.IDSelectorNot(batch)
        self.selector = (batch, skip)  # the selectors must outlive the call
        return self.index.search(q[None, :], k, params=self.faiss.SearchParametersHNSW(efSearch=96, sel=skip))[1][0]

    def remove(self, ids: np.ndarray) -> None:
        self.deleted.update(int(i) for i in ids)



class Usearch:
    reclaims = True  # removed slots are reused by later adds

    def __init__(self, dim: int, threads: int) -> None:
        from usearch.index import Index

        self.Index, self.threads, self.dim = Index, threads, dim
        self.index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=128,
                           expansion_search=64)

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        self.index.add(ids, vecs, threads=self.threads)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.index.search(q, k, threads=1).keys)

    def remove(self, ids: np.ndarray) -> None:
        self.index.remove(np.asarray(ids, dtype=np.uint64))

    def save(self, folder: Path) -> None:
        self.index.save(str(folder / "index.usearch"))

    def open(self, folder: Path) -> None:
        self.index = self.Index.restore(str(folder / "index.usearch"), view=True)


class Hnswlib:
    reclaims = True  # mark_deleted, then replace_deleted reuses the slot

    def __init__(self, dim: int, threads: int) -> None:
        import hnswlib

        self.hnswlib, self.dim, self.threads = hnswlib, dim, threads
        self.index = hnswlib.Index(space="ip", dim=dim)
        self.capacity = 0

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        if not self.capacity:
            self.capacity = BATCH
            self.index.init_index(max_elements=self.capacity, ef_construction=100, M=16, allow_replace_deleted=True)
            self.index.set_ef(64)
        need = self.index.get_current_count() + len(ids)
        if need > self.capacity:  # doubling: a few resizes up to a million
            self.capacity = max(need, 2 * self.capacity)
            self.index.resize_index(self.capacity)
        self.index.add_items(vecs, ids, num_threads=self.threads, replace_deleted=True)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self.index.knn_query(q[None, :], k=k, num_threads=1)[0][0]

    def remove(self, ids: np.ndarray) -> None:
        for i in ids:
            self.index.mark_deleted(int(i))

    def save(self, folder: Path) -> None:
        self.index.save_index(str(folder / "index.hnsw"))

    def open(self, folder: Path) -> None:
        self.index = self.hnswlib.Index(space="ip", dim=self.dim)
        self.index.load_index(str(folder / "index.hnsw"), allow_replace_deleted=True)
        self.index.set_ef(64)


ADAPTERS: dict[str, Callable[[int, int], Any]] = {
    "faiss-flat": FaissFlat, "faiss-hnsw": FaissHnsw, "usearch": Usearch, "hnswlib": Hnswlib}


def measure(backend: str, n: int, dim: int, clusters: int, queries: int, seed: int) -> dict:
    """One backend at one size, in the calling process."""
    data = make_vectors(n, dim, clusters, seed)
    qs = make_queries(data, queries, seed)
    truth = exact_top(data, qs)
    base_rss = status_mb("VmRSS")
    reset_peak()
    index = ADAPTERS[backend](dim, 2)
    ids = np.arange(n, dtype=np.int64)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        index.add(ids[start:start + BATCH], data[start:start + BATCH])
    build = time.perf_counter() - started
    getattr(index, "for_queries", lambda: None)()
    found, ms = [], []
    for q in qs:
        t0 = time.perf_counter()
        found.append(index.search(q, K))
        ms.append((time.perf_counter() - t0) * 1000.0)
    hits = [len(set(map(int, f)) & set(map(int, t))) / K for f, t in zip(found, truth)]
    rng = np.random.default_rng(seed + 2)
    victims = rng.choice(n, size=2 * OPS, replace=False)
    delete_ms, replace_ms = [], []
    for v in victims[:OPS]:
        t0 = time.perf_counter()
        index.remove(np.array([v], dtype=np.int64))
        delete_ms.append((time.perf_counter() - t0) * 1000.0)
    next_id = n
    for v in victims[OPS:]:  # a summary replaced: the old id out, a new id in
        t0 = time.perf_counter()
        index.remove(np.array([v], dtype=np.int64))
        index.add(np.array([next_id], dtype=np.int64), data[v:v + 1])
        replace_ms.append((time.perf_counter() - t0) * 1000.0)
        next_id += 1
    deleted = {int(v) for v in victims}
    after = [index.search(q, K) for q in qs[:50]]
    leaked = sum(1 for f in after for i in f if int(i) in deleted)
    peak_rss = status_mb("VmHWM")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        index.save(folder)
        save_s = time.perf_counter() - t0
        size = dir_bytes(folder)
        del index
        reopened = ADAPTERS[backend](dim, 1)
        t0 = time.perf_counter()
        reopened.open(folder)
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reopened.search(qs[0], K)
        first_query_ms = (time.perf_counter() - t0) * 1000.0
    return {
        "backend": backend, "n": n,
        "build_seconds": round(build, 2), "vectors_per_second": round(n / build),
        "query_ms_p50": round(percentile(ms, 50), 3), "query_ms_p95": round(percentile(ms, 95), 3),
        "recall_at_10": round(float(np.mean(hits)), 4),
        "delete_ms_median": round(statistics.median(delete_ms), 4), "delete_ms_p95": round(percentile(delete_ms, 95), 4),
        "replace_ms_median": round(statistics.median(replace_ms), 4),
        "replace_ms_p95": round(percentile(replace_ms, 95), 4),
        "deleted_ids_returned_after": leaked,
        "reclaims_deleted_space": ADAPTERS[backend].reclaims,
        "save_seconds": round(save_s, 2), "file_bytes": size, "open_seconds": round(open_s, 3),
        "first_query_after_open_ms": round(first_query_ms, 2),
        "raw_vectors_mb": round(data.nbytes / 2**20, 1),
        "rss_peak_minus_vectors_mb": round(peak_rss - base_rss, 1),
    }


def _child(conn: Any, *args: Any) -> None:
    try:
        conn.send(measure(*args))
    except Exception as exc:  # reported, not raised: one backend failing must not lose the others
        conn.send({"backend": args[0], "n": args[1], "error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def run(args: Any) -> dict:
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    backends = [b.strip() for b in str(args.backends).split(",") if b.strip()]
    unknown = sorted(set(backends) - set(ADAPTERS))
    if unknown:
        raise ValueError(f"unknown backends {unknown}; choose from {', '.join(ADAPTERS)}")
    ctx = mp.get_context("fork")
    load_before = os.getloadavg()
    rows = []
    for n in sizes:
        for backend in backends:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(child, backend, n, args.dim, args.clusters, args.queries, args.seed))
            proc.start()
            child.close()
            row = parent.recv() if parent.poll(None) else {"backend": backend, "n": n, "error": "no result"}
            proc.join()
            if proc.exitcode and "error" not in row:
                row["error"] = f"exit status {proc.exitcode}"
            rows.append(row)
            print(render_row(row), file=sys.stderr, flush=True)
    result = {"vectors": f"seeded mixture of {args.clusters} clusters, dim {args.dim}, unit norm (seed {args.seed})",
              "queries": args.queries, "k": K, "threads": {"build": 2, "query": 1},
              "libraries": versions(backends), "rows": rows,
              # other work on the machine inflates every time here: the 1-minute load average
              # before and after the run (the machine's core count is in `machine`)
              "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]}
    return finish(result, args, "vectors")


def versions(backends: list[str]) -> dict[str, str]:
    """The installed release of each library the run used."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name, dist in (("faiss", "faiss-cpu"), ("usearch", "usearch"), ("hnswlib", "hnswlib")):
        if any(b.startswith(name) for b in backends):
            try:
                out[name] = version(dist)
            except PackageNotFoundError:  # the backend's row then says why it failed
                out[name] = "not installed"
    return out


def render_row(row: dict) -> str:
    if "error" in row:
        return f"{row['backend']:>10} n={row['n']}: {row['error']}"
    return (f"{row['backend']:>10} n={row['n']}: build {row['build_seconds']} s, query p50 {row['query_ms_p50']} ms "
            f"p95 {row['query_ms_p95']} ms, recall@10 {row['recall_at_10']}, delete {row['delete_ms_median']} ms, "
            f"replace {row['replace_ms_median']} ms, file {row['file_bytes'] / 2**20:.0f} MiB, "
            f"rss-vectors {row['rss_peak_minus_vectors_mb']} MB")
