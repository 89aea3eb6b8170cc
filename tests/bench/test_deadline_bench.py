"""`eragraph bench deadline --smoke`: the summarize handler makes a layer's summaries over
several invocations, each stopping before its (injected) deadline and re-queueing the rest, and
the ledger shows every summary paid for once."""

from __future__ import annotations

import json

from eragraph.bench import deadline as bench_deadline
from test_bench_smoke import parse


def test_deadline_smoke(tmp_path):
    out = tmp_path / "deadline-smoke.json"
    args = parse(bench_deadline, ["deadline", "--smoke", "--no-progress", "--out", str(out)])
    res = bench_deadline.run(args)
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert res["summaries_layer1"] >= bench_deadline.SMOKE_SUMMARIES
    assert res["function"]["timeout_seconds"] == bench_deadline.SMOKE_TIMEOUT
    assert res["function"]["batch_size"] == 10  # SummarizeFunction's SQS BatchSize in template.yaml
    # each invocation stopped short of its timeout, so the layer took several and continued
    assert res["seconds_used_max"] < res["function"]["timeout_seconds"]
    assert res["summaries_per_working_invocation_max"] <= res["function"]["timeout_seconds"] - 20 + 1
    assert res["continuations_delivered"] >= 2
    assert res["records_failed"] == 0
    assert res["ledger_summarize_calls"] == res["summaries_stored"] > res["summaries_layer1"]
    assert res["paid_twice"] == 0
    assert res["invariants"]["ok"], res["invariants"]["violations"]

    # the benchmark pages: a full run (not a smoke one) gets its section and its target row
    from eragraph.bench import report

    results, site = tmp_path / "results", tmp_path / "site"
    results.mkdir()
    (results / "deadline-x.json").write_text(json.dumps({**res, "smoke": False}))
    pages, _ = report.render(results, site)
    text = pages["deadline.md"]
    assert text.startswith("# Deadline: a layer of new summaries") and "eragraph bench deadline --smoke" in text
    assert "### deadline-x" in text
    [row] = [line for line in pages["index.md"].splitlines() if line.startswith("| AWS deadline run completes")]
    assert "**met**" in row and f"ledger {res['ledger_summarize_calls']} calls" in row
    (results / "deadline-x.json").write_text(json.dumps({**res, "smoke": False, "paid_twice": 1}))
    index = report.render(results, site)[0]["index.md"]
    [row] = [line for line in index.splitlines() if line.startswith("| AWS deadline")]
    assert "**missed**" in row


def test_function_settings_come_from_the_template():
    from pathlib import Path

    template = Path(__file__).resolve().parents[2] / "template.yaml"
    assert bench_deadline.function_settings(template) == {"timeout": 300.0, "batch_size": 10}
