"""The console's own logic, run in the browser as the page runs it: the metadata-filter builder's
JSON (Amazon Bedrock Knowledge Bases' shape), the grouping of change records by the upload that
started them, and the alignment of the ledger's series on one time axis."""

from __future__ import annotations

import json


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


def test_the_band_layout_puts_each_node_over_its_members_and_keeps_rows_apart(page):
    # layer 2: one summary; layer 1: three summaries, two drawn with members; layer 0: a page of
    # chunks covering the first two (as a layer's page covers few segments of the layer above),
    # and one chunk whose parent is not drawn
    bands = [
        {"layer": 2, "nodes": [{"id": "t", "layer": 2, "parent": None}]},
        {"layer": 1, "nodes": [{"id": f"s{i}", "layer": 1, "parent": "t"} for i in range(3)]},
        {"layer": 0, "nodes": [{"id": f"c{i}", "layer": 0, "parent": "s0" if i < 4 else "s1"} for i in range(7)]
         + [{"id": "orphan", "layer": 0, "parent": "not-drawn"}]},
    ]
    at = run(page, "layout.js", f"Object.fromEntries(m.bandLayout({json.dumps(bands)}, {{slot: 10, band: 100}}))")
    assert {at[n]["y"] for n in ("t",)} == {0} and {at[f"s{i}"]["y"] for i in range(3)} == {100}
    assert {at[f"c{i}"]["y"] for i in range(7)} | {at["orphan"]["y"]} == {200}
    for row in (["s0", "s1", "s2"], [f"c{i}" for i in range(7)] + ["orphan"]):
        xs = [at[n]["x"] for n in row]
        assert xs == sorted(xs) and all(b - a >= 10 for a, b in zip(xs, xs[1:])), row  # in order, never closer than a slot
    assert at["s0"]["x"] == (at["c0"]["x"] + at["c3"]["x"]) / 2  # over the middle of its members
    assert at["s1"]["x"] == (at["c4"]["x"] + at["c6"]["x"]) / 2
    assert at["s0"]["x"] <= at["t"]["x"] <= at["s2"]["x"]
    assert at["orphan"]["x"] > at["c6"]["x"]  # a tree of its own, after the others
    # a summary whose members are not drawn is folded; folded neighbours pack closer
    bands[1]["nodes"] += [{"id": f"f{i}", "layer": 1, "parent": "t", "members": 9} for i in range(3)]
    at = run(page, "layout.js", f"Object.fromEntries(m.bandLayout({json.dumps(bands)}, {{slot: 10, fold: 4, band: 100}}))")
    assert [at[n]["folded"] for n in ("s0", "s1", "f0", "f1")] == [False, False, True, True]
    assert at["f1"]["x"] - at["f0"]["x"] == 4 and at["f2"]["x"] - at["f1"]["x"] == 4


def test_the_ledger_axis_is_never_years_wide(page):
    assert run(page, "stats.js", "m.span(7200, 7200, 'hour')") == [7200 - 3 * 3600, 7200 + 3 * 3600]
    assert run(page, "stats.js", "m.span(0, 86400 * 30, 'day')") == [-43200, 86400 * 30 + 43200]


def test_a_change_names_its_documents_and_counts_the_rest(page):
    record = {"kind": "ingest", "documents": ["a.md", "b.md"], "documents_total": 5}
    assert run(page, "changes.js", f"m.sources({json.dumps(record)})") == "a.md, b.md and 3 more"
    assert run(page, "changes.js", "m.sources({documents: ['a.md']})") == "a.md"
