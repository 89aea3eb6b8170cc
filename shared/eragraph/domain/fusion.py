"""Reciprocal rank fusion (Cormack et al. 2009) and its weighted form (EA-GraphRAG eq. 8):

    score(d) = sum_i  w_i / (c + rank_i(d))      rank from 1, c = 60

A list that does not hold ``d`` adds nothing. Ties are broken by id, so the fused order is
deterministic."""

from __future__ import annotations

from collections.abc import Sequence

RRF_C = 60


def rrf(lists: Sequence[Sequence[str]], weights: Sequence[float] | None = None,
        c: int = RRF_C) -> list[tuple[str, float]]:
    if weights is None:
        weights = [1.0] * len(lists)
    if len(weights) != len(lists):
        raise ValueError("one weight per ranked list")
    if c < 0:
        raise ValueError("the RRF constant must be non-negative")
    scores: dict[str, float] = {}
    for ranked, w in zip(lists, weights):
        if w < 0:
            raise ValueError("RRF weights must be non-negative")
        seen: set[str] = set()
        rank = 0
        for item in ranked:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] = scores.get(item, 0.0) + float(w) / (c + rank)
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))


def weighted_rrf(dense: Sequence[str], graph: Sequence[str], s: float, c: int = RRF_C) -> list[tuple[str, float]]:
    """EA-GraphRAG eq. 8: the dense-side list weighted 1 - s(q), the graph list s(q)."""
    if not 0.0 <= s <= 1.0:
        raise ValueError("s(q) must be within [0, 1]")
    return rrf([dense, graph], [1.0 - s, s], c)
