"""Collapsed and biased search over the layered graph (EraRAG Alg. 2 and §III-D)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODES_SUMMARY_GRAPH = ("collapsed", "detailed", "summarized", "dense")


SCORE_DIGITS = 5  # scores equal to this many decimals are a tie, broken by node id


def rank_score(score: float) -> float:
    """A score as the ranking compares it: two scores equal here are a tie."""
    return round(score, SCORE_DIGITS)


def rank_key(c: "Candidate | Any") -> tuple[float, str]:
    """Best first; scores that differ only past SCORE_DIGITS decimals are a tie broken by node
    id, so a float32 index (FAISS) and a float64 one (OpenSearch) order near-equal scores the
    same way (the deployed parity test found two summaries whose scores differed in the 7th
    decimal swapped between the profiles). Anything with ``score`` and ``node_id`` (a
    candidate, an index's hit): every index cuts its top k by this key too, so a near-tie at
    the k-th place keeps the same member on every profile."""
    return (-rank_score(c.score), c.node_id)


def top_hits(hits: Sequence[Any], k: int, min_score: float | None = None) -> list[Any]:
    """The top k of ``hits`` by ``rank_key``, without those scoring below ``min_score``: what
    every index's ``search_many`` gives for a row."""
    ranked = sorted(hits, key=rank_key)[: max(k, 0)]
    return ranked if min_score is None else [h for h in ranked if h.score >= min_score]


def below_floor(score: float, min_score: float | None) -> bool:
    """A score whose rank is below ``min_score``'s: a hit at or past it can neither pass the
    floor nor displace one that does, so ties there need no ordering."""
    return min_score is not None and rank_score(score) < rank_score(min_score)


@dataclass(frozen=True)
class Candidate:
    node_id: str
    layer: int
    score: float
    tokens: int


def fill_budget(candidates: Sequence[Candidate], k: int, budget: int | None) -> list[Candidate]:
    """Take candidates best first until k are taken; with a token budget, skip any candidate
    that no longer fits (a later, shorter one may still fit). Ties break by node id (rank_key)."""
    ordered = sorted(candidates, key=rank_key)
    out: list[Candidate] = []
    used = 0
    seen: set[str] = set()
    for cand in ordered:
        if len(out) >= k:
            break
        if cand.node_id in seen:
            continue
        if budget is not None and used + cand.tokens > budget:
            continue
        out.append(cand)
        seen.add(cand.node_id)
        used += cand.tokens
    return out


def best_per_document(candidates: Sequence[Candidate], doc_of: Mapping[str, str], k: int,
                       budget: int | None) -> list[Candidate]:
    """k places filled one document at a time: each document's best chunk first, best first (a
    document ranks by its best chunk, MaxP), so a long document split into several chunks takes
    one place, not several; only when fewer than k documents are among the candidates do their
    next-best chunks fill the places left. The token budget applies to the whole result. A
    candidate without a document counts as a document of its own."""
    firsts: list[Candidate] = []
    rest: list[Candidate] = []
    seen: set[str] = set()
    for cand in sorted(candidates, key=rank_key):
        doc = doc_of.get(cand.node_id) or cand.node_id
        (rest if doc in seen else firsts).append(cand)
        seen.add(doc)
    out = fill_budget(firsts, k, budget)
    if len(out) < k and rest:
        used = sum(c.tokens for c in out)
        out += fill_budget(rest, k - len(out), None if budget is None else budget - used)
    return out


def documents_among(candidates: Sequence[Candidate], doc_of: Mapping[str, str]) -> int:
    return len({doc_of.get(c.node_id) or c.node_id for c in candidates})


def biased_split(k: int, p: float) -> tuple[int, int]:
    """(primary, secondary) counts for detailed/summarized search: round(p*k) and the rest."""
    if not 0.0 <= p <= 1.0:
        raise ValueError("p must be within [0, 1]")
    primary = int(round(p * k))
    return primary, k - primary


def biased_merge(
    primary: Sequence[Candidate],
    secondary: Sequence[Candidate],
    k: int,
    p: float,
    budget: int | None,
) -> list[Candidate]:
    """Top-pk from the primary layers, then top-(k - pk) from the secondary ones; if one side
    has too few, the other fills the remaining places, so k results come back when k exist.
    The budget applies to the whole result, primary first."""
    n_primary, _ = biased_split(k, p)
    first = fill_budget(primary, n_primary, budget)
    used = sum(c.tokens for c in first)
    rest_budget = None if budget is None else budget - used
    second = fill_budget(secondary, k - len(first), rest_budget)
    out = first + second
    if len(out) < k:
        taken = {c.node_id for c in out}
        more = fill_budget(
            [c for c in primary if c.node_id not in taken],
            k - len(out),
            None if budget is None else budget - sum(c.tokens for c in out),
        )
        out += more
    return sorted(out, key=rank_key)
