"""The registry of retrieval modes: one typed, explicit table that query, the CLI, the API
schema and the benchmarks read. A mode declares what the store must have (an entity graph, a
lexical index); ``available_modes`` lists the ones a given engine can run.

Import direction (no cycles): modes -> summary_search, lexical_search, graph_query, routing;
graph_query -> summary_search, entity_ids; entity_index -> entity_ids."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..domain.filters import Filter
from ..domain.ranking import Candidate
from .engine import Engine


@dataclass
class QueryContext:
    """One query as the modes see it; modes record the route they took, s(q) and notes.
    ``vector`` (the question's embedding) is made on first use: a mode that never reads it
    (bm25) never loads the embedder."""
    engine: Engine
    text: str
    k: int
    budget: int | None
    p: float
    route: str = ""
    router_score: float | None = None
    router_ms: float | None = None   # features + score, when the router ran
    notes: list[str] = field(default_factory=list)
    given_vector: np.ndarray | None = field(default=None, repr=False)
    where: Filter | None = None       # the metadata filter: every list is drawn from allowed leaves

    @property
    def vector(self) -> np.ndarray:
        if self.given_vector is None:
            self.given_vector = self.engine.embedder.embed([self.text])[0]
        return self.given_vector


@dataclass(frozen=True)
class RetrievalMode:
    name: str
    family: str                      # summary | lexical | hybrid | graph | fusion | router
    description: str
    run: Callable[[QueryContext], list[Candidate]]
    needs_entity_graph: bool = False
    needs_lexical: bool = False


def _summary(name: str) -> Callable[[QueryContext], list[Candidate]]:
    def run(ctx: QueryContext) -> list[Candidate]:
        from .summary_search import search

        return search(ctx.engine, name, ctx.vector, ctx.k, ctx.budget, ctx.p, ctx.where)
    return run


def _graph(name: str) -> Callable[[QueryContext], list[Candidate]]:
    def run(ctx: QueryContext) -> list[Candidate]:
        from . import graph_query

        return getattr(graph_query, name)(ctx.engine, ctx.text, ctx.vector, ctx.k, ctx.budget, ctx.where)
    return run


def _lexical(name: str) -> Callable[[QueryContext], list[Candidate]]:
    def run(ctx: QueryContext) -> list[Candidate]:
        from . import lexical_search

        return getattr(lexical_search, name)(ctx)
    return run


def _routing(name: str) -> Callable[[QueryContext], list[Candidate]]:
    def run(ctx: QueryContext) -> list[Candidate]:
        from . import routing

        return getattr(routing, name)(ctx)
    return run


_TABLE = (
    RetrievalMode("collapsed", "summary", "one top-k over every layer under the token budget (EraRAG Alg. 2)",
                  _summary("collapsed")),
    RetrievalMode("detailed", "summary", "top-pk leaves, the rest from summaries (EraRAG §III-D)", _summary("detailed")),
    RetrievalMode("summarized", "summary", "top-pk summaries, the rest from leaves (EraRAG §III-D)",
                  _summary("summarized")),
    RetrievalMode("dense", "summary", "leaf chunks by embedding similarity", _summary("dense")),
    RetrievalMode("bm25", "lexical", "leaf chunks by BM25 over the lexical index", _lexical("bm25"),
                  needs_lexical=True),
    RetrievalMode("hybrid", "hybrid", "BM25 and dense leaf lists fused by reciprocal rank fusion",
                  _lexical("hybrid"), needs_lexical=True),
    RetrievalMode("tri_graph", "graph", "LinearRAG tri-graph activation + PPR", _graph("tri_graph"),
                  needs_entity_graph=True),
    RetrievalMode("concept_ppr", "graph", "TERAG concept PPR", _graph("concept_ppr"), needs_entity_graph=True),
    RetrievalMode("local_global", "graph", "E2GraphRAG local/global retrieval", _graph("local_global"),
                  needs_entity_graph=True),
    RetrievalMode("fusion", "fusion", "EA-GraphRAG eq. 8: RRF of the dense-side and tri_graph lists weighted "
                  "1 - s(q) and s(q)", _routing("fusion")),
    RetrievalMode("auto", "router", "EA-GraphRAG complexity router: s(q) picks the dense side, fusion or the graph",
                  _routing("auto")),
)

MODES: dict[str, RetrievalMode] = {m.name: m for m in _TABLE}


def mode_names() -> list[str]:
    """Every registered mode, in registry order (the API schema's enumeration)."""
    return list(MODES)


def has_entity_graph(engine: Engine) -> bool:
    return engine.entities is not None


def available_modes(engine: Engine) -> list[str]:
    """The modes this engine can run (fusion and auto always: they fall back and say so)."""
    graph = has_entity_graph(engine)
    lexical = engine.lexical is not None
    return [m.name for m in _TABLE
            if (graph or not m.needs_entity_graph) and (lexical or not m.needs_lexical)]
