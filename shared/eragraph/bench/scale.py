"""`eragraph bench scale`: what one insert, one delete, a build and a query cost as the store grows.

Synthetic corpus: one-chunk documents of random words (seeded), a few of them capitalized so the
entity graph has names to index; the hashing embedder (``ERAGRAPH_EMBEDDER=hash``) and the
capitalized-phrase NER (``ERAGRAPH_NER=capitalized``) unless ``--embedder`` says otherwise, so
the figures measure the engine, not a model. Per size (``--sizes``, chunks):

* build: what ``eragraph ingest CORPUS.jsonl`` runs (ingest + drain, through the services) in
  its own process, with the run's settings; wall time and that process's peak RSS (its own VmHWM), the peak before the drain began,
  the peak of each phase (ingest, drain, and the built store opened again for one question: index),
  and the size of the vector index (vectors x dim x 4 bytes) for comparison;
* single-document insert and delete (ingest + drain, remove + drain through the services, median
  of ``--repeats``): wall time, items read and written through the GraphStore / VectorIndex
  ports (and the entity graph's store and index), counted by a proxy around each port (calls,
  items in, items out per method; generic over adapters), and summarize calls;
* warm query latency p50/p95 per core mode (collapsed, detailed, summarized, dense), the
  question vectors computed before the clock starts (embedding excluded).

With ``--aws-sizes``: the AWS profile's storage under moto (bench/scale_aws.py: DynamoDB table
from template.yaml, S3, SQS FIFO, OpenSearch through the repository's request-checking fake),
its store made through the services or, with ``--aws-build load``, built locally and loaded
through services/portable (timed); then single-document inserts and deletes through the SQS
queue, questions per mode and a warm ``/stats``, counting DynamoDB requests and items,
OpenSearch requests by operation and SQS messages. moto runs without two costs that grow with
the table (bench/moto_lean.py: a journalled TransactWriteItems, and a Query that reads only its
partition; same answers), or a build would grow quadratically. ``--smoke`` runs 300 chunks locally and 60 on moto, in well under a minute."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..config import Settings, settings_from_env
from ..services.modes import modes_of
from .common import add_common_options, close_engine, finish, percentile, progress
from .counting import count_ports
from .scale_aws import BUILDS, aws_size
from .scale_build import build_and_open, build_child, build_store, index_resident_kb, peak_kb
from .scale_corpus import (WORDS_PER_DOC, Precomputed, doc_text, insert_delete, probe_docs, questions, synthetic_rows,
                           vocabulary, write_corpus)

# the corpus and build helpers other benchmarks import from here
__all__ = ["WORDS_PER_DOC", "Precomputed", "build_and_open", "build_child", "build_store", "doc_text",
           "index_resident_kb", "insert_delete", "peak_kb", "probe_docs", "questions", "synthetic_rows",
           "vocabulary", "write_corpus", "add_parser", "model_settings", "run"]

CORE_MODES = tuple(modes_of("summary"))
DEFAULT_SIZES = "10000,100000,1000000"
SMOKE_SIZE = 300
SMOKE_AWS_SIZE = 60  # moto answers each request in-process, slowly


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("scale", help="build, insert, delete and query cost against store size",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"store sizes in chunks (default {DEFAULT_SIZES})")
    p.add_argument("--aws-sizes", default="",
                   help="sizes for the AWS profile under moto (e.g. 10000,100000; default: none)")
    p.add_argument("--aws-build", choices=BUILDS, default="services",
                   help="how the moto store is made: services (ingest + drain through moto, request by request; "
                        "slow) or load (the local profile's build of the same corpus, dumped and loaded into "
                        "the moto store through services/portable; the load is timed)")
    p.add_argument("--smoke", action="store_true",
                   help=f"{SMOKE_SIZE} chunks locally and {SMOKE_AWS_SIZE} on moto; fast")
    p.add_argument("--repeats", type=int, default=5, help="single-document inserts/deletes per size (median)")
    p.add_argument("--queries", type=int, default=50, help="timed questions per mode")
    p.add_argument("--batch-docs", type=int, default=256, help="documents per ingest batch in the build")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--store", help="working directory for corpora and stores (default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the built stores and corpora")
    p.add_argument("--template", help="template.yaml for the moto table (default: the repository's)")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


# ----------------------------------------------------------------------------- measurements


def query_latency(engine: Any, texts: list[str], k: int = 5) -> dict:
    from ..services.query import query

    inner = engine.embedder
    engine.embedder = Precomputed(inner, texts)
    try:
        out = {}
        for mode in CORE_MODES:
            query(engine, texts[0], mode=mode, k=k)  # warm-up
            ms = []
            for text in texts:
                started = time.perf_counter()
                query(engine, text, mode=mode, k=k)
                ms.append((time.perf_counter() - started) * 1000.0)
            out[mode] = {"n": len(ms), "latency_ms_p50": round(percentile(ms, 50), 3),
                         "latency_ms_p95": round(percentile(ms, 95), 3)}
        return out
    finally:
        engine.embedder = inner

def model_settings(args: Any, **overrides: Any) -> Settings:
    """The settings of every engine of the run: the environment's, then the model flags (the
    hashing embedder by default; with it, the capitalized NER unless ERAGRAPH_NER names one)."""
    base = settings_from_env()
    embedder = getattr(args, "embedder", None) or "hash"
    ner = "capitalized" if embedder == "hash" and base.ner == "auto" else None
    return base.with_overrides(embedder=embedder, summarizer=getattr(args, "summarizer", None), ner=ner,
                               **overrides)

def local_size(n: int, work: Path, args: Any, settings: Settings) -> dict:
    corpus = write_corpus(work / f"corpus-{n}.jsonl", n, args.seed)
    store = work / f"store-{n}"
    engine, build = build_and_open(store, corpus, args, settings)
    sizes = engine.graph.layer_sizes()
    vectors = engine.vectors.count()
    build["vector_index_mb"] = round(vectors * engine.embedder.dim * 4 / 2**20, 1)
    if hasattr(engine.vectors, "shape"):  # the local index: flat or IVF, as the queries below find it
        build["vector_index_shape"] = engine.vectors.shape()
    build["seconds_per_chunk_ms"] = round(1000 * build["service_seconds"] / max(sizes.get(0, 1), 1), 4)
    queries = query_latency(engine, questions(args.queries, args.seed))
    counters = count_ports(engine)
    ops = insert_delete(engine, counters, probe_docs(args.repeats, args.seed, f"n{n}-"))
    close_engine(engine)
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
        corpus.unlink(missing_ok=True)
    return {"chunks": sizes.get(0, 0), "layers": {str(k): v for k, v in sorted(sizes.items())},
            "vectors": vectors, "build": build, "insert": ops["insert"], "delete": ops["delete"],
            "query": queries}


# ----------------------------------------------------------------------------- run


def parse_sizes(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def run(args: Any) -> dict:
    sizes = [SMOKE_SIZE] if args.smoke else parse_sizes(args.sizes)
    aws_sizes = [SMOKE_AWS_SIZE] if args.smoke else parse_sizes(args.aws_sizes or "")
    if args.smoke:
        args.queries = min(args.queries, 20)
    settings = model_settings(args)
    work_root = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="eragraph-bench-scale-"))
    work_root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "embedder": settings.embedder, "ner": settings.ner if settings.embedder == "hash" else None,
        "note": ("synthetic one-chunk documents of random words; hashing embedder (no model), so times "
                 "measure the engine, not embedding" if settings.embedder == "hash" else
                 f"synthetic one-chunk documents of random words; embedder {settings.embedder}"),
        "repeats": args.repeats, "queries_per_mode": args.queries, "batch_docs": args.batch_docs,
        "seed": args.seed, "smoke": bool(args.smoke),
        "measures": {
            "build": "what `eragraph ingest CORPUS.jsonl` runs (ingest + drain, through the services) in a child process: process wall time, "
                     "the service seconds it reports (ingest + drain), its peak RSS (the child's own VmHWM; "
                     "ru_maxrss from os.wait4 would also count the parent's size at the fork), the peak before "
                     "the drain began and the seconds from the process start to the drain (imports and store "
                     "opening included); the peak of each phase (peak_rss_phases_mb; VmHWM started afresh "
                     "through /proc/self/clear_refs at each): ingest (from the process start), drain, and "
                     "index (the build's stores closed, then the store opened again and one question "
                     "answered: the vector index read from its snapshot); the peak beyond the vector "
                     "index (peak_rss_beyond_index_mb: the build's peak less the index's resident memory); the vector index's resident memory at the end of the build (the "
                     "process's resident memory before and after the index is closed and malloc_trim hands "
                     "the freed pages back: buckets with their spare capacity, the id map's table); the store's size "
                     "on disk by top-level entry (store_mb)",
            "insert": "ingest(one document) + drain through the services on the warm store; delete: remove + "
                      "drain; median of the repeats; items read = items returned by the ports' read methods, "
                      "items written = items given to their write methods",
            "query": "wall time of query() per question and core mode, k=5, question vectors precomputed",
        },
        "local": [], "aws": [],
    }
    try:
        with progress(len(sizes) + len(aws_sizes), "sizes", not args.no_progress) as bar:
            for n in sizes:
                result["local"].append(local_size(n, work_root, args, settings))
                bar.update(1)
            for n in aws_sizes:
                try:
                    result["aws"].append(aws_size(n, work_root, args, settings))
                except ImportError as exc:
                    result["aws_skipped"] = f"moto/boto3 not installed: {exc}"
                    break
                bar.update(1)
    finally:
        if not args.store and not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)
    return finish(result, args, "scale")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--build-child":  # the name older runs spawned
        raise SystemExit(build_child(sys.argv[2:]))
    raise SystemExit("run it as `eragraph bench scale`")
