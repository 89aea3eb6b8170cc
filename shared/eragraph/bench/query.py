"""`eragraph bench query`: p50/p95/p99 latency per retrieval mode on a built store, warm.

The store is opened once (models loaded), one warm-up query per mode runs untimed, then every
question is asked in every mode through the query service (query embedding, search, result
assembly; no answer generation). With ``--corpus`` and an empty ``--store`` the store is
built first (untimed)."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from ..services.ingest import ingest
from ..services.query import available_modes, query
from ..services.resummarize import drain
from .common import (add_common_options, bench_settings, close_engine, finish, load_corpus, mean, open_engine,
                     percentile, progress, read_jsonl)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("query", help="warm query latency per mode (p50/p95/p99)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--store", required=True, help="a built store directory (or where to build one)")
    p.add_argument("--corpus", help="corpus JSONL to build the store from when it is empty")
    p.add_argument("--questions", required=True, help="JSONL with a 'question' (or 'query'/'text') field")
    p.add_argument("--modes", help="comma-separated modes (default: every available mode), or `eragraph bench "
                                   "levers` variants with settings (hop, paths:path_depth=2, auto:hop_entities=2)")
    p.add_argument("--k", type=int, default=5, help="results per query")
    p.add_argument("--limit", type=int, help="use only the first N corpus documents when building")
    p.add_argument("--question-limit", type=int, default=300, help="at most N questions per mode")
    p.add_argument("--no-entities", action="store_true",
                   help="build without the entity graph and time only the core modes (collapsed, detailed, summarized, dense)")
    p.add_argument("--repeat", type=int, default=1, help="ask every question this many times")
    p.add_argument("--interleave", type=int, metavar="ROUNDS", default=0,
                   help="compare modes under the same load: every question embedded once (untimed), then "
                        "ROUNDS rounds, each asking every question in every mode in turn; per mode, each "
                        "round's p50/p95 of wall and CPU time and their medians over the rounds (search "
                        "time, no embedding)")
    p.add_argument("--embedding-cache", action="store_true",
                   help="with --interleave: keep the embedding cache on and ask every question in every mode once, "
                        "untimed, before the rounds, so the names a graph mode embeds are cached: the rounds time "
                        "the search alone (what a graph mode's own work adds, without the name embedding's "
                        "variance under load)")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def question_texts(path: str, limit: int | None) -> list[str]:
    out = []
    for row in read_jsonl(path):
        text = row.get("question") or row.get("query") or row.get("text")
        if text:
            out.append(text)
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise ValueError(f"{path}: no questions")
    return out


def summarize_latencies(ms: list[float]) -> dict:
    return {"n": len(ms), "latency_ms_p50": round(percentile(ms, 50), 3),
            "latency_ms_p95": round(percentile(ms, 95), 3), "latency_ms_p99": round(percentile(ms, 99), 3),
            "latency_ms_mean": round(mean(ms), 3), "latency_ms_max": round(max(ms), 3)}


def variant(shipped: Any, name: str) -> tuple[str, Any]:
    """The mode a ``--modes`` entry runs and the settings it runs with: a mode as given with the
    store's settings, or a levers variant (``hop``, ``paths:path_depth=2``) with its settings set."""
    from .levers import variant_mode

    mode, graph = variant_mode(name, shipped.graph_retrieval)
    return mode, (shipped if graph is shipped.graph_retrieval else dataclasses.replace(shipped, graph_retrieval=graph))


def weights_record(settings) -> dict:
    """The router weights the run's ``auto`` and ``fusion`` used when they are not the shipped
    file (the ``router_weights`` setting, ERAGRAPH_ROUTER_WEIGHTS): such a run is a comparison."""
    return {"router_weights": settings.router_weights} if settings.router_weights else {}


def interleaved(engine: Any, modes: list[str], texts: list[str], k: int, rounds: int, show: bool,
                warm: bool = False) -> dict:
    """Per mode: each round's latencies summarized, and the medians of p50/p95 over the rounds;
    the modes take turns on every question, so a change of load falls on all of them. Also per
    mode the p50/p95 over questions of each question's fastest round (``fastest_*``: a question's
    own cost with the least of the machine's load on it; with one round, that round's). ``warm``:
    every question asked in every mode once first, untimed (the embedding cache then holds what
    the modes embed)."""
    vectors = engine.embedder.embed(texts)
    shipped = engine.settings
    runs = {m: variant(shipped, m) for m in modes}
    if warm:
        for text, vector in zip(texts, vectors):
            for mode in modes:
                run_mode, engine.settings = runs[mode]
                query(engine, text, mode=run_mode, k=k, vector=vector)
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    fastest = {m: {"wall": [float("inf")] * len(texts), "cpu": [float("inf")] * len(texts)} for m in modes}
    with progress(len(modes) * len(texts) * rounds, "queries", show) as bar:
        for _ in range(rounds):
            ms: dict[str, list[float]] = {m: [] for m in modes}
            cpu: dict[str, list[float]] = {m: [] for m in modes}
            for text, vector in zip(texts, vectors):
                for mode in modes:
                    run_mode, engine.settings = runs[mode]
                    started, started_cpu = time.perf_counter(), time.process_time()
                    query(engine, text, mode=run_mode, k=k, vector=vector)
                    ms[mode].append((time.perf_counter() - started) * 1000.0)
                    cpu[mode].append((time.process_time() - started_cpu) * 1000.0)
                    bar.update(1)
            for mode in modes:
                for i, (w, c) in enumerate(zip(ms[mode], cpu[mode])):
                    fastest[mode]["wall"][i] = min(fastest[mode]["wall"][i], w)
                    fastest[mode]["cpu"][i] = min(fastest[mode]["cpu"][i], c)
                rows[mode].append({**summarize_latencies(ms[mode]), "cpu_ms_p50": round(percentile(cpu[mode], 50), 3),
                                   "cpu_ms_p95": round(percentile(cpu[mode], 95), 3)})
    engine.settings = shipped

    def median(r: list[dict], key: str) -> float:
        return round(percentile([x[key] for x in r], 50), 3)

    def fast(m: str) -> dict:
        return {f"fastest_{name}_ms_p{q}": round(percentile(fastest[m][kind], q), 3)
                for name, kind in (("latency", "wall"), ("cpu", "cpu")) for q in (50, 95)} if texts and rounds else {}

    return {m: {"rounds": r, **{f"{key}_median": median(r, key)
                               for key in ("latency_ms_p50", "latency_ms_p95", "cpu_ms_p50", "cpu_ms_p95")},
                **fast(m)}
            for m, r in rows.items()}


def run(args: Any) -> dict:
    # the embedding cache off: otherwise every mode after the first would find the question's
    # vector cached and skip the query embedding that a fresh question pays
    warm = bool(getattr(args, "embedding_cache", False)) and getattr(args, "interleave", 0) > 0
    settings = bench_settings(args, embed_cache=warm)
    store = Path(args.store)
    engine = open_engine(args.profile, store, settings)
    built = None
    if args.no_entities:
        engine.ingest_hooks, engine.remove_hooks = [], []
        engine.entities = None  # the graph modes need it: none are available
    if args.corpus and not engine.graph.layer_sizes().get(0):
        docs = load_corpus(args.corpus, limit=args.limit)
        started = time.perf_counter()
        with progress(len(docs), "build store", not args.no_progress) as bar:
            ingest(engine, docs, progress=bar.update)
        drain(engine)
        built = round(time.perf_counter() - started, 3)
    sizes = engine.graph.layer_sizes()
    if not sizes.get(0):
        raise ValueError(f"{store}: the store is empty (pass --corpus to build it)")
    modes = args.modes.split(",") if args.modes else available_modes(engine)
    texts = question_texts(args.questions, args.question_limit)
    shipped = engine.settings
    for mode in modes:  # warm-up: model load, caches, lazy indexes
        run_mode, engine.settings = variant(shipped, mode)
        query(engine, texts[0], mode=run_mode, k=args.k)
    engine.settings = shipped
    if getattr(args, "interleave", 0) > 0:
        per_mode = interleaved(engine, modes, texts, args.k, args.interleave, not args.no_progress, warm)
        close_engine(engine)
        return finish({"store": str(store), "layers": {str(k): v for k, v in sorted(sizes.items())},
                       "nodes": sum(sizes.values()), "embedder": settings.embedder, "profile": args.profile,
                       "k": args.k, "questions": len(texts), "rounds": args.interleave, "embedding_cache": warm,
                       **weights_record(settings),
                       "measure": "wall time (and the process's CPU time, less sensitive to other processes' "
                                  "load) of query() per question given its embedding (made once, untimed), the "
                                  "modes taking turns question by question in each round; per mode the median "
                                  "over rounds of each round's p50/p95" + (
                                      "; the embedding cache on and every question asked in every mode once "
                                      "before the rounds, so the names a mode embeds come from the cache: "
                                      "search time alone" if warm else ""), "modes": per_mode}, args, "query")
    per_mode = {}
    with progress(len(modes) * len(texts) * args.repeat, "queries", not args.no_progress) as bar:
        for mode in modes:
            ms = []
            run_mode, engine.settings = variant(shipped, mode)
            for _ in range(args.repeat):
                for text in texts:
                    started = time.perf_counter()
                    query(engine, text, mode=run_mode, k=args.k)
                    ms.append((time.perf_counter() - started) * 1000.0)
                    bar.update(1)
            per_mode[mode] = summarize_latencies(ms)
    engine.settings = shipped
    close_engine(engine)
    result = {"store": str(store), "layers": {str(k): v for k, v in sorted(sizes.items())},
              "nodes": sum(sizes.values()), "embedder": settings.embedder, "profile": args.profile,
              "k": args.k, "questions": len(texts), "build_seconds": built, **weights_record(settings),
              "measure": "wall time of query() per question (embedding the question with the embedding "
                         "cache off, search, result assembly), warm: one untimed query per mode first, "
                         "model load excluded",
              "modes": per_mode}
    return finish(result, args, "query")
