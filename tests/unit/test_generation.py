"""services.generation.stream_answer: one streamed shape for every generator; the ledger prices
the call once, when the answer is whole."""

from __future__ import annotations

import pytest

from support import make_engine
from eragraph.domain.rerank import RerankSpec
from eragraph.ports.records import Answer
from eragraph.services.generation import stream_answer
from eragraph.services.query import BadQueryError, query

EVIDENCE = [("c1", "The comet returns every 76 years."), ("c2", "Halley saw it in 1682.")]


class Whole:
    identity = "whole"

    def answer(self, question, evidence):
        return Answer(text=f"every 76 years [{evidence[0][0]}]", cited_ids=(evidence[0][0],), tokens_in=9,
                      tokens_out=4, model="whole-1")


class Pieces:
    identity = "pieces"

    def __init__(self, pieces, final=True):
        self.pieces, self.final = pieces, final

    def stream(self, question, evidence):
        yield from self.pieces
        if self.final:
            yield Answer(text="".join(self.pieces), cited_ids=("c2",), tokens_in=5, tokens_out=len(self.pieces),
                         model="pieces-1")

    def answer(self, question, evidence):  # pragma: no cover - stream_answer must not call it
        raise AssertionError("a streaming generator is streamed")


def test_a_whole_answer_is_one_piece_then_the_answer_and_is_ledgered():
    e = make_engine()
    items = list(stream_answer(Whole(), "when?", EVIDENCE, graph=e.graph))
    assert items[:-1] == ["every 76 years [c1]"]
    assert isinstance(items[-1], Answer) and items[-1].cited_ids == ("c1",)
    assert e.graph.ledger()["generate|whole-1"]["tokens_in"] == 9


def test_a_stream_keeps_its_pieces_in_order_and_drops_empty_ones():
    e = make_engine()
    items = list(stream_answer(Pieces(["Hal", "", "ley"]), "who?", EVIDENCE, graph=e.graph))
    assert items[:-1] == ["Hal", "ley"] and items[-1].text == "Halley"
    assert e.graph.ledger()["generate|pieces-1"] == {"calls": 1, "tokens_in": 5, "tokens_out": 3,
                                                     "seconds": pytest.approx(0.0, abs=1.0)}


def test_a_stream_without_its_answer_is_an_error_and_is_not_ledgered():
    e = make_engine()
    with pytest.raises(RuntimeError, match="without an Answer"):
        list(stream_answer(Pieces(["a"], final=False), "q", EVIDENCE, graph=e.graph))
    assert not any(key.startswith("generate|") for key in e.graph.ledger())


def test_rerank_without_a_reranker_is_a_bad_query():
    e = make_engine()
    with pytest.raises(BadQueryError, match="no reranker"):
        query(e, "comet", rerank=RerankSpec(candidates=20))
