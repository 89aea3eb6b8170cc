"""`eragraph bench growth`: what it costs to keep a growing corpus current, incrementally
versus rebuilding from scratch after every step (EraRAG §V, Fig. 4-6).

The corpus is ordered by its own ``increment`` field when present (else file order); the first
``--initial`` fraction builds the base graph, the rest arrives in ``--steps`` equal steps. After
every step:

* incremental: the step's documents are ingested into the growing store and the queue is
  drained (re-partitioning and re-summarizing only the affected segments);
* rebuild: every document present so far is ingested into a FRESH store with the embedding
  cache off and drained, reusing nothing from earlier builds.

Costs come from the drain's ChangeReport (summarize calls, tokens in/out, segments
re-summarized per layer, summarize-only seconds); ``seconds`` is the wall time of the whole
ingest + drain, embedding included. Recall@5 of ``collapsed`` and ``dense`` is measured on both
graphs for the questions whose supporting documents are all present by then. The
single-document case adds one document to a copy of the half-built store versus rebuilding
the half corpus plus that document.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from ..bootstrap.profiles import keeps_store
from ..services.ingest import SourceDoc, ingest
from ..services.query import search, to_results
from ..services.resummarize import drain
from .common import (add_common_options, bench_settings, close_engine, finish, fresh_dir, load_corpus,
                     load_questions, mean, open_engine, order_by_increment, progress, recall_at_k,
                     result_doc_ids)

RECALL_MODES = ("collapsed", "dense")
RECALL_K = 5
OWN_DIRS = ("incremental", "rebuild-", "single-")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("growth", help="incremental growth vs. from-scratch rebuild, step by step",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True, help="corpus JSONL ({id, text, title?, increment?})")
    p.add_argument("--questions", help="questions JSONL ({question, supporting_ids}); omit to skip recall")
    p.add_argument("--initial", type=float, default=0.5, help="fraction of the corpus in the base build")
    p.add_argument("--steps", type=int, default=10, help="number of equal growth steps for the rest")
    p.add_argument("--store", required=True, help="working directory (its contents are replaced)")
    p.add_argument("--limit", type=int, help="use only the first N documents (after ordering)")
    p.add_argument("--question-limit", type=int, help="use at most N questions")
    p.add_argument("--rebuild-every", type=int, default=1,
                   help="rebuild only every Nth step (and the last); totals then cover those steps only")
    p.add_argument("--no-single", action="store_true", help="skip the single-document case")
    p.add_argument("--no-entities", action="store_true",
                   help="leave the entity graph out of both paths (EraRAG's graph only; much faster with spaCy)")
    p.add_argument("--keep-rebuilds", action="store_true", help="keep the rebuilt stores on disk")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def split_steps(docs: list[SourceDoc], initial: float, steps: int) -> tuple[list[SourceDoc], list[list[SourceDoc]]]:
    """(base, steps): the first round(initial * n) documents, then the rest in ``steps`` runs
    whose sizes differ by at most one (earlier steps take the remainder)."""
    if not 0.0 < initial < 1.0:
        raise ValueError("--initial must be within (0, 1)")
    if steps < 1:
        raise ValueError("--steps must be at least 1")
    n_base = max(1, round(initial * len(docs)))
    base, rest = docs[:n_base], docs[n_base:]
    if len(rest) < steps:
        raise ValueError(f"{len(rest)} documents cannot fill {steps} steps")
    size, extra = divmod(len(rest), steps)
    out, start = [], 0
    for i in range(steps):
        end = start + size + (1 if i < extra else 0)
        out.append(rest[start:end])
        start = end
    return base, out


def cost_of(report: Any, seconds: float, engine: Any) -> dict:
    return {
        "summarize_calls": report.cost.summarize_calls,
        "tokens_in": report.cost.tokens_in,
        "tokens_out": report.cost.tokens_out,
        "seconds": round(seconds, 3),
        "summarize_seconds": round(report.cost.summarize_seconds, 3),
        "segments_resummarized": {str(k): v for k, v in sorted(report.segments_resummarized.items())},
        "summaries_revised": {str(k): v for k, v in sorted(report.summaries_revised.items())},
        "summaries_carried": {str(k): v for k, v in sorted(report.summaries_carried.items())},
        "chunks": engine.graph.layer_sizes().get(0, 0),
        "layers": {str(k): v for k, v in sorted(engine.graph.layer_sizes().items())},
    }


def add_and_drain(engine: Any, docs: list[SourceDoc], show: bool, desc: str) -> dict:
    started = time.perf_counter()
    with progress(len(docs), desc, show) as bar:
        report = ingest(engine, docs, progress=bar.update, batch_docs=64)
    report.merge(drain(engine))
    seconds = time.perf_counter() - started
    if report.errors:
        raise RuntimeError(f"ingest errors: {report.errors[:3]}")
    return cost_of(report, seconds, engine)


def recall(engine: Any, questions: list[dict], vectors: dict[str, Any]) -> dict[str, float | None]:
    if not questions:
        return {mode: None for mode in RECALL_MODES}
    out = {}
    for mode in RECALL_MODES:
        scores = []
        for q in questions:
            ranked = search(engine, mode, vectors[q["id"]], RECALL_K, None, engine.settings.bias_p)
            scores.append(recall_at_k(result_doc_ids(to_results(engine, ranked)), q["supporting_ids"], RECALL_K))
        out[mode] = round(mean(scores), 4)
    return out


class Builder:
    """Fresh engines for one run: the growing store, rebuilt stores, copies."""

    def __init__(self, args: Any) -> None:
        self.profile = args.profile
        self.root = Path(args.store)
        if self.root.exists():
            foreign = [p.name for p in self.root.iterdir() if not p.name.startswith(OWN_DIRS)]
            if foreign:
                raise ValueError(f"{self.root} holds other files ({', '.join(sorted(foreign)[:3])}); "
                                 "give growth an empty or a previous growth directory")
        fresh_dir(self.root)
        self.settings = bench_settings(args)
        self.rebuild_settings = bench_settings(args, embed_cache=False)
        self.keep = args.keep_rebuilds
        self.no_entities = getattr(args, "no_entities", False)

    def _open(self, path: Path | None, settings: Any) -> Any:
        engine = open_engine(self.profile, path, settings)
        if self.no_entities:
            engine.ingest_hooks, engine.remove_hooks = [], []
        return engine

    def incremental(self) -> Any:
        return self._open(self.root / "incremental", self.settings)

    def rebuild(self, name: str) -> Any:
        path = self.root / name
        if keeps_store(self.profile):
            fresh_dir(path)
        return self._open(path, self.rebuild_settings)

    def copy_of(self, engine: Any, name: str, docs: list[SourceDoc]) -> Any:
        """A second store in the state of ``engine`` (which holds exactly ``docs``): a copy of
        the store directory, or for the memory profile the same documents replayed (untimed)."""
        if not keeps_store(self.profile):
            twin = self._open(None, self.settings)
            ingest(twin, docs)
            drain(twin)
            return twin
        engine.vectors.flush()
        close_engine(engine)
        target = self.root / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.root / "incremental", target)
        return self._open(target, self.settings)

    def discard(self, engine: Any, name: str) -> None:
        close_engine(engine)
        if keeps_store(self.profile) and not self.keep:
            shutil.rmtree(self.root / name, ignore_errors=True)


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def totals(steps: list[dict]) -> dict:
    measured = [s for s in steps if s.get("rebuild")]
    out: dict[str, Any] = {"steps": len(steps), "rebuild_steps": len(measured)}
    for path in ("incremental", "rebuild"):
        rows = [s[path] for s in measured]
        out[path] = {key: round(sum(r[key] for r in rows), 3) if key.endswith("seconds") else sum(r[key] for r in rows)
                     for key in ("summarize_calls", "tokens_in", "tokens_out", "seconds", "summarize_seconds")}
    inc, reb = out["incremental"], out["rebuild"]
    out["ratio_incremental_to_rebuild"] = {key: ratio(inc[key], reb[key]) for key in inc}
    if measured and len(measured) < len(steps):
        out["note"] = "totals cover only the steps that were rebuilt (--rebuild-every)"
    return out


def run(args: Any) -> dict:
    show = not getattr(args, "no_progress", False)
    docs = order_by_increment(load_corpus(args.corpus))
    if args.limit:
        docs = docs[: args.limit]
    base, steps = split_steps(docs, args.initial, args.steps)
    questions = load_questions(args.questions, corpus_ids={d.doc_id for d in docs}) if args.questions else []
    if args.question_limit:
        questions = questions[: args.question_limit]
    build = Builder(args)
    inc = build.incremental()
    vectors = {}
    if questions:
        embedded = inc.embedder.embed([q["question"] for q in questions])
        vectors = {q["id"]: embedded[i] for i, q in enumerate(questions)}

    def eligible(present: set[str]) -> list[dict]:
        return [q for q in questions if set(q["supporting_ids"]) <= present]

    present = {d.doc_id for d in base}
    initial = add_and_drain(inc, base, show, "base build")
    initial["documents"] = len(base)
    initial["questions"] = len(eligible(present))
    initial["recall@5"] = recall(inc, eligible(present), vectors)

    single = None
    if not args.no_single:
        newcomer = steps[0][0]
        clone = build.copy_of(inc, "single-incremental", base)
        single_inc = add_and_drain(clone, [newcomer], show, "single doc (incremental)")
        build.discard(clone, "single-incremental")
        fresh = build.rebuild("single-rebuild")
        single_reb = add_and_drain(fresh, base + [newcomer], show, "single doc (rebuild)")
        build.discard(fresh, "single-rebuild")
        single = {"document": newcomer.doc_id, "base_documents": len(base), "incremental": single_inc,
                  "rebuild": single_reb,
                  "rebuild_over_incremental": {key: ratio(single_reb[key], single_inc[key])
                                               for key in ("summarize_calls", "tokens_in", "tokens_out", "seconds")}}
        if keeps_store(args.profile):
            inc = build.incremental()

    rows = []
    so_far = list(base)
    for i, step_docs in enumerate(steps, start=1):
        so_far += step_docs
        present |= {d.doc_id for d in step_docs}
        qs = eligible(present)
        row: dict[str, Any] = {"step": i, "documents": len(so_far), "added": len(step_docs), "questions": len(qs)}
        row["incremental"] = add_and_drain(inc, step_docs, show, f"step {i} incremental")
        rec_inc = recall(inc, qs, vectors)
        rec_reb = None
        if i % max(1, args.rebuild_every) == 0 or i == len(steps):
            fresh = build.rebuild(f"rebuild-{i}")
            row["rebuild"] = add_and_drain(fresh, so_far, show, f"step {i} rebuild")
            rec_reb = recall(fresh, qs, vectors)
            build.discard(fresh, f"rebuild-{i}")
        else:
            row["rebuild"] = None
        row["recall@5"] = {"incremental": rec_inc["collapsed"], "rebuild": rec_reb["collapsed"] if rec_reb else None}
        row["recall@5_by_mode"] = {"incremental": rec_inc, "rebuild": rec_reb}
        rows.append(row)
    close_engine(inc)

    result = {
        "corpus": args.corpus, "questions_file": args.questions, "documents": len(docs),
        "initial_fraction": args.initial, "embedder": build.settings.embedder,
        "summarizer": build.settings.summarizer, "profile": args.profile,
        "entity_graph": not build.no_entities,
        "settings": build.settings.graph_settings(),
        "delta_summaries": build.settings.delta_summaries,
        "seconds_measure": "wall time of ingest + drain (chunking, embedding, hashing, partitioning, "
                           "summarizing, writing); summarize_seconds is the summarizer alone",
        "recall_measure": "Recall@5 over supporting documents: chunk results credit their document, "
                          "summary results credit none; questions whose support is all present",
        "initial": initial, "steps": rows, "single_document": single, "totals": totals(rows),
    }
    return finish(result, args, "growth")
