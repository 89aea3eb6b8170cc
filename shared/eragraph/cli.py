"""The `eragraph` command line: ingest, query, delete, stats, rebuild, reindex, bench, demo."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .config import Settings, settings_from_env
from .domain.model import EragraphError
from .services.modes import mode_names

BENCH_MODULES = ("retrieval", "growth", "ingest", "query")
DEFAULT_STORE = "eragraph-store"


def _emit(args: argparse.Namespace, payload: dict[str, Any], human: str) -> None:
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        print(human)


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {name: getattr(args, name, None) for name in ("embedder", "summarizer", "generator")}
    return settings_from_env(**overrides)


def _engine(args: argparse.Namespace, settings: Settings | None = None):
    from .bootstrap import build_engine

    return build_engine("local", Path(args.store), settings or _settings(args))


def _progress(total: int, desc: str, args: argparse.Namespace):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="doc", file=sys.stderr,
                disable=getattr(args, "quiet", False) or total < 2)


def _text_key(doc_id: str) -> str:
    return f"text/{doc_id}.txt"


def ingest_docs(engine, docs, args) -> dict:
    """Ingest SourceDocs, keep their text in the blob store (for rebuilds), drain the bus."""
    from .services import ingest as ingest_service
    from .services import resummarize

    started = time.perf_counter()
    with _progress(len(docs), "ingest", args) as bar:
        report = ingest_service.ingest(engine, docs, progress=bar.update)
    if engine.blobs is not None:
        for doc in docs:
            engine.blobs.put(_text_key(doc.resolved_id), doc.text.encode("utf-8"))
    report.merge(resummarize.drain(engine))
    report.seconds = time.perf_counter() - started
    return report.to_dict()


def cmd_ingest(args: argparse.Namespace) -> int:
    from .services.sources import load_sources

    engine = _engine(args)
    docs, errors, _raw = load_sources(args.paths, engine.settings.max_document_bytes)
    out = ingest_docs(engine, docs, args)
    out["errors"] = errors + out["errors"]
    for err in out["errors"]:
        print(f"skipped {err['source']}: {err['error']}", file=sys.stderr)
    layers = ", ".join(f"layer {k}: {v}" for k, v in out["segments_resummarized"].items()) or "none"
    _emit(args, out, (f"{out['documents_added']} added, {out['documents_replaced']} replaced, "
                      f"{out['documents_unchanged']} unchanged, {out['chunks_added']} chunks, "
                      f"segments re-summarized: {layers}; {out['summarize_calls']} summarize calls, "
                      f"{out['tokens_in']} tokens in, {out['tokens_out']} out, {out['seconds']:.1f}s"
                      + (f"; {len(out['errors'])} skipped" if out["errors"] else "")))
    return 0 if docs or not errors else 1


def cmd_query(args: argparse.Namespace) -> int:
    from .services.query import query

    engine = _engine(args)
    if not engine.graph.list_documents():
        print(f"the store {args.store} is empty: run `eragraph ingest PATH --store {args.store}` first",
              file=sys.stderr)
        return 2
    response = query(engine, args.text, mode=args.mode, k=args.k, budget=args.budget, p=args.p,
                     answer=args.answer)
    lines = []
    if response.answer is not None:
        lines += [f"answer: {response.answer}", ""]
    for i, r in enumerate(response.results, 1):
        label = f"L{r.layer}" + (f" {r.title or r.doc_id}" if r.layer == 0 else f" summary of {len(r.children)}")
        snippet = " ".join(r.text.split())[:300]
        lines.append(f"{i}. [{r.score:.3f}] {label} ({r.id})\n   {snippet}")
    if response.router_score is not None:
        lines.append(f"(route: {response.route}, s(q) = {response.router_score:.3f})")
    if response.note:
        lines.append(f"({response.note})")
    _emit(args, response.to_dict(), "\n".join(lines) or "no results")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from .services import remove, resummarize

    engine = _engine(args)
    started = time.perf_counter()
    refs = [str(Path(r).resolve()) if Path(r).exists() else r for r in args.refs]
    docs = [d for ref in refs for d in remove.resolve(engine, ref)]
    report = remove.remove(engine, refs)
    if engine.blobs is not None:
        for doc in docs:
            engine.blobs.delete(_text_key(doc.doc_id))
    report.merge(resummarize.drain(engine))
    report.seconds = time.perf_counter() - started
    out = report.to_dict()
    _emit(args, out, f"{out['documents_removed']} documents removed ({out['chunks_removed']} chunks); "
                     f"{out['summarize_calls']} summarize calls"
                     + "".join(f"\n  {e['source']}: {e['error']}" for e in out["errors"]))
    return 0 if out["documents_removed"] else 1


def stats(engine) -> dict:
    s = engine.settings
    layers = []
    sizes = engine.graph.layer_sizes()
    for layer, count in sizes.items():
        segs = engine.graph.get_segments(layer)
        lens = [len(x.members) for x in segs]
        layers.append({"layer": layer, "nodes": count, "segments": len(segs),
                       "smallest_segment": min(lens) if lens else None,
                       "largest_segment": max(lens) if lens else None})
    lsh = engine.graph.get_lsh()
    return {
        "documents": len(engine.graph.list_documents()),
        "layers": layers,
        "s_min": s.s_min, "s_max": s.s_max, "n_planes": s.n_planes, "max_layers": s.max_layers,
        "chunk_tokens": s.chunk_tokens, "chunk_overlap": s.chunk_overlap,
        "embedder": lsh.embedder_id if lsh else None,
        "vectors": engine.vectors.count(),
        "ledger": engine.graph.ledger(),
        "dirty_layers": [int(k.split(":")[1]) for k in engine.graph.meta_keys("dirty:")],
    }


def cmd_stats(args: argparse.Namespace) -> int:
    engine = _engine(args)
    out = stats(engine)
    rows = [f"documents: {out['documents']}   S_min/S_max: {out['s_min']}/{out['s_max']}   "
            f"hyperplanes: {out['n_planes']}   embedder: {out['embedder']}"]
    for row in out["layers"]:
        seg = (f"{row['segments']} segments of {row['smallest_segment']}..{row['largest_segment']}"
               if row["segments"] else "top layer")
        rows.append(f"  layer {row['layer']}: {row['nodes']} nodes, {seg}")
    for kind, row in out["ledger"].items():
        rows.append(f"  {kind}: {int(row['calls'])} calls, {int(row['tokens_in'])} tokens in, "
                    f"{int(row['tokens_out'])} out, {row['seconds']:.1f}s")
    _emit(args, out, "\n".join(rows))
    return 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    """Build the same documents from scratch in a fresh store (no cache, no old summaries)."""
    from dataclasses import replace

    from .services.ingest import SourceDoc

    engine = _engine(args)
    docs = []
    for doc in engine.graph.list_documents():
        try:
            text = engine.blobs.get(_text_key(doc.doc_id)).decode("utf-8")
        except KeyError:
            print(f"no stored text for {doc.doc_id}; skipped", file=sys.stderr)
            continue
        docs.append(SourceDoc(source=doc.source, text=text, title=doc.title, doc_id=doc.doc_id, meta=doc.meta))
    target = Path(args.into) if args.into else Path(tempfile.mkdtemp(prefix="eragraph-rebuild-"))
    if target.exists() and any(target.iterdir()):
        print(f"{target} is not empty; choose an empty --into folder", file=sys.stderr)
        return 2
    from .bootstrap import build_engine

    fresh = build_engine("local", target, replace(engine.settings, embed_cache=False))
    out = ingest_docs(fresh, docs, args)
    out["store"] = str(target)
    if args.replace:
        backup = Path(str(args.store).rstrip("/") + ".old")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(args.store, backup)
        shutil.copytree(target, args.store)
        shutil.rmtree(backup, ignore_errors=True)
        out["replaced"] = True
    _emit(args, out, f"rebuilt {len(docs)} documents into {target}: {out['summarize_calls']} summarize calls, "
                     f"{out['tokens_in']} tokens in, {out['seconds']:.1f}s")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from .services import reindex

    engine = _engine(args)
    out = reindex.run(engine, stuck_after=args.stuck_after)
    out = out if isinstance(out, dict) else out.to_dict()
    _emit(args, out, json.dumps(out, indent=2, default=str))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample corpus and answer a few questions."""
    from .services.query import query
    from .services.sources import load_sources

    sample = Path(__file__).parent / "samples"
    args.store = args.store or DEFAULT_STORE
    engine = _engine(args)
    docs, errors, _ = load_sources([sample / "corpus.jsonl"])
    out = ingest_docs(engine, docs, args)
    print(f"ingested {out['documents_added']} new documents ({out['chunks_added']} chunks) into {args.store}; "
          f"{out['summarize_calls']} summaries written")
    questions = json.loads((sample / "questions.json").read_text(encoding="utf-8"))
    for question in questions:
        response = query(engine, question, mode="collapsed", k=3)
        print(f"\nQ: {question}")
        for r in response.results:
            label = f"L{r.layer} {r.title}" if r.layer == 0 else f"L{r.layer} summary"
            print(f"  [{r.score:.3f}] {label}: {' '.join(r.text.split())[:160]}")
    print(f"\n(evidence only: configure a generator for answers; see README)\n"
          f"stats: eragraph stats --store {args.store}")
    return 0 if not errors else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eragraph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, store_required: bool = True) -> None:
        p.add_argument("--store", default=os.environ.get("ERAGRAPH_STORE", DEFAULT_STORE if not store_required else None),
                       required=store_required and not os.environ.get("ERAGRAPH_STORE"),
                       help="store directory (or ERAGRAPH_STORE)")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.add_argument("--embedder", choices=("minilm", "bedrock", "hash"), help="override ERAGRAPH_EMBEDDER")
        p.add_argument("--summarizer", choices=("extractive", "bedrock", "openai"))
        p.add_argument("--generator", choices=("none", "bedrock", "openai"))

    p = sub.add_parser("ingest", help="ingest files, folders and .jsonl corpora")
    p.add_argument("paths", nargs="+")
    common(p)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("query", help="retrieve evidence (and an answer with --answer)")
    p.add_argument("text")
    p.add_argument("--mode", default="collapsed",
                   help="retrieval mode: " + ", ".join(mode_names()) + " (auto: the complexity router picks "
                        "the dense side, fusion or tri_graph)")
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--budget", type=int, default=None, help="token budget for the evidence")
    p.add_argument("--p", type=float, default=None, help="proportion for detailed/summarized")
    p.add_argument("--answer", action="store_true", help="generate an answer (needs a generator)")
    common(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("delete", help="remove documents by id or source")
    p.add_argument("refs", nargs="+", metavar="DOC_ID_OR_SOURCE")
    common(p)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("stats", help="documents, layers, segments, cost ledger")
    common(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("rebuild", help="build the same corpus from scratch for comparison")
    p.add_argument("--into", help="empty folder for the rebuilt store (default: a temp folder)")
    p.add_argument("--replace", action="store_true", help="replace the store with the rebuilt one")
    common(p)
    p.set_defaults(func=cmd_rebuild)

    p = sub.add_parser("reindex", help="audit and repair the store; report what was found")
    p.add_argument("--stuck-after", type=float, default=900.0, help="seconds after which a dirty layer is re-queued")
    common(p)
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("demo", help="ingest the bundled sample corpus and answer a few questions")
    common(p, store_required=False)
    p.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks (growth, retrieval, ingest, query)")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for name in BENCH_MODULES:
        try:
            module = importlib.import_module(f"eragraph.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"eragraph.bench.{name}" or exc.name == "eragraph.bench":
                continue
            raise
        module.add_parser(bench_sub)
    bench.set_defaults(func=cmd_bench)

    router = sub.add_parser("router", help="the auto retrieval router (train)")
    router_sub = router.add_subparsers(dest="router_command", required=True)
    from .training import router as router_training

    router_training.add_parser(router_sub).set_defaults(func=cmd_router_train)
    return parser


def cmd_router_train(args: argparse.Namespace) -> int:
    from .training import router as router_training

    router_training.run(args)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"eragraph.bench.{args.bench_command}")
    out = module.run(args)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    _emit(args, out, json.dumps(out, indent=2, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (EragraphError, ValueError) as exc:
        print(f"eragraph: error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # a model provider gave up (providers.prompts.ModelCallError)
        print(f"eragraph: model call failed: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
