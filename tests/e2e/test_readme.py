"""The examples of the README and the docs pages against a rerun: their example questions are
answered by the bundled sample corpus, and the measured cost example (docs/cost.md) is what the
documented commands make."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eragraph.cli.app import main

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
COST_PAGE = REPO / "docs" / "cost.md"
# the pages whose `eragraph query` examples are checked (the benchmark pages quote runs, not examples)
PAGES = [README, *sorted(p for p in (REPO / "docs").rglob("*.md") if "benchmarks" not in p.parts)]
SAMPLES = REPO / "shared" / "eragraph" / "samples" / "corpus.jsonl"
# every question the README and the docs ask with `eragraph query`, and the sample document that answers it
ANSWERED_BY = {
    "who discovered radium?": "sample-marie_curie",
}


def readme_questions() -> set[str]:
    return {q for page in PAGES for q in re.findall(r'eragraph query "([^"]+)"', page.read_text(encoding="utf-8"))}


def run_json(capsys, *argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_readme_question_is_answered_by_the_sample_corpus(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    questions = readme_questions()
    assert questions and questions <= set(ANSWERED_BY), \
        f"name the sample document that answers {sorted(questions - set(ANSWERED_BY))}"
    store = str(tmp_path / "kb")
    run_json(capsys, "ingest", str(SAMPLES), "--store", store, "--quiet")
    for question in questions:
        for mode in ("dense", "collapsed", "bm25"):
            res = run_json(capsys, "query", question, "--store", store, "--mode", mode, "--k", "5")
            docs = [r.get("doc_id") for r in res["results"]]
            assert ANSWERED_BY[question] in docs, (question, mode, docs)


def cost_table() -> dict[str, list[str]]:
    """The measured cost table (docs/cost.md): first cell -> the other cells."""
    text = COST_PAGE.read_text(encoding="utf-8")
    block = text[text.index("<!-- cost-example -->"):text.index("<!-- /cost-example -->")]
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 6 and not set(cells[1]) <= set("-"):
            rows[cells[0]] = cells[1:]
    return rows


def number(cell: str) -> float:
    return float(cell.replace(",", "").replace("$", ""))


@pytest.mark.model
def test_readme_cost_example_is_what_a_rerun_makes(tmp_path, capsys, monkeypatch):
    """The commands under "Measured" (MiniLM, the extractive summarizer, default settings), run
    again: every count and dollar figure of the table."""
    for name in ("ERAGRAPH_EMBEDDER", "ERAGRAPH_SUMMARIZER", "ERAGRAPH_NER", "ERAGRAPH_STORE"):
        monkeypatch.delenv(name, raising=False)
    text = COST_PAGE.read_text(encoding="utf-8")
    block = text[text.index("<!-- cost-example -->"):text.index("<!-- /cost-example -->")]
    [question] = re.findall(r'eragraph query "([^"]+)"', block)
    [prices] = re.findall(r"ERAGRAPH_PRICES='([^']+)'", block)
    monkeypatch.setenv("ERAGRAPH_PRICES", prices)
    store = str(tmp_path / "kb")
    run_json(capsys, "ingest", str(SAMPLES), "--store", store, "--quiet")
    usage = run_json(capsys, "query", question, "--store", store)["usage"]
    stats = run_json(capsys, "stats", "--store", store)
    by_kind = stats["ledger"]["by_kind"]
    layers = {row["layer"]: row["nodes"] for row in stats["layers"]}
    rows = cost_table()
    [embed_row] = [k for k in rows if k.startswith("embed")]
    [summ_row] = [k for k in rows if k.startswith("summarize")]
    assert f"{layers[0]} chunks" in embed_row and f"{layers[1]} summaries" in embed_row
    assert f"{layers[1]} segments" in summ_row
    expected = {embed_row: by_kind["embed"], summ_row: by_kind["summarize"], "total": stats["ledger"]["total"],
                next(k for k in rows if k.startswith("the query alone")): usage["total"]}
    for row, measured in expected.items():
        calls, tokens_in, tokens_out, _, cost = rows[row]
        assert (number(calls), number(tokens_in), number(tokens_out)) == \
            (measured["calls"], measured["tokens_in"], measured["tokens_out"]), row
        assert number(cost) == pytest.approx(measured["cost_usd"], rel=0.02, abs=5e-8), row
