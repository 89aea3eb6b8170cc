"""The commands around the store rather than on it: demo (the bundled sample corpus ingested and
asked a few questions), bench (the benchmarks of eragraph.bench) and router (train the auto
retrieval router)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from .exits import EXIT_OK, EXIT_PARTIAL
from .ingest import ingest_docs
from .progress import count_inputs, input_bytes
from .render import emit
from .store import DEFAULT_STORE, open_engine, writing

BENCH_MODULES = ("retrieval", "levers", "growth", "ingest", "query", "scale", "vectors", "deadline", "filters", "load", "followup",
                 "console", "warm")
SAMPLES = Path(__file__).resolve().parents[1] / "samples"  # eragraph/samples: the demo's corpus and questions


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample corpus and answer a few questions."""
    args.store = args.store or DEFAULT_STORE
    with writing(args.store, create=True):
        return _cmd_demo(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..services.query import query
    from ..services.sources import iter_sources

    args.store = args.store or DEFAULT_STORE
    engine = open_engine(args, create=True)
    errors: list[dict[str, str]] = []
    corpus = SAMPLES / "corpus.jsonl"
    out = ingest_docs(engine, iter_sources([corpus], errors), args, total=count_inputs([corpus]), errors=errors,
                      total_bytes=input_bytes([corpus]))
    print(f"ingested {out['documents_added']} new documents ({out['chunks_added']} chunks) into {args.store}; "
          f"{out['summarize_calls']} summaries written")
    questions = json.loads((SAMPLES / "questions.json").read_text(encoding="utf-8"))
    for question in questions:
        response = query(engine, question, mode="collapsed", k=3)
        print(f"\nQ: {question}")
        for r in response.results:
            label = f"L{r.layer} {r.title}" if r.layer == 0 else f"L{r.layer} summary"
            print(f"  [{r.score:.3f}] {label}: {' '.join(r.text.split())[:160]}")
    print(f"\n(evidence only: configure a generator for answers; see README)\n"
          f"stats: eragraph stats --store {args.store}\n"
          f"in the browser: eragraph serve{'' if args.store == DEFAULT_STORE else f' --store {args.store}'}"
          "  (then open the URL it prints)")
    for err in errors:
        print(f"skipped {err['source']}: {err['error']}", file=sys.stderr)
    return EXIT_PARTIAL if errors else EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.common import mark_start

    mark_start()  # the commit of the code that runs, before a long run lets HEAD move on
    module = importlib.import_module(f"eragraph.bench.{args.bench_command}")
    out = module.run(args)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    emit(args, out, json.dumps(out, indent=2, default=str))
    return 0


def cmd_router_train(args: argparse.Namespace) -> int:
    from ..training import router as router_training

    router_training.run(args)
    return 0
