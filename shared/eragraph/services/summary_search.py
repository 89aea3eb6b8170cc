"""Search over the summary graph's vectors: collapsed (one top-k over every layer, then fill
the token budget: EraRAG Alg. 2), detailed / summarized (biased merge of leaves and summaries,
§III-D) and dense (leaf chunks only, one document at a time: dense_leaves).

Under a metadata filter (``where``) every one of them searches the leaves inside the filter
only: a summary mixes chunks of several documents, so no summary is returned under a filter
(the README's rule; the true top-k of the allowed leaves comes from the vector index)."""

from __future__ import annotations

import numpy as np

from ..domain.filters import Filter
from ..domain.model import EragraphError
from ..domain.ranking import Candidate, best_per_document, biased_merge, documents_among, fill_budget
from .engine import Engine
from .leaf_ranking import leaf_candidates

OVERFETCH = 4
WIDEN = 2  # dense: widenings of the leaf read (x4 each) while looking for k distinct documents


class BadQueryError(EragraphError):
    """The request is not a valid query (empty text, unknown mode, bad k...)."""


def _candidates(engine: Engine, vector: np.ndarray, k: int, layers: list[int] | None,
                where: Filter | None = None) -> list[Candidate]:
    hits = engine.vectors.search(vector, k, layers=layers, where=where)
    nodes = engine.graph.get_nodes(h.node_id for h in hits)
    return [Candidate(h.node_id, nodes[h.node_id].layer, h.score, nodes[h.node_id].tokens)
            for h in hits if h.node_id in nodes]


def dense_leaves(engine: Engine, vector: np.ndarray, k: int, budget: int | None,
                 where: Filter | None = None) -> list[Candidate]:
    """``dense``: the top k leaf chunks, one document at a time (domain.ranking.best_per_document:
    a document ranks by its best chunk, and its other chunks only fill places no other document
    takes). The leaf read widens (x4, at most WIDEN times) while it comes back full but holds
    fewer than k documents; each widening reads the nodes of its new hits only."""
    fetch = k * OVERFETCH
    nodes: dict = {}
    for attempt in range(WIDEN + 1):
        hits = engine.vectors.search(vector, fetch, layers=[0], where=where)
        cands, doc_of = leaf_candidates(engine, ((h.node_id, h.score) for h in hits), known=nodes)
        if len(hits) < fetch or attempt == WIDEN or documents_among(cands, doc_of) >= k:
            break
        fetch *= OVERFETCH
    return best_per_document(cands, doc_of, k, budget)


def summary_layers(engine: Engine) -> list[int]:
    return [layer for layer in engine.graph.layer_sizes() if layer > 0]


FILTER_NOTE = "filtered: summaries are left out, leaves inside the filter only"


def search(engine: Engine, mode: str, vector: np.ndarray, k: int, budget: int | None, p: float,
           where: Filter | None = None, view_only: bool = False) -> list[Candidate]:
    """``view_only``: ``where`` is a caller's access view alone (domain.access.Caller.view):
    every summary carries its partition's readers, so the layers are searched inside it too
    (a metadata filter still leaves summaries out)."""
    fetch = k * OVERFETCH
    if where is not None and not view_only:
        if mode not in ("collapsed", "dense", "detailed", "summarized"):
            raise BadQueryError(f"unknown mode {mode!r}")
        if mode == "dense":
            return dense_leaves(engine, vector, k, budget, where)
        return fill_budget(_candidates(engine, vector, fetch, [0], where), k, budget)
    if mode == "collapsed":
        return fill_budget(_candidates(engine, vector, fetch, None, where), k, budget)
    if mode == "dense":
        return dense_leaves(engine, vector, k, budget, where)
    if mode in ("detailed", "summarized"):
        leaves = _candidates(engine, vector, fetch, [0], where)
        upper_layers = summary_layers(engine)
        summaries = _candidates(engine, vector, fetch, upper_layers, where) if upper_layers else []
        primary, secondary = (leaves, summaries) if mode == "detailed" else (summaries, leaves)
        return biased_merge(primary, secondary, k, p, budget)
    raise BadQueryError(f"unknown mode {mode!r}")


