"""A bulk build's whole-layer pass goes region by region (domain.scoped.stream_regions): it
never holds the layer, a pass stopped part-way is finished by the next reconcile of the layer,
and the result -- and what it paid -- is what one pass over the whole layer gives."""

from __future__ import annotations

from eragraph.domain.model import APPLYING, is_streaming
from eragraph.services import invariants, resummarize
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import DeadlineReached, continuation, drain, reconcile, target_segments
from support import Ledger, make_engine, synthetic_docs


def streaming(engine) -> list[str]:
    return [key for key in engine.graph.meta_keys(APPLYING) if is_streaming(key)]


def structure(engine) -> dict[int, set]:
    return {layer: {s.members for s in engine.graph.get_segments(layer)}
            for layer in engine.graph.layer_sizes()}


def cut_as_the_rule_says(engine) -> bool:
    return all({s.members for s in engine.graph.get_segments(layer)} ==
               {s.members for s in target_segments(engine, layer)} for layer in engine.graph.layer_sizes())


def build(n: int, region_refs: int, monkeypatch) -> tuple:
    monkeypatch.setattr(resummarize, "STREAM_REGION_REFS", region_refs)
    engine = make_engine(delta_summaries=False)
    ledger = Ledger(engine.summarizer)
    engine.summarizer = ledger
    applies: list[tuple[int, int]] = []
    original = engine.graph.apply_region

    def recording(change):
        applies.append((change.layer, len(change.expected)))
        return original(change)

    engine.graph.apply_region = recording
    ingest(engine, synthetic_docs(n))
    drain(engine)
    return engine, ledger, applies


def test_a_bulk_build_applies_small_regions_and_matches_one_whole_pass(monkeypatch):
    streamed, paid, applies = build(240, 1, monkeypatch)
    whole, whole_paid, whole_applies = build(240, 10**9, monkeypatch)
    assert invariants.check(streamed).ok
    assert structure(streamed) == structure(whole)
    assert cut_as_the_rule_says(streamed)
    assert sorted(paid.paid) == sorted(whole_paid.paid)  # the same summaries, each paid once
    assert all(n == 1 for n in paid.paid.values())
    layer0 = [n for layer, n in applies if layer == 0]
    size0 = streamed.graph.layer_sizes()[0]
    assert len(layer0) >= size0 // 40  # many regions, not one
    cap = 5  # count_cap(3, 5)
    assert max(layer0) <= 2 * cap + 2 + streamed.settings.n_planes * cap
    assert max(n for layer, n in whole_applies if layer == 0) == size0  # the old way: one region
    assert not streaming(streamed)


def run_with_deadlines(engine, budget: float, on_stop=None) -> int:
    """Deliver every message with a fresh invocation's ``budget``; each summarize call costs ten
    "seconds" (walking regions done before costs reads only); a DeadlineReached sends the
    continuation, as the summarize handler does. Returns how many passes stopped."""
    clock = {"left": 0.0}
    inner = engine.summarizer

    class Timed:
        identity = inner.identity

        def summarize(self, texts, max_tokens, sources=None):
            clock["left"] -= 10.0
            return inner.summarize(texts, max_tokens, sources)

    engine.summarizer = Timed()
    stopped = 0
    while engine.queue.pending():
        receipt, message = engine.queue.receive(1)[0]
        clock["left"] = budget
        try:
            reconcile(engine, message, deadline=lambda: clock["left"])
        except DeadlineReached:
            stopped += 1
            engine.queue.send([continuation(message)])
            if on_stop is not None:
                on_stop(engine, message)
        engine.queue.ack([receipt])
    engine.summarizer = inner
    return stopped


def test_a_pass_stopped_by_its_deadline_is_finished_by_the_continuation(monkeypatch):
    monkeypatch.setattr(resummarize, "STREAM_REGION_REFS", 1)
    engine = make_engine(delta_summaries=False)
    ledger = Ledger(engine.summarizer)
    engine.summarizer = ledger
    ingest(engine, synthetic_docs(200))
    marked = []
    stopped = run_with_deadlines(engine, 90.0,
                                 on_stop=lambda e, m: marked.append(bool(streaming(e))))
    assert stopped >= 3 and any(marked)  # the layer was left part-way, and said so
    assert not streaming(engine)
    assert invariants.check(engine).ok
    assert all(n == 1 for n in ledger.paid.values())
    _whole, clean, _ = build(200, 10**9, monkeypatch)
    assert sorted(ledger.paid) == sorted(clean.paid)


def test_documents_added_while_a_pass_is_part_way_are_taken_in(monkeypatch):
    monkeypatch.setattr(resummarize, "STREAM_REGION_REFS", 1)
    engine = make_engine(delta_summaries=False)
    ingest(engine, synthetic_docs(200))
    added = {"done": False}

    def more(engine, _message):
        if not added["done"]:  # the first stop: other writers go on meanwhile
            added["done"] = True
            ingest(engine, synthetic_docs(30, seed=5, prefix="late"))

    assert run_with_deadlines(engine, 120.0, on_stop=more) >= 1 and added["done"]
    assert not streaming(engine)
    assert invariants.check(engine).ok
    assert cut_as_the_rule_says(engine)
