"""Bulk ingest streams: sources are lazy, ingest draws one batch at a time and writes it before
drawing the next, and the result is the graph a list ingest makes."""

from __future__ import annotations

import json

import pytest

from eragraph.cli.app import main
from eragraph.services import resummarize
from eragraph.services.ingest import batches, ingest
from eragraph.services.sources import iter_sources
from support import load_sources, make_engine, synthetic_docs


def test_batches_draw_lazily():
    drawn = []

    def stream():
        for i in range(7):
            drawn.append(i)
            yield i

    it = batches(stream(), 3)
    assert next(it) == [0, 1, 2] and drawn == [0, 1, 2]
    assert next(it) == [3, 4, 5] and len(drawn) == 6
    assert next(it) == [6]
    assert list(it) == []
    with pytest.raises(ValueError):
        next(batches([], 0))


def test_ingest_writes_each_batch_before_drawing_the_next():
    engine = make_engine()
    docs = synthetic_docs(50, seed=11)
    drawn = 0
    written_when_drawn = []

    def stream():
        nonlocal drawn
        for doc in docs:
            written_when_drawn.append((drawn, len(engine.graph.list_documents())))
            drawn += 1
            yield doc

    report = ingest(engine, stream(), batch_docs=8)
    assert report.documents_added == 50
    for already_drawn, written in written_when_drawn:
        # whatever was drawn before the current batch started has been written
        assert written >= already_drawn - already_drawn % 8
        assert already_drawn - written < 8

    reference = make_engine()
    ingest(reference, list(docs), batch_docs=8)
    resummarize.drain(engine)
    resummarize.drain(reference)
    for layer in (0, 1, 2):
        assert ({r.node_id for r in engine.graph.layer_refs(layer)}
                == {r.node_id for r in reference.graph.layer_refs(layer)})
    assert engine.vectors.ids() == reference.vectors.ids()


def test_jsonl_is_read_line_by_line_with_per_line_errors(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [json.dumps({"id": f"r{i}", "title": "t", "text": f"row {i} text"}).encode() for i in range(5)]
    rows.insert(2, b'{"id": "bad", "text": "caf\xe9"}')  # Latin-1, not UTF-8
    rows.insert(4, b"{not json")
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(rows) + b"\n")
    errors: list = []
    it = iter_sources([path], errors)
    first = next(it)
    assert first.doc_id == "r0" and errors == []
    rest = list(it)
    assert [d.doc_id for d in [first, *rest]] == ["r0", "r1", "r2", "r3", "r4"]
    assert [e["source"] for e in errors] == [f"{path}:3", f"{path}:5"]
    assert "UTF-8" in errors[0]["error"] and "not JSON" in errors[1]["error"]


@pytest.mark.parametrize("content, message", [(b"", "empty file"), (b'{"text": "a"}\n\x00\x00', "binary"),
                                               (b"\n \n", "no text")])
def test_bad_jsonl_files_are_one_error(tmp_path, content, message):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    docs, errors, _ = load_sources([path])
    assert docs == [] and len(errors) == 1 and message in errors[0]["error"]


def test_cli_ingest_and_rebuild_stream_in_batches(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.setenv("ERAGRAPH_S_MIN", "2")
    monkeypatch.setenv("ERAGRAPH_S_MAX", "3")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    corpus = tmp_path / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as fh:
        for d in synthetic_docs(30, seed=2):
            fh.write(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text}) + "\n")
    store = tmp_path / "store"
    assert main(["ingest", str(corpus), "--store", str(store), "--batch-docs", "7", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["documents_read"] == 30 and out["documents_added"] == 30
    assert main(["rebuild", "--store", str(store), "--into", str(tmp_path / "re"), "--batch-docs", "4",
                 "--json", "--quiet"]) == 0
    rebuilt = json.loads(capsys.readouterr().out)
    assert rebuilt["documents_read"] == 30 and rebuilt["chunks_added"] == out["chunks_added"]
