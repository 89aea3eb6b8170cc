"""``fusion`` and ``auto``: EA-GraphRAG's complexity router (§3.2-3.4, Algorithm 1).

s(q) = the trained scorer over the z-scored features of the question (domain.router_model):
its lexical cues and its embedding projected (the shipped weights), or the features of a spaCy
parse (weights trained on ``parse`` inputs; providers.question_parser). ``auto`` routes
s < tau_low to the dense side (dense or hybrid, as trained), s >= tau_high to ``tri_graph``
and anything between to ``fusion``: the dense-side list and the tri_graph list fused by RRF
weighted 1 - s(q) and s(q) (eq. 8). The ``GRAPH_ROUTE`` setting (``paths``) puts ``paths`` in
``tri_graph``'s place in both (the route then says ``paths``). The weights ship in ``eragraph/weights/router.json``
(``eragraph router train`` writes them; the ``router_weights`` setting names another file,
which bootstrap loads into ``engine.router``; the parser is ``engine.question_parser``).

Two heads (domain.router_model): the text+vector head scores a query embedded by the embedder
it was trained with (the engine's ``embedder.identity``, compared whole: same model and weights,
not merely the same dimension); a query embedded by another (Titan on the AWS stack) is scored
by the text-only head, and the note says so. Weights with one head route as before.

Weights on ``text+vector+agreement`` inputs (domain.retrieval_features) read the retrieval
itself: ``auto`` and ``fusion`` then run the dense search, BM25 and the graph walk once each
(``_lists``), score s(q) with the lists' agreement, and answer from the list the route names
or from the two fused: ``auto`` costs what ``fusion`` costs (the same searches, on AWS the
same requests). With such weights the dense side is searched without the second hop.

Fallbacks, each said in the response's note: a store without an entity graph gets the dense
side; a store whose lexical index is not built yet gets dense; a question with no words to
parse gets s(q) = 0 (the dense side)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..domain.fusion import rrf, weighted_rrf
from ..domain.question_features import features
from ..domain.ranking import Candidate
from ..domain.retrieval_features import agreement_features
from ..domain.router_model import RouterModel
from .graph_query import graph_settings, tri_graph
from .path_query import paths
from . import second_hop
from .leaf_ranking import fill_by_document
from .lexical_search import bm25_list, dense_list, fetch_size, hybrid_ranked
from .query_context import QueryContext, has_entity_graph
from .summary_search import search

_lock = threading.Lock()
_shipped: list[RouterModel] = []


def load_router(path: str | Path | None = None) -> RouterModel:
    """The router's weights from ``path`` (a file `eragraph router train` wrote), else the
    ones shipped in the package (read once per process)."""
    if path:
        return RouterModel.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
    with _lock:
        if not _shipped:
            text = resources.files("eragraph").joinpath("weights/router.json").read_text(encoding="utf-8")
            _shipped.append(RouterModel.from_dict(json.loads(text)))
        return _shipped[0]


def router_of(engine) -> RouterModel:
    return engine.router if engine.router is not None else load_router()


def score_question(text: str, model: RouterModel, parser, vector: np.ndarray | None = None,
                   embedder_id: str | None = None, agreement: np.ndarray | None = None) -> tuple[float, str]:
    """(s(q), note): ``scored_by_head`` without the head."""
    s, note, _ = scored_by_head(text, model, parser, vector, embedder_id, agreement)
    return s, note


def scored_by_head(text: str, model: RouterModel, parser, vector: np.ndarray | None = None,
                   embedder_id: str | None = None, agreement: np.ndarray | None = None) -> tuple[float, str, RouterModel]:
    """(s(q), note, the head whose thresholds route it). Weights on text+vector inputs read the
    question's text and its embedding (no parser) when ``embedder_id`` (the embedder that made
    ``vector``) is the one the head was trained with; otherwise their text-only head reads the
    text (the note says so). Weights on a parse need the parser: without one, or for a question
    with no words to parse, s(q) = 0 with a note."""
    if parser is None:
        return 0.0, "no question parser configured (parser = none): s(q) = 0", model
    head, why = model.head_for(embedder_id, vector)
    if not head.needs_parse:
        if not any(ch.isalnum() for ch in text):
            return 0.0, "question has no words to read: s(q) = 0", head
        phi, note = head.phi(text, vector, embedder_id, agreement)
        return head.score(phi), "; ".join(n for n in (why, note) if n), head
    try:
        parsed = parser.parse(text)
    except Exception as exc:  # a parser failure must not fail the query
        return 0.0, f"question could not be parsed ({type(exc).__name__}): s(q) = 0", head
    if not any(ch.isalnum() for t in parsed.tokens for ch in t.text):
        return 0.0, "question has no words to parse: s(q) = 0", head
    return head.score(features(parsed)), "", head


def lexical_ready(ctx: QueryContext) -> bool:
    return ctx.engine.lexical is not None and ctx.engine.lexical.ready()


def _score(ctx: QueryContext, model: RouterModel, lists: Lists | None = None) -> tuple[float, RouterModel]:
    """(s(q), the head that scored it: its thresholds and dense side route the query). With
    ``lists`` (weights reading them), the features of the lists are part of the router's time."""
    vector = None if model.needs_parse else ctx.vector  # every route embeds it: not the router's time
    embedder_id = None if model.needs_parse else ctx.engine.embedder.identity
    t0 = time.perf_counter()
    agreement = None if lists is None else lists.agreement()
    s, note, head = scored_by_head(ctx.text, model, ctx.engine.question_parser, vector, embedder_id, agreement)
    ctx.router_ms = (time.perf_counter() - t0) * 1000.0
    ctx.router_score = s
    if note:
        ctx.notes.append(note)
    return s, head


def _dense_side(ctx: QueryContext, which: str, n: int) -> tuple[str, list[tuple[str, float]]]:
    if which == "hybrid" and not lexical_ready(ctx):
        ctx.notes.append("no lexical index in this store (run `eragraph reindex`): dense instead of hybrid")
        which = "dense"
    if second_hop.active(ctx.engine):  # the hop_entities setting: the dense side's second hop
        return which, (second_hop.hybrid_ranked_hop if which == "hybrid" else second_hop.dense_ranked)(ctx, n)[:n]
    if which == "hybrid":
        return which, hybrid_ranked(ctx, n)[:n]
    ids = dense_list(ctx, n)
    return which, [(i, 1.0 / (60 + r)) for r, i in enumerate(ids, 1)]


def _graph_mode(ctx: QueryContext):
    """The graph mode behind the graph route and fusion's graph list (the ``route`` graph
    setting, ERAGRAPH_GRAPH_ROUTE)."""
    return paths if graph_settings(ctx.engine).route == "paths" else tri_graph


def _graph_ids(ctx: QueryContext, n: int) -> list[str]:
    return [c.node_id for c in _graph_mode(ctx)(ctx.engine, ctx.text, ctx.vector, n, None, ctx.where)]


def _finish(ctx: QueryContext, scored: list[tuple[str, float]]) -> list[Candidate]:
    return fill_by_document(ctx.engine, scored, ctx.k, ctx.budget)


def _fused(ctx: QueryContext, model: RouterModel, s: float, n: int) -> list[Candidate]:
    side, dense = _dense_side(ctx, model.fusion_dense, n)
    fused = weighted_rrf([i for i, _ in dense], _graph_ids(ctx, n), s)
    return _finish(ctx, fused[:n])


def _no_graph(ctx: QueryContext, model: RouterModel, n: int, why: str) -> list[Candidate]:
    side, ranked = _dense_side(ctx, model.low_route, n)
    ctx.route = side
    ctx.notes.append(f"no entity graph in this store: {why} falls back to {side}")
    return _finish(ctx, ranked)


def fusion(ctx: QueryContext) -> list[Candidate]:
    n = fetch_size(ctx.k)
    if _reads_lists(ctx):
        return _routed_from_lists(ctx, n, "fusion")
    s, model = _score(ctx, router_of(ctx.engine))
    if not has_entity_graph(ctx.engine):
        return _no_graph(ctx, model, n, "fusion")
    ctx.route = "fusion"
    return _fused(ctx, model, s, n)


def auto(ctx: QueryContext) -> list[Candidate]:
    n = fetch_size(ctx.k)
    if _reads_lists(ctx):
        return _routed_from_lists(ctx, n, "auto")
    s, model = _score(ctx, router_of(ctx.engine))
    route = model.route(s)
    if route in ("fusion", "tri_graph") and not has_entity_graph(ctx.engine):
        return _no_graph(ctx, model, n, "auto")
    if route == "fusion":
        ctx.route = "fusion"
        return _fused(ctx, model, s, n)
    if route == "tri_graph":
        ctx.route = graph_settings(ctx.engine).route
        return _graph_mode(ctx)(ctx.engine, ctx.text, ctx.vector, ctx.k, ctx.budget, ctx.where)
    side, ranked = _dense_side(ctx, route, n)
    ctx.route = side
    return _finish(ctx, ranked)


# ----------------------------------------------------------------------------- weights reading the lists
# Weights on text+vector+agreement inputs (domain.retrieval_features) score the question after
# the retrieval: the dense side and the graph run first (what ``fusion`` runs anyway), their
# agreement and the dense scores join the question's text and vector, and the route answers
# from a list already held: no retrieval runs twice.


@dataclass
class Lists:
    """The lists ``auto`` holds before it routes: the dense leaf list with its scores, BM25's
    (empty without a lexical index), the dense side's RRF of the two (dense alone without BM25)
    and the graph's candidates (tri_graph's, or GRAPH_ROUTE's mode)."""
    dense: list[Candidate]
    bm25: list[str]
    side: list[tuple[str, float]]
    graph: list[Candidate]
    lexical: bool = True    # the side is the RRF of dense and BM25 (False: no lexical index, dense alone)

    def agreement(self) -> np.ndarray:
        return agreement_features([c.node_id for c in self.dense], [c.score for c in self.dense], self.bm25,
                                  [i for i, _ in self.side], [c.node_id for c in self.graph])

    def dense_ranked(self) -> list[tuple[str, float]]:
        return rrf([[c.node_id for c in self.dense]])  # the dense list alone, scored as the RRF scores it


def _reads_lists(ctx: QueryContext) -> bool:
    return router_of(ctx.engine).reads_lists and has_entity_graph(ctx.engine)


def _lists(ctx: QueryContext, n: int) -> Lists:
    """Each list once: one dense search (its scores kept), one BM25 search, one graph walk."""
    lexical = lexical_ready(ctx)
    dense = search(ctx.engine, "dense", ctx.vector, n, None, ctx.p, ctx.where)
    lists = Lists(dense, [], [], [], lexical)
    if lexical:
        lists.bm25 = bm25_list(ctx, n)
        lists.side = rrf([[c.node_id for c in dense], lists.bm25])[:n]
    else:
        ctx.notes.append("no lexical index in this store (run `eragraph reindex`): the router's dense side is dense")
        lists.side = lists.dense_ranked()
    lists.graph = _graph_mode(ctx)(ctx.engine, ctx.text, ctx.vector, n, None, ctx.where)
    return lists


def _routed_from_lists(ctx: QueryContext, n: int, mode: str) -> list[Candidate]:
    """``auto`` (or ``fusion``) for weights that read the lists: every list first, then s(q),
    then the route's answer from the lists held (fusion: the two fused by s(q), as eq. 8)."""
    if second_hop.active(ctx.engine):
        ctx.notes.append("the router reads the retrieval's lists: its dense side is searched without the second hop")
    lists = _lists(ctx, n)
    s, model = _score(ctx, router_of(ctx.engine), lists)
    route = "fusion" if mode == "fusion" else model.route(s)
    which = model.fusion_dense if route == "fusion" else route
    side = lists.side if which == "hybrid" else lists.dense_ranked()
    if route == "fusion":
        ctx.route = "fusion"
        return _finish(ctx, weighted_rrf([i for i, _ in side], [c.node_id for c in lists.graph], s)[:n])
    if route == "tri_graph":
        ctx.route = graph_settings(ctx.engine).route
        return _finish(ctx, [(c.node_id, c.score) for c in lists.graph])
    ctx.route = which if lists.lexical else "dense"
    return _finish(ctx, side)
