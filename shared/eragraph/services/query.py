"""Query: validate the request, run the retrieval mode named in the registry (services.modes:
summary-graph search, BM25, hybrid, the entity-graph modes, fusion and the ``auto`` router),
optionally generate an answer. Every response says the route taken and, when the router
scored the question, s(q). A metadata filter (domain.filters: Bedrock KB's JSON shape, or a
parsed tree) narrows every mode to the leaf chunks inside it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..domain.access import Caller
from ..domain.filters import Filter, FilterError, combine, parse_filter, to_json, view_of
from ..domain.model import BadInputError
from ..domain.places import NO_PLACE_NOTE, describe
from ..domain.ranking import Candidate
from ..domain.rerank import RerankSpec
from . import conversation as conversations
from . import cost
from . import decomposition as decompositions
from ..domain.conversation import Message
from . import explain as explaining
from ..ports.records import Answer
from .engine import LEAF_ATTRS, Engine
from .generation import stream_answer
from .modes import LEAVES_ONLY, MODES, available_modes, mode_names
from .query_context import QueryContext
from .summary_search import FILTER_NOTE, OVERFETCH, BadQueryError, search, summary_layers

MAX_QUERY_CHARS = 4000  # the API's limit too

__all__ = ["BadQueryError", "OVERFETCH", "QueryResponse", "Result", "available_modes", "mode_names", "query",
           "search", "summary_layers", "to_results"]


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
    place: tuple[int, ...] = ()  # a chunk's place in its document (domain.places); () unknown

    @property
    def where(self) -> dict | None:
        """The place as the API shows it: start, end and (paged) page, pages; None unknown."""
        return describe(self.place)


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
    route: str = ""                      # the mode that produced the results (auto: the one it chose)
    router_score: float | None = None    # s(q) when the router scored the question (auto, fusion)
    router_ms: float | None = None       # the router's own time (features and score)
    filter: dict | None = None           # the metadata filter applied (Bedrock KB's JSON shape)
    rerank: dict | None = None           # when reranked: {model, candidates, ms}
    stages: dict = field(default_factory=dict)  # ms per stage: embed, retrieve, rerank, generate (when run)
    explain: dict | None = None          # asked for: why the entity-graph modes ranked so (services.explain)
    explained: bool = False              # explain was asked for (the key is in the answer, null or not)
    rewrite: dict | None = None          # a conversation's follow-up made standalone: question, how, ...
    decomposition: dict | None = None    # asked for: the sub-questions retrieved for, how, which found what

    def to_dict(self) -> dict:
        out = asdict(self)
        if not out.pop("explained"):
            out.pop("explain")
        for key in ("rewrite", "decomposition"):
            if out[key] is None:
                out.pop(key)
        for r, result in zip(out["results"], self.results):
            r["children"] = list(r["children"])
            r["place"] = result.where
        out["seconds"] = round(self.seconds, 4)
        if self.router_score is not None:
            out["router_score"] = round(self.router_score, 4)
        if self.router_ms is not None:
            out["router_ms"] = round(self.router_ms, 3)
        return out


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
                          score=round(float(c.score), 6), children=n.children, title=titles.get(n.doc_id, ""),
                          place=n.place))
    return out


def as_filter(where: Filter | dict | str | None) -> Filter | None:
    """A filter from its JSON (or an already parsed tree); a bad one is a BadQueryError."""
    if where is None or not isinstance(where, (dict, str)):
        return where
    try:
        return parse_filter(where)
    except FilterError as exc:
        raise BadQueryError(str(exc)) from None


def query(engine: Engine, text: str, mode: str = "collapsed", k: int | None = None,
          budget: int | None = None, p: float | None = None, answer: bool = False,
          vector: np.ndarray | None = None, where: Filter | dict | str | None = None,
          rerank: RerankSpec | None = None, on_piece: Callable[[str], None] | None = None,
          explain: bool = False, on_results: Callable[[QueryResponse], None] | None = None,
          conversation: Sequence[Message] | None = None, caller: Caller | None = None,
          decompose: bool = False) -> QueryResponse:
    """``vector``: the question's embedding when the caller already has it (a benchmark embeds
    each question once, before any mode); else it is made on first use by the mode. ``where``:
    a metadata filter (a parsed tree, or its JSON); every result is a leaf chunk inside it.
    ``rerank``: re-order the results with the engine's reranker (a BadQueryError when it has none).
    ``explain``: say why the entity-graph modes ranked the results so (services.explain; other
    modes: None and a note). ``on_results`` sees the response once its results are known, before
    an answer is generated (the streamed /query sends them first); ``on_piece`` each piece of
    the answer as it is written. ``conversation``: the earlier messages of a chat (oldest first);
    the question is made standalone from them (services.conversation) before it is retrieved
    for and answered, and the response's ``rewrite`` says how. ``decompose``: split the
    (standalone) question into sub-questions with the generator, retrieve for each and fuse the
    lists (services.decomposition; a BadQueryError without a generator that can); the answer is
    still to the whole question, and the response's ``decomposition`` shows the sub-questions.
    ``caller``: who is asking (domain.access; None: the operator,
    everything): every mode runs inside its view, summaries of the partitions it may read included."""
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
    if len(text) > MAX_QUERY_CHARS:
        raise BadQueryError(f"query text is longer than {MAX_QUERY_CHARS} characters")
    if mode not in available_modes(engine):
        known = "unknown" if mode not in MODES else "unavailable on this store"
        raise BadQueryError(f"{known} mode {mode!r}; choose one of {', '.join(available_modes(engine))}")
    reranker, fetch = None, k
    if rerank is not None:
        reranker = _reranker_for(engine, rerank)
        fetch = max(k, rerank.candidates if rerank.candidates is not None else engine.settings.rerank_candidates)
    where = as_filter(where)
    view = view_of(caller)
    # refuses a store built with another embedder; a store without hyperplanes holds nothing (never
    # ingested, or its tenant deleted): nothing is embedded, searched or written (a read never writes)
    empty = engine.stored_lsh() is None
    asked, rewrite = text, None
    with cost.track() as calls, explaining.recording(explain) as recorder:
        if conversation:
            rewrite = conversations.standalone(engine, text, conversation)
            text = rewrite.question[:MAX_QUERY_CHARS]
        if decompose:
            decompositions.check(engine)  # refused in words before any call
        parts = decompositions.split(engine, text) if decompose and not empty else None
        contexts: list[QueryContext] = []

        def run(question: str, given: np.ndarray | None = None) -> list[Candidate]:
            one = QueryContext(engine=engine, text=question, k=fetch, budget=budget, p=p,  # embeds on first use
                               given_vector=given, where=combine([view, where]),
                               view_only=view is not None and where is None)
            contexts.append(one)
            return [] if empty else MODES[mode].run(one)

        retrieve_started = time.perf_counter()
        if parts is None:
            ranked = run(text, vector)
        else:
            ranked, parts = decompositions.retrieve(parts, run, fetch, budget)
        ctx = contexts[0]
        embed_ms = sum(c.embed_ms for c in contexts)
        results, rerank_report = to_results(engine, ranked), None
        stages = {"embed_ms": round(embed_ms, 3),
                  "retrieve_ms": round((time.perf_counter() - retrieve_started) * 1000.0 - embed_ms, 3)}
        if reranker is not None:
            results, rerank_report = _rerank(engine, reranker, text, results, k)
            stages["rerank_ms"] = rerank_report["ms"]
        response = QueryResponse(query=asked, mode=mode, rewrite=None if rewrite is None else rewrite.to_dict(), results=results, rerank=rerank_report,
                                 route=ctx.route or mode, router_score=ctx.router_score, router_ms=ctx.router_ms,
                                 filter=None if where is None else to_json(where), stages=stages, explained=explain)
        notes = list(dict.fromkeys(n for c in contexts for n in c.notes))
        if parts is not None:
            shown = {r.id for r in results}
            response.decomposition = replace(parts, found={i: f for i, f in parts.found.items() if i in shown}).to_dict()
            if parts.note:
                notes.append(f"decomposition: {parts.note}")
        if explain:
            response.explain = _explained(engine, recorder, response, in_view=view is not None)
            if response.explain is None:
                notes.append(f"explain covers the entity-graph modes ({', '.join(explaining.GRAPH_ROUTES)}, and auto "
                             f"when it routes to one of them); {response.route} has none")
        if where is not None and MODES[mode].under_filter == LEAVES_ONLY:
            notes.append(FILTER_NOTE)
        if where is not None and engine.graph.get_meta(LEAF_ATTRS) is None:
            notes.append("this store was built before metadata filters and its leaves carry no attributes yet, "
                         "so no filter matches them: run `eragraph reindex` (the scheduled reindex on AWS)")
        if empty:
            notes.append("the store is empty")
        if any(r.layer == 0 and not r.place for r in response.results):
            notes.append(NO_PLACE_NOTE)
        if on_results is not None:
            on_results(replace(response, note="; ".join(notes)))
        if answer and not empty:
            if engine.generator is None:
                notes.append("no generator configured: evidence only, no answer generated")
            else:
                evidence = [(r.id, r.text) for r in response.results]
                started_gen = time.perf_counter()
                if on_piece is not None:  # streamed: each piece to the caller as it is written
                    ans = _streamed(engine, text, evidence, on_piece)
                else:
                    ans = engine.generator.answer(text, evidence)
                    cost.record(engine.graph, "generate", ans.model or engine.generator.identity, ans.tokens_in,
                                ans.tokens_out, time.perf_counter() - started_gen)
                stages["generate_ms"] = round((time.perf_counter() - started_gen) * 1000.0, 3)
                response.answer = ans.text
                response.cited_ids = list(ans.cited_ids)
        elif engine.generator is None:
            notes.append("evidence only (no generator configured)")
        response.note = "; ".join(notes)
    response.usage = cost.calls_report(calls, engine.settings.price_table())
    response.seconds = time.perf_counter() - started
    return response


def _explained(engine: Engine, recorder, response: QueryResponse, in_view: bool = False) -> dict | None:
    """The response's explain (services.explain) when it was routed to an entity-graph mode
    (``in_view``: in a caller's view, its entities only those of the passages shown)."""
    entities = engine.entities
    if entities is None:
        return None
    return explaining.report(recorder, response.route, response.results, entities.store.chunk_entities, in_view)


def _reranker_for(engine: Engine, spec: RerankSpec):
    """The engine's reranker, or the same provider asking the model ``spec`` names (Bedrock);
    a BadQueryError in words when none is configured or a local one is asked for another model."""
    if not isinstance(spec, RerankSpec):
        raise BadQueryError("rerank must be a RerankSpec")
    if spec.candidates is not None and (not isinstance(spec.candidates, int) or not 1 <= spec.candidates <= 1000):
        raise BadQueryError("rerank candidates must be an integer within 1..1000")
    reranker = engine.reranker
    if reranker is None:
        raise BadQueryError("reranking was asked for, but no reranker is configured for this store")
    model = spec.model
    if not model or model in (getattr(reranker, "model", None), getattr(reranker, "arn", None), reranker.identity):
        return reranker
    with_model = getattr(reranker, "with_model", None)
    if with_model is None:
        raise BadQueryError(f"rerank model {model!r} is not available: this store's reranker is "
                            f"{reranker.identity} (ERAGRAPH_RERANK_MODEL), and a local reranker runs only that model")
    try:
        return with_model(model)
    except BadInputError as exc:  # a model this deployment does not rerank with
        raise BadQueryError(str(exc)) from None


def _rerank(engine: Engine, reranker, text: str, results: list[Result], k: int) -> tuple[list[Result], dict]:
    """The results re-scored by ``reranker``, the best k in its order (ties keep retrieval order),
    each with its rerank score; the call is ledgered as kind "rerank"."""
    started = time.perf_counter()
    scores = reranker.score(text, [r.text for r in results]) if results else []
    if len(scores) != len(results):
        raise RuntimeError(f"reranker {reranker.identity} gave {len(scores)} scores for {len(results)} passages")
    seconds = time.perf_counter() - started
    billed = getattr(reranker, "billed_queries", None)
    cost.record(engine.graph, "rerank", reranker.identity, billed(len(results)) if billed else 0, 0, seconds)
    order = sorted(range(len(results)), key=lambda i: -scores[i])  # sorted() is stable: ties keep retrieval order
    kept = [replace(results[i], score=float(scores[i])) for i in order[:k]]
    return kept, {"model": reranker.identity, "candidates": len(results), "ms": round(seconds * 1000, 3)}


def _streamed(engine: Engine, text: str, evidence: list[tuple[str, str]],
              on_piece: Callable[[str], None]) -> Answer:
    """The answer through generation.stream_answer (which records its cost), each text piece
    handed to ``on_piece`` as it arrives."""
    final = None
    for item in stream_answer(engine.generator, text, evidence, graph=engine.graph):
        if isinstance(item, Answer):
            final = item
        else:
            on_piece(item)
    assert final is not None  # stream_answer ends with the Answer or raises
    return final
