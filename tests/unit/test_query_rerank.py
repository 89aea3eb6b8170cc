"""services.query with rerank=RerankSpec: candidates retrieved, re-scored, best k kept in the
reranker's order (ties in retrieval order), reported in the response and priced in the ledger."""

from __future__ import annotations

import pytest

from support import make_engine, synthetic_docs
from eragraph.domain.rerank import RerankSpec
from eragraph.services.ingest import ingest
from eragraph.services.query import BadQueryError, query
from eragraph.services.resummarize import drain

Q = "telescope comet planet orbit galaxy"


class ByLength:
    """Scores a passage by its length (longer is better), buckets of 40 chars so ties happen."""

    identity = "bedrock:amazon.rerank-v1:0"
    model = "amazon.rerank-v1:0"

    def __init__(self):
        self.calls = []

    def score(self, query, texts):
        self.calls.append((query, list(texts)))
        return [float(len(t) // 40) for t in texts]

    @staticmethod
    def billed_queries(n):
        return -(-n // 100)


@pytest.fixture(scope="module")
def engine():
    e = make_engine()
    ingest(e, synthetic_docs(40))
    drain(e)
    return e


def test_rerank_retrieves_candidates_keeps_best_k_in_reranked_order(engine):
    engine.reranker = rr = ByLength()
    try:
        plain = query(engine, Q, mode="dense", k=12)
        resp = query(engine, Q, mode="dense", k=4, rerank=RerankSpec(candidates=12))
    finally:
        engine.reranker = None
    (asked, texts), = rr.calls
    assert asked == Q and texts == [r.text for r in plain.results]  # the 12 candidates, in retrieval order
    scores = [len(t) // 40 for t in texts]
    want = sorted(range(len(texts)), key=lambda i: -scores[i])[:4]  # stable: ties in retrieval order
    assert [r.id for r in resp.results] == [plain.results[i].id for i in want]
    assert [r.score for r in resp.results] == [float(scores[i]) for i in want]
    assert resp.rerank["model"] == "bedrock:amazon.rerank-v1:0" and resp.rerank["candidates"] == 12
    assert resp.rerank["ms"] >= 0 and resp.to_dict()["rerank"] == resp.rerank
    assert resp.usage["by_kind"]["rerank"]["tokens_in"] == 1  # one billed Bedrock query
    assert resp.usage["by_kind"]["rerank"]["cost_usd"] == pytest.approx(0.001)
    assert engine.graph.ledger()["rerank|bedrock:amazon.rerank-v1:0"]["calls"] >= 1


def test_candidates_default_from_settings_and_never_below_k(engine):
    engine.reranker = rr = ByLength()
    try:
        query(engine, Q, mode="dense", k=3, rerank=RerankSpec())
        query(engine, Q, mode="dense", k=8, rerank=RerankSpec(candidates=2))
    finally:
        engine.reranker = None
    assert len(rr.calls[0][1]) == min(engine.settings.rerank_candidates, 40)
    assert len(rr.calls[1][1]) == 8


def test_rerank_refusals_in_words(engine):
    with pytest.raises(BadQueryError, match="no reranker is configured"):
        query(engine, Q, rerank=RerankSpec())
    engine.reranker = ByLength()  # no with_model: a local reranker runs only its own model
    try:
        with pytest.raises(BadQueryError, match="rerank model 'cohere.rerank-v3-5:0' is not available"):
            query(engine, Q, rerank=RerankSpec(model="cohere.rerank-v3-5:0"))
        with pytest.raises(BadQueryError, match="1..1000"):
            query(engine, Q, rerank=RerankSpec(candidates=0))
        assert query(engine, Q, k=2, rerank=RerankSpec(model="amazon.rerank-v1:0")).rerank is not None
    finally:
        engine.reranker = None
