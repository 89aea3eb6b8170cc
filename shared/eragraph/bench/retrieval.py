"""`eragraph bench retrieval`: Recall@k and query latency of every retrieval mode on a QA corpus.

    eragraph bench retrieval --corpus ../shared/data/musique/corpus.jsonl \\
        --questions ../shared/data/musique/questions.jsonl \\
        --modes dense,bm25,hybrid,tri_graph,fusion,auto --k 2,5 --store stores/musique [--json]

Corpus lines {id, title, text}: one document per line whose id is the line's id and whose text
is ``title + "\\n" + text`` (the title names the passage's subject -- often the bridge entity
of a multi-hop question -- and HippoRAG/LinearRAG index it the same way). An existing store is
reused (unchanged documents are skipped), then the message queue is drained.

Recall@k (the HippoRAG definition): the fraction of a question's ``supporting_ids`` whose
document appears among the documents of the first k results, averaged over questions. Only
leaf chunks credit their document; ``recall@k_with_summaries`` also lets a summary node credit
every leaf document beneath it (reported separately, it rewards vague summaries). Latency is
the wall time of ``services.query.query`` (query embedding included) after one warm-up query
per mode (model load, matrix snapshot), in ms. Each question is embedded once, before any mode
runs (``question_embedding_ms_p50/p95``, timed on its own), and every mode is given that vector:
a mode's latency is its own work, the same for the first mode run as for the last, so the
modes' latencies compare (``bm25`` never embeds). ``bm25`` runs the store's lexical index (SQLite
FTS5) like every other mode, through ``query``. For ``fusion`` and ``auto`` the row also has the
share of each route taken and the router's own latency (features and score; p50/p95 ms).
Each mode's row also keeps every question's recall (``per_question``: one list per measure, in
the order of the result's ``question_ids``), so two runs on the same questions compare question
by question (``eragraph bench report`` pairs NAME-before with NAME-after and bootstraps the
paired difference).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..services.modes import modes_of
from .common import add_common_options, bench_settings, finish, load_corpus, load_questions, mean, percentile

# every registered mode but the parameter variants of another (detailed, summarized: collapsed's p)
DEFAULT_MODES = ",".join(modes_of(variants=False))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("retrieval", help="Recall@k and latency of retrieval modes on a QA corpus",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True, help="corpus JSONL ({id, title, text})")
    p.add_argument("--questions", required=True, help="questions JSONL ({question, supporting_ids, question_type})")
    p.add_argument("--modes", default=DEFAULT_MODES, help=f"comma-separated modes (default {DEFAULT_MODES})")
    p.add_argument("--k", default="2,5", help="comma-separated cut-offs (default 2,5)")
    p.add_argument("--store", required=True, help="store directory (reused when it exists)")
    p.add_argument("--limit", type=int, help="use at most N questions")
    p.add_argument("--corpus-limit", type=int, help="ingest only the first N corpus lines")
    add_common_options(p)
    return p


def leaf_docs(engine: Any, result: Any, cache: dict) -> list[str]:
    """Documents a result covers: its own for a chunk, every leaf's beneath a summary."""
    if result.layer == 0:
        return [result.doc_id]
    if result.id in cache:
        return cache[result.id]
    out: list[str] = []
    frontier = list(result.children)
    while frontier:
        nodes = engine.graph.get_nodes(frontier)
        frontier = []
        for n in nodes.values():
            if n.layer == 0:
                out.append(n.doc_id)
            else:
                frontier += list(n.children)
    cache[result.id] = list(dict.fromkeys(out))
    return cache[result.id]


def recall(docs: list[str], support: set[str], k_docs: int | None = None) -> float:
    seen = list(dict.fromkeys(d for d in docs if d))
    if k_docs is not None:
        seen = seen[:k_docs]
    return len(support & set(seen)) / len(support)


def embed_questions(engine: Any, questions: list[dict]) -> tuple[list[float], list[Any]]:
    """Each question's embedding, made once and timed one at a time as a query would (after one
    warm-up call that loads the model): (milliseconds per question, vectors)."""
    if not questions:
        return [], []
    engine.embedder.embed([questions[0]["question"] + " (warm-up)"])
    times, vectors = [], []
    for q in questions:
        t0 = time.perf_counter()
        vectors.append(engine.embedder.embed([q["question"]])[0])
        times.append((time.perf_counter() - t0) * 1000.0)
    return times, vectors


def run(args: Any) -> dict:
    from ..bootstrap import build_engine
    from ..services.ingest import ingest
    from ..services.query import available_modes, query
    from ..services.resummarize import drain, requeue_dirty
    from .common import progress

    corpus = Path(args.corpus)
    ks = sorted({int(x) for x in str(args.k).split(",") if x.strip()})
    modes = [m.strip() for m in str(args.modes).split(",") if m.strip()]
    show = not getattr(args, "no_progress", False)
    settings = bench_settings(args)
    profile = getattr(args, "profile", "local")
    engine = build_engine(profile, args.store, settings)
    unknown = [m for m in modes if m not in available_modes(engine)]
    if unknown:
        raise ValueError(f"unknown modes {unknown}; available: {available_modes(engine)}")

    docs = load_corpus(corpus, getattr(args, "corpus_limit", None))
    started = time.perf_counter()
    requeue_dirty(engine)
    added = unchanged = chunks = 0
    bar = progress(len(docs), "ingest", show)
    for start in range(0, len(docs), 256):
        report = ingest(engine, docs[start:start + 256])
        added += report.documents_added + report.documents_replaced
        unchanged += report.documents_unchanged
        chunks += report.chunks_added
        bar.update(len(docs[start:start + 256]))
    bar.close()
    drained = drain(engine)
    ingest_seconds = time.perf_counter() - started

    questions = load_questions(args.questions, getattr(args, "limit", None), corpus_ids=[d.doc_id for d in docs])
    kmax = max(ks)
    embed_ms, vectors = embed_questions(engine, questions) if any(m != "bm25" for m in modes) else ([], [])
    summary_cache: dict = {}
    out_modes: dict[str, dict] = {}
    for mode in modes:
        given = vectors if mode != "bm25" else []  # bm25 never embeds
        if questions:
            query(engine, questions[0]["question"], mode=mode, k=kmax,
                  vector=given[0] if given else None)  # warm-up, not timed
        routes: dict[str, int] = {}
        router_ms: list[float] = []
        per_k: dict[str, list[float]] = {}
        by_type: dict[str, dict[str, list[float]]] = {}
        latencies: list[float] = []
        bar = progress(len(questions), mode, show)
        for i, q in enumerate(questions):
            support = set(q["supporting_ids"])
            t0 = time.perf_counter()
            response = query(engine, q["question"], mode=mode, k=kmax,
                             vector=given[i] if given else None)
            latencies.append((time.perf_counter() - t0) * 1000.0)
            results = response.results
            routes[response.route] = routes.get(response.route, 0) + 1
            if response.router_ms is not None:
                router_ms.append(response.router_ms)
            covered = [leaf_docs(engine, r, summary_cache) for r in results]
            leaves = [[r.doc_id] if r.layer == 0 else [] for r in results]
            qtype = str(q.get("question_type") or q.get("type") or "all")
            for k in ks:
                r_leaf = recall([d for docs_ in leaves[:k] for d in docs_], support)
                r_sum = recall([d for docs_ in covered[:k] for d in docs_], support)
                for key, val in ((f"recall@{k}", r_leaf), (f"recall@{k}_with_summaries", r_sum)):
                    per_k.setdefault(key, []).append(val)
                    by_type.setdefault(qtype, {}).setdefault(key, []).append(val)
            bar.update(1)
        bar.close()
        row: dict[str, Any] = {key: round(mean(vals), 4) for key, vals in per_k.items()}
        row["per_question"] = {key: [round(v, 4) for v in vals] for key, vals in per_k.items()}
        if latencies:
            row["latency_ms_p50"] = round(percentile(latencies, 50), 2)
            row["latency_ms_p95"] = round(percentile(latencies, 95), 2)
        if router_ms:
            row["route_shares"] = {r: round(n / len(questions), 4) for r, n in sorted(routes.items())}
            row["router_ms_p50"] = round(percentile(router_ms, 50), 3)
            row["router_ms_p95"] = round(percentile(router_ms, 95), 3)
        row["by_type"] = {t: {"n": len(next(iter(v.values()))), **{key: round(mean(vals), 4) for key, vals in v.items()}}
                          for t, v in sorted(by_type.items())}
        out_modes[mode] = row
    result = {
        "modes": out_modes,
        "corpus": str(args.corpus),
        "questions": len(questions),
        "question_ids": [str(q.get("id", i)) for i, q in enumerate(questions)],
        "k": ks,
        "question_embedding_ms_p50": round(percentile(embed_ms, 50), 2) if embed_ms else None,
        "question_embedding_ms_p95": round(percentile(embed_ms, 95), 2) if embed_ms else None,
        "latency_method": "each question embedded once before any mode (question_embedding_ms_*); "
                          "mode latencies exclude it",
        "documents": len(docs),
        "ingest": {"documents_added": added, "documents_unchanged": unchanged, "chunks_added": chunks,
                   "segments_resummarized": getattr(drained, "segments_resummarized", None),
                   "seconds": round(ingest_seconds, 1)},
        "entities": engine.entities.store.entity_count() if engine.entities is not None else None,
        "embedder": engine.embedder.identity,
        "ner": engine.settings.entity_extractor(),
    }
    if not getattr(args, "json", False):
        print(render(result), file=sys.stderr)
    return finish(result, args, "retrieval")


def render(result: dict) -> str:
    ks = result["k"]
    head = ["mode"] + [f"R@{k}" for k in ks] + [f"R@{k}+sum" for k in ks] + ["p50 ms", "p95 ms"]
    lines = [f"{result['corpus']}: {result['questions']} questions, {result['documents']} documents",
             f"question embedding (once per question, before any mode; not in the modes' times): "
             f"p50 {result.get('question_embedding_ms_p50')} ms, p95 {result.get('question_embedding_ms_p95')} ms",
             "  ".join(f"{h:>12}" for h in head)]
    for mode, row in result["modes"].items():
        cells = [mode] + [row.get(f"recall@{k}", 0) for k in ks] + [row.get(f"recall@{k}_with_summaries", 0) for k in ks]
        cells += [row.get("latency_ms_p50", 0), row.get("latency_ms_p95", 0)]
        lines.append("  ".join(f"{c:>12}" if isinstance(c, str) else f"{c:>12.3f}" for c in cells))
        if row.get("route_shares"):
            shares = ", ".join(f"{r} {v:.0%}" for r, v in row["route_shares"].items())
            lines.append(f"{'':>12}  routes: {shares}; router p50 {row['router_ms_p50']:.1f} ms, "
                         f"p95 {row['router_ms_p95']:.1f} ms")
    types = sorted({t for row in result["modes"].values() for t in row.get("by_type", {})})
    if len(types) > 1:
        lines.append("by question type (R@%d):" % ks[-1])
        for mode, row in result["modes"].items():
            parts = [f"{t}={row['by_type'][t].get(f'recall@{ks[-1]}', 0):.3f} (n={row['by_type'][t]['n']})"
                     for t in types if t in row["by_type"]]
            lines.append(f"  {mode:>12}: " + ", ".join(parts))
    return "\n".join(lines)
