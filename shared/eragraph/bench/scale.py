"""`eragraph bench scale`: what one insert, one delete, a build and a query cost as the store grows.

Synthetic corpus: one-chunk documents of random words (seeded), a few of them capitalized so the
entity graph has names to index; the hashing embedder (``ERAGRAPH_EMBEDDER=hash``) and the
capitalized-phrase NER (``ERAGRAPH_NER=capitalized``) unless ``--embedder`` says otherwise, so
the figures measure the engine, not a model. Per size (``--sizes``, chunks):

* build: what ``eragraph ingest CORPUS.jsonl`` runs (ingest + drain, through the services) in
  its own process, with the run's settings; wall time and that process's peak RSS (its own VmHWM), the peak before the drain began,
  and the size of the vector index (vectors x dim x 4 bytes) for comparison;
* single-document insert and delete (ingest + drain, remove + drain through the services, median
  of ``--repeats``): wall time, items read and written through the GraphStore / VectorIndex
  ports (and the entity graph's store and index), counted by a proxy around each port (calls,
  items in, items out per method; generic over adapters), and summarize calls;
* warm query latency p50/p95 per core mode (collapsed, detailed, summarized, dense), the
  question vectors computed before the clock starts (embedding excluded).

With ``--aws-sizes``: the same single-document insert and delete on the AWS profile's storage
under moto (bench/moto.MotoProfile: DynamoDB table from template.yaml, S3, SQS FIFO; vectors in memory instead of
OpenSearch), counting DynamoDB requests and items read/written with botocore event hooks on the
DynamoDB client (items from the requests and the returned items/Count). The AWS store is built
through the services with an in-process queue (one drain), then the measured inserts go through
the SQS queue. moto runs without two costs that grow with the table (bench/moto_lean.py: a
journalled TransactWriteItems, and a Query that reads only its partition; same answers), or a
build would grow quadratically. ``--smoke`` runs 300 chunks locally and 60 on moto, in well under a minute."""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings, settings_from_env
from ..services.modes import modes_of
from .common import add_common_options, close_engine, finish, percentile, progress
from .counting import DynamoCounter, count_ports, median_dynamo, median_methods, median_row, reset, totals
from .moto import moto_engine

CORE_MODES = tuple(modes_of("summary"))
DEFAULT_SIZES = "10000,100000,1000000"
SMOKE_SIZE = 300
SMOKE_AWS_SIZE = 60  # moto answers each request in-process, slowly
WORDS_PER_DOC = 40


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("scale", help="build, insert, delete and query cost against store size",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default=DEFAULT_SIZES, help=f"store sizes in chunks (default {DEFAULT_SIZES})")
    p.add_argument("--aws-sizes", default="",
                   help="sizes for the AWS profile under moto (e.g. 10000,100000; default: none)")
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


# ----------------------------------------------------------------------------- corpus


def vocabulary(seed: int, n: int = 20000) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dor", "ben", "fal", "gor",
                 "hin", "jas", "lum", "mor", "nix", "osk", "pel", "rav", "sil", "tam", "urd", "vel", "wim"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def doc_text(rng: random.Random, vocab: list[str]) -> str:
    words = [rng.choice(vocab) for _ in range(WORDS_PER_DOC)]
    for i in rng.sample(range(WORDS_PER_DOC), 3):  # names for the entity graph
        words[i] = words[i].capitalize()
    return " ".join(words[:20]).capitalize() + ". " + " ".join(words[20:]).capitalize() + "."


def synthetic_rows(n: int, seed: int, prefix: str = "s") -> Iterator[dict]:
    vocab = vocabulary(seed)
    rng = random.Random(seed * 1_000_003 + n)
    for i in range(n):
        yield {"id": f"{prefix}{i}", "text": doc_text(rng, vocab)}


def write_corpus(path: Path, n: int, seed: int) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for row in synthetic_rows(n, seed):
            fh.write(json.dumps(row) + "\n")
    return path


def probe_docs(n: int, seed: int, tag: str) -> list:
    from ..services.ingest import SourceDoc

    return [SourceDoc(source=f"probe/{tag}{row['id']}", doc_id=f"probe-{tag}{row['id']}", text=row["text"])
            for row in synthetic_rows(n, seed + 101, prefix="")]


def questions(n: int, seed: int) -> list[str]:
    vocab = vocabulary(seed)
    rng = random.Random(seed + 202)
    return [" ".join(rng.choice(vocab) for _ in range(8)) + "?" for _ in range(n)]


# ----------------------------------------------------------------------------- measurements


def insert_delete(engine: Any, counters: dict, docs: list, extra_counter: Any = None) -> dict:
    """Insert each probe document (ingest + drain), then delete it (remove + drain); medians."""
    import copy

    from ..services.ingest import ingest
    from ..services.remove import remove
    from ..services.resummarize import drain

    result: dict[str, Any] = {}
    for op in ("insert", "delete"):
        result[op] = {"rows": [], "methods": [], "dynamodb": []}
    for doc in docs:
        for op in ("insert", "delete"):
            reset(counters)
            if extra_counter is not None:
                extra_counter.reset()
            started = time.perf_counter()
            if op == "insert":
                report = ingest(engine, [doc])
            else:
                report = remove(engine, [doc.doc_id])
            report.merge(drain(engine))
            seconds = time.perf_counter() - started
            result[op]["rows"].append({"seconds": seconds, **totals(counters),
                                       "summarize_calls": report.cost.summarize_calls})
            result[op]["methods"].append(copy.deepcopy(counters))
            if extra_counter is not None:
                result[op]["dynamodb"].append(extra_counter.snapshot())
    out = {}
    for op, data in result.items():
        out[op] = {"median": median_row(data["rows"]), "runs": len(data["rows"]),
                   "seconds_all": [round(r["seconds"], 4) for r in data["rows"]],
                   "ports_median": median_methods(data["methods"])}
        if data["dynamodb"]:
            out[op]["dynamodb_median"] = median_dynamo(data["dynamodb"])
    return out


class Precomputed:
    """The engine's embedder with the benchmark questions' vectors computed up front, so the
    query clock measures retrieval, not question embedding."""

    def __init__(self, inner: Any, texts: list[str]) -> None:
        self._inner = inner
        self._rows = dict(zip(texts, inner.embed(texts)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts):
        if all(t in self._rows for t in texts):
            return np.stack([self._rows[t] for t in texts])
        return self._inner.embed(texts)


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


# ----------------------------------------------------------------------------- build in a child


def build_child(argv: list[str]) -> int:
    """``python -m eragraph.bench.scale --build-child STORE CORPUS REPORT BATCH SETTINGS``: the
    build `eragraph ingest` runs (each document's text kept in the blob store as it passes, the
    streamed ingest, then the drain), through the services with SETTINGS (JSON of
    config.Settings); writes its report plus the peak RSS reached before the drain began (the
    streamed ingest alone) to REPORT."""
    store, corpus, report_path, batch, settings_json = argv
    started = time.perf_counter()
    from ..bootstrap import build_engine
    from ..providers.extractors import ReadLimits
    from ..services.ingest import ingest
    from ..services.resummarize import drain, requeue_dirty
    from ..services.sources import CsvMapping, iter_sources, keep_texts

    settings = Settings(**json.loads(settings_json))
    engine = build_engine("local", Path(store), settings)
    errors: list[dict[str, str]] = []
    docs = iter_sources([corpus], errors, ReadLimits.from_settings(settings),
                        csv_mapping=CsvMapping.from_settings(settings))
    service_started = time.perf_counter()
    requeue_dirty(engine)
    report = ingest(engine, keep_texts(engine, docs), batch_docs=int(batch))
    rss_before_drain, ingest_phase = peak_kb(), time.perf_counter() - started
    report.merge(drain(engine))
    report.seconds = time.perf_counter() - service_started
    report.errors = errors + report.errors
    out = {"exit_code": 1 if report.errors else 0, "cli": report.to_dict(), "rss_before_drain_kb": rss_before_drain,
           "ingest_phase_seconds": ingest_phase, "rss_peak_kb": peak_kb(),
           "vector_index_resident_kb": index_resident_kb(engine)}
    Path(report_path).write_text(json.dumps(out), encoding="utf-8")
    return out["exit_code"]


def peak_kb() -> int:
    """This process's peak resident memory: VmHWM, which starts afresh at exec (ru_maxrss also
    keeps the size of the process it was forked from), else ru_maxrss."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def resident_kb() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def index_resident_kb(engine: Any) -> int | None:
    """What the build's vector index holds in memory, as it grew (buckets with their spare
    capacity, the id map's table): the process's resident memory before and after the index
    is closed and glibc hands the freed pages back (``malloc_trim``). Linux only."""
    close = getattr(getattr(engine, "vectors", None), "close", None)
    if close is None or not os.path.exists("/proc/self/statm"):
        return None
    import ctypes
    import gc

    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    # trimmed before as after: pages freed earlier in the process (by whatever ran before the
    # index was closed) are handed back first, so the difference is what closing it freed
    gc.collect()
    trim(0)
    before = resident_kb()
    close()
    gc.collect()
    trim(0)
    return before - resident_kb()


def build_store(store: Path, corpus: Path, batch_docs: int, settings: Settings) -> dict:
    report = store.parent / f"{store.name}-build.json"
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "eragraph.bench.scale", "--build-child", str(store), str(corpus),
                             str(report), str(batch_docs), json.dumps(settings.to_dict())])
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"the build of {store} failed (exit {proc.returncode})")
    child = json.loads(report.read_text(encoding="utf-8"))
    report.unlink()
    cli_out = child["cli"]
    return {"process_seconds": round(wall, 3), "service_seconds": round(cli_out["seconds"], 3),
            "ingest_phase_seconds": round(child["ingest_phase_seconds"] or 0.0, 3),
            "peak_rss_mb": round((child.get("rss_peak_kb") or usage.ru_maxrss) / 1024, 1),
            "peak_rss_before_drain_mb": round((child["rss_before_drain_kb"] or 0) / 1024, 1),
            "vector_index_resident_mb": (None if child.get("vector_index_resident_kb") is None
                                         else round(child["vector_index_resident_kb"] / 1024, 1)),
            "documents_added": cli_out["documents_added"], "chunks_added": cli_out["chunks_added"],
            "summarize_calls": cli_out["summarize_calls"]}


def model_settings(args: Any, **overrides: Any) -> Settings:
    """The settings of every engine of the run: the environment's, then the model flags (the
    hashing embedder by default; with it, the capitalized NER unless ERAGRAPH_NER names one)."""
    base = settings_from_env()
    embedder = getattr(args, "embedder", None) or "hash"
    ner = "capitalized" if embedder == "hash" and base.ner == "auto" else None
    return base.with_overrides(embedder=embedder, summarizer=getattr(args, "summarizer", None), ner=ner,
                               **overrides)


def build_and_open(store: Path, corpus: Path, args: Any, settings: Settings) -> tuple[Any, dict]:
    """A fresh local store built from ``corpus`` in a child process (build_store), then opened
    with the same settings: (engine, build figures)."""
    from ..bootstrap import build_engine

    if store.exists():
        shutil.rmtree(store)
    build = build_store(store, corpus, args.batch_docs, settings)
    return build_engine("local", store, settings), build


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


# ----------------------------------------------------------------------------- AWS under moto


def aws_size(n: int, args: Any, settings: Settings) -> dict:
    from ..adapters.aws.queue_sqs import SqsQueue
    from ..services.ingest import SourceDoc, ingest
    from ..services.resummarize import drain

    with moto_engine(f"scale-{n}", args, settings) as (engine, url, sqs):
        started = time.perf_counter()
        rows = synthetic_rows(n, args.seed)
        ingest(engine, (SourceDoc(source=f"synthetic/{r['id']}", doc_id=r["id"], text=r["text"]) for r in rows),
               batch_docs=args.batch_docs)
        drain(engine)
        build_seconds = time.perf_counter() - started
        engine.queue = SqsQueue(url, client=sqs)
        counter = DynamoCounter()
        counter.attach(engine.graph.models.item._get_connection().connection.client)
        counters = count_ports(engine)
        ops = insert_delete(engine, counters, probe_docs(args.repeats, args.seed, f"aws{n}-"), extra_counter=counter)
        sizes = engine.graph.layer_sizes()
    return {"chunks": sizes.get(0, 0), "layers": {str(k): v for k, v in sorted(sizes.items())},
            "build_seconds_under_moto": round(build_seconds, 3),
            "insert": ops["insert"], "delete": ops["delete"]}


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
                     "opening included); the vector index's resident memory at the end of the build (the "
                     "process's resident memory before and after the index is closed and malloc_trim hands "
                     "the freed pages back: buckets with their spare capacity, the id map's table)",
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
                    result["aws"].append(aws_size(n, args, settings))
                except ImportError as exc:
                    result["aws_skipped"] = f"moto/boto3 not installed: {exc}"
                    break
                bar.update(1)
    finally:
        if not args.store and not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)
    return finish(result, args, "scale")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--build-child":
        raise SystemExit(build_child(sys.argv[2:]))
    raise SystemExit("run it as `eragraph bench scale`")
