"""phi_agree(q): what the retrieval itself says about a question (query-performance prediction),
the router's third part of inputs ``text+vector+agreement`` (domain.router_model). ``auto`` with
such weights runs the dense side and the graph first, as ``fusion`` does, reads these features
off the lists, then answers from one of the lists it holds (services.routing); training reads
the same lists from its cached runs (training.router). No I/O: ids and scores in, numbers out.

The lists (chunk ids, best first, each at most ``LIST_CAP`` long; longer lists are cut):
    dense    the dense leaf list and its scores (inner products with the question's vector)
    bm25     the BM25 leaf list (empty when the store has no lexical index)
    hybrid   the dense side's list (RRF of dense and bm25, or dense alone)
    graph    the graph's leaf list (tri_graph's)

Features (``AGREEMENT_FEATURE_NAMES``):
    agree_side_graph_at5 / _at20   shared chunks of the dense side's and the graph's top 5 / 20,
                                   over 5 / 20
    agree_dense_graph_at5          the same for dense alone
    agree_dense_bm25_at5           the dense side's own agreement (dense and BM25 top 5)
    agree_rbo                      rank-biased overlap (p = 0.9) of the dense side and the graph
    graph5_in_dense20              how many of the graph's top 5 the dense top 20 ranks at all, / 5
    graph_top_in_side              1 / rank of the graph's first chunk in the dense side's list (0 absent)
    side_top_in_graph              1 / rank of the dense side's first chunk in the graph's list
    dense_top1, dense_margin5      the dense top-1 score and top-1 minus top-5
    dense_spread20                 the dense top-1 score minus the list's last
    graph_short                    the graph's list is shorter than the dense one (a sparse walk)

Every feature is linear in the lists' lengths (sets of at most LIST_CAP ids)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LIST_CAP = 20
RBO_P = 0.9

AGREEMENT_FEATURE_NAMES: tuple[str, ...] = (
    "agree_side_graph_at5", "agree_side_graph_at20", "agree_dense_graph_at5", "agree_dense_bm25_at5", "agree_rbo",
    "graph5_in_dense20", "graph_top_in_side", "side_top_in_graph", "dense_top1", "dense_margin5", "dense_spread20",
    "graph_short",
)


def overlap_at(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """|top k of a ∩ top k of b| / k."""
    return len(set(a[:k]) & set(b[:k])) / k


def rank_biased_overlap(a: Sequence[str], b: Sequence[str], p: float = RBO_P, depth: int = LIST_CAP) -> float:
    """Rank-biased overlap (Webber et al. 2010) truncated at ``depth``, normalized so that two
    identical lists of that depth score 1: sum_d p^(d-1) |A_d ∩ B_d| / d, over its value for
    identical lists. One pass, two sets."""
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    shared = 0
    total = norm = 0.0
    for d in range(1, depth + 1):
        x = a[d - 1] if d <= len(a) else None
        y = b[d - 1] if d <= len(b) else None
        if x is not None and x == y:
            shared += 1
        else:
            if x is not None:
                shared += x in seen_b
                seen_a.add(x)
            if y is not None:
                shared += y in seen_a
                seen_b.add(y)
        weight = p ** (d - 1)
        total += weight * shared / d
        norm += weight
    return total / norm


def reciprocal_rank(item: str | None, ranked: Sequence[str]) -> float:
    if item is None:
        return 0.0
    for r, i in enumerate(ranked, 1):
        if i == item:
            return 1.0 / r
    return 0.0


def agreement_features(dense: Sequence[str], dense_scores: Sequence[float], bm25: Sequence[str],
                       hybrid: Sequence[str], graph: Sequence[str]) -> np.ndarray:
    """phi_agree(q) in AGREEMENT_FEATURE_NAMES order (see the module's doc)."""
    if len(dense_scores) != len(dense):
        raise ValueError("one dense score per dense chunk")
    dense, bm25, hybrid, graph = (list(x[:LIST_CAP]) for x in (dense, bm25, hybrid, graph))
    scores = [float(s) for s in dense_scores[:LIST_CAP]]
    top1 = scores[0] if scores else 0.0
    out = {
        "agree_side_graph_at5": overlap_at(hybrid, graph, 5),
        "agree_side_graph_at20": overlap_at(hybrid, graph, LIST_CAP),
        "agree_dense_graph_at5": overlap_at(dense, graph, 5),
        "agree_dense_bm25_at5": overlap_at(dense, bm25, 5),
        "agree_rbo": rank_biased_overlap(hybrid, graph),
        "graph5_in_dense20": len(set(graph[:5]) & set(dense)) / 5,
        "graph_top_in_side": reciprocal_rank(graph[0] if graph else None, hybrid),
        "side_top_in_graph": reciprocal_rank(hybrid[0] if hybrid else None, graph),
        "dense_top1": top1,
        "dense_margin5": top1 - scores[min(4, len(scores) - 1)] if scores else 0.0,
        "dense_spread20": top1 - scores[-1] if scores else 0.0,
        "graph_short": float(len(graph) < len(dense)),
    }
    return np.array([out[f] for f in AGREEMENT_FEATURE_NAMES], dtype=np.float64)
