"""The console's own logic, run in the browser as the page runs it: the metadata-filter builder's
JSON (Amazon Bedrock Knowledge Bases' shape), the grouping of change records by the upload that
started them, and the alignment of the ledger's series on one time axis."""

from __future__ import annotations


def run(page, module: str, expression: str):
    page.goto("/#stats")
    return page.evaluate(f"import('/console/js/{module}').then((m) => {expression})")


def test_the_filter_of_one_row_two_rows_and_lists(page):
    rows = [{"key": "lang", "op": "equals", "value": "pl"}]
    assert run(page, "filters.js", f"m.filterOf({rows}, 'andAll')") == {"equals": {"key": "lang", "value": "pl"}}
    rows = [{"key": "year", "op": "greaterThanOrEquals", "value": "2020"},
            {"key": "lang", "op": "in", "value": "pl, en"}, {"key": "", "op": "equals", "value": ""}]
    assert run(page, "filters.js", f"m.filterOf({rows}, 'orAll')") == {"orAll": [
        {"greaterThanOrEquals": {"key": "year", "value": 2020}}, {"in": {"key": "lang", "value": ["pl", "en"]}}]}
    assert run(page, "filters.js", "m.filterOf([], 'andAll')") is None
    assert run(page, "filters.js", "m.condition('code', 'startsWith', '007')") == {"startsWith": {"key": "code", "value": "007"}}
    said = run(page, "filters.js", "(() => { try { m.condition('year', 'lessThan', 'soon'); } catch (e) { return e.message; } })()")
    assert "not a number" in said
    said = run(page, "filters.js", "(() => { try { m.condition(' ', 'equals', 'x'); } catch (e) { return e.message; } })()")
    assert "key" in said


def test_change_records_are_grouped_by_the_upload_that_started_them(page):
    records = [  # newest first, as GET /changes answers
        {"id": "5", "time": 50, "kind": "resummarize", "layer": 1, "segments": 1, "summaries": ["s9"], "calls": 1, "tokens_in": 10, "tokens_out": 2},
        {"id": "4", "time": 40, "kind": "ingest", "documents": ["b.txt"], "chunks_added": 2},
        {"id": "3", "time": 30, "kind": "resummarize", "layer": 2, "segments": 1, "summaries": ["s3"], "calls": 1, "tokens_in": 30, "tokens_out": 5},
        {"id": "2", "time": 20, "kind": "resummarize", "layer": 1, "segments": 2, "summaries": ["s1", "s2"], "calls": 2, "tokens_in": 60, "tokens_out": 10},
        {"id": "1", "time": 10, "kind": "ingest", "documents": ["a.txt"], "chunks_added": 3},
    ]
    groups = run(page, "changes.js", f"m.changeGroups({records})")
    assert [g["head"]["id"] for g in groups] == ["4", "1"]
    assert groups[1]["summaries"] == ["s1", "s2", "s3"]
    assert groups[1]["cost"] == {"calls": 3, "tokens_in": 90, "tokens_out": 15, "segments": 3, "summaries": 3}
    assert [r["layer"] for r in groups[1]["layers"]] == [1, 2]
    assert "a.txt" in groups[1]["title"] and groups[0]["summaries"] == ["s9"]


def test_the_ledger_series_share_one_time_axis(page):
    series = [{"kind": "embed", "model": "h", "points": [{"t": 7200, "calls": 2, "tokens_in": 5, "tokens_out": 0}]},
              {"kind": "summarize", "model": "x", "points": [{"t": 3600, "calls": 1, "tokens_in": 9, "tokens_out": 3},
                                                              {"t": 7200, "calls": 4, "tokens_in": 1, "tokens_out": 1}]}]
    assert run(page, "stats.js", f"m.aligned({series}, 'tokens')") == [[3600, 7200], [None, 5], [12, 2]]
    assert run(page, "stats.js", f"m.aligned({series}, 'calls')") == [[3600, 7200], [None, 2], [1, 4]]
