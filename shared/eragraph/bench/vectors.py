"""`eragraph bench vectors`: candidate local vector indexes on the same vectors, at each size.

    eragraph bench vectors --sizes 100000,1000000 --data spread \\
        --backends faiss-flat,faiss-hnsw,usearch,hnswlib,lancedb --out bench-results/vectors-spread.json

The question it answers: which index can replace the local profile's exact FAISS index
(``IndexIDMap2(IndexFlatIP)``, whose ``remove_ids`` moves the whole array) at a million chunks.
Per backend and size, each in a process of its own (so its peak RSS is its own):

* build: the N vectors added in batches of 10,000, then the ANN index where the library builds
  it apart (LanceDB) (seconds, vectors per second; 2 threads);
* query: ``--queries`` questions, top-10, one thread, one question at a time (p50/p95 ms), and
  recall@10 against the exact top-10 (numpy brute force over the same vectors; an id whose
  score ties the 10th counts, as duplicate vectors do in a real cache);
* filtered query: the same questions restricted to one layer -- layer 0 (90% of the rows) and
  layer 3 (about 3%) -- with each library's own filter where it has one (``filter_method`` in the
  row says how), recall against the exact top-10 of that layer;
* delete and replace one id (median and p95 of 200 single operations) -- what a summary
  replacement costs -- and whether the space is reclaimed or only tombstoned; then the queries
  again over the changed set (p50/p95, recall, deleted ids returned);
* save (seconds, bytes on disk) and open again (seconds; memory-mapped where the library can);
  LanceDB is on disk from the start: its size before and after ``optimize`` (compaction), which is
  timed, with the queries once more after it;
* RSS: the process's peak minus its resident size once the raw vectors were made (LanceDB reads
  its files through the page cache, which RSS does not count).

The backends: ``faiss-flat`` (the exact index the local profile used alone before), ``faiss-ivf``
(IVF-Flat trained on a sample of the data, nprobe = ``--ef``, buckets ``--nlist``),
``eragraph-faiss`` (the local profile's own ``FaissVectorIndex`` with its defaults: flat below
100k vectors, IVF from there on; flushed after every build batch, as the engine flushes after
each ingest; the single deletes and replacements in memory, as every backend's),
``faiss-hnsw``, ``usearch``, ``hnswlib`` and ``lancedb``;
``--m``/``--ef-construction`` set the HNSW graphs' build parameters.

Every vector has a layer (90% layer 0, the rest spread over 1-3), as summaries sit above chunks.

The vectors (``--data``; the same seed gives every backend the same vectors):

* ``mixture``: ``--clusters`` unit-norm topic centres in ``--dim`` dimensions, each vector a centre
  plus Gaussian noise, normalized; the queries are perturbed copies of stored vectors. Easy: the
  graph indexes all score recall 1.0 on it at 100k.
* ``spread``: a Gaussian in a 64-dimensional subspace whose axes shrink as i^-0.5, a small common
  offset and isotropic noise, normalized: no clusters, neighbours on a continuum (what makes
  text embeddings hard for a graph index); queries are fresh draws, never stored.
* ``sqlite:PATH``: real vectors from an Eragraph embedding cache (table ``embeddings``, float32
  blobs; rows of ``--dim`` only), shuffled by the seed; the first ``--queries`` are held out as
  queries and a size is capped at what remains. The result names the file, not its path."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .common import finish, percentile
from .vector_backends import ADAPTERS, BATCH

BACKENDS = ("faiss-flat", "faiss-ivf", "eragraph-faiss", "faiss-hnsw", "usearch", "hnswlib", "lancedb")
K = 10
OPS = 200
DATA_NOISE = 0.8   # noise norm around a unit centre: same-topic cosine about 0.6, as MiniLM neighbours
QUERY_NOISE = 0.5  # a query is a stored vector moved by this norm
SPREAD = {"latent": 64, "decay": 0.5, "common": 0.1, "noise": 0.6}
LAYER_SHARE = 0.9  # of the rows in layer 0; the rest uniformly in layers 1-3
FILTERS = {"layer0": 0, "layer3": 3}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("vectors", help="candidate local vector indexes on the same vectors",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100000", help="comma-separated vector counts (default 100000)")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help=f"comma-separated, of {', '.join(ADAPTERS)} (default: {', '.join(BACKENDS)})")
    p.add_argument("--data", default="mixture", help="mixture (default), spread, or sqlite:PATH (an embedding cache)")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--clusters", type=int, default=2000, help="mixture only")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--ef", type=int, help="query-time candidate list of every graph index (default: each "
                   "adapter's own: faiss-hnsw 96, usearch 64, hnswlib 64, lancedb 128)")
    p.add_argument("--refine", type=int, help="LanceDB only: re-score refine x 10 candidates on the raw vectors "
                   "(default: none for IVF_HNSW_SQ, 20 for lancedb-ivfpq)")
    p.add_argument("--m", type=int, help="graph degree M of the HNSW indexes (default: each adapter's own)")
    p.add_argument("--ef-construction", type=int, help="build-time candidate list of the HNSW indexes")
    p.add_argument("--nlist", type=int, help="faiss-ivf only: number of buckets (default 4 x sqrt(n)); "
                   "its nprobe is --ef")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", metavar="FILE.json", help="also write the result to this file")
    p.add_argument("--no-progress", action="store_true", help="(accepted for symmetry; prints per backend)")
    return p


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


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


def make_spread(n: int, count: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n stored vectors and ``count`` queries from the same distribution (SPREAD); the queries
    come from a stream of their own, so they do not change with n."""
    rng = np.random.default_rng(seed)
    latent = min(SPREAD["latent"], dim)
    common = unit(rng.standard_normal(dim))
    basis = np.linalg.qr(rng.standard_normal((dim, latent)))[0].T.astype(np.float32)
    scale = np.arange(1, latent + 1, dtype=np.float32) ** -SPREAD["decay"]
    scale /= np.linalg.norm(scale)

    def draw(gen: np.random.Generator, m: int) -> np.ndarray:
        out = np.empty((m, dim), dtype=np.float32)
        for start in range(0, m, 100_000):
            size = min(m, start + 100_000) - start
            z = gen.standard_normal((size, latent), dtype=np.float32) * scale
            noise = gen.standard_normal((size, dim), dtype=np.float32) * (SPREAD["noise"] / np.sqrt(dim))
            out[start:start + size] = unit(SPREAD["common"] * common + z @ basis + noise)
        return out

    return draw(rng, n), draw(np.random.default_rng(seed + 1), count)


def read_cache(path: str, dim: int) -> np.ndarray:
    """Every vector of ``dim`` in an embedding cache, in key order (read-only)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no embedding cache at {path}")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        blobs = [b for (b,) in con.execute("SELECT vec FROM embeddings WHERE dim = ? ORDER BY key", (dim,))]
    finally:
        con.close()
    if not blobs:
        raise ValueError(f"{Path(path).name} holds no vectors of dim {dim}")
    return unit(np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim))


def load_data(kind: str, n: int, dim: int, clusters: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(stored vectors, queries) for one size; with real vectors, n may come back smaller."""
    if kind == "mixture":
        data = make_vectors(n, dim, clusters, seed)
        return data, make_queries(data, queries, seed)
    if kind == "spread":
        return make_spread(n, queries, dim, seed)
    if kind.startswith("sqlite:"):
        real = read_cache(kind.split(":", 1)[1], dim)
        real = real[np.random.default_rng(seed).permutation(len(real))]
        return np.ascontiguousarray(real[queries:queries + n]), np.ascontiguousarray(real[:queries])
    raise ValueError(f"unknown --data {kind!r}: mixture, spread or sqlite:PATH")


def describe_data(args: Any) -> dict:
    kind = args.data
    if kind == "mixture":
        return {"kind": "mixture", "clusters": args.clusters, "data_noise": DATA_NOISE, "query_noise": QUERY_NOISE,
                "queries": "perturbed copies of stored vectors"}
    if kind == "spread":
        return {"kind": "spread", **SPREAD, "queries": "fresh draws from the same distribution, not stored"}
    path = Path(kind.split(":", 1)[1])
    return {"kind": "sqlite", "file": path.name, "queries": f"{args.queries} held-out cached vectors, not stored"}


def make_layers(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 3)
    upper = rng.integers(1, 4, n).astype(np.int8)
    return np.where(rng.random(n) < LAYER_SHARE, 0, upper).astype(np.int8)


def exact_top(data: np.ndarray, queries: np.ndarray, k: int = K, allowed: np.ndarray | None = None) -> np.ndarray:
    """Row numbers of the exact top-k by inner product; ``allowed`` (a bool per row) leaves the
    other rows out."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(data), 200_000):
        scores = queries @ data[start:start + 200_000].T
        if allowed is not None:
            scores[:, ~allowed[start:start + 200_000]] = -np.inf
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


class Truth:
    """The exact top-K of each query over the rows ``allowed`` (all when None), and its judge: a
    found id is a hit when it is one of those K, or a valid id whose vector scores as high as the
    K-th (a tie: a real cache holds duplicate vectors, whose order no two libraries agree on)."""

    def __init__(self, data: np.ndarray, qs: np.ndarray, ids: np.ndarray, allowed: np.ndarray | None = None) -> None:
        rows = exact_top(data, qs, allowed=allowed)
        self.data, self.qs = data, qs
        self.ids = ids[rows]
        self.kth = np.einsum("ij,ij->i", qs, data[rows[:, -1]])
        self.valid = np.zeros(int(ids.max()) + 1, dtype=bool)
        self.valid[ids if allowed is None else ids[allowed]] = True
        self.row_of = np.zeros(len(self.valid), dtype=np.int64)
        self.row_of[ids] = np.arange(len(ids))

    def recall(self, i: int, found: np.ndarray) -> float:
        f = np.unique(np.asarray(found, dtype=np.int64))
        f = f[(f >= 0) & (f < len(self.valid))]
        exact = np.isin(f, self.ids[i])
        tie = self.valid[f] & (self.data[self.row_of[f]] @ self.qs[i] >= self.kth[i] - 1e-5)
        return min(K, int(np.count_nonzero(exact | tie))) / K


def timed_queries(search: Any, qs: np.ndarray, truth: Truth) -> tuple[list[float], list[float], list]:
    """Each query alone: (milliseconds, recall@K, what was found)."""
    ms, hits, found = [], [], []
    for i, q in enumerate(qs):
        t0 = time.perf_counter()
        f = search(q)
        ms.append((time.perf_counter() - t0) * 1000.0)
        found.append(f)
        hits.append(truth.recall(i, f))
    return ms, hits, found


def summary(ms: list[float], hits: list[float], prefix: str) -> dict:
    return {f"{prefix}_ms_p50": round(percentile(ms, 50), 3), f"{prefix}_ms_p95": round(percentile(ms, 95), 3),
            f"{prefix}_recall_at_10": round(float(np.mean(hits)), 4)}


TUNING = {"m": "M", "ef_construction": "EF_CONSTRUCTION", "nlist": "NLIST"}  # flag -> adapter attribute


def tune(backend: str, tuning: dict | None) -> None:
    """Set the build parameters given on the command line on the backend's adapter class (this
    process only: each backend runs in a spawned process of its own); a parameter the backend
    does not have is left alone."""
    cls = ADAPTERS[backend]
    for flag, value in (tuning or {}).items():
        if value is not None and hasattr(cls, TUNING[flag]):
            setattr(cls, TUNING[flag], value)


def measure(backend: str, n: int, data_kind: str, dim: int, clusters: int, queries: int, seed: int,
            ef: int | None = None, refine: int | None = None, tuning: dict | None = None) -> dict:
    """One backend at one size, in the calling process."""
    tune(backend, tuning)
    data, qs = load_data(data_kind, n, dim, clusters, queries, seed)
    n = len(data)
    layers = make_layers(n, seed)
    ids = np.arange(n, dtype=np.int64)
    truth = Truth(data, qs, ids)
    filtered_truth = {name: Truth(data, qs, ids, allowed=layers == layer) for name, layer in FILTERS.items()}
    ops = min(OPS, n // 4)  # a tiny size gets fewer
    victims = np.random.default_rng(seed + 2).choice(n, size=2 * ops, replace=False)
    # after the operations: the first ops victims gone, the others back under new ids n, n+1, ...
    current_ids = ids.copy()
    current_ids[victims[ops:]] = n + np.arange(ops)
    alive = np.ones(n, dtype=bool)
    alive[victims[:ops]] = False
    truth_after = Truth(data, qs, current_ids, allowed=alive)
    base_rss = status_mb("VmRSS")
    reset_peak()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        index = ADAPTERS[backend](dim, 2, folder, ef, refine)
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            index.add(ids[start:start + BATCH], data[start:start + BATCH], layers[start:start + BATCH])
        added = time.perf_counter()
        getattr(index, "finish_build", lambda: None)()
        build = time.perf_counter() - started
        getattr(index, "for_queries", lambda: None)()
        row: dict[str, Any] = {"backend": backend, "n": n, "params": index.params(),
                               "build_seconds": round(build, 2), "vectors_per_second": round(n / build)}
        if hasattr(index, "finish_build"):
            row["index_build_seconds"] = round(build - (added - started), 2)
        ms, hits, _ = timed_queries(partial(index.search, k=K), qs, truth)
        row.update({"query_ms_p50": round(percentile(ms, 50), 3), "query_ms_p95": round(percentile(ms, 95), 3),
                    "recall_at_10": round(float(np.mean(hits)), 4), "filter_method": ADAPTERS[backend].filter_method})
        for name, layer in FILTERS.items():
            fms, fhits, _ = timed_queries(partial(index.search_layer, k=K, layer=layer), qs, filtered_truth[name])
            row.update(summary(fms, fhits, f"filtered_{name}"))
        delete_ms, replace_ms = [], []
        for v in victims[:ops]:
            t0 = time.perf_counter()
            index.delete(np.array([v], dtype=np.int64))
            delete_ms.append((time.perf_counter() - t0) * 1000.0)
        for v in victims[ops:]:  # a summary replaced: the old id out, a new id in
            t0 = time.perf_counter()
            index.delete(np.array([v], dtype=np.int64))
            index.add(current_ids[v:v + 1], data[v:v + 1], layers[v:v + 1])
            replace_ms.append((time.perf_counter() - t0) * 1000.0)
        row.update({"operations": ops, "delete_ms_median": round(statistics.median(delete_ms), 4),
                    "delete_ms_p95": round(percentile(delete_ms, 95), 4),
                    "replace_ms_median": round(statistics.median(replace_ms), 4),
                    "replace_ms_p95": round(percentile(replace_ms, 95), 4)})
        deleted = {int(v) for v in victims}
        ams, ahits, after = timed_queries(partial(index.search, k=K), qs, truth_after)
        row.update(summary(ams, ahits, "after_changes_query"))
        row["deleted_ids_returned_after"] = sum(1 for f in after for i in f if int(i) in deleted)
        row["reclaims_deleted_space"] = ADAPTERS[backend].reclaims
        peak_rss = status_mb("VmHWM")
        t0 = time.perf_counter()
        index.save(folder)
        row["save_seconds"] = round(time.perf_counter() - t0, 2)
        row["file_bytes"] = dir_bytes(folder)
        if hasattr(index, "maintain"):
            t0 = time.perf_counter()
            index.maintain()
            row["optimize_seconds"] = round(time.perf_counter() - t0, 2)
            row["file_bytes_after_optimize"] = dir_bytes(folder)
            oms, ohits, _ = timed_queries(partial(index.search, k=K), qs, truth_after)
            row.update(summary(oms, ohits, "after_optimize_query"))
        del index
        reopened = ADAPTERS[backend](dim, 1, folder, ef, refine)
        t0 = time.perf_counter()
        reopened.open(folder)
        row["open_seconds"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        reopened.search(qs[0], K)
        row["first_query_after_open_ms"] = round((time.perf_counter() - t0) * 1000.0, 2)
        del reopened
    row["raw_vectors_mb"] = round(data.nbytes / 2**20, 1)
    row["rss_peak_minus_vectors_mb"] = round(peak_rss - base_rss, 1)
    return row


def _child(conn: Any, *args: Any) -> None:
    try:
        started = time.perf_counter()
        row = measure(*args)
        row["wall_seconds"] = round(time.perf_counter() - started, 1)  # data, truth and all the steps
        conn.send(row)
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
    data = describe_data(args)  # also rejects an unknown --data before any work
    if data["kind"] == "sqlite":
        available = len(read_cache(args.data.split(":", 1)[1], args.dim)) - args.queries
        data["available_vectors"] = available
        capped = sorted({min(n, available) for n in sizes})
        if capped != sorted(sizes):
            data["sizes_capped"] = f"asked {sizes}, ran {capped}"
        sizes = capped
    # spawned, not forked: a child forked from a process whose OpenMP threads (FAISS) have run
    # can deadlock in its first FAISS call (seen in the test suite: add_with_ids never returned)
    ctx = mp.get_context("spawn")
    load_before = os.getloadavg()
    rows = []
    for n in sizes:
        for backend in backends:
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(child, backend, n, args.data, args.dim, args.clusters,
                                                    args.queries, args.seed, args.ef, args.refine,
                                                    {f: getattr(args, f, None) for f in TUNING}))
            proc.start()
            child.close()
            row = parent.recv() if parent.poll(None) else {"backend": backend, "n": n, "error": "no result"}
            proc.join()
            if proc.exitcode and "error" not in row:
                row["error"] = f"exit status {proc.exitcode}"
            rows.append(row)
            print(render_row(row), file=sys.stderr, flush=True)
    result = {"vectors": vectors_line(data, args), "data": data,
              "layers": f"{LAYER_SHARE:.0%} layer 0, the rest uniformly layers 1-3; filters {FILTERS}",
              "queries": args.queries, "k": K, "threads": {"build": 2, "query": 1},
              "libraries": versions(backends), "rows": rows,
              # other work on the machine inflates every time here: the 1-minute load average
              # before and after the run (the machine's core count is in `machine`)
              "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]}
    # the command as run, but an embedding cache named by its file only (no machine's path)
    argv = [private(a) for a in (getattr(args, "argv", None) or sys.argv[1:])]
    return finish(result, argparse.Namespace(**{**vars(args), "argv": argv}), "vectors")


def private(arg: str) -> str:
    for prefix in ("sqlite:", "--data=sqlite:"):
        if arg.startswith(prefix):
            return prefix + Path(arg[len(prefix):]).name
    return arg


def vectors_line(data: dict, args: Any) -> str:
    if data["kind"] == "mixture":
        return f"seeded mixture of {args.clusters} clusters, dim {args.dim}, unit norm (seed {args.seed})"
    if data["kind"] == "spread":
        return (f"seeded spread: a {SPREAD['latent']}-dim Gaussian subspace with noise, dim {args.dim}, "
                f"unit norm (seed {args.seed})")
    return f"all-MiniLM-L6-v2 vectors from {data['file']}, dim {args.dim}, shuffled (seed {args.seed})"


def versions(backends: list[str]) -> dict[str, str]:
    """The installed release of each library the run used."""
    from importlib.metadata import PackageNotFoundError, version

    wanted = {"faiss": "faiss-cpu", "usearch": "usearch", "hnswlib": "hnswlib", "lancedb": "lancedb"}
    out = {}
    for name, dist in wanted.items():
        if any(b.startswith(name) for b in backends):
            for key, package in ((name, dist),) + ((("pyarrow", "pyarrow"),) if name == "lancedb" else ()):
                try:
                    out[key] = version(package)
                except PackageNotFoundError:  # the backend's row then says why it failed
                    out[key] = "not installed"
    return out


def render_row(row: dict) -> str:
    if "error" in row:
        return f"{row['backend']:>10} n={row['n']}: {row['error']}"
    return (f"{row['backend']:>10} n={row['n']}: build {row['build_seconds']} s, query p50 {row['query_ms_p50']} ms "
            f"p95 {row['query_ms_p95']} ms, recall@10 {row['recall_at_10']}, filtered(layer 0) p95 "
            f"{row['filtered_layer0_ms_p95']} ms recall {row['filtered_layer0_recall_at_10']}, delete "
            f"{row['delete_ms_median']} ms, replace {row['replace_ms_median']} ms, file "
            f"{row['file_bytes'] / 2**20:.0f} MiB, rss-vectors {row['rss_peak_minus_vectors_mb']} MB, "
            f"{row['wall_seconds']} s in all")
