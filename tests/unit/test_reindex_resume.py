"""services.reindex.run in pieces: a run stopped by its deadline after every step (and every
page of the vector step) is continued from its AuditProgress until it ends; each step runs once,
each live node's vector is asked for once, only the missing ones are re-embedded."""

from __future__ import annotations

from support import make_engine, synthetic_docs

from eragraph.domain.audit import AuditProgress, audit_staleness
from eragraph.services import reindex
from eragraph.services.ingest import ingest
from eragraph.services.resummarize import drain


def test_a_run_cut_after_every_step_and_page_resumes_to_the_end(monkeypatch):
    engine = make_engine()
    ingest(engine, synthetic_docs(12))
    drain(engine)
    live = {r.node_id for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)}
    dropped = sorted(live)[::3]
    engine.vectors.delete(dropped)
    monkeypatch.setattr(reindex, "REF_PAGE", 4)
    asked, upserted = [], []
    get_vectors, upsert = engine.vectors.get_vectors, engine.vectors.upsert
    monkeypatch.setattr(engine.vectors, "get_vectors", lambda ids: asked.extend(ids) or get_vectors(ids))
    monkeypatch.setattr(engine.vectors, "upsert", lambda ids, v, m: upserted.extend(ids) or upsert(ids, v, m))
    progress, reports = AuditProgress(run="r1"), []
    for _ in range(500):
        report = reindex.run(engine, drain=False, out_of_time=lambda: True,
                             progress=AuditProgress.from_dict(progress.to_dict()))  # through JSON-able form
        reports.append(report)
        if report["complete"]:
            break
        progress = AuditProgress.from_dict(report["resume"])
    assert [r["complete"] for r in reports] == [False] * (len(reports) - 1) + [True]
    steps = [s for r in reports for s in r["steps_run"]]
    assert steps.count("vectors") >= len(live) // 4  # page by page
    paged = ("documents", "vectors")  # the paged steps run once a page
    assert [s for i, s in enumerate(steps) if s not in paged or steps[i - 1] != s] == list(reindex.STEPS)
    assert sorted(asked) == sorted(live)  # every live node checked once
    assert sorted(upserted) == sorted(dropped)  # only the missing ones, once each
    assert reports[-1]["invariants"]["ok"] and reports[-1]["totals"]["VectorsReembedded"] == len(dropped)
    assert progress.run == "r1" and progress.pieces == len(reports) - 1


def test_a_run_without_a_deadline_is_whole():
    engine = make_engine()
    ingest(engine, synthetic_docs(6))
    drain(engine)
    report = reindex.run(engine)
    assert report["complete"] and report["steps_run"] == list(reindex.STEPS) and "resume" not in report


def test_audit_staleness():
    out = audit_staleness({"": 0.0, "a": 90_000.0, "b": 1000.0}, ["", "a", "b", "c"], now=100_000.0)
    assert out == {"oldest_age_seconds": 100_000.0, "late": ["", "b"], "late_count": 2}
