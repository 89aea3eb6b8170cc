"""services.changes on the memory engine: an ingest, a removal and each re-summarization leave a
change record naming what they changed (the summary ids are those of the graph), a no-op leaves
none, the records are trimmed to the most recent ones, and the rebuild estimate follows the
ledger."""

from __future__ import annotations

from dataclasses import replace

from support import make_engine, synthetic_docs

from eragraph.services import changes
from eragraph.services.ingest import ingest
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain


def test_ingest_and_resummarize_records_name_the_real_summaries():
    engine = make_engine()
    docs = [replace(d, doc_id="") for d in synthetic_docs(12)]
    ingest(engine, docs)
    drain(engine)
    records = changes.recent(engine, 50)
    kinds = [r["kind"] for r in records]
    assert kinds[-1] == "ingest" and "resummarize" in kinds
    first = records[-1]
    assert first["documents"] == [d.source for d in docs] and first["documents_total"] == len(docs)
    assert first["chunks_added"] > 0 and first["chunks_removed"] == 0
    times = [r["time"] for r in records]
    assert times == sorted(times, reverse=True)  # newest first
    live = {n for layer, size in engine.graph.layer_sizes().items() if layer >= 1
            for n in (r.node_id for r in engine.graph.layer_refs(layer))}
    written = {s for r in records if r["kind"] == "resummarize" for s in r["summaries"]}
    assert live and live <= written  # every live summary was written by a recorded re-summarization
    ledger = sum(int(row["calls"]) for key, row in engine.graph.ledger().items() if key.startswith("summarize"))
    assert sum(r["calls"] for r in records) == ledger > 0  # every summarize call is in one record
    for r in records:
        if r["kind"] == "resummarize":
            assert r["layer"] >= 1 and r["segments"] == len(r["summaries"])


def test_a_rerun_records_nothing_and_a_removal_lists_what_left():
    engine = make_engine()
    docs = [replace(d, doc_id="") for d in synthetic_docs(8)]
    ingest(engine, docs)
    drain(engine)
    before = changes.recent(engine, 200)
    ingest(engine, docs)  # unchanged: no change
    drain(engine)
    assert changes.recent(engine, 200) == before
    remove(engine, [docs[0].source])
    drain(engine)
    after = changes.recent(engine, 200)
    removal = next(r for r in after if r["kind"] == "remove")
    assert removal["documents"] == [docs[0].source] and removal["chunks_removed"] > 0
    revised = [r for r in after[:after.index(removal)] if r["kind"] == "resummarize"]
    gone = {s for r in revised for s in r["removed"]}
    assert gone and not gone & set(engine.graph.get_nodes(gone))  # removed ids are gone from the graph


def test_records_are_trimmed_to_the_most_recent():
    engine = make_engine()
    for n in range(changes.KEEP + changes.SLACK + 5):
        engine.graph.put_meta(f"{changes.PREFIX}{n:020d}:x", {"id": str(n), "time": n, "kind": "ingest"})
    changes.trim(engine)
    keys = engine.graph.meta_keys(changes.PREFIX)
    assert len(keys) == changes.KEEP
    assert [r["id"] for r in changes.recent(engine, 3)] == [str(changes.KEEP + changes.SLACK + 4 - i)
                                                            for i in range(3)]


def test_the_rebuild_estimate_follows_the_ledger():
    engine = make_engine()
    empty = changes.rebuild_estimate(engine)
    assert empty["calls"] == 0 and empty["basis"] == "words"
    ingest(engine, [replace(d, doc_id="") for d in synthetic_docs(12)])
    drain(engine)
    estimate = changes.rebuild_estimate(engine)
    summaries = sum(n for layer, n in engine.graph.layer_sizes().items() if layer >= 1)
    assert estimate["calls"] == summaries > 0
    assert estimate["basis"] == "ledger" and estimate["tokens_in"] > 0


def test_writes_list_the_records_only_every_slack_th_time_and_stay_bounded(monkeypatch):
    """Listing the records is a read on the insert path: a process lists (and trims) on its first
    write and every SLACK-th after, never on every write, and never holds more than
    KEEP + 2 * SLACK records."""
    import itertools

    engine = make_engine()
    monkeypatch.setattr(changes, "_WRITES", itertools.count())
    listed = []
    meta_keys = engine.graph.meta_keys
    monkeypatch.setattr(engine.graph, "meta_keys", lambda prefix: listed.append(prefix) or meta_keys(prefix))
    writes = changes.KEEP + 5 * changes.SLACK
    for n in range(writes):
        changes._put(engine, {"kind": "ingest", "documents": [f"d{n}"]}, now=1000.0 + n)
        assert len(meta_keys(changes.PREFIX)) <= changes.KEEP + 2 * changes.SLACK
    assert len(listed) == -(-writes // changes.SLACK)  # ceil: the first write and every SLACK-th


def test_a_report_lists_a_bounded_number_and_counts_them_all():
    """A report keeps the first LISTED sources and summary ids (what a record shows) and counts
    the rest, so a bulk ingest or drain holds a constant; a merge adds the counts and lists a
    source both reports listed once."""
    from eragraph.services.reports import LISTED, ChangeReport

    big, small = ChangeReport(), ChangeReport()
    for i in range(LISTED + 50):
        big.add_source(f"s{i}", "p" if i % 2 else "")
        big.add_summaries(1, [f"n{i}"], i % 3)
    big.add_source("s1", "q")  # listed already: not counted again, its newest partition kept
    assert len(big.sources) == len(big.source_partitions) == LISTED and big.sources_total == LISTED + 50
    assert big.source_partitions["s1"] == "q"
    assert len(big.summary_ids[1]) == LISTED and big.summaries_total == {1: LISTED + 50}
    assert len(big.summary_partitions) == LISTED
    small.add_source("s0", "")
    small.add_source("t", "")
    small.add_summaries(2, ["m"], 0, removed=True)
    small.merge(big)
    assert small.sources[:2] == ["s0", "t"] and len(small.sources) == LISTED
    assert small.sources_total == 1 + (LISTED + 50)  # "t", and every source of big ("s0" once)
    assert small.summaries_total == {1: LISTED + 50} and small.removed_total == {2: 1}
    record = changes.record_documents(make_engine(), "ingest", small, 0.1)
    assert len(record["documents"]) == LISTED and record["documents_total"] == LISTED + 51
    assert record["partitions"][:2] == ["", ""]
