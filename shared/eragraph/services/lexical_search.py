"""Lexical retrieval over the LexicalIndex port: ``bm25`` (leaf chunks by BM25) and ``hybrid``
(the BM25 and dense leaf lists fused by reciprocal rank fusion, domain.fusion); both cut to k
one document at a time (services.leaf_ranking).

On OpenSearch the hybrid mode sends two queries (``match`` and k-NN) and fuses them here,
rather than one hybrid query with a normalization search pipeline: the fusion is then the same
rank-based RRF in every profile (min-max score normalization is another ranking), and no
search pipeline has to be deployed and versioned with the index."""

from __future__ import annotations

from ..domain.fusion import rrf
from ..domain.ranking import Candidate
from .leaf_ranking import fill_by_document
from .query_context import QueryContext
from .summary_search import OVERFETCH, search


def fetch_size(k: int) -> int:
    return max(k * OVERFETCH, 20)


def _lexical(ctx: QueryContext, n: int):
    return ctx.engine.lexical.search(ctx.text, n, where=ctx.where)


def bm25_list(ctx: QueryContext, n: int) -> list[str]:
    return [h.node_id for h in _lexical(ctx, n)]


def dense_list(ctx: QueryContext, n: int) -> list[str]:
    return [c.node_id for c in search(ctx.engine, "dense", ctx.vector, n, None, ctx.p, ctx.where)]


def bm25(ctx: QueryContext) -> list[Candidate]:
    hits = _lexical(ctx, fetch_size(ctx.k))
    return fill_by_document(ctx.engine, [(h.node_id, h.score) for h in hits], ctx.k, ctx.budget)


def hybrid_ranked(ctx: QueryContext, n: int) -> list[tuple[str, float]]:
    return rrf([dense_list(ctx, n), bm25_list(ctx, n)])


def hybrid(ctx: QueryContext) -> list[Candidate]:
    n = fetch_size(ctx.k)
    return fill_by_document(ctx.engine, hybrid_ranked(ctx, n)[:n], ctx.k, ctx.budget)
