"""Progress survives: summaries are stored as they are made, a redelivered message continues
where the last run stopped and never pays twice; a run stops cleanly before its deadline."""

from __future__ import annotations

import pytest

from eragraph.domain.model import APPLYING, is_streaming
from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import DeadlineReached, continuation, drain, reconcile
from support import Ledger, drain_redelivering, make_engine, synthetic_docs


def clean_calls(n=60) -> int:
    engine = make_engine(delta_summaries=False)
    ingest(engine, synthetic_docs(n))
    return drain(engine).cost.summarize_calls


@pytest.mark.parametrize("region_refs", [resummarize.STREAM_REGION_REFS, 1])  # 1: a streamed pass
@pytest.mark.parametrize("k", range(0, 30, 3))
def test_crash_after_k_summaries_then_redelivery_pays_each_summary_once(k, region_refs, monkeypatch):
    monkeypatch.setattr(resummarize, "STREAM_REGION_REFS", region_refs)
    engine = make_engine(delta_summaries=False)
    ledger = Ledger(engine.summarizer, fail_after=k)
    engine.summarizer = ledger
    ingest(engine, synthetic_docs(60))
    drain_redelivering(engine)
    assert invariants.check(engine).ok
    assert all(n == 1 for n in ledger.paid.values())  # no segment's summary paid twice
    assert sum(ledger.paid.values()) == clean_calls()
    assert not [key for key in engine.graph.meta_keys(APPLYING) if is_streaming(key)]  # the pass finished


def test_deadline_stops_between_summaries_and_the_continuation_finishes():
    engine = make_engine(delta_summaries=False)
    ledger = Ledger(engine.summarizer)
    engine.summarizer = ledger
    ingest(engine, synthetic_docs(60))
    clock = {"left": 0.0}

    def deadline():
        clock["left"] -= 10.0  # every check costs ten "seconds"
        return clock["left"]

    runs = continued = 0
    while engine.queue.pending():
        receipt, message = engine.queue.receive(1)[0]
        clock["left"] = 60.0  # a fresh invocation: room for about four summaries
        runs += 1
        try:
            reconcile(engine, message, deadline=deadline)
        except DeadlineReached:
            engine.queue.send([continuation(message)])
            continued += 1
        engine.queue.ack([receipt])
    assert continued >= 3 and runs > continued
    assert invariants.check(engine).ok
    assert all(n == 1 for n in ledger.paid.values())
    assert sum(ledger.paid.values()) == clean_calls()


def test_continuation_is_a_new_operation():
    engine = make_engine()
    ingest(engine, synthetic_docs(10))
    _r, message = engine.queue.receive(1)[0]
    again = continuation(message)
    assert again.codes == message.codes and again.layer == message.layer and again.group == message.group
    assert again.op != message.op


def test_a_reconcile_with_less_than_the_margin_left_does_not_begin():
    """A batch's later records come to reconcile after the earlier ones used the time: they
    must not read and plan a layer they cannot finish (a Lambda cut at its timeout retries the
    whole batch)."""
    from eragraph.services.resummarize import DEADLINE_MARGIN

    engine = make_engine()
    ledger = Ledger(engine.summarizer)
    engine.summarizer = ledger
    ingest(engine, synthetic_docs(30))
    _r, message = engine.queue.receive(1)[0]
    before = (engine.graph.layer_sizes(), engine.graph.meta_keys(""))
    with pytest.raises(DeadlineReached, match="not begun"):
        reconcile(engine, message, deadline=lambda: DEADLINE_MARGIN - 0.5)
    assert (engine.graph.layer_sizes(), engine.graph.meta_keys("")) == before
    assert sum(ledger.paid.values()) == 0
    reconcile(engine, message, deadline=lambda: DEADLINE_MARGIN + 1000.0)  # with time: it runs
    assert sum(ledger.paid.values()) > 0
