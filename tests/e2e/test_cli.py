"""The CLI end to end on a local store (SQLite + FAISS), with the model-free embedder."""

from __future__ import annotations

import json

import pytest

from eragraph.cli.app import main

GOOD = {
    "a.txt": "The Danube rises in the Black Forest. It flows through Vienna and Budapest to the Black Sea.",
    "b.md": "# Rivers\n\nThe Vistula is the longest river in Poland. Warsaw and Krakow stand on it.",
    "c.html": "<html><head><style>p{}</style><script>var x=1;</script></head><body><p>The Nile flows "
              "north into the Mediterranean.</p><p>Lake Victoria feeds the White Nile.</p></body></html>",
}


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.setenv("ERAGRAPH_S_MIN", "2")
    monkeypatch.setenv("ERAGRAPH_S_MAX", "3")
    monkeypatch.setenv("ERAGRAPH_MAX_DOCUMENT_BYTES", "4000")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    return tmp_path


def run(capsys, *argv) -> tuple[int, dict | None, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    try:
        payload = json.loads(captured.out) if "--json" in argv else None
    except json.JSONDecodeError:
        payload = None
    return code, payload, captured.err


def write_docs(folder):
    folder.mkdir()
    for name, text in GOOD.items():
        (folder / name).write_text(text, encoding="utf-8")
    for i in range(6):
        (folder / f"extra{i}.txt").write_text(f"Document {i} tells about river number {i} and its delta.", encoding="utf-8")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (folder / "latin1.txt").write_bytes("Caf\xe9 au lait".encode("latin-1"))
    (folder / "huge.txt").write_text("word " * 2000, encoding="utf-8")
    (folder / "image.png").write_bytes(b"\x89PNG")


def test_ingest_reports_each_bad_file_and_keeps_the_rest(env, capsys):
    docs, store = env / "docs", env / "store"
    write_docs(docs)
    code, out, err = run(capsys, "ingest", str(docs), "--store", str(store), "--json", "--quiet")
    assert code == 3  # partial: the bad files were skipped, the rest ingested
    assert out["documents_added"] == 9
    assert out["chunks_added"] >= 9
    reasons = {e["source"].rsplit("/", 1)[-1]: e["error"] for e in out["errors"]}
    assert set(reasons) == {"empty.txt", "binary.txt", "latin1.txt", "huge.txt", "image.png"}
    assert "empty" in reasons["empty.txt"]
    assert "binary" in reasons["binary.txt"]
    assert "UTF-8" in reasons["latin1.txt"]
    assert "limit" in reasons["huge.txt"]
    assert "unsupported" in reasons["image.png"]
    for name in reasons:
        assert name in err
    for key in ("documents_unchanged", "segments_resummarized", "summarize_calls", "tokens_in",
                "tokens_out", "seconds"):
        assert key in out
    assert sum(out["segments_resummarized"].values()) == out["summarize_calls"] > 0

    code, stats, _ = run(capsys, "stats", "--store", str(store), "--json")
    assert stats["documents"] == 9
    layer0 = next(row for row in stats["layers"] if row["layer"] == 0)
    assert layer0["nodes"] == out["chunks_added"]
    assert int(stats["ledger"]["by_kind"]["summarize"]["calls"]) == out["summarize_calls"]
    assert int(stats["ledger"]["by_kind"]["summarize"]["tokens_in"]) == out["tokens_in"]
    assert stats["vectors"] == sum(row["nodes"] for row in stats["layers"])

    # nothing was lost: fixing a file and ingesting again adds just it
    (docs / "latin1.txt").write_text("Café au lait by the river.", encoding="utf-8")
    code, again, _ = run(capsys, "ingest", str(docs), "--store", str(store), "--json", "--quiet")
    assert again["documents_added"] == 1 and again["documents_unchanged"] == 9


def test_reingest_unchanged_changes_nothing_and_delete_removes(env, capsys):
    docs, store = env / "docs", env / "store"
    write_docs(docs)
    run(capsys, "ingest", str(docs), "--store", str(store), "--json", "--quiet")
    code, again, _ = run(capsys, "ingest", str(docs), "--store", str(store), "--json", "--quiet")
    assert again["documents_added"] == 0 and again["documents_unchanged"] == 9
    assert again["chunks_added"] == 0 and again["summarize_calls"] == 0

    code, res, _ = run(capsys, "query", "Vistula Warsaw Krakow river Poland", "--store", str(store),
                       "--json", "--mode", "dense", "--k", "3")
    assert code == 0
    top = res["results"][0]
    assert set(top) >= {"id", "layer", "doc_id", "source", "text", "score"}
    assert top["source"].endswith("b.md")
    assert "evidence only" in res["note"] and res["answer"] is None

    code, gone, _ = run(capsys, "delete", str(docs / "b.md"), "--store", str(store), "--json")
    assert code == 0 and gone["documents_removed"] == 1
    code, res, _ = run(capsys, "query", "Vistula Warsaw Krakow river Poland", "--store", str(store),
                       "--json", "--mode", "dense", "--k", "8")
    assert all(not r["source"].endswith("b.md") for r in res["results"])
    code, stats, _ = run(capsys, "stats", "--store", str(store), "--json")
    assert stats["documents"] == 8

    code, _, err = run(capsys, "delete", "no-such-doc", "--store", str(store), "--json")
    assert code == 1


def test_query_errors_are_clear(env, capsys):
    store = env / "store"
    code, _, err = run(capsys, "query", "anything", "--store", str(store))
    assert code == 1 and f"no store at {store}" in err and "eragraph ingest" in err and not store.exists()
    docs = env / "docs"
    write_docs(docs)
    run(capsys, "ingest", str(docs), "--store", str(store), "--quiet")
    code, _, err = run(capsys, "query", "rivers", "--store", str(store), "--mode", "nonsense")
    assert code == 2 and "unknown mode" in err
    code, _, err = run(capsys, "query", "  ", "--store", str(store))
    assert code == 2 and "empty" in err


def test_rebuild_builds_the_same_graph_from_scratch(env, capsys):
    docs, store, rebuilt = env / "docs", env / "store", env / "rebuilt"
    write_docs(docs)
    run(capsys, "ingest", str(docs), "--store", str(store), "--quiet")
    code, out, _ = run(capsys, "rebuild", "--store", str(store), "--into", str(rebuilt), "--json", "--quiet")
    assert code == 0 and out["documents_added"] == 9
    _, a, _ = run(capsys, "stats", "--store", str(store), "--json")
    _, b, _ = run(capsys, "stats", "--store", str(rebuilt), "--json")
    assert a["layers"] == b["layers"]


def test_stats_and_query_show_tokens_and_cost(env, capsys, monkeypatch):
    docs, store = env / "docs", env / "store"
    write_docs(docs)
    # price the model-free embedder and summarizer like Bedrock models, to see dollars
    monkeypatch.setenv("ERAGRAPH_PRICES", '{"hashing-bow-v1": [0.02, 0], "extractive-tfidf-v3": [0.25, 1.25]}')
    _, out, _ = run(capsys, "ingest", str(docs), "--store", str(store), "--json", "--quiet")
    _, stats, _ = run(capsys, "stats", "--store", str(store), "--json")
    ledger = stats["ledger"]
    rows = {(r["kind"], r["model"]): r for r in ledger["calls"]}
    assert set(rows) == {("embed", "hashing-bow-v1@256"), ("summarize", "extractive-tfidf-v3")}
    embed, summ = rows[("embed", "hashing-bow-v1@256")], rows[("summarize", "extractive-tfidf-v3")]
    assert embed["tokens_in"] > 0 and embed["tokens_out"] == 0 and embed["calls"] >= 1
    assert summ["tokens_in"] == out["tokens_in"] and summ["calls"] == out["summarize_calls"]
    assert embed["cost_usd"] == pytest.approx(embed["tokens_in"] * 0.02 / 1e6)
    assert summ["cost_usd"] == pytest.approx((summ["tokens_in"] * 0.25 + summ["tokens_out"] * 1.25) / 1e6)
    assert ledger["total"]["cost_usd"] == pytest.approx(embed["cost_usd"] + summ["cost_usd"])
    assert ledger["unpriced"] == []
    main(["stats", "--store", str(store)])
    human = capsys.readouterr().out
    assert "embed (hashing-bow-v1@256)" in human and "total:" in human and "$" in human

    question = "Vistula Warsaw river"
    _, res, _ = run(capsys, "query", question, "--store", str(store), "--json")
    [call] = res["usage"]["calls"]
    assert (call["kind"], call["model"], call["calls"]) == ("embed", "hashing-bow-v1@256", 1)
    assert call["tokens_in"] == 3 and res["usage"]["total"]["cost_usd"] == pytest.approx(3 * 0.02 / 1e6)
    _, after, _ = run(capsys, "stats", "--store", str(store), "--json")
    grown = {(r["kind"], r["model"]): r for r in after["ledger"]["calls"]}[("embed", "hashing-bow-v1@256")]
    assert grown["tokens_in"] == embed["tokens_in"] + 3 and grown["calls"] == embed["calls"] + 1


def test_store_from_before_the_lexical_index_is_told_to_reindex(env, capsys):
    import sqlite3

    docs, store = env / "docs", env / "store"
    write_docs(docs)
    run(capsys, "ingest", str(docs), "--store", str(store), "--quiet")
    conn = sqlite3.connect(store / "graph.sqlite")  # what a store written by an older eragraph looks like
    conn.execute("DROP TABLE leaf_text")
    conn.execute("DELETE FROM store_info WHERE key = 'lexical'")
    conn.commit()
    conn.close()
    for mode in ("bm25", "hybrid"):
        code, _, err = run(capsys, "query", "Vistula Poland", "--store", str(store), "--mode", mode)
        assert code == 1 and "eragraph reindex" in err and "lexical" in err
    code, out, _ = run(capsys, "query", "Which river flows through Warsaw?", "--store", str(store), "--mode", "fusion",
                       "--json")  # fusion always reads the dense side (hybrid): dense instead, and it says so
    assert code == 0 and out["results"] and "router_score" in out and "reindex" in out["note"]
    code, report, _ = run(capsys, "reindex", "--store", str(store), "--json")
    assert code == 0 and report["lexical_index_built"] >= 3
    code, out, _ = run(capsys, "query", "Vistula Poland", "--store", str(store), "--mode", "bm25", "--json")
    assert code == 0 and "Vistula" in out["results"][0]["text"] and out["route"] == "bm25"
    assert main(["query", "Which river flows through Warsaw?", "--store", str(store), "--mode", "auto"]) == 0
    assert "(route: " in capsys.readouterr().out  # the text output says the route and s(q)


def test_reindex_of_the_local_profile_needs_a_store_and_audits_it(env, capsys):
    """`--profile local` (the default) keeps the store directory: without --store (or
    ERAGRAPH_STORE) it is a usage error in words; with it, the local audit as before (drained,
    under the writer lock, no tenant registry)."""
    code, _, err = run(capsys, "reindex", "--json")
    assert code == 2 and "--profile local needs --store DIR" in err and "Traceback" not in err
    docs, store = env / "docs", env / "store"
    write_docs(docs)
    run(capsys, "ingest", str(docs), "--store", str(store), "--quiet")
    code, report, _ = run(capsys, "reindex", "--profile", "local", "--store", str(store), "--json")
    assert code == 0 and report["complete"] and report["invariants"]["ok"] and "tenant" not in report
    assert report["steps_run"][-1] == "invariants"
    assert main(["reindex", "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith(f"reindex of {store} (")


def test_demo_ingests_the_bundled_corpus_and_answers_its_questions(env, capsys):
    """The README's first command ends in `eragraph demo`: the bundled corpus is found wherever
    the command's modules live, every sample question gets evidence, and a second run adds
    nothing (its documents are already stored)."""
    from eragraph.cli.tools import SAMPLES

    questions = json.loads((SAMPLES / "questions.json").read_text(encoding="utf-8"))
    documents = len((SAMPLES / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
    store = str(env / "demo-store")
    for added in (f"ingested {documents} new documents", "ingested 0 new documents"):
        code = main(["demo", "--store", store, "--quiet"])
        out = capsys.readouterr().out
        assert code == 0 and out.startswith(added), out[:200]
        asked = [line[3:] for line in out.splitlines() if line.startswith("Q: ")]
        assert asked == questions and out.count("  [") >= len(questions)
