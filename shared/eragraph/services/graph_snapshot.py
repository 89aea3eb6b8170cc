"""The entity graph's exact execution (services.graph_query): a snapshot of the entity store's
matrices and aligned vectors per store generation, and one query's view of it restricted to the
chunks a metadata filter allows."""

from __future__ import annotations

import numpy as np

from ..domain import graph_math as gm
from ..domain.filters import Filter
from .chunk_filter import of as chunk_filter_of
from .engine import Engine
from .synonyms import entity_block


# ---------------------------------------------------------------- snapshot (exact execution)


class Snapshot:
    """Matrices + aligned vectors for one store generation: chunks are all live layer-0 nodes."""

    def __init__(self, engine: Engine) -> None:
        import scipy.sparse as sp

        index = engine.entities
        mats = index.store.export()
        self.generation = mats.generation
        self.mats = mats
        chunk_ids = sorted(r.node_id for r in engine.graph.layer_refs(0))
        self.chunks = chunk_ids
        ci = {c: i for i, c in enumerate(chunk_ids)}
        rows = np.array([ci.get(c, -1) for c in mats.chunks], dtype=np.int64)
        keep = rows >= 0
        coo = mats.contain.tocoo()
        mask = keep[coo.row]
        self.contain = sp.csr_matrix((coo.data[mask], (rows[coo.row[mask]], coo.col[mask])),
                                     shape=(len(chunk_ids), len(mats.entities)))
        self.entities = mats.entities
        self.entity_index = mats.entity_index
        self.mention = mats.mention
        self.cooc = mats.cooccurrence
        self.frequency = mats.frequency
        self.chunk_vectors = vector_matrix(engine.vectors, chunk_ids, engine.embedder.dim)
        self._entity_source = (index.vectors, engine.embedder.dim)
        self._entity_vectors: np.ndarray | None = None
        self.sentence_chunk = np.where(mats.sentence_chunk >= 0, rows[mats.sentence_chunk], -1)
        self.sentence_vectors = (vector_matrix(index.vectors, mats.sentences, engine.embedder.dim)
                                 if index.embed_sentences else None)
        self.synonymy = mats.synonymy
        self.tri_adjacency = gm.bipartite_adjacency(self.contain)
        self.concept_adjacency = gm.bipartite_adjacency(self.contain, self.cooc)
        self._walks: dict[tuple[str, float], gm.Walk] = {}
        self._kept: dict[str, object] = {}

    def kept(self, name: str, make):
        """``make()``, made on first use and kept with the snapshot (matrices every query reads)."""
        if name not in self._kept:
            self._kept[name] = make()
        return self._kept[name]

    @property
    def entity_vectors(self) -> np.ndarray:
        """The entity name vectors aligned with ``entities``: read from the entity vector index
        on first use (the exact entity match; the ann match never reads them) and kept."""
        if self._entity_vectors is None:
            from .entity_ids import entity_vector_id

            vectors, dim = self._entity_source
            self._entity_vectors = vector_matrix(vectors, [entity_vector_id(e) for e in self.entities], dim)
        return self._entity_vectors

    def walk(self, graph: str, synonym_weight: float = 0.0) -> gm.Walk:
        """The random walk over ``tri_adjacency`` (with the synonymy edges at
        ``synonym_weight``) or ``concept_adjacency``, made on first use and kept with the
        snapshot: a query without a filter does not rebuild it."""
        key = (graph, synonym_weight)
        w = self._walks.get(key)
        if w is None:
            block = entity_block(self.synonymy, synonym_weight)
            adjacency = getattr(self, graph) if block is None else gm.bipartite_adjacency(self.contain, block)
            w = self._walks[key] = gm.walk(adjacency)
        return w


def vector_matrix(vectors, ids, dim) -> np.ndarray:
    out = np.zeros((len(ids), dim), dtype=np.float32)
    got = {}
    for start in range(0, len(ids), 5000):
        got.update(vectors.get_vectors(ids[start:start + 5000]))
    for i, key in enumerate(ids):
        v = got.get(key)
        if v is not None:
            out[i] = v
    return out


def snapshot(engine: Engine) -> Snapshot:
    index = engine.entities
    snap = engine.graph_snapshot
    if snap is None or snap.generation != index.store.generation():
        snap = Snapshot(engine)
        engine.graph_snapshot = snap
    return snap


def use_exact(engine: Engine) -> bool:
    gs = engine.settings.graph_retrieval
    store = engine.entities.store
    return bool(store.can_export) if gs.exact is None else bool(gs.exact and store.can_export)


class View:
    """A snapshot's matrices restricted, for one query, to the chunks a filter allows (the
    snapshot itself without a filter): other chunks lose their entity edges and their
    sentences, so no activation or PageRank mass flows through them."""

    def __init__(self, snap: Snapshot, allowed: np.ndarray | None) -> None:
        self.snap = snap
        self.allowed = allowed
        self.contain, self.mention, self.sentence_ok = snap.contain, snap.mention, None
        self._cooc = None
        if allowed is not None:
            import scipy.sparse as sp

            self.contain = (sp.diags(allowed.astype(np.float64)) @ snap.contain).tocsr()
            sc = snap.sentence_chunk
            self.sentence_ok = (sc >= 0) & allowed[np.maximum(sc, 0)] if len(allowed) else sc < -1
            self.mention = (sp.diags(self.sentence_ok.astype(np.float64)) @ snap.mention).tocsr()

    @property
    def mention_t(self):
        """M^T as a float CSR matrix (the activation's entity -> sentence read), kept with the
        snapshot when no filter cuts it."""
        def make():
            import scipy.sparse as sp

            return sp.csr_matrix(self.mention, dtype=np.float64).T.tocsr()
        return make() if self.allowed is not None else self.snap.kept("mention_t", make)

    @property
    def log_contain(self):
        """ln(1 + C) (eq. 7's passage term), kept with the snapshot when no filter cuts it."""
        def make():
            return gm.log1p_counts(self.contain)
        return make() if self.allowed is not None else self.snap.kept("log_contain", make)

    @property
    def empty(self) -> bool:
        return self.allowed is not None and not self.allowed.any()

    @property
    def cooc(self):
        """Entity co-occurrence: sentences that mention both, counted over the allowed ones."""
        if self.allowed is None:
            return self.snap.cooc
        if self._cooc is None:
            b = (self.mention > 0).astype(np.float64)
            c = (b.T @ b).tocsr()
            c.setdiag(0.0)
            c.eliminate_zeros()
            self._cooc = c
        return self._cooc

    def tri_walk(self, synonym_weight: float = 0.0) -> gm.Walk:
        if self.allowed is None:
            return self.snap.walk("tri_adjacency", synonym_weight)
        return gm.walk(gm.bipartite_adjacency(self.contain, entity_block(self.snap.synonymy, synonym_weight)))

    def concept_walk(self) -> gm.Walk:
        if self.allowed is None:
            return self.snap.walk("concept_adjacency")
        return gm.walk(gm.bipartite_adjacency(self.contain, self.cooc))

    def top(self, scores: np.ndarray, n: int, positive: bool = False) -> list[tuple[str, float]]:
        """The n best allowed chunks by ``scores`` (chunk positions first)."""
        s = np.asarray(scores[: len(self.snap.chunks)], dtype=np.float64)
        if self.allowed is not None:
            s = np.where(self.allowed, s, -np.inf)
        order = _first(-s, n)
        return [(self.snap.chunks[i], float(s[i])) for i in order
                if np.isfinite(s[i]) and (s[i] > 0 or not positive)]


def _first(keys: np.ndarray, n: int) -> np.ndarray:
    """``np.argsort(keys, kind="stable")[:n]`` without sorting all of ``keys``: the n smallest,
    ties in index order, from the entries up to the n-th smallest value."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if n >= len(keys):
        return np.argsort(keys, kind="stable")
    kth = np.partition(keys, n - 1)[n - 1]
    near = np.flatnonzero(keys <= kth)  # every entry that may be among the first n, in index order
    return near[np.argsort(keys[near], kind="stable")][:n]


def filtered_view(engine: Engine, where: Filter | None, vector: np.ndarray) -> View:
    snap = snapshot(engine)
    cf = chunk_filter_of(engine, where)
    return View(snap, None if cf is None else cf.mask(snap.chunks, vector))
