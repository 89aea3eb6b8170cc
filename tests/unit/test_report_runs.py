"""Every results file records its run (date, commit, machine) under ``run``, and the report
prints each run's own, saying "not recorded" for what an older file lacks."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from eragraph.bench.common import finish, run_record
from eragraph.bench.report import render, run_info, run_line


def retrieval_result(**extra) -> dict:
    return {"benchmark": "retrieval", "command": "eragraph bench retrieval --corpus c.jsonl", "questions": 3,
            "documents": 10, "embedder": "hash", "k": [5],
            "modes": {"dense": {"recall@5": 0.5, "recall@5_with_summaries": 0.5,
                                "latency_ms_p50": 1.0, "latency_ms_p95": 2.0}}, **extra}


def test_finish_writes_one_run_record(tmp_path):
    out = tmp_path / "r.json"
    result = finish({"x": 1}, SimpleNamespace(out=str(out), argv=["bench", "retrieval", "--k", "5"]), "retrieval")
    written = json.loads(out.read_text())
    assert written == result and set(written["run"]) == {"date", "commit", "machine"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written["run"]["date"])
    assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|not recorded", written["run"]["commit"])
    assert {"cpu", "cores", "python"} <= set(written["run"]["machine"])
    assert "machine" not in written and "finished_at" not in written


def test_run_info_reads_the_run_key():
    data = {"run": {"date": "2026-01-02T03:04:05Z", "commit": "a" * 40 + "+dirty",
                    "machine": {"cpu": "Some CPU", "cores": 8, "python": "3.11.9"}}}
    assert run_info(data) == {"date": "2026-01-02T03:04:05Z", "commit": "a" * 40 + "+dirty", "cpu": "Some CPU",
                              "cores": 8, "python": "3.11.9"}
    line = run_line(data)
    assert line == ("Run: 2026-01-02T03:04:05Z; commit `aaaaaaaaaaaa` (uncommitted changes); "
                    "machine: Some CPU, 8 cores, Python 3.11.9.")


def test_older_files_say_not_recorded_instead_of_inventing():
    legacy = {"finished_at": "2026-11-21T23:51:23+0000", "machine": {"cpu": "Old CPU", "cores": 2, "python": "3.11.7"}}
    assert run_line(legacy) == ("Run: 2026-11-21T23:51:23+0000; commit not recorded; "
                                "machine: Old CPU, 2 cores, Python 3.11.7.")
    assert run_line({}) == ("Run: not recorded; commit not recorded; machine: not recorded, cores not recorded, "
                            "Python not recorded.")


def test_a_machine_described_in_one_line_is_its_cpu(tmp_path):
    """bench-results/mutation.json records its machine as one string: the report reads it, and
    a results folder holding such a file still renders (it raised AttributeError)."""
    mutation = {"tool": "mutmut 3.8.1", "commit": "abc1234", "machine": "x86_64, 2 cores", "targets": {}}
    assert run_info(mutation)["cpu"] == "x86_64, 2 cores" and run_info(mutation)["commit"] == "abc1234"
    (tmp_path / "mutation.json").write_text(json.dumps(mutation))
    (tmp_path / "retrieval-new.json").write_text(json.dumps(retrieval_result(run=run_record())))
    index = render(tmp_path, tmp_path / "site")[0]["index.md"]
    assert "x86_64, 2 cores: 1 file" in index[:index.index("## Current targets")]


def test_report_prints_each_runs_own_machine(tmp_path):
    new = retrieval_result(run=run_record())
    old = retrieval_result(finished_at="2026-11-21T23:51:23+0000",
                           machine={"cpu": "Old CPU", "cores": 4, "python": "3.11.7"})
    (tmp_path / "retrieval-new.json").write_text(json.dumps(new))
    (tmp_path / "retrieval-old.json").write_text(json.dumps(old))
    pages, _ = render(tmp_path, tmp_path / "site")
    text = pages["retrieval.md"]  # two data sets ("new", "old"): each run is current
    sections = {name: text[text.index(f"### {name}"):] for name in ("retrieval-new", "retrieval-old")}
    assert run_line(new) in sections["retrieval-new"].split("###")[1]
    assert run_line(old) in sections["retrieval-old"].split("###")[1]
    this_cpu = new["run"]["machine"]["cpu"]
    header = pages["index.md"][:pages["index.md"].index("## Current targets")]
    assert "Old CPU: 1 file" in header and f"{this_cpu}: 1 file" in header
    runs = pages["runs.md"]
    assert ("| `retrieval-old.json` | [retrieval](retrieval.md) | current | 2026-11-21T23:51:23+0000 | not recorded "
            "| Old CPU | 4 | 3.11.7 |") in runs
    assert f"| `retrieval-new.json` | [retrieval](retrieval.md) | current | {new['run']['date']} |" in runs


def test_before_and_after_runs_are_compared_per_mode():
    from eragraph.bench.report import before_after_section

    before = retrieval_result()
    after = retrieval_result()
    after["modes"]["dense"] = {**after["modes"]["dense"], "recall@5_with_summaries": 0.55}
    lines = before_after_section([("retrieval-x-after", after), ("retrieval-x-before", before)])
    assert "### retrieval-x: before / after" in lines
    assert "| dense | recall@5_with_summaries | 0.5000 | 0.5500 | +0.0500 |" in lines
    assert "| dense | recall@5 | 0.5000 | 0.5000 | +0.0000 |" in lines
    assert "Recall@5 with summaries did not drop." in lines
    worse = retrieval_result()
    worse["modes"]["dense"] = {**worse["modes"]["dense"], "recall@5_with_summaries": 0.49}
    assert "Recall@5 with summaries dropped: `dense` by 0.0100." in before_after_section(
        [("retrieval-x-after", worse), ("retrieval-x-before", before)])
    assert before_after_section([("retrieval-x-after", after)]) == []


def test_scale_plot_ticks_are_short_size_labels():
    from eragraph.bench.report import size_label

    assert [size_label(n) for n in (300, 2500, 10_000, 100_000, 1_000_000)] == ["300", "2.5k", "10k", "100k", "1M"]


def test_vectors_section_names_its_run_and_every_backend(tmp_path):
    import json

    from eragraph.bench.report import vectors

    row = {"backend": "usearch", "n": 1000, "build_seconds": 1.0, "query_ms_p50": 0.1, "query_ms_p95": 0.2,
           "recall_at_10": 0.99, "delete_ms_median": 0.01, "replace_ms_median": 0.02, "reclaims_deleted_space": True,
           "file_bytes": 2**21, "open_seconds": 0.01, "rss_peak_minus_vectors_mb": 3.0}
    data = {"command": "eragraph bench vectors --sizes 1000", "rows": [row, {"backend": "hnswlib", "n": 1000, "error": "boom"}],
            "run": {"date": "2026-01-01T00:00:00Z", "commit": "abc", "machine": {"cpu": "X", "cores": 2, "python": "3.11"}},
            "load_average": [0.5, 1.5]}
    text = "\n".join(vectors.section("vectors-x", data, tmp_path))
    assert "### vectors-x" in text and "2026-01-01" in text and "| usearch | 1,000 |" in text
    assert "error: boom" in text and "0.5 and 1.5" in text


def test_hand_written_sections_survive_regeneration(tmp_path):
    """A ``*.md`` beside the results is part of the pages, verbatim: on its benchmark's page after
    the runs when its name starts with the benchmark's, else a page of its own (headings one
    level up), listed on the index."""
    (tmp_path / "b-notes.md").write_text("## Second note\n\nwritten by hand\n", encoding="utf-8")
    (tmp_path / "a-notes.md").write_text("## First note\n\nalso by hand\n", encoding="utf-8")
    (tmp_path / "retrieval-notes.md").write_text("## Retrieval note\n\nby hand too\n", encoding="utf-8")
    (tmp_path / "retrieval-new.json").write_text(json.dumps(retrieval_result(run=run_record())), encoding="utf-8")
    (tmp_path / "cold-start.json").write_text(json.dumps({"command": "x", "run": {"commit": "abc"}}), encoding="utf-8")
    pages, _ = render(tmp_path, tmp_path / "site")
    assert pages["a-notes.md"] == "# First note\n\nalso by hand\n"
    assert pages["b-notes.md"] == "# Second note\n\nwritten by hand\n"
    index = pages["index.md"]
    assert index.index("[First note](a-notes.md)") < index.index("[Second note](b-notes.md)")
    retrieval = pages["retrieval.md"]
    assert retrieval.index("### retrieval-new") < retrieval.index("## Retrieval note\n\nby hand too")


def test_pairs_pool_within_their_study_only():
    """Two studies of before / after pairs (the last word of their names) pool apart: a pooled row
    never mixes another change's questions in."""
    from eragraph.bench.report import before_after_section

    def run(values):
        r = retrieval_result(question_ids=["q1", "q2", "q3"])
        r["modes"]["dense"]["per_question"] = {"recall@5": values, "recall@5_with_summaries": values}
        return r

    runs = [("retrieval-a-one-before", run([0.0, 0.0, 0.0])), ("retrieval-a-one-after", run([1.0, 1.0, 0.0])),
            ("retrieval-b-one-before", run([0.0, 0.0, 0.0])), ("retrieval-b-one-after", run([1.0, 0.0, 0.0])),
            ("retrieval-a-two-before", run([1.0, 1.0, 1.0])), ("retrieval-a-two-after", run([0.0, 1.0, 1.0])),
            ("retrieval-b-two-before", run([1.0, 1.0, 1.0])), ("retrieval-b-two-after", run([1.0, 1.0, 1.0]))]
    text = "\n".join(before_after_section(runs))
    one = text[text.index("### Before / after, pooled: one"):text.index("### Before / after, pooled: two")]
    two = text[text.index("### Before / after, pooled: two"):]
    assert "| dense | recall@5 | 6 | 3 | 0 | +0.5000 |" in one      # 3 of 6 questions rose by 1
    assert "| dense | recall@5 | 6 | 0 | 1 | -0.1667 |" in two
    assert "retrieval-a-two" not in one and "retrieval-a-one" not in two


def test_a_growth_run_of_older_code_says_so_in_the_targets_table():
    from eragraph.bench.report import growth_target_rows

    totals = {"steps": 2, "rebuild_steps": 2,
              "ratio_incremental_to_rebuild": {"summarize_calls": 0.4, "tokens_in": 0.19, "seconds": 0.09}}
    d = {"documents": 10, "embedder": "hash", "totals": totals,
         "steps": [{"step": 1, "rebuild": {}}, {"step": 2, "rebuild": {}, "recall@5": {"incremental": 0.5, "rebuild": 0.5}}]}
    current = growth_target_rows("growth-x", d)
    older = growth_target_rows("growth-x", {**d, "code_note": "measured with older code"})
    assert current and len(older) == len(current)
    assert all("older code" not in row[1] for row in current)
    assert all("**older code**" in row[1] for row in older)
