"""`eragraph bench load --smoke`: a tiny store served by a real `eragraph serve` process, client
threads in every phase (collapsed alone, beside tri_graph, mixed, beside a writer process), and
the query handler under moto; every request answered, the JSON carries each phase's figures per
mode, the writer's ingests, the server's memory over time, and the run record. No timing is
asserted (the figures are on the load benchmark's page, docs/benchmarks/load.md, from the full
run)."""

from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from eragraph.bench import load  # noqa: E402

PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="eragraph bench")
    load.add_parser(parser.add_subparsers(dest="name"))
    args = parser.parse_args(argv)
    args.argv = argv[1:]
    return args


def test_load_smoke_serve_and_lambda(tmp_path, monkeypatch):
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    out = tmp_path / "load.json"
    result = load.run(parse(["load", "--smoke", "--embedder", "hash", "--out", str(out)]))
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["command"].startswith("eragraph bench load --smoke") and result["run"]["machine"]["cores"]

    serve = result["serve"]
    assert [p["phase"] for p in serve["phases"]] == ["collapsed", "collapsed+tri_graph", "mixed", "collapsed+writer"]
    assert serve["store"]["chunks_added"] >= load.SMOKE["chunks"]
    for phase in serve["phases"]:
        assert phase["modes"], phase
        for mode, row in phase["modes"].items():
            assert row["errors"] == 0 and row["requests"] > 0 and row["per_second"] > 0, (phase["phase"], mode, row)
            assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert set(serve["phases"][2]["modes"]) == {"collapsed", "dense", "bm25", "tri_graph"}
    assert set(serve["phases"][1]["modes"]) == {"collapsed", "tri_graph"}
    writer = serve["phases"][3]["writer"]
    assert writer["ingests"] >= 1 and writer["documents_added"] > 0 and not writer["failures"]
    assert serve["memory_mb"]["max"] > 0 and len(serve["memory_mb"]["over_time"]) >= 2
    assert serve["checks"]["errors"] == 0 and set(serve["checks"]["targets_met"]) >= {
        "zero_errors", "collapsed_100_per_second", "collapsed_p99_alone_100ms", "collapsed_p99_writer_250ms",
        "collapsed_p95_within_2x_beside_tri_graph"}

    handler = result["lambda"]
    assert handler["errors"] == 0 and handler["modes_not_offered"] == ["bm25"]
    assert [p["phase"] for p in handler["phases"]] == ["collapsed", "mixed", "collapsed+writer"]
    assert set(handler["phases"][1]["modes"]) == {"collapsed", "dense", "tri_graph"}
    assert handler["phases"][2]["writer"]["documents_added"] > 0
    assert handler["memory_mb"]["max"] > 0
    for phase in handler["phases"]:
        assert phase["server_rss_mb"]["max"] > 0
        for row in phase["modes"].values():
            assert row["requests"] > 0 and all(q in row for q in PERCENTILES)


def test_load_against_target_serves_the_same_answers(tmp_path, monkeypatch):
    """``--target against``: this tree's `eragraph serve` and another source tree's (here a copy
    of this one's ``shared``), alternately; both answer every request, and over the same store
    they give the same answers: a query, a refusal of its body (422), a route of no table (404)."""
    import os
    import shutil
    import urllib.error
    import urllib.request
    from pathlib import Path

    other = tmp_path / "other"
    shutil.copytree(Path(load.__file__).resolve().parents[1], other / "eragraph",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    result = load.run(parse(["load", "--target", "against", "--against", str(other), "--smoke", "--rounds", "1",
                             "--embedder", "hash", "--store", str(tmp_path / "work"), "--out", str(tmp_path / "load.json")]))
    rounds = result["against"]["rounds"]
    assert [r["tree"] for r in rounds] == ["this tree", "against"]
    assert all(r["errors"] == 0 and r["requests"] > 0 for r in rounds), rounds
    assert result["against"]["trees"]["against"]["path"] == str(other.resolve())

    def ask(url: str, method: str, path: str, body: bytes | None) -> tuple[int, object]:
        request = urllib.request.Request(url + path, data=body, method=method,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    asked = [("POST", "/query", json.dumps({"query": "what happened", "mode": "collapsed", "k": 5}).encode()),
             ("POST", "/query", b'{"question": 3}'), ("GET", "/nowhere", None), ("GET", "/health", None)]
    answers = []
    for path in (None, str(other)):
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
        proc, url = load.start_server(tmp_path / "work" / "store", env, ("eragraph", "serve"))
        try:
            answers.append([ask(url, *a) for a in asked])
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    ours, theirs = answers
    assert [status for status, _ in ours] == [200, 422, 404, 200]
    # usage aside: the first server's embedding of the question is kept in the store's cache
    strip = lambda body: {k: v for k, v in body.items() if k not in ("seconds", "stages", "request_id", "usage")}  # noqa: E731
    assert strip(ours[0][1]) == strip(theirs[0][1]) and ours[1:] == theirs[1:]
