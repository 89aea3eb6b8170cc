"""The registry of retrieval modes: one typed table of functions (not names) that query, the
CLI, the API schema and the benchmarks read. Each entry holds the mode's callable and what it
needs and does: an entity graph, a lexical index, the question's embedding, spaCy (the
question's entities, its parse for the router), how it answers under a metadata filter, and
whether it reads summaries. ``available_modes`` lists the ones a given engine can run.

A new mode is one module holding ``def run(ctx: QueryContext) -> list[Candidate]`` plus one
line in ``_TABLE``. Import direction (no cycles): modes -> summary_search, lexical_search,
path_query, second_hop -> graph_query, routing -> query_context -> engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..domain.ranking import Candidate
from . import graph_query, lexical_search, path_query, routing, second_hop, summary_search
from .engine import Engine
from .query_context import QueryContext, has_entity_graph

__all__ = ["MODES", "QueryContext", "RetrievalMode", "available_modes", "families", "has_entity_graph",
           "mode_names", "modes_of"]

ModeFn = Callable[[QueryContext], list[Candidate]]

# How a mode answers under a metadata filter: the index applies it (lexical), or the mode keeps
# the leaves inside it and leaves summaries out (the response says so: summary_search.FILTER_NOTE).
NATIVE = "native"
LEAVES_ONLY = "leaves only"


@dataclass(frozen=True)
class RetrievalMode:
    name: str
    family: str                      # summary | lexical | hybrid | graph | fusion | router
    description: str
    run: ModeFn
    needs_entity_graph: bool = False
    needs_lexical: bool = False
    needs_embedding: bool = True     # the question's embedding (the embedder is loaded)
    spacy: frozenset[str] = frozenset()  # "entities" (the question's, for the entity graph), "parse" (router)
    under_filter: str = LEAVES_ONLY  # NATIVE | LEAVES_ONLY
    reads_summaries: bool = False    # draws on summary nodes (layers > 0) when unfiltered
    variant_of: str | None = None    # a parameter variant of another mode (benchmarks compare the base)
    purpose: str = ""                # when to choose it, in a client's words (the MCP tools' descriptions)
    pool: str = "fast"               # eragraph serve's thread pool for it: "slow" keeps graph work off the fast one

    @property
    def needs_spacy(self) -> bool:
        return bool(self.spacy)


def _summary(name: str) -> ModeFn:
    def run(ctx: QueryContext) -> list[Candidate]:
        return summary_search.search(ctx.engine, name, ctx.vector, ctx.k, ctx.budget, ctx.p, ctx.where,
                                     view_only=ctx.view_only)
    return run


def _hop(first: ModeFn, name: str) -> ModeFn:
    """``first``, or the mode's second hop (``second_hop.HOPS[name]``) when the hop_entities
    setting asks for it (a new mode needs no second hop: it is a lever of three)."""
    def run(ctx: QueryContext) -> list[Candidate]:
        return second_hop.HOPS[name](ctx) if second_hop.active(ctx.engine) else first(ctx)
    return run


def _graph(fn: Callable[..., list[Candidate]]) -> ModeFn:
    def run(ctx: QueryContext) -> list[Candidate]:
        return fn(ctx.engine, ctx.text, ctx.vector, ctx.k, ctx.budget, ctx.where)
    return run


_ENTITIES = frozenset({"entities"})
_PARSE = frozenset({"parse"})

_TABLE = (
    RetrievalMode("collapsed", "summary", "one top-k over every layer under the token budget (EraRAG Alg. 2)",
                  _summary("collapsed"), reads_summaries=True,
                  purpose="the default: broad questions and overviews; mixes summaries of whole topics with exact passages"),
    RetrievalMode("detailed", "summary", "top-pk leaves, the rest from summaries (EraRAG §III-D)", _summary("detailed"),
                  reads_summaries=True, variant_of="collapsed",
                  purpose="like collapsed, leaning to exact passages (the share p of leaves)"),
    RetrievalMode("summarized", "summary", "top-pk summaries, the rest from leaves (EraRAG §III-D)",
                  _summary("summarized"), reads_summaries=True, variant_of="collapsed",
                  purpose="like collapsed, leaning to summaries (the share p of summaries)"),
    RetrievalMode("dense", "summary", "leaf chunks by embedding similarity", _hop(_summary("dense"), "dense"),
                  purpose="specific facts phrased differently from the text: the closest passages by meaning"),
    RetrievalMode("bm25", "lexical", "leaf chunks by BM25 over the lexical index", lexical_search.bm25,
                  needs_lexical=True, needs_embedding=False, under_filter=NATIVE,
                  purpose="exact words, names, codes or identifiers that must appear in the passage"),
    RetrievalMode("hybrid", "hybrid", "BM25 and dense leaf lists fused by reciprocal rank fusion",
                  _hop(lexical_search.hybrid, "hybrid"), needs_lexical=True, under_filter=NATIVE,
                  purpose="specific facts with exact names or terms: keyword and meaning matches combined"),
    RetrievalMode("tri_graph", "graph", "LinearRAG tri-graph activation + PPR",
                  _hop(_graph(graph_query.tri_graph), "tri_graph"),
                  needs_entity_graph=True, pool="slow", spacy=_ENTITIES,
                  purpose="questions linking named entities across documents (multi-hop)"),
    RetrievalMode("paths", "graph", "PropRAG beam search over sentence paths inside tri_graph's PPR subgraph, "
                  "fused with the PPR ranking", _graph(path_query.paths),
                  needs_entity_graph=True, pool="slow", spacy=_ENTITIES,
                  purpose="multi-hop questions whose answer lies at the end of a chain of facts (A's spouse's team)"),
    RetrievalMode("concept_ppr", "graph", "TERAG concept PPR", _graph(graph_query.concept_ppr),
                  needs_entity_graph=True, pool="slow", spacy=_ENTITIES,
                  purpose="questions about how concepts or entities relate across many passages"),
    RetrievalMode("local_global", "graph", "E2GraphRAG local/global retrieval", _graph(graph_query.local_global),
                  needs_entity_graph=True, pool="slow", spacy=_ENTITIES, reads_summaries=True,
                  purpose="questions about one entity's neighbourhood, with summaries for context"),
    RetrievalMode("fusion", "fusion", "EA-GraphRAG eq. 8: RRF of the dense-side and tri_graph lists weighted "
                  "1 - s(q) and s(q)", routing.fusion, spacy=_ENTITIES | _PARSE, pool="slow",
                  purpose="unsure whether a question is simple or multi-hop: blends the dense side and the entity graph"),
    RetrievalMode("auto", "router", "EA-GraphRAG complexity router: s(q) picks the dense side, fusion or the graph",
                  routing.auto, spacy=_PARSE, pool="slow",
                  purpose="let the router choose per question (simple: dense side; multi-hop: the entity graph)"),
)

MODES: dict[str, RetrievalMode] = {m.name: m for m in _TABLE}


def mode_names() -> list[str]:
    """Every registered mode, in registry order (the API schema's enumeration)."""
    return list(MODES)


def families() -> list[str]:
    """The families of the registered modes, in registry order."""
    return list(dict.fromkeys(m.family for m in _TABLE))


def modes_of(*families_: str, variants: bool = True) -> list[str]:
    """The modes of the given families (every family when none is given), in registry order;
    ``variants=False`` leaves out the parameter variants of another mode."""
    return [m.name for m in _TABLE if (not families_ or m.family in families_) and (variants or not m.variant_of)]


def available_modes(engine: Engine) -> list[str]:
    """The modes this engine can run (fusion and auto always: they fall back and say so)."""
    graph = has_entity_graph(engine)
    lexical = engine.lexical is not None
    return [m.name for m in _TABLE
            if (graph or not m.needs_entity_graph) and (lexical or not m.needs_lexical)]
