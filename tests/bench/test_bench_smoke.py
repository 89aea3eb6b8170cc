"""Smoke runs of every benchmark on a tiny corpus with the hashing embedder: they complete and
their JSON carries the promised fields with sane values. No timing is asserted."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from eragraph.bench import common, growth, report
from eragraph.bench import counting as bench_counting
from eragraph.bench import ingest as bench_ingest
from eragraph.bench import query as bench_query
from eragraph.bench import retrieval as bench_retrieval
from eragraph.bench import scale as bench_scale
from eragraph.bench import vectors as bench_vectors
from shared_data import SHARED_DATA, need
from support import synthetic_docs

MULTIHOP = SHARED_DATA / "multihop_rag"


def parse(module, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="eragraph bench")
    module.add_parser(parser.add_subparsers(dest="name"))
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    return args


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    """36 synthetic documents in 6 increments, one question per document (its marker)."""
    root = tmp_path_factory.mktemp("tiny")
    docs = synthetic_docs(36, seed=3)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i, d in enumerate(docs):
            fh.write(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text, "increment": 1 + i // 6}) + "\n")
    with open(root / "questions.jsonl", "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"id": "q-" + d.doc_id, "question": f"Which item is called Marker{d.doc_id}?",
                                 "supporting_ids": [d.doc_id]}) + "\n")
        fh.write(json.dumps({"id": "q-null", "question": "Nothing?", "supporting_ids": []}) + "\n")
    return root / "corpus.jsonl", root / "questions.jsonl"


def test_recall_and_percentile():
    assert common.recall_at_k(["a", "a", "b", "c"], ["b", "z"], 2) == 0.5
    assert common.recall_at_k(["a", "b", "c"], ["c"], 2) == 0.0
    assert common.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert common.percentile([5.0], 99) == 5.0
    with pytest.raises(ValueError):
        common.recall_at_k(["a"], [], 1)


def test_split_steps_orders_by_increment_and_sizes_evenly(tiny):
    corpus, _ = tiny
    docs = common.order_by_increment(common.load_corpus(corpus))
    assert [d.meta["increment"] for d in docs] == sorted(d.meta["increment"] for d in docs)
    base, steps = growth.split_steps(docs, 0.5, 4)
    assert len(base) == 18 and [len(s) for s in steps] == [5, 5, 4, 4]
    assert [d.doc_id for d in base + [d for s in steps for d in s]] == [d.doc_id for d in docs]


def check_cost(row: dict) -> None:
    for key in ("summarize_calls", "tokens_in", "tokens_out", "seconds", "summarize_seconds", "chunks"):
        assert row[key] >= 0, key
    assert row["tokens_in"] >= row["summarize_calls"]


@pytest.mark.parametrize("profile", ["memory", "local"])
def test_growth_smoke(tiny, tmp_path, profile):
    corpus, questions = tiny
    args = parse(growth, ["growth", "--corpus", str(corpus), "--questions", str(questions), "--initial", "0.5",
                          "--steps", "3", "--store", str(tmp_path / "g"), "--profile", profile,
                          "--embedder", "hash", "--no-progress", "--out", str(tmp_path / "growth-x.json")])
    res = growth.run(args)
    assert json.loads((tmp_path / "growth-x.json").read_text()) == json.loads(json.dumps(res))
    assert [s["step"] for s in res["steps"]] == [1, 2, 3]
    assert res["steps"][-1]["documents"] == 36
    for s in res["steps"]:
        check_cost(s["incremental"])
        check_cost(s["rebuild"])
        # both graphs hold the same documents, so the same chunks
        assert s["incremental"]["chunks"] == s["rebuild"]["chunks"]
        for path in ("incremental", "rebuild"):
            assert 0.0 <= s["recall@5"][path] <= 1.0
    # a rebuild re-summarizes everything; the incremental path never does more
    t = res["totals"]
    assert t["rebuild"]["summarize_calls"] >= t["incremental"]["summarize_calls"] > 0
    assert 0 < t["ratio_incremental_to_rebuild"]["tokens_in"] <= 1.0
    single = res["single_document"]
    assert single["rebuild"]["summarize_calls"] >= single["incremental"]["summarize_calls"]
    assert single["rebuild"]["chunks"] == single["incremental"]["chunks"]
    assert res["command"].startswith("eragraph bench growth ")
    if profile == "local":  # rebuilt stores are removed once measured
        assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["incremental"]


def test_ingest_smoke(tiny, tmp_path):
    corpus, _ = tiny
    args = parse(bench_ingest, ["ingest", "--corpus", str(corpus), "--profile", "memory", "--embedder", "hash",
                                "--no-progress", "--limit", "24"])
    res = bench_ingest.run(args)
    assert res["documents"] == 24 and res["chunks"] >= 24
    assert res["embedder_alone"]["texts"] == res["chunks"] + res["summaries"]
    assert res["embed_in_pipeline"]["texts"] == res["embedder_alone"]["texts"]
    assert {"chunk", "embed", "store", "summarize", "hash_partition_other"} <= set(res["stages_seconds"])
    # the residual is total minus the clocked stages: clocks that overlap (a stage timed inside
    # another) or run outside the total make it negative; each clocked stage lies inside the total
    stages = res["stages_seconds"]
    assert stages["hash_partition_other"] >= -0.01, stages
    assert all(0 <= v <= res["seconds"]["total"] + 0.01 for k, v in stages.items() if k != "hash_partition_other")
    assert 0.0 <= res["outside_models_share"] <= 1.0


def test_query_smoke(tiny, tmp_path):
    corpus, questions = tiny
    args = parse(bench_query, ["query", "--store", str(tmp_path / "q"), "--corpus", str(corpus),
                               "--questions", str(questions), "--modes", "collapsed,dense", "--question-limit", "10",
                               "--embedder", "hash", "--no-progress", "--out", str(tmp_path / "query-x.json")])
    res = bench_query.run(args)
    assert set(res["modes"]) == {"collapsed", "dense"}
    for row in res["modes"].values():
        assert row["n"] == 10
        assert 0 < row["latency_ms_p50"] <= row["latency_ms_p95"] <= row["latency_ms_p99"] <= row["latency_ms_max"]


def test_query_interleaved_modes_take_turns(tiny, tmp_path, monkeypatch):
    """--interleave: the modes alternate question by question (a change of load falls on both),
    each given the question's vector made once; per mode every round is kept and the medians."""
    corpus, questions = tiny
    calls: list[tuple[str, bool]] = []
    real = bench_query.query

    def spy(engine, text, mode="collapsed", **kw):
        calls.append((mode, kw.get("vector") is not None))
        return real(engine, text, mode=mode, **kw)

    monkeypatch.setattr(bench_query, "query", spy)
    args = parse(bench_query, ["query", "--store", str(tmp_path / "q"), "--corpus", str(corpus),
                               "--questions", str(questions), "--modes", "collapsed,dense", "--question-limit", "4",
                               "--interleave", "2", "--embedder", "hash", "--no-progress"])
    res = bench_query.run(args)
    timed = calls[2:]  # after one warm-up per mode
    assert timed == [("collapsed", True), ("dense", True)] * 8
    for row in res["modes"].values():
        assert len(row["rounds"]) == 2 and all(r["n"] == 4 for r in row["rounds"])
        assert row["cpu_ms_p95_median"] >= 0 and all("cpu_ms_p95" in r for r in row["rounds"])
        assert min(r["latency_ms_p95"] for r in row["rounds"]) <= row["latency_ms_p95_median"] <= \
            max(r["latency_ms_p95"] for r in row["rounds"])
        # each question's fastest round: no slower than the fastest round's percentile
        assert 0 <= row["fastest_latency_ms_p95"] <= min(r["latency_ms_p95"] for r in row["rounds"])
        assert row["fastest_cpu_ms_p50"] <= row["fastest_cpu_ms_p95"] <= min(r["cpu_ms_p95"] for r in row["rounds"])


def test_query_interleaved_with_the_embedding_cache_warms_every_mode_first(tiny, tmp_path, monkeypatch):
    """--embedding-cache: every question asked in every mode once, untimed, before the rounds,
    with the cache on, so the rounds find what the modes embed cached (the default keeps it off)."""
    corpus, questions = tiny
    calls: list[tuple[str, bool]] = []
    real = bench_query.query

    def spy(engine, text, mode="collapsed", **kw):
        calls.append((mode, engine.settings.embed_cache))
        return real(engine, text, mode=mode, **kw)

    monkeypatch.setattr(bench_query, "query", spy)
    base = ["query", "--store", str(tmp_path / "q"), "--corpus", str(corpus), "--questions", str(questions),
            "--modes", "collapsed,dense", "--question-limit", "3", "--interleave", "1", "--embedder", "hash",
            "--no-progress"]
    res = bench_query.run(parse(bench_query, [*base, "--embedding-cache"]))
    assert calls[2:] == [("collapsed", True), ("dense", True)] * 6  # 3 warm, then 3 timed
    assert res["embedding_cache"] is True and all(r["rounds"][0]["n"] == 3 for r in res["modes"].values())
    calls.clear()
    res = bench_query.run(parse(bench_query, base))
    assert calls[2:] == [("collapsed", False), ("dense", False)] * 3 and res["embedding_cache"] is False


def test_query_interleaves_a_levers_variant_with_its_settings(tiny, tmp_path, monkeypatch):
    """--modes takes a levers variant (``hop``: tri_graph with its second hop): it runs its mode
    with its settings, question by question beside the mode as shipped; the store's settings are
    back afterwards."""
    corpus, questions = tiny
    calls: list[tuple[str, int]] = []
    real = bench_query.query
    seen = {}

    def spy(engine, text, mode="collapsed", **kw):
        calls.append((mode, engine.settings.graph_retrieval.hop_entities))
        seen["engine"] = engine
        return real(engine, text, mode=mode, **kw)

    monkeypatch.setattr(bench_query, "query", spy)
    monkeypatch.setattr(bench_query, "close_engine", lambda engine: None)
    args = parse(bench_query, ["query", "--store", str(tmp_path / "q"), "--corpus", str(corpus),
                               "--questions", str(questions), "--modes", "tri_graph,hop:hop_entities=3",
                               "--question-limit", "3", "--interleave", "1", "--embedder", "hash", "--no-progress"])
    res = bench_query.run(args)
    assert calls[2:] == [("tri_graph", 0), ("tri_graph", 3)] * 3
    assert set(res["modes"]) == {"tri_graph", "hop:hop_entities=3"}
    assert seen["engine"].settings.graph_retrieval.hop_entities == 0


def test_retrieval_embeds_each_question_once_before_any_mode(tiny, tmp_path, monkeypatch):
    """Every mode but bm25 gets the vector embedded up front, so no mode's latency includes the
    question's embedding; the vector gives the same results as embedding inside the query."""
    corpus, questions = tiny
    from eragraph.services import query as query_service

    calls: list[tuple[str, bool]] = []
    real = query_service.query

    def spy(engine, text, mode="collapsed", **kw):
        calls.append((mode, kw.get("vector") is not None))
        response = real(engine, text, mode=mode, **kw)
        if kw.get("vector") is not None:
            again = real(engine, text, mode=mode, k=kw.get("k"))
            assert [r.id for r in again.results] == [r.id for r in response.results]
        return response

    monkeypatch.setattr(query_service, "query", spy)
    args = parse(bench_retrieval, ["retrieval", "--corpus", str(corpus), "--questions", str(questions),
                                   "--store", str(tmp_path / "r"), "--profile", "memory", "--embedder", "hash",
                                   "--modes", "dense,bm25,collapsed", "--k", "1,5", "--limit", "8",
                                   "--no-progress", "--json"])
    res = bench_retrieval.run(args)
    assert set(res["modes"]) == {"dense", "bm25", "collapsed"}
    assert res["question_embedding_ms_p50"] > 0
    assert {m for m, given in calls if given} == {"dense", "collapsed"}
    assert {m for m, given in calls if not given} == {"bm25"}
    assert res["modes"]["dense"]["recall@5"] > 0.5  # each question names its document's marker
    assert len(res["question_ids"]) == len(set(res["question_ids"])) == 8
    for row in res["modes"].values():  # every question's recall, averaging to the row's figure
        for key in ("recall@1", "recall@5", "recall@5_with_summaries"):
            assert len(row["per_question"][key]) == 8
            assert abs(sum(row["per_question"][key]) / 8 - row[key]) < 1e-3


def test_report_renders_targets_and_plots(tiny, tmp_path):
    corpus, questions = tiny
    results = tmp_path / "results"
    growth.run(parse(growth, ["growth", "--corpus", str(corpus), "--questions", str(questions), "--steps", "2",
                              "--store", str(tmp_path / "g"), "--profile", "memory", "--embedder", "hash",
                              "--no-progress", "--out", str(results / "growth-tiny.json")]))
    out = tmp_path / "docs" / "benchmarks"
    assert report.main(["--results", str(results), "--out", str(out)]) == 0
    text = (out / "index.md").read_text()
    assert "## Current targets" in text and "summarize input tokens ≤ 0.20 of rebuild" in text
    assert ("**met**" in text) or ("**missed**" in text)
    assert "[`growth-tiny.json`](growth.md)" in text
    growth_page = (out / "growth.md").read_text()
    assert "### growth-tiny" in growth_page and "![growth-tiny-cost.png](plots/growth-tiny-cost.png)" in growth_page
    assert (out / "plots" / "growth-tiny-cost.png").stat().st_size > 0
    assert (out / "plots" / "growth-tiny-recall.png").stat().st_size > 0


def test_growth_on_a_multihop_slice(tmp_path):
    need(MULTIHOP / "corpus.jsonl")  # skips without the data set, fails under CI
    args = parse(growth, ["growth", "--corpus", str(MULTIHOP / "corpus.jsonl"), "--questions",
                          str(MULTIHOP / "questions.jsonl"), "--limit", "24", "--steps", "2", "--no-single",
                          "--store", str(tmp_path / "g"), "--profile", "memory", "--embedder", "hash",
                          "--no-entities", "--no-progress"])
    res = growth.run(args)
    assert res["documents"] == 24 and len(res["steps"]) == 2
    assert res["steps"][-1]["incremental"]["chunks"] == res["steps"][-1]["rebuild"]["chunks"] > 24


def test_growth_refuses_a_directory_it_did_not_make(tiny, tmp_path):
    corpus, _ = tiny
    (tmp_path / "keep.txt").write_text("precious")
    args = parse(growth, ["growth", "--corpus", str(corpus), "--store", str(tmp_path), "--profile", "memory",
                          "--embedder", "hash", "--no-progress"])
    with pytest.raises(ValueError, match="holds other files"):
        growth.run(args)
    assert (tmp_path / "keep.txt").read_text() == "precious"


def test_command_line_names_the_benchmark_once():
    ns = argparse.Namespace(argv=["bench", "growth", "--corpus", "c.jsonl"])
    assert common.command_line(ns, "growth") == "eragraph bench growth --corpus c.jsonl"
    ns = argparse.Namespace(argv=["--corpus", "a b.jsonl"])
    assert common.command_line(ns, "ingest") == "eragraph bench ingest --corpus 'a b.jsonl'"


def test_counting_proxy_counts_calls_and_items_per_method():
    from eragraph.adapters.memory.graph_memory import MemoryGraphStore
    from eragraph.domain.model import Node, RegionChange, Segment

    counts: dict = {}
    store = bench_counting.Counting(MemoryGraphStore(), counts)
    store.put_nodes([Node(node_id=f"n{i}", layer=0, text="t", tokens=1, code=i) for i in range(3)])
    assert set(store.get_nodes(["n0", "n1", "missing"])) == {"n0", "n1"}
    store.delete_nodes(i for i in ("n0", "n2"))  # a one-shot iterator is counted and still applied
    assert [r.node_id for r in store.layer_refs(0)] == ["n1"]
    [ref] = store.prefix_refs(0, 0, 7)
    store.apply_region(RegionChange(layer=0, expected=(ref,), assign=(("n1", "s1"),),
                                    add=(Segment("s1", 0, ("n1",), "sum1"),)))
    assert counts["put_nodes"] == {"calls": 1, "items_in": 3, "items_out": 0}
    assert counts["get_nodes"] == {"calls": 1, "items_in": 3, "items_out": 2}
    assert counts["delete_nodes"]["items_in"] == 2 and counts["layer_refs"]["items_out"] == 1
    assert counts["apply_region"]["items_in"] == 2
    total = bench_counting.totals({"graph": counts})
    assert total["items_written"] == 3 + 2 + 2
    assert total["items_read"] == 2 + 1 + 1  # get_nodes, layer_refs, prefix_refs
    assert total["calls"] == 6


def test_scale_smoke(tmp_path):
    pytest.importorskip("moto")
    started = time.perf_counter()
    args = parse(bench_scale, ["scale", "--smoke", "--no-progress", "--store", str(tmp_path / "work"),
                               "--out", str(tmp_path / "results" / "scale-smoke.json")])
    res = bench_scale.run(args)
    elapsed = time.perf_counter() - started
    assert json.loads((tmp_path / "results" / "scale-smoke.json").read_text()) == json.loads(json.dumps(res))
    assert res["embedder"] == "hash" and "hashing embedder" in res["note"]
    [local] = res["local"]
    assert local["chunks"] == bench_scale.SMOKE_SIZE == local["build"]["chunks_added"]
    build = local["build"]
    assert 0 < build["peak_rss_before_drain_mb"] <= build["peak_rss_mb"]
    phases = build["peak_rss_phases_mb"]  # each phase's own peak (VmHWM started afresh on Linux)
    assert list(phases) == ["ingest", "drain", "index"] and phases["ingest"] == build["peak_rss_before_drain_mb"]
    assert 0 < phases["drain"] <= build["peak_rss_mb"] and phases["index"] > 0
    assert abs(build["peak_rss_beyond_index_mb"] - (build["peak_rss_mb"] - build["vector_index_resident_mb"])) < 0.2
    assert build["vector_index_mb"] > 0 and build["service_seconds"] > 0
    assert build["vector_index_resident_mb"] is not None  # measured (300 chunks: too small to bound)
    # the store on disk by entry: the databases (their logs counted with them) and directories
    assert {"graph.sqlite", "embeddings.sqlite", "vectors", "blobs"} <= set(build["store_mb"])
    assert not any(name.endswith(("-wal", "-shm")) for name in build["store_mb"])
    assert 0 < build["store_mb"]["embeddings.sqlite"] < 5  # 300 chunks' vectors and their summaries'
    for op in ("insert", "delete"):
        row = local[op]["median"]
        assert local[op]["runs"] == 5
        assert row["seconds"] > 0 and row["items_read"] > 0 and row["items_written"] > 0
        assert row["summarize_calls"] >= 1
        assert local[op]["ports_median"]["graph"]
    assert set(local["query"]) == set(bench_scale.CORE_MODES)
    for row in local["query"].values():
        assert row["n"] == 20 and 0 < row["latency_ms_p50"] <= row["latency_ms_p95"]
    [aws] = res["aws"]
    assert aws["chunks"] == bench_scale.SMOKE_AWS_SIZE
    dyn = aws["insert"]["dynamodb_median"]
    assert dyn["requests"] > 0 and dyn["items_written"] > 0 and dyn["items_read"] > 0
    # the partition tally: every written item names its partition; an insert writes a document,
    # refs, nodes and metadata
    assert dyn["partitions_written"] >= 3 and 1 <= dyn["hottest_partition_writes"] <= dyn["items_written"]
    assert {"DOC", "NODE", "REF"} <= set(dyn["writes_by_kind"]) and dyn["meta_partitions_written"] >= 1
    assert not any(p.name.startswith(("store-", "corpus-")) for p in (tmp_path / "work").iterdir())
    print(f"scale smoke: {elapsed:.1f}s")

    site = tmp_path / "site"
    assert report.main(["--results", str(tmp_path / "results"), "--out", str(site)]) == 0
    text = (site / "scale.md").read_text()
    assert text.startswith("# Scale: cost against store size") and "eragraph bench scale --smoke" in text
    assert "![scale-smoke-scale.png](plots/scale-smoke-scale.png)" in text
    assert (site / "plots" / "scale-smoke-scale.png").stat().st_size > 0
    assert "The built store on disk" in text and f"{build['store_mb']['embeddings.sqlite']}" in text
    # two sizes spanning 10k -> 1M get verdicts; the ratios come from the two rows
    import copy

    big = copy.deepcopy(local)
    big["chunks"] = 1_000_000
    big["insert"]["median"]["seconds"] = local["insert"]["median"]["seconds"] * 3
    small = copy.deepcopy(local)
    small["chunks"] = 10_000
    rows = report.scale.targets("x", {"local": [small, big], "embedder": "hash"})
    by_label = {r[0]: r for r in rows}
    wall = by_label["scale: single insert wall time at 1M ≤ 1.5× at 10k"]
    assert wall[2] == "3.00×" and "missed" in wall[3]
    assert "met" in by_label["scale: single insert items read at 1M ≤ 1.5× at 10k"][3]
    # a run whose sizes ran under different loads gives its timed ratios no verdict, the rest one
    loaded = {r[0]: r for r in report.scale.targets("x", {"local": [small, big], "embedder": "hash",
                                                          "timings_comparable": False})}
    wall = loaded["scale: single insert wall time at 1M ≤ 1.5× at 10k"]
    assert wall[2] == "3.00×" and "not measured" in wall[3] and "not comparable" in wall[4]
    assert "met" in loaded["scale: single insert items read at 1M ≤ 1.5× at 10k"][3]
    # a run whose builds alone ran under different loads keeps its insert's verdict
    built = {r[0]: r for r in report.scale.targets("x", {"local": [small, big], "embedder": "hash",
                                                         "build_timings_comparable": False})}
    assert "missed" in built["scale: single insert wall time at 1M ≤ 1.5× at 10k"][3]
    build = built["scale: build time per chunk at 1M within 1.3× of 10k"]
    assert "not measured" in build[3] and "builds ran under different loads" in build[4]
    assert "not measured" not in by_label["scale: build time per chunk at 1M within 1.3× of 10k"][3]


VECTOR_ROW_FIELDS = (
    "build_seconds", "query_ms_p50", "query_ms_p95", "recall_at_10", "filter_method",
    "filtered_layer0_ms_p95", "filtered_layer0_recall_at_10", "filtered_layer3_ms_p95", "filtered_layer3_recall_at_10",
    "delete_ms_median", "delete_ms_p95", "replace_ms_median", "replace_ms_p95", "after_changes_query_ms_p95",
    "after_changes_query_recall_at_10", "deleted_ids_returned_after", "reclaims_deleted_space", "save_seconds",
    "file_bytes", "open_seconds", "first_query_after_open_ms", "rss_peak_minus_vectors_mb", "params", "wall_seconds")


@pytest.mark.parametrize("data", ["mixture", "spread"])
def test_vector_index_candidates_smoke(tmp_path, data):
    """Every candidate, LanceDB included, runs the same operations on the same vectors: the exact
    index finds the exact top-10 (filtered too, and after the deletes), and no deleted id is ever
    returned again."""
    pytest.importorskip("lancedb")
    args = parse(bench_vectors, ["vectors", "--sizes", "2000", "--queries", "30", "--clusters", "50",
                                 "--data", data, "--out", str(tmp_path / "vectors.json")])
    res = bench_vectors.run(args)
    rows = {r["backend"]: r for r in res["rows"]}
    assert set(rows) == set(bench_vectors.BACKENDS) and "lancedb" in rows
    assert all("error" not in r for r in rows.values()), rows
    for exact in ("faiss-flat", "eragraph-faiss"):  # the product's index is flat at this size
        for key in ("recall_at_10", "filtered_layer0_recall_at_10", "filtered_layer3_recall_at_10",
                    "after_changes_query_recall_at_10"):
            assert rows[exact][key] == 1.0, (exact, key)
    assert rows["eragraph-faiss"]["params"]["kind"] == "flat"
    for row in rows.values():
        assert all(key in row for key in VECTOR_ROW_FIELDS), set(VECTOR_ROW_FIELDS) - set(row)
        for key in row:
            if key.endswith("recall_at_10"):
                assert 0.0 <= row[key] <= 1.0, (row["backend"], key)
        assert row["recall_at_10"] >= 0.8, row["backend"]  # tiny: every index is close to exact
        assert row["deleted_ids_returned_after"] == 0
        assert 0 < row["query_ms_p50"] <= row["query_ms_p95"]
        assert row["file_bytes"] > 0 and row["n"] == 2000
    lance = rows["lancedb"]
    assert lance["params"]["index"] == "IVF_HNSW_SQ" and lance["index_build_seconds"] >= 0
    assert 0 < lance["file_bytes_after_optimize"] and 0.0 <= lance["after_optimize_query_recall_at_10"] <= 1.0
    assert res["data"]["kind"] == data
    assert json.loads((tmp_path / "vectors.json").read_text())["run"]["machine"]["cores"] >= 1


def test_vector_build_parameters_from_the_command_line(tmp_path):
    """--m/--ef-construction reach the HNSW adapters and --nlist the IVF one (each backend runs in
    a spawned process: the values travel as arguments); an IVF scanning all its buckets is exact."""
    args = parse(bench_vectors, ["vectors", "--sizes", "1500", "--queries", "15", "--clusters", "30",
                                 "--backends", "faiss-ivf,hnswlib", "--m", "8", "--ef-construction", "40",
                                 "--nlist", "12", "--ef", "12"])
    rows = {r["backend"]: r for r in bench_vectors.run(args)["rows"]}
    assert all("error" not in r for r in rows.values()), rows
    assert rows["hnswlib"]["params"] == {"M": 8, "ef_construction": 40, "ef": 12}
    ivf = rows["faiss-ivf"]
    assert ivf["params"]["nlist"] == 12 and ivf["params"]["nprobe"] == 12
    assert ivf["recall_at_10"] == 1.0 and ivf["filtered_layer3_recall_at_10"] == 1.0
    assert ivf["deleted_ids_returned_after"] == 0 and ivf["after_changes_query_recall_at_10"] == 1.0


def test_vector_data_from_an_embedding_cache(tmp_path):
    """--data sqlite:PATH reads the cached vectors of the right dim, holds the queries out, caps
    the size at what is left and records only the file's name."""
    import sqlite3

    import numpy as np

    path = tmp_path / "embeddings.sqlite"
    rng = np.random.default_rng(0)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE embeddings (identity TEXT NOT NULL, key TEXT NOT NULL, dim INTEGER NOT NULL, "
                "vec BLOB NOT NULL, PRIMARY KEY (identity, key)) WITHOUT ROWID")
    con.executemany("INSERT INTO embeddings VALUES ('m', ?, 16, ?)",
                    [(f"k{i:04d}", rng.standard_normal(16).astype(np.float32).tobytes()) for i in range(600)])
    con.execute("INSERT INTO embeddings VALUES ('m', 'other', 8, ?)", (np.ones(8, np.float32).tobytes(),))
    con.commit()
    con.close()
    data, qs = bench_vectors.load_data(f"sqlite:{path}", 1000, 16, 0, 20, 7)
    assert data.shape == (580, 16) and qs.shape == (20, 16)
    assert np.allclose(np.linalg.norm(data, axis=1), 1.0, atol=1e-5)
    stored = {v.tobytes() for v in data}
    assert not any(q.tobytes() in stored for q in qs)  # held out
    args = parse(bench_vectors, ["vectors", "--sizes", "200,5000", "--queries", "20", "--dim", "16",
                                 "--backends", "faiss-flat", "--data", f"sqlite:{path}"])
    res = bench_vectors.run(args)
    assert [r["n"] for r in res["rows"]] == [200, 580]
    assert [r["operations"] for r in res["rows"]] == [50, 145]  # a quarter of a tiny size
    assert res["data"] == {"kind": "sqlite", "file": "embeddings.sqlite", "queries": "20 held-out cached vectors, "
                           "not stored", "available_vectors": 580, "sizes_capped": "asked [200, 5000], ran [200, 580]"}
    assert str(tmp_path) not in json.dumps(res["data"]) + res["vectors"] + res["command"]
    assert "--data sqlite:embeddings.sqlite" in res["command"]
    assert all("error" not in r for r in res["rows"]), res["rows"]
    assert res["rows"][0]["recall_at_10"] == 1.0


def test_index_resident_memory_is_what_closing_the_index_gives_back(tmp_path):
    """The scale bench's index-resident figure: 120k vectors of 64 dims (29 MiB raw) grown the
    way an ingest grows them; closing the index gives back at least their raw size (IVF adds
    spare bucket capacity and a hash map, so more) and its unflushed changes are on disk."""
    from types import SimpleNamespace

    import numpy as np

    from eragraph.adapters.local.vector_faiss import FaissVectorIndex

    n, dim = 120_000, 64
    index = FaissVectorIndex(tmp_path / "v", dim)
    rng = np.random.default_rng(1)
    for start in range(0, n, 4000):
        v = rng.standard_normal((4000, dim)).astype(np.float32)
        index.upsert([f"v{start + i}" for i in range(4000)], v / np.linalg.norm(v, axis=1, keepdims=True),
                     [{"layer": 0, "doc_id": "d"}] * 4000)
    index.upsert(["late"], np.full((1, dim), dim ** -0.5, np.float32), [{"layer": 1, "doc_id": "d"}])
    raw_kb = n * dim * 4 / 1024
    freed = bench_scale.index_resident_kb(SimpleNamespace(vectors=index))
    assert freed is not None and 0.9 * raw_kb < freed < 3 * raw_kb, (freed, raw_kb)
    again = FaissVectorIndex(tmp_path / "v", dim)
    assert again.count() == n + 1 and again.meta("late")["layer"] == 1  # close flushed first


def test_filters_smoke(tmp_path):
    from eragraph.bench import filters as bench_filters

    args = parse(bench_filters, ["filters", "--smoke", "--no-progress", "--store", str(tmp_path / "work"),
                                 "--out", str(tmp_path / "results" / "filters-smoke.json")])
    res = bench_filters.run(args)
    assert res["chunks"] == bench_filters.SMOKE_CHUNKS and res["embedder"] == "hash"
    for mode in ("dense", "collapsed", "bm25"):
        rows = res["modes"][mode]
        assert set(rows) == {"unfiltered", "1%", "10%", "50%"}
        for label, row in rows.items():
            assert row["n"] == 10 and 0 < row["latency_ms_p50"] <= row["latency_ms_p95"]
            if label != "unfiltered":
                assert row["leaks"] == 0
    assert all(row["recall_at_k"] == 1.0 for row in res["modes"]["dense"].values())  # flat: exact
    # a smoke run is not reported; a full one is
    full = tmp_path / "results" / "filters-full.json"
    full.write_text(json.dumps({**res, "smoke": False}))
    site = tmp_path / "site"
    assert report.main(["--results", str(tmp_path / "results"), "--out", str(site)]) == 0
    text = (site / "filters.md").read_text()
    assert text.startswith("# Metadata filters: query latency by selectivity")
    assert "### filters-full" in text and "### filters-smoke" not in text


def test_rerank_stream_bench_routes_smoke(tmp_path):
    """scripts/rerank_stream_bench.py --routes-only on the sample corpus with the hashing
    embedder: it builds the store, serves it, checks that Retrieve returns what POST /query does
    for each question, streams through boto3's client, and writes its record."""
    import subprocess
    import sys

    pytest.importorskip("aws_lambda_powertools")
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "routes.json"
    done = subprocess.run([sys.executable, str(root / "scripts" / "rerank_stream_bench.py"), "--routes-only",
                           "--repeats", "1", "--questions", "2", "--embedder", "hash", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["command"].startswith("python scripts/rerank_stream_bench.py --routes-only")
    assert result["run"]["commit"] and "rerank_median_ms" not in result
    routes = result["routes"]
    assert routes["embedder"] == "hash" and routes["questions"] == 2
    for mode in ("dense", "hybrid"):
        o = routes[f"overhead_{mode}"]
        assert o["query"]["n"] == o["retrieve"]["n"] == 2 and o["ratio_median"] > 0
    stream = routes["stream"]
    assert {"first_output_event", "last_event", "whole_retrieve_and_generate"} <= set(stream)
    assert stream["first_output_event"]["median_ms"] <= stream["last_event"]["median_ms"]


def test_access_smoke(tiny, tmp_path):
    """bench access: reader groups on the tiny corpus; every figure is there, and the split is
    deterministic (one group, or two for a shared document)."""
    from eragraph.bench import access

    out = tmp_path / "access.json"
    assert access.main(["--data", str(tiny[0].parent), "--embedder", "hash", "--groups", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["groups"]) == {"group:g0", "group:g1"}
    assert result["summaries_partitioned"] > 0 and result["summaries_flat"] > 0
    assert result["insert_summarize_calls_flat"] >= 0 and result["insert_summarize_calls_partitioned"] >= 0
    assert access.group_of("x", 4, 0.0) == access.group_of("x", 4, 0.0) and len(access.group_of("x", 4, 1.0)) == 2
    for diff in (d for g in result["groups"].values() for d in g["questions_differing"]):
        assert diff["found_view"]["found"] != diff["found_alone"]["found"]
        assert all(len(row) == 3 and row[2] <= row[1] for row in diff["found_view"]["results"])
    one = tmp_path / "one.json"  # one group: its caller against its alone store, no flat store
    assert access.main(["--data", str(tiny[0].parent), "--embedder", "hash", "--groups", "2", "--only", "g1",
                        "--out", str(one)]) == 0
    single = json.loads(one.read_text())
    assert set(single["groups"]) == {"group:g1"} and "summaries_flat" not in single
    for figure in ("recall_alone", "recall_partitioned_view", "summaries_in_results"):  # its partitions cut alike
        assert single["groups"]["group:g1"][figure] == result["groups"]["group:g1"][figure], figure


def test_access_stores_share_ner_and_embeddings():
    """bench access: a later store of the run extracts nothing the first did (its chunks' NER and
    entity names come from the first store's extractor and embedder), and holds the same entities."""
    from eragraph.bench import access
    from eragraph.config import Settings
    from eragraph.services.ingest import SourceDoc

    docs = [SourceDoc(source=f"c/d{i}", doc_id=f"d{i}", title=f"t{i}",
                      text=f"Marie Curie met Pierre Curie in Paris in year {i}. Radium glowed in the dark.")
            for i in range(3)]
    first = access.build(Settings(embedder="hash"), docs)
    shared = first.entities.extractor
    calls: list[str] = []
    inner = shared.inner
    shared.inner = type("Counting", (), {"extract": lambda self, texts: (calls.extend(texts), inner.extract(texts))[1]})()
    second = access.build(Settings(embedder="hash"), docs[:2], first)
    assert calls == [], "a chunk extracted again"
    assert second.embedder is first.embedder and second.entities.embedder is first.embedder
    assert second.entities.store.frequencies(["Marie Curie", "marie curie"])  # the entities are there
    shared.extract(["A new line by Ada Lovelace."])
    assert calls == ["A new line by Ada Lovelace."]


def test_access_embed_cache_file_makes_a_rerun_embed_nothing(tmp_path):
    """bench access --embed-cache: the first store's embeddings kept in a file; a store built
    again from it (a rerun) sends no text to the model, and is built the same."""
    from eragraph.bench import access
    from eragraph.config import Settings
    from eragraph.services.ingest import SourceDoc

    docs = [SourceDoc(source=f"c/d{i}", doc_id=f"d{i}", title=f"t{i}",
                      text=f"Ada Lovelace wrote notes on the engine in year {i}. The engine computed numbers.")
            for i in range(8)]
    cache = str(tmp_path / "embeddings.sqlite")
    first = access.build(Settings(embedder="hash", s_min=2, s_max=3), docs, cache_file=cache)
    assert first.embedder.embedded > 0 and first.entities.embedder is first.embedder
    again = access.build(Settings(embedder="hash", s_min=2, s_max=3), docs, cache_file=cache)
    assert again.embedder.embedded == 0 and again.embedder.hits > 0
    assert access.summaries(again) == access.summaries(first) > 0


def test_reconcile_race_fuzz_smoke():
    """scripts/reconcile_race_fuzz.py on a few seeds of each store: the consumer threads drain
    the bus and the invariants are read (its rates are in docs/reliability.md; breakage is rare
    and timing-dependent, so none is asserted here)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    for store in ("memory", "sqlite"):
        done = subprocess.run([sys.executable, str(root / "scripts" / "reconcile_race_fuzz.py"), "--seeds", "0", "3",
                               "--store", store], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["store"] == store and summary["check"] and summary["runs"] == 6
