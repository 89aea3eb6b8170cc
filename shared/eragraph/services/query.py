"""Query: collapsed search under a token budget (EraRAG Alg. 2), detailed/summarized biased
search (§III-D), dense leaf-only search; optional answer generation. Graph modes register
themselves in ``engine.extras["modes"]`` (see services.graph_query)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..domain.model import EragraphError
from ..domain.ranking import Candidate, biased_merge, fill_budget
from . import cost
from .engine import Engine

OVERFETCH = 4


@dataclass(frozen=True)
class Result:
    id: str
    layer: int
    doc_id: str
    source: str
    text: str
    score: float
    children: tuple[str, ...] = ()
    title: str = ""


@dataclass
class QueryResponse:
    query: str
    mode: str
    results: list[Result]
    answer: str | None = None
    cited_ids: list[str] = field(default_factory=list)
    note: str = ""
    seconds: float = 0.0
    usage: dict = field(default_factory=dict)  # this query's model calls, tokens and cost (services.cost)

    def to_dict(self) -> dict:
        out = asdict(self)
        for r in out["results"]:
            r["children"] = list(r["children"])
        out["seconds"] = round(self.seconds, 4)
        return out


class BadQueryError(EragraphError):
    """The request is not a valid query (empty text, unknown mode, bad k...)."""


def _candidates(engine: Engine, vector: np.ndarray, k: int, layers: list[int] | None) -> list[Candidate]:
    hits = engine.vectors.search(vector, k, layers=layers)
    nodes = engine.graph.get_nodes(h.node_id for h in hits)
    return [Candidate(h.node_id, nodes[h.node_id].layer, h.score, nodes[h.node_id].tokens)
            for h in hits if h.node_id in nodes]


def summary_layers(engine: Engine) -> list[int]:
    return [layer for layer in engine.graph.layer_sizes() if layer > 0]


def search(engine: Engine, mode: str, vector: np.ndarray, k: int, budget: int | None, p: float) -> list[Candidate]:
    fetch = k * OVERFETCH
    if mode == "collapsed":
        return fill_budget(_candidates(engine, vector, fetch, None), k, budget)
    if mode == "dense":
        return fill_budget(_candidates(engine, vector, fetch, [0]), k, budget)
    if mode in ("detailed", "summarized"):
        leaves = _candidates(engine, vector, fetch, [0])
        upper_layers = summary_layers(engine)
        summaries = _candidates(engine, vector, fetch, upper_layers) if upper_layers else []
        primary, secondary = (leaves, summaries) if mode == "detailed" else (summaries, leaves)
        return biased_merge(primary, secondary, k, p, budget)
    raise BadQueryError(f"unknown mode {mode!r}")


def available_modes(engine: Engine) -> list[str]:
    return ["collapsed", "detailed", "summarized", "dense", *sorted(engine.extras.get("modes", {}))]


def to_results(engine: Engine, ranked: list[Candidate]) -> list[Result]:
    nodes = engine.graph.get_nodes(c.node_id for c in ranked)
    doc_ids = {n.doc_id for n in nodes.values() if n.doc_id}
    titles = {}
    for doc_id in doc_ids:
        doc = engine.graph.get_document(doc_id)
        if doc is not None:
            titles[doc_id] = doc.title
    out = []
    for c in ranked:
        n = nodes.get(c.node_id)
        if n is None:
            continue
        out.append(Result(id=n.node_id, layer=n.layer, doc_id=n.doc_id, source=n.source, text=n.text,
                          score=round(float(c.score), 6), children=n.children, title=titles.get(n.doc_id, "")))
    return out


def query(engine: Engine, text: str, mode: str = "collapsed", k: int | None = None,
          budget: int | None = None, p: float | None = None, answer: bool = False) -> QueryResponse:
    started = time.perf_counter()
    if not isinstance(text, str) or not text.strip():
        raise BadQueryError("query text is empty")
    k = engine.settings.top_k if k is None else k
    if not isinstance(k, int) or k < 1 or k > 100:
        raise BadQueryError("k must be an integer within 1..100")
    budget = engine.settings.token_budget if budget is None else budget
    if not isinstance(budget, int) or budget < 1:
        raise BadQueryError("budget must be a positive number of tokens")
    p = engine.settings.bias_p if p is None else p
    if not 0.0 <= p <= 1.0:
        raise BadQueryError("p must be within [0, 1]")
    modes: dict[str, Callable] = engine.extras.get("modes", {})
    if mode not in available_modes(engine):
        raise BadQueryError(f"unknown mode {mode!r}; choose one of {', '.join(available_modes(engine))}")
    engine.lsh()  # refuses a store built with another embedder
    with cost.track() as calls:
        vector = engine.embedder.embed([text])[0]
        if mode in modes:
            ranked = modes[mode](engine, text, vector, k, budget)
        else:
            ranked = search(engine, mode, vector, k, budget, p)
        response = QueryResponse(query=text, mode=mode, results=to_results(engine, ranked))
        if answer:
            if engine.generator is None:
                response.note = "no generator configured: evidence only, no answer generated"
            else:
                started_gen = time.perf_counter()
                ans = engine.generator.answer(text, [(r.id, r.text) for r in response.results])
                cost.record(engine.graph, "generate", ans.model or engine.generator.identity, ans.tokens_in,
                            ans.tokens_out, time.perf_counter() - started_gen)
                response.answer = ans.text
                response.cited_ids = list(ans.cited_ids)
        elif engine.generator is None:
            response.note = "evidence only (no generator configured)"
    response.usage = cost.calls_report(calls, engine.settings.price_table())
    response.seconds = time.perf_counter() - started
    return response
