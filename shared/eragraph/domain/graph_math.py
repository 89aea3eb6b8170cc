"""Pure graph math for entity-graph retrieval (no I/O): Personalized PageRank (exact sparse
power iteration and Andersen-Chung-Lang local push), LinearRAG's semantic-bridging activation
(eq. 5), TERAG's restart weights (eq. 3-5), E2GraphRAG's h-hop pair filter and index mapping
(eq. 1-2) with coverage-then-occurrence ranking."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import combinations

import numpy as np
import scipy.sparse as sp

Neighbours = Callable[[Hashable], Sequence[tuple[Hashable, float]]]


# ---------------------------------------------------------------- PageRank


def ppr(adjacency: sp.spmatrix, personalization: np.ndarray, damping: float = 0.85,
        tol: float = 1e-8, max_iter: int = 100) -> np.ndarray:
    """Personalized PageRank by sparse power iteration.

    ``adjacency[i, j]`` is the weight of the edge i -> j (symmetric for an undirected graph).
    A walker follows an out-edge with probability ``damping`` (proportional to its weight) and
    restarts at the normalized ``personalization`` otherwise; a node without out-edges restarts
    (the networkx convention for dangling nodes). Returns a probability vector."""
    n = adjacency.shape[0]
    p = np.asarray(personalization, dtype=np.float64).reshape(-1)
    if p.shape[0] != n:
        raise ValueError("personalization length must equal the number of nodes")
    if (p < 0).any():
        raise ValueError("personalization must be non-negative")
    total = p.sum()
    if total <= 0:
        raise ValueError("personalization has no mass")
    p = p / total
    a = sp.csr_matrix(adjacency, dtype=np.float64)
    out = np.asarray(a.sum(axis=1)).reshape(-1)
    dangling = out <= 0
    inv = np.zeros(n)
    inv[~dangling] = 1.0 / out[~dangling]
    transition_t = (sp.diags(inv) @ a).T.tocsr()  # column-stochastic: x_new = T^T x
    x = p.copy()
    for _ in range(max_iter):
        x_new = damping * (transition_t @ x + x[dangling].sum() * p) + (1.0 - damping) * p
        if np.abs(x_new - x).sum() < n * tol:
            return x_new
        x = x_new
    return x


def push_ppr(seeds: Mapping[Hashable, float], neighbours: Neighbours, damping: float = 0.85,
             epsilon: float = 1e-4, max_pushes: int = 200_000) -> dict[Hashable, float]:
    """Approximate Personalized PageRank by local push (Andersen, Chung, Lang 2006), reading
    each node's weighted neighbourhood on demand through ``neighbours`` (a store call).

    Invariant: ppr = p + PPR(r), so every node's error is bounded by the residual left; a node
    is pushed while its residual exceeds ``epsilon`` times its weighted degree, hence at the end
    ``r[u] <= epsilon * deg(u)`` everywhere. A node without neighbours keeps its residual as
    settled mass (it restarts onto itself). Returns the estimate ``p`` (un-normalized mass of
    at most 1)."""
    total = float(sum(seeds.values()))
    if total <= 0:
        return {}
    alpha = 1.0 - damping
    residual: dict[Hashable, float] = {u: w / total for u, w in seeds.items() if w > 0}
    estimate: dict[Hashable, float] = {}
    cache: dict[Hashable, tuple[list[tuple[Hashable, float]], float]] = {}

    def nbrs(u: Hashable) -> tuple[list[tuple[Hashable, float]], float]:
        if u not in cache:
            items = [(v, float(w)) for v, w in neighbours(u) if w > 0]
            cache[u] = (items, sum(w for _, w in items))
        return cache[u]

    queue = deque(residual)
    queued = set(queue)
    pushes = 0
    while queue and pushes < max_pushes:
        u = queue.popleft()
        queued.discard(u)
        r = residual.get(u, 0.0)
        items, degree = nbrs(u)
        if degree <= 0:
            estimate[u] = estimate.get(u, 0.0) + r
            residual[u] = 0.0
            continue
        if r <= epsilon * degree:
            continue
        pushes += 1
        estimate[u] = estimate.get(u, 0.0) + alpha * r
        residual[u] = 0.0
        spread = (1.0 - alpha) * r / degree
        for v, w in items:
            residual[v] = residual.get(v, 0.0) + spread * w
            if v not in queued:
                _, dv = nbrs(v)
                if residual[v] > epsilon * dv or dv <= 0:
                    queue.append(v)
                    queued.add(v)
    return estimate


# ---------------------------------------------------------------- LinearRAG


def semantic_bridging(mention: sp.spmatrix, sentence_sim: np.ndarray, seeds: np.ndarray,
                      threshold: float = 0.4, max_iter: int = 3,
                      top_sentences: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """LinearRAG eq. 5 over the sentence x entity mention matrix M, with dynamic pruning.

    ``top_sentences == 0``: the matrix form a_t = MAX(M^T (sigma * (M a_{t-1})), a_{t-1}).
    ``top_sentences == n > 0``: the form of LinearRAG's released code -- each frontier entity
    e propagates only through its n sentences most similar to the query, giving every entity
    of such a sentence s the score a_e * sigma_s, aggregated by max (scores stay within the
    similarity range, so the threshold keeps its meaning however often an entity is mentioned).

    In both, an entity newly reached in step t stays only if its score exceeds ``threshold``;
    only the entities activated in step t propagate in step t+1 (an activated entity keeps its
    score: feeding a seed back through its own sentences would only inflate it), and the loop
    stops when no new entity passes. Returns (activation, tier) where tier[i] is the step at
    which entity i was activated (1 for the seeds, 0 when never) -- the L_e of eq. 7."""
    m = sp.csr_matrix(mention, dtype=np.float64)
    mt = m.T.tocsr()
    sigma = np.asarray(sentence_sim, dtype=np.float64).reshape(-1)
    a = np.asarray(seeds, dtype=np.float64).reshape(-1).copy()
    tier = np.where(a > 0, 1, 0).astype(np.int64)
    frontier = a.copy()
    for step in range(2, max_iter + 2):
        if not frontier.any():
            break
        if top_sentences > 0:
            spread = np.zeros_like(a)
            for e in np.flatnonzero(frontier):
                sents = mt.indices[mt.indptr[e]:mt.indptr[e + 1]]
                if len(sents) == 0:
                    continue
                if len(sents) > top_sentences:
                    sents = sents[np.argsort(-sigma[sents], kind="stable")[:top_sentences]]
                for s_ in sents:
                    ents = m.indices[m.indptr[s_]:m.indptr[s_ + 1]]
                    spread[ents] = np.maximum(spread[ents], frontier[e] * sigma[s_])
        else:
            spread = mt @ (sigma * (m @ frontier))
        newly = (spread > threshold) & (tier == 0)
        if not newly.any():
            break
        tier[newly] = step
        a = np.where(newly, spread, a)
        frontier = np.where(newly, a, 0.0)
    return a, tier


def semantic_bridging_local(seeds: Mapping[Hashable, float],
                            sentences_of: Callable[[list], Mapping[Hashable, Sequence[Hashable]]],
                            sentence_info: Callable[[list], Mapping[Hashable, tuple[float, Sequence[Hashable]]]],
                            threshold: float = 0.4, max_iter: int = 3,
                            top_sentences: int = 0) -> tuple[dict, dict]:
    """The same activation as ``semantic_bridging`` computed from neighbourhood reads:
    ``sentences_of(entities)`` gives each entity's sentences, ``sentence_info(sentence ids)``
    each sentence's (similarity to the query, entities). Returns (activation, tier) dicts."""
    act = {e: float(a) for e, a in seeds.items() if a > 0}
    tier = {e: 1 for e in act}
    frontier = dict(act)
    for step in range(2, max_iter + 2):
        if not frontier:
            break
        by_entity = sentences_of(list(frontier))
        info = sentence_info(sorted({s for ss in by_entity.values() for s in ss}))
        spread: dict = {}
        if top_sentences > 0:
            for src, sids in by_entity.items():
                ranked = sorted((s for s in sids if s in info), key=lambda s: (-info[s][0], s))[:top_sentences]
                for s in ranked:
                    sim, ents = info[s]
                    for e in set(ents):
                        spread[e] = max(spread.get(e, 0.0), frontier[src] * sim)
        else:
            for sim, ents in info.values():
                ents = set(ents)
                mass = sum(frontier.get(e, 0.0) for e in ents)
                if mass == 0:
                    continue
                for e in ents:
                    spread[e] = spread.get(e, 0.0) + sim * mass
        frontier = {}
        for e, v in spread.items():
            if v > threshold and e not in act:
                tier[e] = step
                act[e] = v
                frontier[e] = v
        for e in frontier:
            act[e] = frontier[e]
    return act, tier


def passage_init(passage_sim: np.ndarray, contain: sp.spmatrix, activation: np.ndarray,
                 tier: np.ndarray, lam: float = 0.05, passage_weight: float = 0.05) -> np.ndarray:
    """LinearRAG eq. 7: (lambda * sim(q, p) + ln(1 + sum_e a_e * ln(1 + N_pe) / L_e)) * W_p
    over the passage x entity count matrix C (N_pe = occurrences of e in p)."""
    c = sp.csr_matrix(contain, dtype=np.float64)
    c.data = np.log1p(c.data)
    level = np.where(tier > 0, tier, 1).astype(np.float64)
    entity_term = c @ (np.asarray(activation, dtype=np.float64) / level)
    return (lam * np.asarray(passage_sim, dtype=np.float64) + np.log1p(entity_term)) * passage_weight


def bipartite_adjacency(contain: sp.spmatrix, extra_entity_edges: sp.spmatrix | None = None) -> sp.csr_matrix:
    """Symmetric adjacency over [passages..., entities...] from the passage x entity matrix C,
    optionally with entity-entity edges (co-occurrence)."""
    c = sp.csr_matrix(contain, dtype=np.float64)
    n_p, n_e = c.shape
    ee = sp.csr_matrix((n_e, n_e)) if extra_entity_edges is None else sp.csr_matrix(extra_entity_edges, dtype=np.float64)
    return sp.bmat([[sp.csr_matrix((n_p, n_p)), c], [c.T, ee]], format="csr")


# ---------------------------------------------------------------- TERAG


def restart_weights(exact: Iterable[Hashable], semantic: Mapping[Hashable, float],
                    frequency: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """TERAG eq. 3-5: w(u) = s(u) / f(u) with s = 1 for exact matches and sim(q, u) for semantic
    ones, normalized within each group so that each non-empty group carries mass 1 (an entity
    in both groups keeps its exact weight). A frequency below 1 counts as 1."""
    exact = list(dict.fromkeys(exact))
    groups = [
        {u: 1.0 / max(float(frequency.get(u, 1.0)), 1.0) for u in exact},
        {u: max(float(s), 0.0) / max(float(frequency.get(u, 1.0)), 1.0)
         for u, s in semantic.items() if u not in set(exact)},
    ]
    out: dict[Hashable, float] = {}
    for group in groups:
        total = sum(group.values())
        if total > 0:
            for u, w in group.items():
                out[u] = out.get(u, 0.0) + w / total
    return out


# ---------------------------------------------------------------- E2GraphRAG


def hop_distance(a: Hashable, b: Hashable, neighbours: Callable[[Hashable], Iterable[Hashable]],
                 limit: int) -> int | None:
    """Shortest hop count from a to b if it is at most ``limit`` (bounded BFS), else None."""
    if a == b:
        return 0
    seen = {a}
    frontier = [a]
    for depth in range(1, limit + 1):
        nxt = []
        for u in frontier:
            for v in neighbours(u):
                if v == b:
                    return depth
                if v not in seen:
                    seen.add(v)
                    nxt.append(v)
        if not nxt:
            return None
        frontier = nxt
    return None


def pairs_within_hops(entities: Sequence[Hashable], neighbours: Callable[[Hashable], Iterable[Hashable]],
                      h: int) -> list[tuple[Hashable, Hashable, int]]:
    """E2GraphRAG eq. 1: the pairs (e_i, e_j), i < j, whose graph distance is at most h, each
    with its distance."""
    out = []
    for a, b in combinations(list(dict.fromkeys(entities)), 2):
        d = hop_distance(a, b, neighbours, h)
        if d is not None:
            out.append((a, b, d))
    return out


def index_mapping(pairs: Iterable[tuple[Hashable, Hashable]], postings: Callable[[Hashable], Iterable[Hashable]]) -> set:
    """E2GraphRAG eq. 2: the union over pairs of the intersection of their chunk sets."""
    out: set = set()
    cache: dict[Hashable, set] = {}
    for a, b in pairs:
        for e in (a, b):
            if e not in cache:
                cache[e] = set(postings(e))
        out |= cache[a] & cache[b]
    return out


def coverage_occurrence_rank(chunk_entities: Mapping[Hashable, Mapping[Hashable, int]],
                             query_entities: Iterable[Hashable]) -> list[tuple[Hashable, int, int]]:
    """Rank chunks first by entity coverage (distinct query entities present), then by entity
    occurrence (their total count); ties by chunk id. Returns (chunk, coverage, occurrence)."""
    q = set(query_entities)
    rows = []
    for chunk, counts in chunk_entities.items():
        hit = {e: c for e, c in counts.items() if e in q}
        rows.append((chunk, len(hit), int(sum(hit.values()))))
    rows.sort(key=lambda r: (-r[1], -r[2], str(r[0])))
    return rows


def top_items(scores: Mapping[Hashable, float], k: int) -> list[tuple[Hashable, float]]:
    return heapq.nsmallest(k, scores.items(), key=lambda kv: (-kv[1], str(kv[0])))
