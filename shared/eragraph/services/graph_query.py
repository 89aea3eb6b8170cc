"""Graph retrieval modes over the entity graph (listed in the registry, services.modes):

- ``tri_graph``   LinearRAG: query entities matched to graph entities by embedding (eq. 3),
                  query-sentence relevance (eq. 4), semantic-bridging activation with threshold
                  pruning (eq. 5), PPR over the passage-entity graph with the hybrid passage
                  initialization (eq. 6-7); dense fallback without a usable entity (App. G.4).
- ``concept_ppr`` TERAG: exact, else top-n semantic matches of query entities; restart weights
                  s(u)/f(u) normalized per group (eq. 3-5); PPR over concepts + passages with
                  co-occurrence edges; passages ranked by PPR mass.
- ``local_global`` E2GraphRAG: entity pairs within h hops (eq. 1), index-mapping intersection
                  (eq. 2), shrinking h while more than k chunks, coverage-then-occurrence ranking;
                  otherwise the global path (collapsed search over all layers with occurrence
                  ranking, a summary weighted by its children).

Two executions of the same retrieval: when the entity store can export matrices (local,
memory) the exact sparse power-iteration PPR runs over a snapshot cached per store generation;
otherwise (DynamoDB) activation and PPR read neighbourhoods on demand through the store and use
the local-push PPR with a bounded residual.

Under a metadata filter (``where``) every mode runs over the allowed chunks only: the exact path
cuts the other chunks (and their sentences) out of the matrices for this query, the push path
drops them from every neighbourhood it reads, and the dense fill and the global path search
allowed leaves. Entities stay shared, but the co-occurrence edges between them are counted
over the allowed sentences only; no text outside the filter is returned, and none steers the
ranking.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from ..config import GraphSettings
from ..domain import graph_math as gm
from ..domain.filters import Filter
from ..domain.ranking import Candidate, fill_budget
from .explain import note
from .chunk_filter import ChunkFilter
from .chunk_filter import of as chunk_filter_of
from .engine import Engine
from .entity_match import nearest_names, nearest_positions
from .leaf_ranking import fill_by_document
from .graph_snapshot import View, filtered_view, snapshot, use_exact
from .synonyms import synonym_neighbours

DEFAULT_OVERFETCH = 4


def graph_settings(engine: Engine) -> GraphSettings:
    return engine.settings.graph_retrieval


def walk_reads(engine: Engine):
    """The context of one walk's reads: a store that keeps the graph in memory (the AWS query
    function's, adapters/aws/entity_warm) is brought up to date once and answers from memory
    inside it; any other store is read as it is."""
    reading = getattr(engine.entities.store, "reading", None)
    return reading() if reading is not None else nullcontext()


# ---------------------------------------------------------------- shared steps


def dense(engine: Engine, vector: np.ndarray, k: int, budget: int | None,
          where: Filter | None = None) -> list[Candidate]:
    from .summary_search import search

    return search(engine, "dense", vector, k, budget, engine.settings.bias_p, where)


def _query_entity_vectors(engine: Engine, text: str) -> tuple[list[str], np.ndarray]:
    index = engine.entities
    names = index.extractor.query_entities(text)
    if not names:
        return [], np.zeros((0, engine.embedder.dim), dtype=np.float32)
    return names, engine.embedder.embed(names)


def _finish(engine: Engine, ranked: list[tuple[str, float]], vector: np.ndarray, k: int,
            budget: int | None, where: Filter | None = None) -> list[Candidate]:
    """Top k of a graph ranking under the budget, one document at a time (services.leaf_ranking);
    dense results fill any places left."""
    cands = fill_by_document(engine, ranked[: max(k * DEFAULT_OVERFETCH, k)], k, budget)
    if len(cands) < k:
        taken = {c.node_id for c in cands}
        used = sum(c.tokens for c in cands)
        rest = [c for c in dense(engine, vector, k * 2, None, where) if c.node_id not in taken]
        floor = min((c.score for c in cands), default=0.0)
        more = fill_budget([Candidate(c.node_id, c.layer, min(floor, 0.0) - 1.0 + c.score * 1e-3, c.tokens)
                            for c in rest], k - len(cands), None if budget is None else budget - used)
        cands += more
    return cands


# ---------------------------------------------------------------- tri_graph (LinearRAG)


class TriWalk:
    """tri_graph's walk for one query: passages by PageRank mass (``ranked``, best first) and
    the graph entities the question's names matched (``seeds``: name -> similarity); ``view``
    is the exact execution's (None on the push execution)."""

    def __init__(self, ranked: list[tuple[str, float]], seeds: dict[str, float], view: View | None = None,
                 start: _ExactStart | _PushStart | None = None) -> None:
        self.ranked, self.seeds, self.view = ranked, seeds, view
        self.names: tuple[list[str], np.ndarray] | None = None  # the question's entity names and vectors
        self.start = start  # what the walk read and computed from the question alone (a re-seeded walk reuses it)


class _ExactStart:
    """The exact execution's question-only inputs: the view, the question's entity matches by
    position, and the passages' and sentences' similarities to the question."""

    def __init__(self, view: View, seeds: np.ndarray, psim: np.ndarray, sigma: np.ndarray) -> None:
        self.view, self.seeds, self.psim, self.sigma = view, seeds, psim, sigma


class _PushStart:
    """The push execution's question-only reads: the question's entity matches, the dense hits
    that seed the passages and their entities, and the sentence reads of the activation
    (memoized, so a re-seeded walk reads only sentences the first did not)."""

    def __init__(self, seeds: dict[str, float], sentences_of, sentence_info) -> None:
        self.seeds = seeds
        self.sentences_of, self.sentence_info = _memo(sentences_of), _memo(sentence_info)
        self.hits: list | None = None
        self.counts: dict | None = None


def _memo(read):
    """A batched read whose answers are kept: each call asks ``read`` for the keys not asked yet."""
    kept: dict = {}
    asked: set = set()

    def cached(keys):
        wanted = set(keys)
        missing = [x for x in dict.fromkeys(keys) if x not in asked]
        if missing:
            kept.update(read(missing))
            asked.update(missing)
        return {x: v for x, v in kept.items() if x in wanted}  # in the order the reads answered

    return cached


def tri_graph(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
              where: Filter | None = None) -> list[Candidate]:
    walk = tri_graph_walk(engine, text, vector, k * DEFAULT_OVERFETCH, where)
    if walk is None:
        return dense(engine, vector, k, budget, where)
    if walk.view is not None and walk.view.empty:
        return []
    return _finish(engine, walk.ranked, vector, k, budget, where)


def tri_graph_walk(engine: Engine, text: str, vector: np.ndarray, n: int,
                   where: Filter | None = None) -> TriWalk | None:
    """tri_graph's ranking of (at most n, exact execution) passages; None when the question
    has no usable entity (the mode answers with ``dense``)."""
    names = _query_entity_vectors(engine, text)
    walk = _tri_graph_walk(engine, vector, n, where, names)
    if walk is not None:
        walk.names = names
    return walk


def reseeded_walk(engine: Engine, first: TriWalk, vector: np.ndarray, n: int, where: Filter | None,
                  extra_seeds: dict[str, float]) -> TriWalk | None:
    """``first``'s walk again with ``extra_seeds`` (graph entities, at those similarities: the
    second hop's bridges) seeded beside the question's matches. What depends on the question
    alone is taken from ``first`` (its entity names and matches, the passages' and sentences'
    similarities, the view; on the push execution its dense hits and sentence reads): only the
    activation and the PageRank run again, to the ranking a fresh walk would give."""
    walk = _tri_graph_walk(engine, vector, n, where, first.names, extra_seeds, first.start)
    if walk is not None:
        walk.names = first.names
    return walk


def _tri_graph_walk(engine: Engine, vector: np.ndarray, n: int, where: Filter | None,
                    names_vectors: tuple[list[str], np.ndarray] | None, extra_seeds: dict[str, float] | None = None,
                    start: _ExactStart | _PushStart | None = None) -> TriWalk | None:
    gs = graph_settings(engine)
    names, qvecs = names_vectors or ([], None)
    if not names:
        return None
    if use_exact(engine):
        if not isinstance(start, _ExactStart):
            view = filtered_view(engine, where, vector)
            if view.empty:
                return TriWalk([], {}, view)
            start = _exact_start(engine, view, vector, qvecs)
        view, snap = start.view, start.view.snap
        seeds = start.seeds.copy()
        for e, s in (extra_seeds or {}).items():
            i = snap.entity_index.get(e)
            if i is not None:
                seeds[i] = max(seeds[i], s)
        if not (seeds > 0).any():
            return None
        act, tier = gm.semantic_bridging(view.mention, start.sigma, seeds, gs.threshold, gs.iterations,
                                         gs.top_sentences, view.mention_t)
        psim = start.psim
        pinit = gm.passage_init(gm.min_max(psim) if gs.minmax else psim, view.contain, act, tier, gs.lam,
                                gs.passage_weight, view.log_contain)
        if view.allowed is not None:
            pinit = np.where(view.allowed, pinit, 0.0)
        note("tri_graph", seeds=seeds, activated=act, restart=pinit, entities=snap.entities, chunks=snap.chunks)
        matched = {snap.entities[i]: float(seeds[i]) for i in np.flatnonzero(seeds > 0)}
        personal = np.concatenate([np.maximum(pinit, 0.0), act])
        if personal.sum() <= 0:
            return TriWalk([], matched, view, start)
        scores = gm.ppr(view.tri_walk(gs.synonym_weight), personal, gs.damping, tol=1e-7, max_iter=60)
        return TriWalk(view.top(scores, n), matched, view, start)
    with walk_reads(engine):
        return _tri_graph_push(engine, vector, qvecs, gs, chunk_filter_of(engine, where), extra_seeds,
                               start if isinstance(start, _PushStart) else None)


def _exact_start(engine: Engine, view: View, vector: np.ndarray, qvecs: np.ndarray) -> _ExactStart:
    snap = view.snap
    seeds = np.zeros(len(snap.entities))
    for matches in nearest_positions(engine, snap, qvecs, 1):
        for i, s in matches:
            seeds[i] = max(seeds[i], s)
    psim = snap.chunk_vectors @ vector
    if snap.sentence_vectors is not None:
        sigma = snap.sentence_vectors @ vector
    else:  # a sentence scored with its chunk's vector
        sigma = np.where(snap.sentence_chunk >= 0, psim[np.maximum(snap.sentence_chunk, 0)], 0.0)
    if view.allowed is not None:  # the allowed chunks are the corpus: their range, their sentences
        psim = np.where(view.allowed, psim, psim[view.allowed].min())
        sigma = np.where(view.sentence_ok, sigma, 0.0)
    return _ExactStart(view, seeds, psim, sigma)


def _tri_graph_push(engine, vector, qvecs, gs, cf: ChunkFilter | None,
                    extra_seeds: dict[str, float] | None = None, start: _PushStart | None = None) -> TriWalk | None:
    index = engine.entities
    store = index.store
    where = None if cf is None else cf.where

    def sentence_info(sids):
        sents = store.get_sentences(sids)
        if cf is not None:  # a sentence of a chunk outside the filter activates nothing
            ok = cf.allows({s.chunk_id for s in sents.values()})
            sents = {sid: s for sid, s in sents.items() if s.chunk_id in ok}
        if index.embed_sentences:
            vecs = index.vectors.get_vectors(list(sents))
            return {sid: (float(vecs[sid] @ vector) if sid in vecs else 0.0, s.entities) for sid, s in sents.items()}
        vecs = engine.vectors.get_vectors(list({s.chunk_id for s in sents.values()}))
        return {sid: (float(vecs[s.chunk_id] @ vector) if s.chunk_id in vecs else 0.0, s.entities)
                for sid, s in sents.items()}

    if start is None:
        matched: dict[str, float] = {}
        for matches in nearest_names(engine, qvecs, 1):
            for e, s in matches:
                matched[e] = max(matched.get(e, 0.0), s)
        start = _PushStart(matched, store.sentences_of, sentence_info)
    seeds = dict(start.seeds)
    for e, s in (extra_seeds or {}).items():  # entities read from the store's sentences: they exist
        seeds[e] = max(seeds.get(e, 0.0), s)
    if not any(s > 0 for s in seeds.values()):
        return None
    act, tier = gm.semantic_bridging_local(seeds, start.sentences_of, start.sentence_info, gs.threshold,
                                           gs.iterations, gs.top_sentences)
    if start.hits is None:
        start.hits = engine.vectors.search(vector, gs.push_dense_top, layers=[0], where=where)
        start.counts = store.chunk_entities([h.node_id for h in start.hits])
    hits, counts = start.hits, start.counts
    sims = np.array([h.score for h in hits], dtype=np.float64)
    sims = gm.min_max(sims) if gs.minmax else sims  # over the seeded passages only
    restart: dict = {}
    for h, sim in zip(hits, sims):
        ent_term = sum(act[e] * np.log1p(n) / tier[e] for e, n in counts.get(h.node_id, {}).items() if e in act)
        w = (gs.lam * sim + np.log1p(ent_term)) * gs.passage_weight
        if w > 0:
            restart[("c", h.node_id)] = w
    for e, a in act.items():
        restart[("e", e)] = restart.get(("e", e), 0.0) + a
    note("tri_graph", seeds=seeds, activated=act, restart=restart)
    return TriWalk(_push(restart, store, False, gs.damping, gs, cf, gs.synonym_weight),
                   {e: s for e, s in seeds.items() if s > 0}, None, start)


def _bipartite_neighbours(store, cooc: bool, cf: ChunkFilter | None = None, synonym_weight: float = 0.0):
    """The batched neighbourhood read of the passage-entity graph (``gm.NeighboursMany``): nodes
    are ("c", chunk) and ("e", entity); one ``chunk_entities`` call for the chunks and one
    ``postings`` (+ ``cooccurring``, + ``synonyms`` when ``synonym_weight`` > 0) call for the
    entities of a round. Weights are the ones of the exact adjacency (occurrence counts,
    sentence co-occurrence counts, ``synonym_weight`` times the synonymy cosine). With a chunk
    filter, chunks outside it are left out of every neighbourhood (the restricted graph)."""
    synonyms_of = synonym_neighbours(store, synonym_weight)

    def neighbours_many(nodes):
        chunks = [key for kind, key in nodes if kind == "c"]
        ents = [key for kind, key in nodes if kind == "e"]
        if cf is not None and chunks:
            ok = cf.allows(chunks)
            chunks = [c for c in chunks if c in ok]
        out = {}
        if chunks:
            for c, counts in store.chunk_entities(chunks).items():
                items = [(("e", e), float(n)) for e, n in counts.items()]
                out[("c", c)] = (items, float(sum(n for _, n in items)))
        if ents:
            post = store.postings(ents)
            if cf is not None:
                ok = cf.allows(c for p in post.values() for c in p)
                post = {e: {c: n for c, n in p.items() if c in ok} for e, p in post.items()}
            co = (store.cooccurring(ents) if cf is None else _allowed_cooccurring(store, ents, cf)) if cooc else {}
            syn = synonyms_of(ents)
            for e in ents:
                items = [(("c", c), float(n)) for c, n in post.get(e, {}).items()]
                items += [(("e", x), float(w)) for x, w in co.get(e, {}).items()]
                items += [(("e", x), w) for x, w in syn.get(e, ())]
                if items:
                    out[("e", e)] = (items, float(sum(w for _, w in items)))
        return out

    return neighbours_many


def _allowed_cooccurring(store, entities, cf: ChunkFilter) -> dict[str, dict[str, int]]:
    """``store.cooccurring`` counted over the sentences of allowed chunks only (read through the
    entities' sentences: what the exact path's restricted matrices hold)."""
    by_entity = store.sentences_of(entities)
    sents = store.get_sentences({sid for sids in by_entity.values() for sid in sids})
    ok = cf.allows({s.chunk_id for s in sents.values()})
    out: dict[str, dict[str, int]] = {}
    for e, sids in by_entity.items():
        row: dict[str, int] = {}
        for sid in sids:
            sent = sents.get(sid)
            if sent is None or sent.chunk_id not in ok:
                continue
            for x in set(sent.entities):
                if x != e:
                    row[x] = row.get(x, 0) + 1
        out[e] = row
    return out


def _entity_degree_bounds(store):
    """A cheap lower bound of an entity node's degree: its frequency (the sum of its postings,
    its whole degree without co-occurrence edges); passages have none."""

    def bounds(nodes):
        ents = [key for kind, key in nodes if kind == "e"]
        return {("e", e): float(f) for e, f in store.frequencies(ents).items()} if ents else {}

    return bounds


def _push(restart: dict, store, cooc: bool, damping: float, gs: GraphSettings,
          cf: ChunkFilter | None = None, synonym_weight: float = 0.0) -> list[tuple[str, float]]:
    """Local-push PPR from ``restart`` over the passage-entity graph; passages by mass. Under a
    filter an entity's frequency no longer bounds its (restricted) degree from below, so the
    bound is not used (synonymy edges only add to a degree: the bound holds with them)."""
    res = gm.push_ppr_rounds(restart, _bipartite_neighbours(store, cooc, cf, synonym_weight), damping,
                             gs.push_epsilon,
                             hub_cap=gs.push_hub_cap, max_rounds=gs.push_max_rounds,
                             degree_bounds=_entity_degree_bounds(store) if cf is None else None)
    return sorted(((n[1], s) for n, s in res.estimate.items() if n[0] == "c"), key=lambda x: (-x[1], x[0]))


# ---------------------------------------------------------------- concept_ppr (TERAG)


def concept_ppr(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
                where: Filter | None = None) -> list[Candidate]:
    with walk_reads(engine):
        return _concept_ppr(engine, text, vector, k, budget, where)


def _concept_ppr(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
                 where: Filter | None = None) -> list[Candidate]:
    gs = graph_settings(engine)
    index = engine.entities
    names = index.extractor.query_entities(text)
    if not names:
        return dense(engine, vector, k, budget, where)
    exact = sorted(index.store.existing(names))
    missing = [n for n in names if n not in set(exact)]
    semantic: dict[str, float] = {}
    exact_mode = use_exact(engine)
    if missing:
        qvecs = engine.embedder.embed(missing)
        if exact_mode:
            snap = snapshot(engine)
            for matches in nearest_positions(engine, snap, qvecs, gs.semantic_top):
                for i, s in matches:
                    semantic[snap.entities[i]] = max(semantic.get(snap.entities[i], 0.0), s)
        else:
            for matches in nearest_names(engine, qvecs, gs.semantic_top):
                for e, s in matches:
                    semantic[e] = max(semantic.get(e, 0.0), s)
    freq = index.store.frequencies(exact + list(semantic))
    weights = gm.restart_weights(exact, semantic, freq)
    if not weights:
        return dense(engine, vector, k, budget, where)
    note("concept_ppr", seeds={**semantic, **dict.fromkeys(exact, 1.0)}, activated=weights)
    if exact_mode:
        view = filtered_view(engine, where, vector)
        snap = view.snap
        if view.empty:
            return []
        n_p = len(snap.chunks)
        personal = np.zeros(n_p + len(snap.entities))
        for e, w in weights.items():
            i = snap.entity_index.get(e)
            if i is not None:
                personal[n_p + i] += w
        if personal.sum() <= 0:
            return dense(engine, vector, k, budget, where)
        scores = gm.ppr(view.concept_walk(), personal, gs.concept_damping, tol=1e-7, max_iter=60)
        ranked = view.top(scores, k * DEFAULT_OVERFETCH, positive=True)
    else:
        ranked = _push({("e", e): w for e, w in weights.items()}, index.store, True, gs.concept_damping, gs,
                       chunk_filter_of(engine, where))
    return _finish(engine, ranked, vector, k, budget, where)


# ---------------------------------------------------------------- local_global (E2GraphRAG)


def _map_entities(engine: Engine, text: str) -> list[str]:
    """Query entities mapped to graph vertices: exact names, else the nearest entity name when
    it is at least ``match_threshold`` similar; unmapped ones are dropped (E2GraphRAG §3.2)."""
    gs = graph_settings(engine)
    index = engine.entities
    names = index.extractor.query_entities(text)
    if not names:
        return []
    exact = index.store.existing(names)
    missing = [n for n in names if n not in exact]
    mapped = [n for n in names if n in exact]
    if missing:
        qvecs = engine.embedder.embed(missing)
        if use_exact(engine):
            snap = snapshot(engine)
            matches = [[(snap.entities[i], s) for i, s in m] for m in nearest_positions(engine, snap, qvecs, 1)]
        else:
            matches = nearest_names(engine, qvecs, 1)
        for m in matches:
            for e, s in m:
                if s >= gs.match_threshold:
                    mapped.append(e)
    return list(dict.fromkeys(mapped))


def local_global(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
                 where: Filter | None = None) -> list[Candidate]:
    with walk_reads(engine):
        return _local_global(engine, text, vector, k, budget, where)


def _local_global(engine: Engine, text: str, vector: np.ndarray, k: int, budget: int | None,
                  where: Filter | None = None) -> list[Candidate]:
    gs = graph_settings(engine)
    store = engine.entities.store
    entities = _map_entities(engine, text)
    note("local_global", seeds=dict.fromkeys(entities, 1.0))
    if not entities:
        return global_search(engine, vector, k, budget, [], where)
    cf = chunk_filter_of(engine, where)
    if use_exact(engine):
        view = filtered_view(engine, where, vector)
        snap, cooc = view.snap, view.cooc

        def neighbours(e):
            i = snap.entity_index.get(e)
            if i is None:
                return ()
            return (snap.entities[j] for j in cooc.indices[cooc.indptr[i]:cooc.indptr[i + 1]])

        pairs = gm.pairs_within_hops(entities, neighbours, gs.hops)
    else:  # one batched co-occurrence read per ball level, meeting in the middle
        def cooccurring(es):
            return store.cooccurring(es) if cf is None else _allowed_cooccurring(store, es, cf)

        pairs = gm.pairs_within_hops_batched(entities, lambda es: {e: list(n) for e, n in cooccurring(es).items()},
                                             gs.hops)
    if not pairs:
        return global_search(engine, vector, k, budget, entities, where)
    postings_cache = store.postings(sorted({e for a, b, _ in pairs for e in (a, b)}))
    if cf is not None:  # the index mapping intersects postings of allowed chunks only
        ok = cf.allows(c for p in postings_cache.values() for c in p)
        postings_cache = {e: {c: n for c, n in p.items() if c in ok} for e, p in postings_cache.items()}

    def postings(e):
        return postings_cache.get(e, {})

    h = max(d for _, _, d in pairs)
    chunks = gm.index_mapping([(a, b) for a, b, d in pairs if d <= h], postings)
    while len(chunks) > k and h > 1:
        smaller = gm.index_mapping([(a, b) for a, b, d in pairs if d <= h - 1], postings)
        if not smaller:
            break
        chunks, h = smaller, h - 1
    if not chunks:
        return global_search(engine, vector, k, budget, entities, where)
    ranked_rows = gm.coverage_occurrence_rank(store.chunk_entities(chunks), entities)
    # scores that keep the coverage-then-occurrence order (dense similarity breaks ties)
    vecs = engine.vectors.get_vectors([c for c, _, _ in ranked_rows])
    ranked = sorted(((c, cov * 1000.0 + occ + float(vecs[c] @ vector) * 1e-3 if c in vecs else cov * 1000.0 + occ)
                     for c, cov, occ in ranked_rows), key=lambda x: (-x[1], x[0]))
    return _finish(engine, ranked, vector, k, budget, where)


def global_search(engine: Engine, vector: np.ndarray, k: int, budget: int | None,
                  entities: list[str], where: Filter | None = None) -> list[Candidate]:
    """Collapsed dense search over every layer; with query entities, the top-2k candidates are
    re-ranked by entity occurrence (a summary weighs the sum of its children, recursively),
    similarity breaking ties. Under a filter the collapsed search keeps to allowed leaves."""
    from .summary_search import search

    if not entities:
        return search(engine, "collapsed", vector, k, budget, engine.settings.bias_p, where)
    cands = search(engine, "collapsed", vector, 2 * k, None, engine.settings.bias_p, where)
    store = engine.entities.store
    ents = set(entities)
    nodes = engine.graph.get_nodes(c.node_id for c in cands)
    # every leaf beneath the candidates, one batched read per layer, then one entity read
    known = dict(nodes)
    level = [n for n in nodes.values() if n.layer > 0]
    while level:
        kids = sorted({c for n in level for c in n.children if c not in known})
        got = engine.graph.get_nodes(kids) if kids else {}
        known.update(got)
        level = [n for n in got.values() if n.layer > 0]
    leaves = sorted(nid for nid, n in known.items() if n.layer == 0)
    counts_of = store.chunk_entities(leaves) if leaves else {}
    weights: dict[str, float] = {}

    def weight(node_id: str, layer: int, children: tuple[str, ...]) -> float:
        if node_id in weights:
            return weights[node_id]
        if layer == 0:
            counts = counts_of.get(node_id, {})
            w = float(sum(n for e, n in counts.items() if e in ents))
        else:
            w = sum(weight(c, known[c].layer, known[c].children) for c in children if c in known)
        weights[node_id] = w
        return w

    rescored = [Candidate(c.node_id, c.layer, weight(c.node_id, c.layer, nodes[c.node_id].children) + c.score * 1e-3,
                          c.tokens) for c in cands if c.node_id in nodes]
    return fill_budget(rescored, k, budget)
