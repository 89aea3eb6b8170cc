"""Query decomposition with the configured generator (domain.decomposition): the question split
into sub-questions by the model (priced like any call, its output capped at
providers.prompts.DECOMPOSE_MAX_TOKENS), each retrieved for with the request's mode, and the
lists fused by reciprocal rank. Without a generator that can split questions it is refused in
words: no rule splits a question well enough to stand in for a model."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from ..domain.decomposition import Decomposition, fuse, parse_sub_questions
from ..domain.ranking import Candidate, fill_budget
from . import cost
from .engine import Engine
from .summary_search import BadQueryError

NEEDS_MODEL = ("query decomposition needs a model to split the question (a Bedrock or OpenAI-compatible "
               "generator: ERAGRAPH_GENERATOR), and this store has {what}; ask without it")


def check(engine: Engine) -> Callable:
    """The generator's ``decompose``; BadQueryError in words when the engine has no generator
    that can split questions."""
    generator = engine.generator
    splitter = getattr(generator, "decompose", None)
    if splitter is None:
        what = "no generator" if generator is None else f"a generator that cannot ({generator.identity})"
        raise BadQueryError(NEEDS_MODEL.format(what=what))
    return splitter


def split(engine: Engine, question: str) -> Decomposition:
    """The sub-questions of ``question`` from the engine's generator; BadQueryError in words when
    it has none that can split questions."""
    splitter = check(engine)
    generator = engine.generator
    started = time.perf_counter()
    out = splitter(question)
    cost.record(engine.graph, "decompose", out.model or generator.identity, out.tokens_in, out.tokens_out,
                time.perf_counter() - started)
    return parse_sub_questions(out.text, question)


def retrieve(decomposition: Decomposition, run: Callable[[str], list[Candidate]],
             k: int, budget: int | None = None) -> tuple[list[Candidate], Decomposition]:
    """``run`` (one question's retrieval) for each sub-question, fused to the best ``k`` within
    the token ``budget`` (as every mode fills it: domain.ranking.fill_budget); the
    decomposition comes back with which sub-questions found each result."""
    lists = [run(q) for q in decomposition.questions]
    by_id: dict[str, Candidate] = {}
    for ranked in lists:
        for c in ranked:
            by_id.setdefault(c.node_id, c)
    fused, found = fuse([[c.node_id for c in ranked] for ranked in lists], len(by_id))
    out = fill_budget([Candidate(node_id=i, layer=by_id[i].layer, score=score, tokens=by_id[i].tokens)
                       for i, score in fused], k, budget)
    kept = {c.node_id for c in out}
    return out, replace(decomposition, found={i: f for i, f in found.items() if i in kept})
