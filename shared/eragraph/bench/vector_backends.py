"""The candidates of `eragraph bench vectors`: each a small adapter with the same operations.

    add(ids, vecs, layers)        a batch in (ids int64, float32 unit vectors, int8 layer per row)
    finish_build()                (optional) what must follow the adds before queries: an ANN index
    search(q, k) -> ids           top-k by inner product
    search_layer(q, k, layer)     top-k among the rows of one layer (see ``filter_method``)
    delete(ids)                   delete these ids
    save(folder) / open(folder)   write to and read back from ``folder``
    maintain() -> dict            (optional) the library's own compaction, timed by the caller

A constructor takes ``(dim, threads, folder, ef, refine)``: ``folder`` is where an on-disk store
lives (the in-memory indexes only write there when saved); ``ef`` overrides the query-time
candidate list of a graph index (None: the adapter's default below); ``refine`` (LanceDB only)
re-scores refine x k candidates on the raw vectors. ``params()`` records what was set.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..config import library_env, set_library_env

BATCH = 10_000


def postfilter(search: Any, q: np.ndarray, k: int, layer: int, layers: dict[int, int], size: int) -> np.ndarray:
    """For a library with no filter: ask for more and more until k of the wanted layer come back
    (or everything was asked for)."""
    want = 2 * k
    while True:
        found = search(q, min(want, size))
        kept = [int(i) for i in found if i >= 0 and layers.get(int(i)) == layer]
        if len(kept) >= k or want >= size:
            return np.asarray(kept[:k], dtype=np.int64)
        want *= 4


class FaissFlat:
    reclaims = True  # remove_ids compacts the array: O(n) per call
    filter_method = "IDSelectorBitmap over the ids of the layer, passed in SearchParameters"
    default_ef: int | None = None

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        self.faiss = faiss
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self.ef = ef or self.default_ef
        self.layer_of = np.zeros(0, dtype=np.int8)
        self.bitmaps: dict[int, Any] = {}

    def params(self) -> dict:
        return {"index": "IndexIDMap2(IndexFlatIP)"}

    def for_queries(self) -> None:
        """One thread per query, as the other libraries are asked (OpenMP threads on one
        question only wait on each other)."""
        self.faiss.omp_set_num_threads(1)

    def _note_layers(self, ids: np.ndarray, layers: np.ndarray) -> None:
        top = int(ids.max()) + 1
        if top > len(self.layer_of):
            grown = np.full(max(top, 2 * len(self.layer_of)), -1, dtype=np.int8)
            grown[:len(self.layer_of)] = self.layer_of
            self.layer_of = grown
        self.layer_of[ids] = layers
        self.bitmaps.clear()

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        self.index.add_with_ids(vecs, ids)
        self._note_layers(ids, layers)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(q[None, :], k)[1][0]

    def _selector(self, layer: int) -> Any:
        if layer not in self.bitmaps:  # built once per layer (the bits must outlive the selector)
            bits = np.packbits(self.layer_of == layer, bitorder="little")
            self.bitmaps[layer] = (bits, self.faiss.IDSelectorBitmap(len(bits), self.faiss.swig_ptr(bits)))
        return self.bitmaps[layer][1]

    def search_params(self, sel: Any) -> Any:
        return self.faiss.SearchParameters(sel=sel)

    def search_layer(self, q: np.ndarray, k: int, layer: int) -> np.ndarray:
        found = self.index.search(q[None, :], k, params=self.search_params(self._selector(layer)))[1][0]
        return found[found >= 0]

    def delete(self, ids: np.ndarray) -> None:
        self.index.remove_ids(np.asarray(ids, dtype=np.int64))

    def save(self, folder: Path) -> None:
        self.faiss.write_index(self.index, str(folder / "index.faiss"))

    def open(self, folder: Path) -> None:
        self.index = self.faiss.read_index(str(folder / "index.faiss"))


class FaissHnsw(FaissFlat):
    """HNSW cannot remove: a delete is a tombstone, skipped at search through an IDSelector."""
    reclaims = False
    filter_method = "IDSelectorBitmap over the ids of the layer, checked inside the HNSW walk"
    default_ef = 96
    M, EF_CONSTRUCTION = 32, 80

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        super().__init__(dim, threads, folder, ef, refine)
        hnsw = self.faiss.IndexHNSWFlat(dim, self.M, self.faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = self.EF_CONSTRUCTION
        self.index = self.faiss.IndexIDMap2(hnsw)
        self.deleted: set[int] = set()
        self.selector: tuple = ()

    def params(self) -> dict:
        return {"index": "IndexIDMap2(IndexHNSWFlat)", "M": self.M, "efConstruction": self.EF_CONSTRUCTION,
                "efSearch": self.ef}

    def search_params(self, sel: Any) -> Any:
        return self.faiss.SearchParametersHNSW(efSearch=self.ef, sel=sel)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        if not self.deleted:
            return self.index.search(q[None, :], k, params=self.faiss.SearchParametersHNSW(efSearch=self.ef))[1][0]
        batch = self.faiss.IDSelectorBatch(np.fromiter(self.deleted, dtype=np.int64))
        skip = self.faiss.IDSelectorNot(batch)
        self.selector = (batch, skip)  # the selectors must outlive the call
        return self.index.search(q[None, :], k, params=self.search_params(skip))[1][0]

    def delete(self, ids: np.ndarray) -> None:
        self.deleted.update(int(i) for i in ids)


class FaissIvf(FaissFlat):
    """IVF-Flat: vectors bucketed under ``nlist`` k-means centroids, a query scans the ``nprobe``
    nearest buckets exactly (``ef`` sets nprobe here). The adds are buffered until
    ``finish_build``, which trains the centroids on a sample and adds everything; the direct map
    is a hash table, so a remove swaps the row out of its bucket: O(1) per id."""
    reclaims = True
    filter_method = "IDSelectorBitmap in SearchParametersIVF, checked while the nprobe buckets are scanned"
    default_ef = 64  # nprobe
    NLIST: int | None = None  # None: the local index's own rule (4 sqrt(n))
    TRAIN_PER_LIST = 64

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        super().__init__(dim, threads, folder, ef, refine)
        self.dim, self.pending = dim, []
        self.index = None

    def params(self) -> dict:
        nlist = self.index.nlist if self.index is not None else self.NLIST
        return {"index": "IndexIVFFlat (inner product, hash-table direct map)", "nlist": nlist,
                "nprobe": self.ef, "train_per_list": self.TRAIN_PER_LIST}

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        if self.index is None:
            self.pending.append((ids, vecs))
        else:
            self.index.add_with_ids(vecs, ids)
        self._note_layers(ids, layers)

    def finish_build(self) -> None:
        from ..adapters.local.vector_faiss_ivf import nlist as buckets_for

        faiss = self.faiss
        ids = np.concatenate([i for i, _ in self.pending])
        vecs = np.concatenate([v for _, v in self.pending])
        self.pending = []
        nlist = self.NLIST or buckets_for(len(ids))
        quantizer = faiss.IndexFlatIP(self.dim)
        index = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = np.random.default_rng(0).choice(len(vecs), size=min(len(vecs), self.TRAIN_PER_LIST * nlist),
                                                 replace=False)
        index.train(vecs[np.sort(sample)])
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
        index.add_with_ids(vecs, ids)
        index.nprobe = self.ef
        self.quantizer, self.index = quantizer, index

    def search_params(self, sel: Any) -> Any:
        return self.faiss.SearchParametersIVF(nprobe=self.ef, sel=sel)

    def delete(self, ids: np.ndarray) -> None:
        arr = np.ascontiguousarray(ids, dtype=np.int64)
        self.index.remove_ids(self.faiss.IDSelectorArray(len(arr), self.faiss.swig_ptr(arr)))

    def open(self, folder: Path) -> None:
        super().open(folder)
        self.index.nprobe = self.ef
        self.index.set_direct_map_type(self.faiss.DirectMap.Hashtable)


class EragraphFaiss:
    """The local profile's own index (``FaissVectorIndex``) with its defaults: flat below
    ``IVF_MIN`` vectors, IVF from it on, retrained as it grows; string ids and layer/doc metadata
    as the engine writes them, filters through its own ``layers=``; saved by ``flush``. What
    ships, measured on the same vectors as the candidates."""
    reclaims = True
    filter_method = "FaissVectorIndex.search(layers=[...]): nprobe scaled by the filter's share, exact at <= EXACT_MAX"
    default_ef: int | None = None

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        import faiss

        from ..adapters.local.vector_faiss import FaissVectorIndex

        faiss.omp_set_num_threads(threads)
        self.cls, self.dim, self.folder = FaissVectorIndex, dim, folder
        self.index: Any = None  # made by the first add, or by open (not both: a 1M open takes seconds)
        self.building = True

    def params(self) -> dict:
        from ..adapters.local import vector_faiss_search

        return {"index": "FaissVectorIndex", **self.index.shape(), "ivf_min": self.index.ivf_min,
                "nprobe_fraction": self.index.nprobe_fraction, "exact_max": vector_faiss_search.EXACT_MAX}

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        if self.index is None:
            self.index = self.cls(self.folder / "vectors", self.dim)
        self.index.upsert([f"n{i}" for i in ids.tolist()], vecs,
                          [{"layer": int(layer), "doc_id": ""} for layer in layers.tolist()])
        if self.building:
            self.index.flush()  # durable per build batch, as an ingest flushes per document batch

    def for_queries(self) -> None:
        self.building = False  # the single deletes and replacements stay in memory, as every backend's

    @staticmethod
    def _ints(hits: list) -> np.ndarray:
        return np.asarray([int(h.node_id[1:]) for h in hits], dtype=np.int64)

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self._ints(self.index.search(q, k))

    def search_layer(self, q: np.ndarray, k: int, layer: int) -> np.ndarray:
        return self._ints(self.index.search(q, k, layers=[layer]))

    def delete(self, ids: np.ndarray) -> None:
        self.index.delete([f"n{i}" for i in ids.tolist()])

    def save(self, folder: Path) -> None:
        self.index.flush()

    def open(self, folder: Path) -> None:
        self.index = self.cls(folder / "vectors", self.dim)


class Usearch:
    reclaims = True  # removed slots are reused by later adds
    filter_method = "none in the Python API: over-fetch (2k, then x4) and keep the layer's ids"
    default_ef = 64
    CONNECTIVITY, EXPANSION_ADD = 16, 128

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        from usearch.index import Index

        self.Index, self.threads, self.dim = Index, threads, dim
        self.ef = ef or self.default_ef
        self.index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=self.CONNECTIVITY,
                           expansion_add=self.EXPANSION_ADD, expansion_search=self.ef)
        self.layers: dict[int, int] = {}

    def params(self) -> dict:
        return {"connectivity": self.CONNECTIVITY, "expansion_add": self.EXPANSION_ADD, "expansion_search": self.ef}

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        self.index.add(ids, vecs, threads=self.threads)
        self.layers.update(zip(ids.tolist(), layers.tolist()))

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return np.asarray(self.index.search(q, k, threads=1).keys)

    def search_layer(self, q: np.ndarray, k: int, layer: int) -> np.ndarray:
        return postfilter(self.search, q, k, layer, self.layers, len(self.index))

    def delete(self, ids: np.ndarray) -> None:
        self.index.remove(np.asarray(ids, dtype=np.uint64))

    def save(self, folder: Path) -> None:
        self.index.save(str(folder / "index.usearch"))

    def open(self, folder: Path) -> None:
        self.index = self.Index.restore(str(folder / "index.usearch"), view=True)


class Hnswlib:
    reclaims = True  # mark_deleted, then replace_deleted reuses the slot
    filter_method = "filter= callable (a Python call per candidate label) inside the HNSW walk"
    default_ef = 64
    M, EF_CONSTRUCTION = 16, 100

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        import hnswlib

        self.hnswlib, self.dim, self.threads = hnswlib, dim, threads
        self.ef = ef or self.default_ef
        self.index = hnswlib.Index(space="ip", dim=dim)
        self.capacity = 0
        self.layers: dict[int, int] = {}

    def params(self) -> dict:
        return {"M": self.M, "ef_construction": self.EF_CONSTRUCTION, "ef": self.ef}

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        if not self.capacity:
            self.capacity = BATCH
            self.index.init_index(max_elements=self.capacity, ef_construction=self.EF_CONSTRUCTION, M=self.M,
                                  allow_replace_deleted=True)
            self.index.set_ef(self.ef)
        need = self.index.get_current_count() + len(ids)
        if need > self.capacity:  # doubling: a few resizes up to a million
            self.capacity = max(need, 2 * self.capacity)
            self.index.resize_index(self.capacity)
        self.index.add_items(vecs, ids, num_threads=self.threads, replace_deleted=True)
        self.layers.update(zip(ids.tolist(), layers.tolist()))

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self.index.knn_query(q[None, :], k=k, num_threads=1)[0][0]

    def search_layer(self, q: np.ndarray, k: int, layer: int) -> np.ndarray:
        layers = self.layers
        return self.index.knn_query(q[None, :], k=k, num_threads=1, filter=lambda i: layers.get(i) == layer)[0][0]

    def delete(self, ids: np.ndarray) -> None:
        for i in ids:
            self.index.mark_deleted(int(i))

    def save(self, folder: Path) -> None:
        self.index.save_index(str(folder / "index.hnsw"))

    def open(self, folder: Path) -> None:
        self.index = self.hnswlib.Index(space="ip", dim=self.dim)
        self.index.load_index(str(folder / "index.hnsw"), allow_replace_deleted=True)
        self.index.set_ef(self.ef)


class LanceDB:
    """A LanceDB table (id int64, layer int8, vector) in ``folder``: already on disk after each
    add or delete (one commit each: a new fragment, or a deletion file), so ``save`` has nothing
    to do. After the adds: an IVF_HNSW_SQ index on the vector (one partition, as LanceDB advises
    for HNSW: one graph; 8-bit scalar-quantized vectors in it) -- or IVF_PQ as backend
    ``lancedb-ivfpq`` -- a BTree on id (what a delete looks up) and a bitmap on layer (what a
    filter reads). Rows added after the index are searched unindexed (flat, one fragment per add)
    until ``optimize`` folds them in, which ``maintain`` times."""
    reclaims = False  # deletion vectors until optimize() compacts
    filter_method = "SQL where('layer = N') as a prefilter (bitmap index on layer), inside the ANN search"
    default_ef = 128
    kind = "ivf_hnsw_sq"
    M, EF_CONSTRUCTION = 16, 150

    def __init__(self, dim: int, threads: int, folder: Path, ef: int | None = None,
                 refine: int | None = None) -> None:
        # lance's own pool: capped at the cores the other libraries get (read once, at first use)
        set_library_env("LANCE_CPU_THREADS", str(max(threads, 1)), keep_existing=True)
        import lancedb
        import pyarrow as pa

        self.lancedb, self.pa, self.dim, self.folder = lancedb, pa, dim, folder
        self.ef = ef or self.default_ef
        self.schema = pa.schema([("id", pa.int64()), ("layer", pa.int8()), ("vector", pa.list_(pa.float32(), dim))])
        self.table: Any = None
        self.rows = 0
        self.nprobes = 1
        self.refine_asked = refine
        self.refine: int | None = refine
        self.index_config: dict = {}

    def params(self) -> dict:
        out = dict(self.index_config)
        if self.kind == "ivf_hnsw_sq":
            out["ef"] = self.ef
        out["nprobes"] = self.nprobes
        out["refine_factor"] = self.refine
        out["scalar_indexes"] = {"id": "BTREE", "layer": "BITMAP"}
        out["lance_cpu_threads"] = library_env("LANCE_CPU_THREADS")
        return out

    def _batch(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> Any:
        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vecs, dtype=np.float32).ravel())
        return pa.Table.from_arrays([pa.array(ids, pa.int64()), pa.array(layers, pa.int8()),
                                     pa.FixedSizeListArray.from_arrays(flat, self.dim)], schema=self.schema)

    def add(self, ids: np.ndarray, vecs: np.ndarray, layers: np.ndarray) -> None:
        if self.table is None:
            db = self.lancedb.connect(str(self.folder))
            self.table = db.create_table("vectors", schema=self.schema)
        self.table.add(self._batch(ids, vecs, layers))
        self.rows += len(ids)

    def settings(self, n: int) -> Any:
        """The index for n rows, and the search settings that go with it (the same on reopening)."""
        from lancedb.index import HnswSq, IvfPq

        if self.kind == "ivf_pq":
            parts = max(1, round(math.sqrt(n)))
            subs = self.dim // 8  # 8 dimensions a code byte: 48 bytes a vector at 384
            self.nprobes = max(8, math.ceil(parts * 0.05))  # 5% of the partitions, at least 8
            self.refine = self.refine_asked or 20  # 200 raw vectors re-scored for a top-10
            self.index_config = {"index": "IVF_PQ", "num_partitions": parts, "num_sub_vectors": subs, "num_bits": 8}
            return IvfPq(distance_type="dot", num_partitions=parts, num_sub_vectors=subs)
        self.index_config = {"index": "IVF_HNSW_SQ", "num_partitions": 1, "m": self.M,
                             "ef_construction": self.EF_CONSTRUCTION}
        return HnswSq(distance_type="dot", num_partitions=1, m=self.M, ef_construction=self.EF_CONSTRUCTION)

    def finish_build(self) -> None:
        from lancedb.index import Bitmap, BTree

        self.table.create_index("vector", config=self.settings(self.rows))
        self.table.create_index("id", config=BTree())
        self.table.create_index("layer", config=Bitmap())

    def _query(self, q: np.ndarray, k: int) -> Any:
        query = self.table.search(q, vector_column_name="vector").distance_type("dot").limit(k).nprobes(self.nprobes)
        if self.kind == "ivf_hnsw_sq":
            query = query.ef(max(self.ef, k * (self.refine or 1)))
        if self.refine:
            query = query.refine_factor(self.refine)
        return query

    @staticmethod
    def _ids(query: Any) -> np.ndarray:
        return query.select(["id", "_distance"]).to_arrow()["id"].to_numpy()

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        return self._ids(self._query(q, k))

    def search_layer(self, q: np.ndarray, k: int, layer: int) -> np.ndarray:
        return self._ids(self._query(q, k).where(f"layer = {int(layer)}", prefilter=True))

    def delete(self, ids: np.ndarray) -> None:
        self.table.delete("id IN (" + ",".join(str(int(i)) for i in ids) + ")")

    def save(self, folder: Path) -> None:
        pass  # every add and delete was a commit already

    def open(self, folder: Path) -> None:
        self.table = self.lancedb.connect(str(folder)).open_table("vectors")
        self.settings(self.table.count_rows())

    def maintain(self) -> None:
        """Compact the fragments (dropping deleted rows), fold new rows into the indexes, and
        prune the old versions' files."""
        import warnings
        from datetime import timedelta

        with warnings.catch_warnings():  # "removes every version but the latest": no other reader here
            warnings.simplefilter("ignore", UserWarning)
            self.table.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)


class LanceDBPq(LanceDB):
    kind = "ivf_pq"


ADAPTERS: dict[str, Any] = {
    "faiss-flat": FaissFlat, "faiss-ivf": FaissIvf, "eragraph-faiss": EragraphFaiss, "faiss-hnsw": FaissHnsw, "usearch": Usearch, "hnswlib": Hnswlib, "lancedb": LanceDB,
    "lancedb-ivfpq": LanceDBPq}
