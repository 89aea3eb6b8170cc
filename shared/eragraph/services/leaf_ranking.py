"""A ranked list of leaf chunks cut to k under a token budget, one document at a time
(domain.ranking.best_per_document): every leaf-level mode (dense, bm25, hybrid, the graph modes,
fusion and auto) gives a document one place for its best chunk before any document gets a
second, so a passage split into several chunks does not crowd others out of the top k."""

from __future__ import annotations

from collections.abc import Iterable

from ..domain.ranking import Candidate, best_per_document


def leaf_candidates(engine, scored: Iterable[tuple[str, float]],
                    known: dict | None = None) -> tuple[list[Candidate], dict[str, str]]:
    """Candidates for the (node id, score) pairs whose node exists, and each one's document.
    ``known`` (node id -> node) is a cache across calls: only ids missing from it are read, and
    what is read is added to it."""
    scored = list(scored)
    nodes = {} if known is None else known
    nodes.update(engine.graph.get_nodes(i for i, _ in scored if i not in nodes))
    cands = [Candidate(i, nodes[i].layer, float(s), nodes[i].tokens) for i, s in scored if i in nodes]
    return cands, {c.node_id: nodes[c.node_id].doc_id for c in cands}


def fill_by_document(engine, scored: Iterable[tuple[str, float]], k: int, budget: int | None) -> list[Candidate]:
    cands, doc_of = leaf_candidates(engine, scored)
    return best_per_document(cands, doc_of, k, budget)
