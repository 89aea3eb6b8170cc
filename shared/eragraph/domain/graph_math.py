"""Pure graph math for entity-graph retrieval (no I/O): Personalized PageRank (exact sparse
power iteration and Andersen-Chung-Lang local push), LinearRAG's semantic-bridging activation
(eq. 5), TERAG's restart weights (eq. 3-5), E2GraphRAG's h-hop pair filter and index mapping
(eq. 1-2) with coverage-then-occurrence ranking."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

Neighbours = Callable[[Hashable], Sequence[tuple[Hashable, float]]]
# batched neighbourhood read: nodes -> {node: ((neighbour, weight), ...), weighted degree)}
NeighboursMany = Callable[[Sequence[Hashable]], Mapping[Hashable, tuple[Sequence[tuple[Hashable, float]], float]]]


# ---------------------------------------------------------------- PageRank


@dataclass(frozen=True)
class Walk:
    """The random walk of one graph: the transposed row-stochastic transition matrix and its
    dangling nodes (no out-edges). Made once per graph (``walk``), it serves every
    personalization of that graph (``ppr``)."""

    transition_t: sp.csr_matrix
    dangling: np.ndarray

    @property
    def n(self) -> int:
        return int(self.transition_t.shape[0])


def walk(adjacency: sp.spmatrix) -> Walk:
    """``adjacency[i, j]`` is the weight of the edge i -> j (symmetric for an undirected graph);
    a walker follows an out-edge with probability proportional to its weight."""
    import scipy.sparse as sp

    a = sp.csr_matrix(adjacency, dtype=np.float64)
    n = a.shape[0]
    out = np.asarray(a.sum(axis=1)).reshape(-1)
    dangling = out <= 0
    inv = np.zeros(n)
    inv[~dangling] = 1.0 / out[~dangling]
    return Walk((sp.diags(inv) @ a).T.tocsr(), dangling)  # column-stochastic: x_new = T^T x


def ppr(adjacency: sp.spmatrix | Walk, personalization: np.ndarray, damping: float = 0.85,
        tol: float = 1e-8, max_iter: int = 100) -> np.ndarray:
    """Personalized PageRank by sparse power iteration.

    ``adjacency``: the graph (see ``walk``), or its ``Walk`` made beforehand. A walker follows an
    out-edge with probability ``damping`` (proportional to its weight) and restarts at the
    normalized ``personalization`` otherwise; a node without out-edges restarts (the networkx
    convention for dangling nodes). Returns a probability vector."""
    w = adjacency if isinstance(adjacency, Walk) else walk(adjacency)
    n = w.n
    p = np.asarray(personalization, dtype=np.float64).reshape(-1)
    if p.shape[0] != n:
        raise ValueError("personalization length must equal the number of nodes")
    if (p < 0).any():
        raise ValueError("personalization must be non-negative")
    total = p.sum()
    if total <= 0:
        raise ValueError("personalization has no mass")
    p = p / total
    transition_t, dangling = w.transition_t, np.flatnonzero(w.dangling)
    restart = (1.0 - damping) * p
    x = p.copy()
    spread = np.empty_like(p)
    for _ in range(max_iter):
        # damping * (T^T x + dangling mass * p) + (1 - damping) * p, in place (the same arithmetic)
        x_new = transition_t @ x
        np.multiply(p, x[dangling].sum(), out=spread)
        x_new += spread
        x_new *= damping
        x_new += restart
        if np.abs(x_new - x).sum() < n * tol:
            return x_new
        x = x_new
    return x


@dataclass(frozen=True)
class PushOutcome:
    """Outcome of ``push_ppr_rounds``.

    ``estimate``: settled PPR mass per node (a componentwise lower bound of the exact PPR).
    ``residual_mass``: total residual left unpushed; ``parked_mass``: total mass withheld by the
    hub cap. With a symmetric weighted graph, every node v satisfies
    ``0 <= ppr(v) - estimate(v) <= epsilon * deg(v) + parked_mass`` and the L1 error is
    ``residual_mass + parked_mass``. ``rounds``/``fetches``: batched neighbourhood calls made
    (one per round that met unread nodes); ``pushes``: node pushes; ``fetched``: nodes read;
    ``complete``: False when the round or push budget stopped the loop first (the bounds above
    then hold with the larger residual that was left)."""

    estimate: dict
    residual_mass: float
    parked_mass: float
    rounds: int
    fetches: int
    pushes: int
    fetched: int
    complete: bool


def push_ppr_rounds(seeds: Mapping[Hashable, float], neighbours_many: NeighboursMany, damping: float = 0.85,
                    epsilon: float = 1e-4, hub_cap: int = 0, max_rounds: int = 1000,
                    max_pushes: int = 2_000_000,
                    degree_bounds: Callable[[list], Mapping[Hashable, float]] | None = None) -> PushOutcome:
    """Approximate Personalized PageRank by local push (Andersen, Chung, Lang 2006) in rounds,
    reading neighbourhoods on demand and in batches.

    ``neighbours_many(nodes)`` returns ``{node: (items, total_weight)}`` for the requested nodes,
    ``items`` a sequence of (neighbour, weight > 0) and ``total_weight`` the node's weighted degree
    (it may exceed the sum of ``items`` when the caller already truncated the list; a node missing
    from the answer has no neighbours). Every node is read at most once (a per-call cache).

    Push rule (ACL, degree-aware): node u is pushed while ``r(u) >= epsilon * deg(u)``; a push
    settles ``alpha * r(u)`` (alpha = 1 - damping) into the estimate and spreads
    ``damping * r(u) * w(u, v) / deg(u)`` to each neighbour v. The invariant
    ``ppr = estimate + PPR(r)`` holds after every push, so at termination every node has
    ``r(u) < epsilon * deg(u)`` and, on a symmetric graph (``deg(u) ppr_u(v) = deg(v) ppr_v(u)``),
    ``ppr(v) - estimate(v) = sum_u r(u) ppr_u(v) < epsilon * deg(v)`` -- the error of a node is at
    most epsilon times its own degree, and the total work is at most ``1 / (alpha * epsilon)``
    edge updates.

    Rounds: the nodes to push are taken together (Jacobi order: each pushes the residual it
    held when the round began, which keeps the invariant); the unread ones among them -- and
    the unread nodes whose residual reaches ``epsilon`` times the heaviest edge through which they
    received mass (a lower bound of their degree, so a node below it can not be pushable) -- are
    fetched with ONE ``neighbours_many`` call per round. ``degree_bounds(nodes)``, when given, is
    a cheaper batched read of a lower bound of some nodes' degrees (an entity's frequency): it is
    asked once per node before the node's neighbourhood would be read, so that a hub whose
    residual can not reach ``epsilon * deg`` is never read at all.

    Hub cap (``hub_cap = N > 0``): a node with more than N neighbours spreads only along its N
    heaviest edges, still dividing by its full degree; the share of the other edges is parked
    (kept out of the residual, never pushed). Parking withholds non-negative mass, so the
    estimate stays a lower bound of the exact PPR and the parked total ``P`` adds at most ``P``
    to the error of any node and to the L1 error (``PushOutcome.parked_mass`` reports it:
    ``P <= damping * sum over pushes of r(u) * (1 - kept weight of u / deg(u))``).

    A node without neighbours keeps its residual as settled mass (it restarts onto itself)."""
    total = float(sum(w for w in seeds.values() if w > 0))
    if total <= 0:
        return PushOutcome({}, 0.0, 0.0, 0, 0, 0, 0, True)
    alpha = 1.0 - damping
    keys: list = []
    ids: dict = {}

    def ident(u) -> int:
        i = ids.get(u)
        if i is None:
            i = ids[u] = len(keys)
            keys.append(u)
        return i

    cap = 64
    residual = np.zeros(cap)
    estimate = np.zeros(cap)
    bound = np.zeros(cap)       # lower bound of the degree of an unread node
    asked = np.zeros(cap, dtype=bool)  # degree_bounds already consulted
    degree = np.full(cap, -1.0)  # -1: not read yet
    nbr_ids: list = []
    nbr_w: list = []

    def grow(n: int) -> None:
        nonlocal cap, residual, estimate, bound, degree, asked
        if n <= cap:
            return
        new = max(n, 2 * cap)
        residual = np.concatenate([residual, np.zeros(new - cap)])
        estimate = np.concatenate([estimate, np.zeros(new - cap)])
        bound = np.concatenate([bound, np.zeros(new - cap)])
        degree = np.concatenate([degree, np.full(new - cap, -1.0)])
        asked = np.concatenate([asked, np.zeros(new - cap, dtype=bool)])
        cap = new

    for u, w in seeds.items():
        if w > 0:
            i = ident(u)
            grow(len(keys))
            residual[i] += w / total
    empty_i = np.zeros(0, dtype=np.int64)
    empty_w = np.zeros(0)

    def read(idx: np.ndarray) -> None:
        got = neighbours_many([keys[i] for i in idx])
        lookup = ids.get
        for i in idx.tolist():
            items, deg = got.get(keys[i], ((), 0.0))
            if hub_cap and len(items) > hub_cap:
                items = heapq.nsmallest(hub_cap, items, key=lambda vw: (-vw[1], str(vw[0])))
            targets = []
            weights = []
            for v, w in items:
                if w > 0:
                    j = lookup(v)
                    targets.append(ident(v) if j is None else j)
                    weights.append(w)
            ws = np.array(weights, dtype=np.float64)
            if len(nbr_ids) <= i:
                nbr_ids.extend([empty_i] * (i + 1 - len(nbr_ids)))
                nbr_w.extend([empty_w] * (i + 1 - len(nbr_w)))
            nbr_ids[i] = np.array(targets, dtype=np.int64)
            nbr_w[i] = ws
            degree_i = max(float(deg), float(ws.sum()))
            grow(len(keys))
            degree[i] = degree_i

    rounds = fetches = pushes = 0
    parked = 0.0
    complete = False
    while rounds < max_rounds and pushes < max_pushes:
        n = len(keys)
        r, d = residual[:n], degree[:n]
        unread = d < 0
        want = np.flatnonzero(unread & (r > 0) & (r >= epsilon * bound[:n]))
        if degree_bounds is not None and len(want):
            ask = want[~asked[want]]
            if len(ask):
                got = degree_bounds([keys[i] for i in ask.tolist()])
                for i in ask.tolist():
                    bound[i] = max(bound[i], float(got.get(keys[i], 0.0)))
                asked[ask] = True
                want = want[r[want] >= epsilon * bound[want]]
        if len(want):
            read(want)
            fetches += 1
            n = len(keys)
            r, d = residual[:n], degree[:n]
        read_ok = d >= 0
        isolated = np.flatnonzero(read_ok & (d == 0) & (r > 0))
        if len(isolated):
            estimate[isolated] += residual[isolated]
            residual[isolated] = 0.0
        active = np.flatnonzero(read_ok & (d > 0) & (r >= epsilon * np.where(d > 0, d, 1.0)) & (r > 0))
        if not len(active):
            complete = True
            break
        rounds += 1
        pushes += len(active)
        mass = residual[active].copy()
        estimate[active] += alpha * mass
        residual[active] = 0.0
        coef = damping * mass / degree[active]
        targets = [nbr_ids[i] for i in active.tolist()]
        weights = [nbr_w[i] * c for i, c in zip(active.tolist(), coef.tolist())]
        share = np.array([1.0 - nbr_w[i].sum() / degree[i] for i in active.tolist()])
        parked += float((damping * mass * np.where(share > 1e-12, share, 0.0)).sum())
        if targets:
            t = np.concatenate(targets)
            w = np.concatenate(weights)
            if len(t):
                residual[:n] += np.bincount(t, weights=w, minlength=n)[:n]
                edge = np.concatenate([nbr_w[i] for i in active.tolist()])
                np.maximum.at(bound, t, edge)
    n = len(keys)
    out = {keys[i]: float(estimate[i]) for i in np.flatnonzero(estimate[:n] > 0).tolist()}
    return PushOutcome(out, float(residual[:n].sum()), parked, rounds, fetches, pushes,
                      int((degree[:n] >= 0).sum()), complete)


def batched(neighbours: Neighbours) -> NeighboursMany:
    """Adapt a one-node neighbourhood function to the batched contract (for tests and small
    in-memory graphs)."""

    def many(nodes):
        out = {}
        for u in nodes:
            items = [(v, float(w)) for v, w in neighbours(u)]
            out[u] = (items, sum(w for _, w in items if w > 0))
        return out

    return many


# ---------------------------------------------------------------- LinearRAG


def semantic_bridging(mention: sp.spmatrix, sentence_sim: np.ndarray, seeds: np.ndarray,
                      threshold: float = 0.4, max_iter: int = 3,
                      top_sentences: int = 0, mention_t: sp.spmatrix | None = None) -> tuple[np.ndarray, np.ndarray]:
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
    which entity i was activated (1 for the seeds, 0 when never) -- the L_e of eq. 7.
    ``mention_t``: M^T as a float CSR matrix, when the caller keeps it (else made here)."""
    import scipy.sparse as sp

    m = sp.csr_matrix(mention, dtype=np.float64)
    mt = m.T.tocsr() if mention_t is None else mention_t
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


def min_max(values: np.ndarray) -> np.ndarray:
    """Scaled to [0, 1] (all zeros when the values are all equal)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v
    span = float(v.max() - v.min())
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


def passage_init(passage_sim: np.ndarray, contain: sp.spmatrix, activation: np.ndarray,
                 tier: np.ndarray, lam: float = 0.05, passage_weight: float = 0.05,
                 log_contain: sp.spmatrix | None = None) -> np.ndarray:
    """LinearRAG eq. 7: (lambda * sim(q, p) + ln(1 + sum_e a_e * ln(1 + N_pe) / L_e)) * W_p
    over the passage x entity count matrix C (N_pe = occurrences of e in p). ``log_contain``:
    ln(1 + C) as a float CSR matrix, when the caller keeps it (else made here)."""
    c = log_contain if log_contain is not None else log1p_counts(contain)
    level = np.where(tier > 0, tier, 1).astype(np.float64)
    entity_term = c @ (np.asarray(activation, dtype=np.float64) / level)
    return (lam * np.asarray(passage_sim, dtype=np.float64) + np.log1p(entity_term)) * passage_weight


def log1p_counts(contain: sp.spmatrix) -> sp.csr_matrix:
    """ln(1 + C) entry by entry, as a float CSR matrix (eq. 7's ln(1 + N_pe))."""
    import scipy.sparse as sp

    c = sp.csr_matrix(contain, dtype=np.float64, copy=True)
    c.data = np.log1p(c.data)
    return c


def bipartite_adjacency(contain: sp.spmatrix, extra_entity_edges: sp.spmatrix | None = None) -> sp.csr_matrix:
    """Symmetric adjacency over [passages..., entities...] from the passage x entity matrix C,
    optionally with entity-entity edges (co-occurrence)."""
    import scipy.sparse as sp

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


def pairs_within_hops_batched(entities: Sequence[Hashable],
                              neighbours_many: Callable[[list], Mapping[Hashable, Iterable[Hashable]]],
                              h: int) -> list[tuple[Hashable, Hashable, int]]:
    """The pairs of ``pairs_within_hops`` (same order, same distances) by meeting in the middle:
    grow a ball of radius ceil(h/2) around every entity, one batched ``neighbours_many`` call
    per level, and take d(a, b) = min over shared nodes x of d(a, x) + d(x, b). A shortest path
    of length d <= h has a node at distance ceil(d/2) from a and floor(d/2) from b, so the
    distances found are exact; only nodes closer than ceil(h/2) to a query entity are read (for
    h = 2: the query entities' own neighbourhoods), not the h-1 hop frontier of a BFS."""
    ents = list(dict.fromkeys(entities))
    radius = (h + 1) // 2
    dist: dict[Hashable, dict[Hashable, int]] = {e: {e: 0} for e in ents}
    frontier: dict[Hashable, list[Hashable]] = {e: [e] for e in ents}
    cache: dict[Hashable, list[Hashable]] = {}
    for depth in range(1, radius + 1):
        need = sorted({u for f in frontier.values() for u in f if u not in cache}, key=str)
        if need:
            got = neighbours_many(need)
            for u in need:
                cache[u] = list(got.get(u, ()))
        nxt: dict[Hashable, list[Hashable]] = {}
        for e, f in frontier.items():
            seen = dist[e]
            new = []
            for u in f:
                for v in cache[u]:
                    if v not in seen:
                        seen[v] = depth
                        new.append(v)
            if new:
                nxt[e] = new
        frontier = nxt
        if not frontier:
            break
    out = []
    for a, b in combinations(ents, 2):
        da, db = dist[a], dist[b]
        small, large = (da, db) if len(da) <= len(db) else (db, da)
        best = min((d + large[x] for x, d in small.items() if x in large), default=None)
        if best is not None and best <= h:
            out.append((a, b, best))
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

