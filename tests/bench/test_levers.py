"""`eragraph bench levers`: the variants it parses, the walk it bridges, a smoke run on a small
local store (its ``base`` is tri_graph as `bench retrieval` runs it), and the report's choice of
a lever's setting (tuning halves pooled, kept where the held-out half gains)."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from eragraph.bench import levers
from eragraph.bench import retrieval as bench_retrieval
from eragraph.bench.report import levers as levers_page
from support import synthetic_docs


def parse(module, argv):
    parser = argparse.ArgumentParser(prog="eragraph bench")
    module.add_parser(parser.add_subparsers(dest="name"))
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    return args


def test_variants_are_parsed_and_bad_ones_refused_in_words():
    assert levers.parse_variants("base, ann,synonymy=0.5,bridges=2") == [
        ("base", "base", 0.0), ("ann", "ann", 0.0), ("synonymy=0.5", "synonymy", 0.5), ("bridges=2", "bridges", 2.0)]
    assert levers.parse_variants("lam=1") == [("lam=1", "lam", 1.0)]
    assert levers.parse_variants("paths,paths:path_beam=8:path_weight=2") == [
        ("paths", "paths", 0.0), ("paths:path_beam=8:path_weight=2", "paths", 0.0)]
    assert levers.path_settings("paths:path_beam=8:path_weight=2") == {"path_beam": 8, "path_weight": 2.0}
    assert levers.parse_variants("auto,auto:route=paths") == [("auto", "auto", 0.0), ("auto:route=paths", "auto", 0.0)]
    assert levers.path_settings("auto:route=paths:path_depth=2") == {"route": "paths", "path_depth": 2}
    assert levers.parse_variants("hop,hop:hop_weight=2,dense,dense:hop_entities=3,hybrid:hop_entities=0") == [
        ("hop", "hop", 0.0), ("hop:hop_weight=2", "hop", 0.0), ("dense", "dense", 0.0),
        ("dense:hop_entities=3", "dense+hop", 0.0), ("hybrid:hop_entities=0", "hybrid", 0.0)]
    assert levers.path_settings("hop:hop_weight=2") == {"hop_entities": 2, "hop_weight": 2.0}
    assert levers.path_settings("dense:hop_entities=1") == {"hop_entities": 1}
    for bad in ("hop:path_beam=2", "dense:path_weight=1", "paths:hop_entities=2", "hop:hop_entities=1.5",
                "hybrid:hop_weight=-1"):
        with pytest.raises(ValueError):
            levers.parse_variants(bad)
    for bad in ("", "sideways=1", "synonymy", "bridges=-1", "base=1", "ann=2", "paths:lam=1", "paths:path_beam=1.5",
                "paths:route=paths", "auto:route=dense",
                "paths:path_mass=-1", "paths:path_depth"):
        with pytest.raises(ValueError):
            levers.parse_variants(bad)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("levers")
    docs = synthetic_docs(40, seed=5)
    corpus, questions = root / "corpus.jsonl", root / "questions.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Which item is called Marker{d.doc_id}?",
                                             "supporting_ids": [d.doc_id]}) + "\n" for i, d in enumerate(docs)))
    store = root / "store"
    ran = bench_retrieval.run(parse(bench_retrieval, [
        "retrieval", "--corpus", str(corpus), "--questions", str(questions), "--store", str(store),
        "--embedder", "hash", "--modes", "tri_graph", "--k", "2,5", "--no-progress", "--json"]))
    return store, questions, ran


def test_a_smoke_run_keeps_every_question_and_its_base_is_tri_graph(built, tmp_path):
    store, questions, ran = built
    out = tmp_path / "levers.json"
    res = levers.run(parse(levers, ["levers", "--store", str(store), "--questions", str(questions), "--embedder",
                                    "hash", "--variants", "base,synonymy=1,bridges=1,paths,paths:path_weight=0,"
                                    "hop,hop:hop_weight=0,dense:hop_entities=2",
                                    "--no-progress", "--out", str(out)]))
    assert json.loads(out.read_text())["variants"].keys() == {"base", "synonymy=1", "bridges=1", "paths",
                                                              "paths:path_weight=0", "hop", "hop:hop_weight=0",
                                                              "dense:hop_entities=2"}
    # the second hop of weight 0 ranks as tri_graph does; the dense variant runs dense
    assert res["variants"]["hop:hop_weight=0"]["per_question"] == res["variants"]["base"]["per_question"]
    assert res["variants"]["dense:hop_entities=2"]["mode"] == "dense"
    # the paths mode without its path list ranks as tri_graph does
    assert res["variants"]["paths"]["mode"] == "paths"
    assert res["variants"]["paths:path_weight=0"]["per_question"] == res["variants"]["base"]["per_question"]
    assert res["question_ids"] == ran["question_ids"]
    assert len(res["halves"]) == res["questions"] == 40 and set(res["halves"]) == {0, 1}
    # base is the shipped walk: every question's recall as `bench retrieval` measured tri_graph
    assert res["variants"]["base"]["per_question"]["recall@5"] == ran["modes"]["tri_graph"]["per_question"]["recall@5"]
    for row in res["variants"].values():
        assert len(row["per_question"]["recall@5"]) == 40
        assert abs(np.mean(row["per_question"]["recall@5"]) - row["recall@5"]) < 1e-3


def test_bridges_spread_the_weight_over_a_segment(built):
    from eragraph.bench.common import bench_settings, open_engine

    store, _, _ = built

    class Args:
        embedder, summarizer = "hash", None

    engine = open_engine("local", store, bench_settings(Args))
    chunks = sorted(r.node_id for r in engine.graph.layer_refs(0))
    edges = levers.sibling_edges(engine, chunks, 2.0)
    assert edges.nnz > 0
    assert abs(edges - edges.T).max() < 1e-12  # undirected
    sums = np.asarray(edges.sum(axis=1)).ravel()
    assert np.allclose(sums[sums > 0], 2.0)  # each bridged passage spreads the whole weight
    pos = {c: i for i, c in enumerate(chunks)}
    summary = next(iter(engine.graph.get_nodes([r.node_id for r in engine.graph.layer_refs(1)]).values()))
    a, b = [pos[c] for c in summary.children[:2]]
    assert edges[a, b] == pytest.approx(2.0 / (len(summary.children) - 1))


def _run(dataset, base, variants, halves):
    return {"dataset": dataset, "questions": len(base), "halves": halves,
            "variants": {"base": {"kind": "base", "recall@5": 0, "per_question": {"recall@5": base}},
                         **{name: {"kind": "synonymy", "recall@5": 0, "per_question": {"recall@5": v}}
                            for name, v in variants.items()}}}


def test_the_report_chooses_on_tuning_halves_and_keeps_where_held_out_gains():
    halves = [0, 0, 1, 1]
    a = _run("a", [0, 0, 0, 0], {"synonymy=1": [1, 0, 1, 0], "synonymy=2": [1, 1, 0, 0]}, halves)
    b = _run("b", [0, 0, 0, 0], {"synonymy=1": [0, 0, 0, 0], "synonymy=2": [1, 0, -1, 0]}, halves)
    text = "\n".join(levers_page.notes([("levers-a", a), ("levers-b", b)], []))
    # synonymy=2 gains more on the tuning halves pooled (3 of 4 against 1), so it is chosen
    rows = [line for line in text.splitlines() if line.startswith("| synonymy")]
    assert len(rows) == 2 and all("`synonymy=2`" in r for r in rows)
    assert "| a | +0.00 | not kept |" in rows[0] and "| b | -50.00 | not kept |" in rows[1]
    a["variants"]["synonymy=2"]["per_question"]["recall@5"] = [1, 1, 1, 0]
    rows = [line for line in "\n".join(levers_page.notes([("levers-a", a), ("levers-b", b)], [])).splitlines()
            if line.startswith("| synonymy")]
    assert "| a | +50.00 | kept |" in rows[0]


def test_the_report_names_a_run_by_its_study():
    """Two studies of one dataset (say a reduced and a full store) are told apart in the choice."""
    halves = [0, 0, 1, 1]
    a = _run("a", [0, 0, 0, 0], {"synonymy=1": [1, 0, 1, 0]}, halves)
    full = {**_run("a", [0, 0, 0, 0], {"synonymy=1": [0, 0, 0, 0]}, halves), "study": "full"}
    rows = [line for line in "\n".join(levers_page.notes([("levers-a", a), ("levers-a-full", full)], [])).splitlines()
            if line.startswith("| synonymy")]
    assert "| a | +50.00 | kept |" in rows[0] and "| a (full) | +0.00 | not kept |" in rows[1]
