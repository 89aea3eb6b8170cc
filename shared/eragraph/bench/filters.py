"""`eragraph bench filters`: what a metadata filter costs a query, by its selectivity.

A synthetic corpus of one-chunk documents (bench/scale's words), each with the metadata
``{"bucket": i % 100}``, is built on the local profile with `eragraph ingest` (ingest + drain),
the hashing embedder unless ``--embedder`` says otherwise. Then, per mode, warm latency p50/p95
of the same questions unfiltered and under ``bucket < s`` for each selectivity s in
``--selectivities`` (percent of the documents allowed), the question vectors computed before the
clock starts. Each filtered answer is checked against the exact top-k of the allowed leaves
(recall@k of the dense side; the result must hold only allowed leaves)."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import add_common_options, close_engine, finish, percentile
from .scale import Precomputed, build_and_open, model_settings, questions, synthetic_rows

DEFAULT_CHUNKS = 100_000
SMOKE_CHUNKS = 400
MODES = ("dense", "collapsed", "bm25")
BUCKETS = 100


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("filters", help="filtered query latency against unfiltered, by selectivity",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help=f"store size (default {DEFAULT_CHUNKS})")
    p.add_argument("--selectivities", default="1,10,50", help="percent of documents a filter allows")
    p.add_argument("--queries", type=int, default=100, help="timed questions per mode and filter")
    p.add_argument("--smoke", action="store_true", help=f"{SMOKE_CHUNKS} chunks, 10 questions; fast")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--batch-docs", type=int, default=256)
    p.add_argument("--store", help="working directory (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the built store and corpus")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def write_corpus(path: Path, n: int, seed: int) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i, row in enumerate(synthetic_rows(n, seed)):
            fh.write(json.dumps({**row, "metadata": {"bucket": i % BUCKETS}}) + "\n")
    return path


def bucket_filter(percent: int) -> dict | None:
    return None if percent >= BUCKETS else {"lessThan": {"key": "bucket", "value": percent}}


def timed(engine: Any, texts: list[str], mode: str, where: dict | None, k: int) -> tuple[list[float], list]:
    from ..services.query import query

    query(engine, texts[0], mode=mode, k=k, where=where)  # warm-up
    ms, answers = [], []
    for text in texts:
        started = time.perf_counter()
        response = query(engine, text, mode=mode, k=k, where=where)
        ms.append((time.perf_counter() - started) * 1000.0)
        answers.append(response.results)
    return ms, answers


def exact_dense(engine: Any, vector: np.ndarray, allowed_docs: set[str], ids: list[str], matrix: np.ndarray,
                docs: list[str], k: int) -> set[str]:
    scores = matrix @ vector
    mask = np.fromiter((d in allowed_docs for d in docs), dtype=bool, count=len(docs))
    scores = np.where(mask, scores, -np.inf)
    top = np.argsort(-scores, kind="stable")[:k]
    return {ids[i] for i in top if np.isfinite(scores[i])}


def measure(engine: Any, texts: list[str], selectivities: list[int], k: int = 5) -> dict:
    leaves = sorted(r.node_id for r in engine.graph.layer_refs(0))
    nodes = engine.graph.get_nodes(leaves)
    vecs = engine.vectors.get_vectors(leaves)
    matrix = np.stack([vecs[i] for i in leaves])
    doc_of = [nodes[i].doc_id for i in leaves]
    bucket_of = {d.doc_id: d.metadata.get("bucket") for d in engine.graph.list_documents()}
    inner = engine.embedder
    engine.embedder = Precomputed(inner, texts)
    out: dict[str, Any] = {}
    try:
        for mode in MODES:
            if mode == "bm25" and engine.lexical is None:
                continue
            rows = {}
            for percent in [100] + selectivities:
                where = bucket_filter(percent)
                ms, answers = timed(engine, texts, mode, where, k)
                row: dict[str, Any] = {"n": len(ms), "latency_ms_p50": round(percentile(ms, 50), 3),
                                       "latency_ms_p95": round(percentile(ms, 95), 3)}
                allowed = {d for d, b in bucket_of.items() if isinstance(b, int) and b < percent}
                if where is not None:
                    row["leaks"] = sum(1 for results in answers for r in results if r.doc_id not in allowed)
                if mode == "dense":  # unfiltered too: what the index itself gives up against exact
                    recalls = []
                    for text, results in zip(texts, answers):
                        want = exact_dense(engine, engine.embedder.embed([text])[0], allowed, leaves, matrix,
                                           doc_of, k)
                        recalls.append(len(want & {r.id for r in results}) / max(len(want), 1))
                    row["recall_at_k"] = round(float(np.mean(recalls)), 4)
                rows["unfiltered" if where is None else f"{percent}%"] = row
            base = rows["unfiltered"]["latency_ms_p95"]
            for name, row in rows.items():
                row["p95_vs_unfiltered"] = round(row["latency_ms_p95"] / base, 2) if base else None
            out[mode] = rows
    finally:
        engine.embedder = inner
    return out


def run(args: Any) -> dict:
    n = SMOKE_CHUNKS if args.smoke else args.chunks
    n_questions = 10 if args.smoke else args.queries
    selectivities = [int(s) for s in str(args.selectivities).split(",") if s.strip()]
    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="eragraph-filters-"))
    work.mkdir(parents=True, exist_ok=True)
    settings = model_settings(args)
    corpus = write_corpus(work / f"corpus-{n}.jsonl", n, args.seed)
    engine, build = build_and_open(work / f"store-{n}", corpus, args, settings)
    try:
        sizes = engine.graph.layer_sizes()
        shape = engine.vectors.shape() if hasattr(engine.vectors, "shape") else None
        result = {"benchmark": "filters", "smoke": bool(args.smoke), "embedder": settings.embedder,
                  "chunks": sizes.get(0, 0),
                  "layers": {str(k): v for k, v in sorted(sizes.items())}, "vector_index_shape": shape,
                  "build_seconds": build["service_seconds"], "filter": "bucket < s (bucket = document number % 100)",
                  "note": "warm queries on the local profile, question vectors computed before the clock; "
                          "collapsed under a filter searches the allowed leaves only (no summaries)",
                  "modes": measure(engine, questions(n_questions, args.seed), selectivities)}
    finally:
        close_engine(engine)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return finish(result, args, "filters")
