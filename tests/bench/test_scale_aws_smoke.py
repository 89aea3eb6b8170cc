"""`eragraph bench scale --aws-build load` at a tiny size: the local build is loaded into the
moto store through services/portable, then one insert, one delete, a query per mode and a warm
/stats are counted (DynamoDB, OpenSearch through the repository's fake, SQS); the scale page
shows those columns and the AWS targets."""

from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("moto")

from eragraph.bench import report  # noqa: E402
from eragraph.bench import scale as bench_scale  # noqa: E402
from eragraph.bench.counting import search_kind  # noqa: E402

CHUNKS = 120


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="eragraph bench")
    bench_scale.add_parser(parser.add_subparsers(dest="name"))
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    return args


def test_load_built_aws_run_counts_every_service(tmp_path):
    out = tmp_path / "scale-moto-load.json"
    res = bench_scale.run(parse(["scale", "--sizes", "", "--aws-sizes", str(CHUNKS), "--aws-build", "load",
                                 "--repeats", "2", "--no-progress", "--store", str(tmp_path / "work"),
                                 "--out", str(out)]))
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    [aws] = res["aws"]
    build = aws["build"]
    assert build["how"] == "load" and build["load"]["seconds"] > 0
    assert build["load"]["records"]["document"] == CHUNKS == build["local_build"]["chunks_added"]
    assert aws["chunks"] == CHUNKS  # the probes inserted and deleted again
    assert aws["opensearch"].startswith("the repository's OpenSearch fake")
    for op in ("insert", "delete"):
        row = aws[op]
        assert row["dynamodb_median"]["requests"] > 0
        assert row["opensearch_median"]["by_operation"].get("bulk", 0) >= 1
        assert row["opensearch_median"]["by_index"].get("eragraph-nodes", 0) >= 1
        # the summarize messages: each one sent is received and deleted by the drain
        sqs = row["sqs_median"]
        assert sqs["messages_sent"] >= 1 and sqs["messages_received"] == sqs["messages_sent"]
    # as shipped (synonym weight 0) an insert keeps no synonymy edges: no search of the entity
    # names (an _msearch when they are kept, tests/unit/test_synonyms.py), no k-NN search
    inserted = aws["insert"]["opensearch_median"]
    assert "msearch" not in inserted["by_operation"] and "knn_search" not in inserted["by_operation"]
    assert {"collapsed", "dense", "tri_graph"} <= set(aws["query"])
    for mode, q in aws["query"].items():
        searches = q["opensearch_median"]["by_operation"]
        assert q["n"] == 2 and searches.get("knn_search", 0) + searches.get("lexical_search", 0) >= 1, mode
        assert q["dynamodb_median"]["requests"] > 0 and q["dynamodb_median"]["items_written"] == 0, mode
    assert aws["stats"]["dynamodb"]["requests"] >= 1
    # round trips: at least one, never more than the requests; the walk from memory reads no
    # entity partition per question once warm (its first question read the graph in)
    for q in aws["query"].values():
        d = q["dynamodb_median"]
        assert 1 <= d["round_trips"] <= d["requests"]
    walked = aws["query"]["tri_graph"]
    assert "Query" not in walked["dynamodb_median"]["by_operation"], walked["dynamodb_median"]
    assert {"fusion", "auto"} <= set(aws["query"])
    assert 1 <= aws["stats"]["dynamodb"]["round_trips"] <= aws["stats"]["dynamodb"]["requests"] <= 3
    # a cold query function's first walk: every chunk's record read without the snapshot; the
    # generation and one S3 object with it (nothing changed after it was written)
    cold = aws["cold_start"]
    assert cold["snapshot"]["chunks"] == CHUNKS and cold["snapshot"]["read"] == "everything"
    without, with_ = cold["without_snapshot"], cold["with_snapshot"]
    assert without["s3_get_object"] == 0 and with_["s3_get_object"] == 1
    assert without["dynamodb"]["items_read"] >= CHUNKS  # the layer-0 refs and their records
    assert with_["dynamodb"]["requests"] == walked["dynamodb_median"]["requests"] < without["dynamodb"]["requests"]

    lines = report.scale.section("span", res, tmp_path)
    text = "\n".join(lines)
    assert "| chunks | made by | local build s | moto build / load s | ms per chunk |" in text
    assert "OpenSearch by operation" in text and "SQS messages sent" in text and "`/stats`" in text
    labels = [row[0] for row in report.scale.targets("span", res)]
    assert f"AWS single-document insert ≤ 40 DynamoDB requests ({CHUNKS} chunks)" in labels
    assert f"/stats ≤ 3 DynamoDB requests ({CHUNKS} chunks, warm)" in labels
    assert f"AWS tri_graph ≤ 12 DynamoDB round trips a question ({CHUNKS} chunks, warm)" in labels
    assert "round trips" in text and "first question: requests" in text


def test_walk_targets_read_tri_graph_and_the_modes_that_walk_it():
    def q(requests: float, trips: float) -> dict:
        return {"dynamodb_median": {"requests": requests, "round_trips": trips}}

    run = {"chunks": 100000, "insert": {"dynamodb_median": {"requests": 40}},
           "query": {"tri_graph": q(70, 9), "dense": q(8, 8), "fusion": q(78, 17), "auto": q(79, 9)}}
    rows = {r[0]: r for r in report.scale.targets("x", {"aws": [run]})}
    trips = rows["AWS tri_graph ≤ 12 DynamoDB round trips a question (100,000 chunks, warm)"]
    assert trips[2] == "9" and "met" in trips[3]
    requests = rows["AWS tri_graph ≤ 60 DynamoDB requests a question (100,000 chunks, warm)"]
    assert "missed" in requests[3] and requests[4] == "1.2× the allowance"
    fusion = [r for name, r in rows.items() if name.startswith("AWS fusion")][0]
    auto = [r for name, r in rows.items() if name.startswith("AWS auto")][0]
    assert "met" in fusion[3] and "missed" in auto[3]


def test_aws_targets_compare_the_largest_size_with_the_smallest():
    def size(n: int, insert: float, stats: int) -> dict:
        return {"chunks": n, "insert": {"dynamodb_median": {"requests": insert}},
                "delete": {"dynamodb_median": {"requests": insert}}, "stats": {"dynamodb": {"requests": stats}}}

    rows = {r[0]: r for r in report.scale.targets("x", {"aws": [size(1000, 30, 2), size(100000, 39, 3)]})}
    assert "met" in rows["AWS single-document insert ≤ 40 DynamoDB requests (1,000 chunks)"][3]
    span = rows["AWS insert requests at the largest size within 1.5× of the smallest (1,000 → 100,000 chunks)"]
    assert span[2] == "1.30×" and "met" in span[3]
    wide = {r[0]: r for r in report.scale.targets("x", {"aws": [size(60, 30, 2), size(1000, 46, 3)]})}
    span = wide["AWS insert requests at the largest size within 1.5× of the smallest (60 → 1,000 chunks)"]
    assert span[2] == "1.53×" and "missed" in span[3]
    assert "met" in rows["/stats ≤ 3 DynamoDB requests (100,000 chunks, warm)"][3]
    rows = {r[0]: r for r in report.scale.targets("x", {"aws": [size(60, 470, 211)]})}
    assert "missed" in rows["AWS single-document insert ≤ 40 DynamoDB requests (60 chunks)"][3]
    assert rows["/stats ≤ 3 DynamoDB requests (60 chunks, warm)"][4] == "208 over"


def test_search_requests_are_told_apart_by_what_they_ask():
    assert search_kind({"size": 5, "query": {"knn": {"vector": {"vector": [0.0], "k": 5}}}}) == "knn_search"
    assert search_kind({"size": 5, "query": {"bool": {"must": [{"match": {"text": "x"}}]}}}) == "lexical_search"
    assert search_kind({"size": 0, "track_total_hits": True, "query": {"constant_score": {}}}) == "count_search"
    assert search_kind({"size": 1000, "query": {"bool": {"filter": []}}}) == "search"
