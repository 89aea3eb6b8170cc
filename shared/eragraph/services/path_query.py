"""The ``paths`` retrieval mode: PropRAG's beam search over sentence paths (arXiv 2504.18070,
§3.3), run inside the subgraph tri_graph's PageRank induces, no model at query time.

1. tri_graph's walk (services.graph_query.tri_graph_walk) ranks passages by PageRank mass; its
   ``path_passages`` best are the subgraph.
2. The subgraph's sentences, the entities each names and their vectors are read: from the
   snapshot (local, memory), or in three batched reads on a store that cannot export its
   matrices (``sentence_ids_of_chunks``, ``get_sentences``, one vector read): a fixed number
   of round trips per query, not one per sentence.
3. Seeds: the ``path_beam`` sentences most similar to the question, and as many among those
   naming an entity the question's names matched. The beam search (domain.sentence_paths)
   follows shared entities up to ``path_depth`` sentences, keeping ``path_beam`` paths per
   length, a path scored by cos(question, mean of its sentence vectors) + ``path_mass`` x the
   mean PageRank mass (scaled to [0, 1] over the subgraph) of its passages.
4. Passages ranked by their best path are fused with the PageRank ranking by reciprocal rank
   fusion, the path list weighted ``path_weight``; the usual document-at-a-time finish.

A sentence is scored with its own vector when the store holds one (``SENTENCE_VECTORS`` at
ingest, or a reindex with it), else with its chunk's vector (a path of passages). Without a
usable question entity the mode answers as tri_graph does (``dense``). Under a filter the walk,
the subgraph and every sentence are the allowed chunks' only."""

from __future__ import annotations

import weakref

import numpy as np

from ..domain import sentence_paths as sp_
from ..domain.filters import Filter
from ..domain.ranking import Candidate
from . import graph_query as gq
from .graph_snapshot import vector_matrix
from .engine import Engine
from .explain import note

# per snapshot: (sentence x dim unit vectors, sentences ordered by chunk, each chunk's start in
# that order, chunk id -> position)
_SENTENCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def paths(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
          where: Filter | None = None) -> list[Candidate]:
    gs = gq.graph_settings(engine)
    note("paths")  # explain: the walk's seeds, activation and restart, under this mode's name
    walk = gq.tri_graph_walk(engine, text, vector, max(k * gq.DEFAULT_OVERFETCH, gs.path_passages), where)
    if walk is None:
        return gq.dense(engine, vector, k, budget, where)
    if walk.view is not None and walk.view.empty:
        return []
    sub = walk.ranked[: gs.path_passages]
    if sub:
        read = _exact_subgraph if walk.view is not None else _stored_subgraph
        vecs, mention, passage_of, entity_cols = read(engine, walk, [c for c, _ in sub])
        mass = np.array([s for _, s in sub], dtype=np.float64)
        prior = mass / mass.max() if mass.max() > 0 else np.zeros(len(sub))
        sim = vecs @ vector if len(vecs) else np.zeros(0)
        seeds = sp_.seed_sentences(sim, mention, entity_cols, gs.path_beam)
        found = sp_.beam_paths(vecs, vector, mention, passage_of, prior, seeds, gs.path_beam, gs.path_depth,
                               gs.path_mass)
        best = found.passage_score
        by_path = [sub[i][0] for i in np.argsort(-best, kind="stable") if np.isfinite(best[i])]
        ranked = sp_.rrf_fuse([c for c, _ in walk.ranked], by_path, gs.path_weight)
    else:
        ranked = []
    return gq._finish(engine, ranked, vector, k, budget, where)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.where(norms > 0, m / np.maximum(norms, 1e-12), 0.0).astype(np.float32)


def _snapshot_sentences(engine: Engine, snap) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """The snapshot's sentence vectors (the stored ones, else the chunk's) and its sentences
    grouped by chunk position (order, start offsets): made once per snapshot."""
    got = _SENTENCES.get(snap)
    if got is None:
        index = engine.entities
        vecs = snap.sentence_vectors
        if vecs is None:  # vectors the store holds though tri_graph does not read them
            vecs = vector_matrix(index.vectors, snap.mats.sentences, engine.embedder.dim)
        missing = ~vecs.any(axis=1) & (snap.sentence_chunk >= 0)
        if missing.any():
            vecs = vecs.copy()
            vecs[missing] = snap.chunk_vectors[snap.sentence_chunk[missing]]
        chunk = snap.sentence_chunk
        order = np.argsort(chunk, kind="stable")
        starts = np.searchsorted(chunk[order], np.arange(len(snap.chunks) + 1))
        got = _SENTENCES[snap] = (_unit(vecs), order, starts, {c: i for i, c in enumerate(snap.chunks)})
    return got


def _exact_subgraph(engine: Engine, walk: gq.TriWalk, chunks: list[str]):
    view = walk.view
    snap = view.snap
    vecs, order, starts, pos = _snapshot_sentences(engine, snap)
    rows = [pos[c] for c in chunks]
    sents = [order[starts[r]:starts[r + 1]] for r in rows]
    passage_of = np.concatenate([np.full(len(s), i) for i, s in enumerate(sents)]).astype(np.int64)
    idx = np.concatenate(sents).astype(np.int64)
    cols = [snap.entity_index[e] for e in walk.seeds if e in snap.entity_index]
    return vecs[idx], view.mention[idx], passage_of, cols


def _stored_subgraph(engine: Engine, walk: gq.TriWalk, chunks: list[str]):
    """The subgraph read through the entity store's port in three batched calls (its incidence a
    numpy array: the subgraph is a few dozen passages, and the Lambda layers ship no scipy)."""
    index = engine.entities
    store = index.store
    sids = store.sentence_ids_of_chunks(chunks)
    sents = store.get_sentences(sids)
    pos = {c: i for i, c in enumerate(chunks)}
    keep = [sid for sid in sids if sid in sents and sents[sid].chunk_id in pos]
    own = index.vectors.get_vectors(keep)
    need = sorted({sents[s].chunk_id for s in keep if s not in own})
    chunk_vecs = engine.vectors.get_vectors(need) if need else {}
    dim = engine.embedder.dim
    vecs = np.zeros((len(keep), dim), dtype=np.float32)
    for i, sid in enumerate(keep):
        v = own.get(sid)
        if v is None:
            v = chunk_vecs.get(sents[sid].chunk_id)
        if v is not None:
            vecs[i] = v
    cols: dict[str, int] = {}
    rows, cidx = [], []
    for i, sid in enumerate(keep):
        for e in dict.fromkeys(sents[sid].entities):
            rows.append(i)
            cidx.append(cols.setdefault(e, len(cols)))
    mention = np.zeros((len(keep), len(cols)), dtype=np.float64)
    mention[rows, cidx] = 1.0
    passage_of = np.array([pos[sents[s].chunk_id] for s in keep], dtype=np.int64)
    return _unit(vecs), mention, passage_of, [cols[e] for e in walk.seeds if e in cols]
