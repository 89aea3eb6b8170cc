"""`eragraph router train --graph-mode paths`: the runs it learns from take their graph list from
the ``paths`` mode, cached beside tri_graph's (one store's cache serves both), on a small local
store built by `eragraph bench retrieval` (hash embedder)."""

from __future__ import annotations

import argparse
import json

import pytest

from eragraph.bench import retrieval as bench_retrieval
from eragraph.training import router
from support import synthetic_docs


def test_collect_takes_the_graph_list_from_the_chosen_mode(tmp_path, monkeypatch):
    docs = synthetic_docs(30, seed=7)
    corpus, questions = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Which item is called Marker{d.doc_id}?",
                                             "supporting_ids": [d.doc_id]}) + "\n" for i, d in enumerate(docs)))
    store = tmp_path / "store"
    parser = argparse.ArgumentParser()
    bench_retrieval.add_parser(parser.add_subparsers(dest="name"))
    argv = ["retrieval", "--corpus", str(corpus), "--questions", str(questions), "--store", str(store),
            "--embedder", "hash", "--modes", "tri_graph", "--no-progress", "--json"]
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    bench_retrieval.run(args)
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")

    from eragraph.services import path_query

    ran: list[str] = []
    real = path_query.paths

    def spy(engine, text, *a, **kw):
        ran.append(text)
        return real(engine, text, *a, **kw)

    monkeypatch.setattr(path_query, "paths", spy)
    tri, _ = router.collect(store, questions, 10, False)
    assert not ran
    by_paths, _ = router.collect(store, questions, 10, False, graph_mode="paths")
    assert len(ran) == 10  # every question's paths list run once, then cached beside tri_graph's
    cache = json.loads((store / "router-runs.json").read_text())
    assert all({"graph", "graph_paths"} <= set(row) for row in cache.values())
    assert [r["graph"] for r in by_paths] == [cache[r["id"]]["graph_paths"] for r in by_paths]
    assert [r["graph"] for r in tri] == [cache[r["id"]]["graph"] for r in tri]
    again, _ = router.collect(store, questions, 10, False, graph_mode="paths")
    assert len(ran) == 10 and [r["graph"] for r in again] == [r["graph"] for r in by_paths]
    # runs cached before the dense scores were kept get them from the store's vectors (no search
    # again), equal to the scores the dense search gave
    fresh = {r["id"]: r["dense_scores"] for r in tri}
    assert all(len(s) == len(r["dense"]) and s == sorted(s, reverse=True) for r, s in zip(tri, fresh.values()))
    (store / "router-runs.json").write_text(json.dumps({k: {f: v for f, v in row.items() if f != "dense_scores"}
                                                        for k, row in cache.items()}))
    from eragraph.services import summary_search

    searched: list[str] = []
    monkeypatch.setattr(summary_search, "search", lambda *a, **kw: searched.append("dense") or [])
    rebuilt, _ = router.collect(store, questions, 10, False)
    assert not searched
    assert all(r["dense_scores"] == pytest.approx(fresh[r["id"]], abs=1e-5) for r in rebuilt)
