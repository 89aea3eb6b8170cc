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
under moto (DynamoDB table from template.yaml, S3, SQS FIFO; vectors in memory instead of
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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings, settings_from_env
from ..services.modes import modes_of
from .common import add_common_options, close_engine, finish, percentile, progress

CORE_MODES = tuple(modes_of("summary"))
DEFAULT_SIZES = "10000,100000,1000000"
SMOKE_SIZE = 300
SMOKE_AWS_SIZE = 60  # moto answers each request in-process, slowly
WORDS_PER_DOC = 40
WRITE_METHODS = ("put_", "delete_", "upsert", "apply_", "add_", "flush", "remove_", "set_")


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


# ----------------------------------------------------------------------------- counting ports


def size_of(x: Any) -> int:
    """Items in an argument or a result: a collection counts its members, an array its rows,
    None nothing, anything else (a key, a node, a number) one."""
    if x is None:
        return 0
    if isinstance(x, (str, bytes, int, float, bool)):
        return 1
    if isinstance(x, np.ndarray):
        return int(x.shape[0]) if x.ndim > 1 else 1
    if isinstance(x, (Mapping, list, tuple, set, frozenset)):
        return len(x)
    return 1


def is_write(method: str) -> bool:
    return method.startswith(WRITE_METHODS)


class Counting:
    """A proxy around one port: every public method call is counted under its name with the
    items it was given (the first argument's size; ``apply_region``: the items it writes) and
    the items it returned. One-shot iterators among the arguments are materialized first so
    they can be counted (the port sees the same items)."""

    def __init__(self, inner: Any, counts: dict[str, dict[str, int]]) -> None:
        self._inner = inner
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        counts = self._counts

        def counted(*a, **kw):
            a = tuple(list(x) if isinstance(x, Iterator) else x for x in a)
            result = attr(*a, **kw)
            if name == "apply_region":
                change = a[0] if a else kw["change"]
                given = sum(len(x) for x in (change.assign, change.drop, change.add, change.remove,
                                             change.above_add, change.above_remove))
            else:
                given = size_of(a[0]) if a else size_of(next(iter(kw.values()), None))
            row = counts.setdefault(name, {"calls": 0, "items_in": 0, "items_out": 0})
            row["calls"] += 1
            row["items_in"] += given
            row["items_out"] += size_of(result)
            return result

        return counted


def count_ports(engine: Any) -> dict[str, dict[str, dict[str, int]]]:
    """Wrap the engine's graph store and vector index (and the entity graph's store and vector
    index when installed) in counting proxies, in place; returns the live counters."""
    counters: dict[str, dict[str, dict[str, int]]] = {"graph": {}, "vectors": {}}
    engine.graph = Counting(engine.graph, counters["graph"])
    engine.vectors = Counting(engine.vectors, counters["vectors"])
    index = engine.entities
    if index is not None:
        for attr, key in (("store", "entity_store"), ("vectors", "entity_vectors")):
            if hasattr(index, attr):
                counters[key] = {}
                setattr(index, attr, Counting(getattr(index, attr), counters[key]))
    return counters


def totals(counters: dict[str, dict[str, dict[str, int]]]) -> dict[str, int]:
    out = {"calls": 0, "items_read": 0, "items_written": 0}
    for methods in counters.values():
        for method, row in methods.items():
            out["calls"] += row["calls"]
            if is_write(method):
                out["items_written"] += row["items_in"]
            else:
                out["items_read"] += row["items_out"]
    return out


def reset(counters: dict) -> None:
    for methods in counters.values():
        methods.clear()


# ----------------------------------------------------------------------------- measurements


def median_row(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))]
    return {k: round(statistics.median(r[k] for r in rows), 6) for k in keys}


def median_methods(runs: list[dict[str, dict[str, dict[str, int]]]]) -> dict:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for port in sorted({p for run in runs for p in run}):
        for method in sorted({m for run in runs for m in run.get(port, {})}):
            vals = [run.get(port, {}).get(method, {"calls": 0, "items_in": 0, "items_out": 0}) for run in runs]
            out.setdefault(port, {})[method] = {k: statistics.median(v[k] for v in vals)
                                                for k in ("calls", "items_in", "items_out")}
    return out


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

    gc.collect()
    before = resident_kb()
    close()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
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


class DynamoCounter:
    """Counts DynamoDB requests and items with botocore event hooks on one client:
    ``before-parameter-build`` (the request: items written by PutItem/UpdateItem/DeleteItem,
    BatchWriteItem, TransactWriteItems) and ``after-call`` (the response: items returned by
    GetItem, BatchGetItem, TransactGetItems, Query/Scan ``Count`` and ``ScannedCount``, and
    ``ConsumedCapacity`` when the response carries it; unprocessed batch items are not counted
    as written). Written items are also tallied by partition key, to show how one insert's
    writes spread over partitions (a partition takes at most 1,000 write units a second):
    ``partitions_written``, ``hottest_partition_writes`` and, per kind of partition (the key
    up to its first ``#``), ``writes_by_kind``; ``meta_*`` for the store's metadata
    partitions (dirty markers, outbox, follow-ups, retired texts: keys starting ``META``)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: dict[str, int] = {}
        self.items_read = 0
        self.items_scanned = 0
        self.items_written = 0
        self.capacity = 0.0
        self.partitions: dict[str, int] = {}

    def _wrote(self, key: dict | None) -> None:
        pk = ((key or {}).get("PK") or {}).get("S")
        if pk is not None:
            self.partitions[pk] = self.partitions.get(pk, 0) + 1

    def _tally(self, op: str, params: dict) -> None:
        if op == "PutItem":
            self._wrote(params.get("Item"))
        elif op in ("UpdateItem", "DeleteItem"):
            self._wrote(params.get("Key"))
        elif op == "BatchWriteItem":
            for requests in (params.get("RequestItems") or {}).values():
                for r in requests:
                    self._wrote((r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key"))
        elif op == "TransactWriteItems":
            for t in params.get("TransactItems") or []:
                if "Put" in t:
                    self._wrote(t["Put"].get("Item"))
                elif "Update" in t or "Delete" in t:
                    self._wrote((t.get("Update") or t.get("Delete")).get("Key"))

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, params: dict, model: Any, **_: Any) -> None:
        op = model.name
        self.requests[op] = self.requests.get(op, 0) + 1
        self._tally(op, params)
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            self.items_written += 1
        elif op == "BatchWriteItem":
            self.items_written += sum(len(v) for v in (params.get("RequestItems") or {}).values())
        elif op == "TransactWriteItems":
            self.items_written += len(params.get("TransactItems") or [])

    def after(self, http_response: Any, parsed: dict, model: Any, **_: Any) -> None:
        op = model.name
        if op == "GetItem":
            self.items_read += 1 if parsed.get("Item") else 0
        elif op == "BatchGetItem":
            self.items_read += sum(len(v) for v in (parsed.get("Responses") or {}).values())
        elif op == "TransactGetItems":
            self.items_read += sum(1 for r in parsed.get("Responses") or [] if r.get("Item"))
        elif op in ("Query", "Scan"):
            self.items_read += int(parsed.get("Count") or 0)
            self.items_scanned += int(parsed.get("ScannedCount") or 0)
        elif op == "BatchWriteItem":
            self.items_written -= sum(len(v) for v in (parsed.get("UnprocessedItems") or {}).values())
        cap = parsed.get("ConsumedCapacity")
        for c in cap if isinstance(cap, list) else [cap] if cap else []:
            self.capacity += float(c.get("CapacityUnits") or 0.0)

    def snapshot(self) -> dict:
        kinds: dict[str, int] = {}
        for pk, n in self.partitions.items():
            kinds[pk.split("#", 1)[0]] = kinds.get(pk.split("#", 1)[0], 0) + n
        meta = [n for pk, n in self.partitions.items() if pk.startswith("META")]
        return {"requests": sum(self.requests.values()), "items_read": self.items_read,
                "items_scanned": self.items_scanned, "items_written": self.items_written,
                "consumed_capacity": self.capacity, "by_operation": dict(self.requests),
                "partitions_written": len(self.partitions),
                "hottest_partition_writes": max(self.partitions.values(), default=0),
                "meta_partitions_written": len(meta), "meta_hottest_partition_writes": max(meta, default=0),
                "writes_by_kind": kinds}


def median_dynamo(rows: list[dict]) -> dict:
    out = median_row(rows)
    for field in ("by_operation", "writes_by_kind"):
        names = sorted({name for r in rows for name in r[field]})
        out[field] = {name: statistics.median(r[field].get(name, 0) for r in rows) for name in names}
    return out


def load_template(template: Path) -> dict:
    """template.yaml as data; CloudFormation's tags (!Ref, !GetAtt, ...) read as None."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    with open(template, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=Loader)


def table_definition(template: Path, logical_id: str = "GraphTable") -> dict:
    props = load_template(template)["Resources"][logical_id]["Properties"]
    definition = {k: props[k] for k in ("AttributeDefinitions", "KeySchema") if k in props}
    if "GlobalSecondaryIndexes" in props:
        definition["GlobalSecondaryIndexes"] = [
            {k: v for k, v in gsi.items() if k in ("IndexName", "KeySchema", "Projection")}
            for gsi in props["GlobalSecondaryIndexes"]]
    definition["BillingMode"] = props.get("BillingMode", "PAY_PER_REQUEST")
    return definition


def find_template(args: Any) -> Path:
    for candidate in ([Path(args.template)] if args.template else
                      [Path.cwd() / "template.yaml", Path(__file__).resolve().parents[3] / "template.yaml"]):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("template.yaml not found (pass --template)")


@contextmanager
def moto_engine(name: str, args: Any, settings: Settings) -> Iterator[tuple[Any, str, Any]]:
    """The AWS profile's storage under moto (lean: bench/moto_lean.py) for one run: the
    DynamoDB table of template.yaml, an S3 bucket and an SQS FIFO queue; vectors in memory
    (moto has no OpenSearch), an in-process queue until the caller swaps in the SQS one.
    Yields (engine, the queue's URL, the SQS client)."""
    import boto3
    from moto import mock_aws

    from ..adapters.aws.graph_dynamodb import DynamoGraphStore
    from ..adapters.aws.entity_dynamodb import DynamoEntityStore
    from ..adapters.aws.blob_s3 import S3BlobStore
    from ..adapters.memory.queue_memory import MemoryQueue
    from ..adapters.memory.vector_memory import MemoryVectorIndex
    from ..bootstrap.providers import attach_query_side, make_embedder, make_generator, make_summarizer
    from ..providers.hashing import RegexTokenizer
    from ..services.engine import Engine, open_settings
    from .moto_lean import lean_moto

    region, table, bucket = "us-east-1", f"eragraph-{name}", "eragraph-bench-docs"
    definition = table_definition(find_template(args))
    # mock_aws sets fake credentials for the process; every client below names its region
    with mock_aws(), lean_moto():
        boto3.client("s3", region_name=region).create_bucket(Bucket=bucket)
        sqs = boto3.client("sqs", region_name=region)
        url = sqs.create_queue(QueueName=f"eragraph-{name}.fifo",
                               Attributes={"FifoQueue": "true", "VisibilityTimeout": "60"})["QueueUrl"]
        boto3.client("dynamodb", region_name=region).create_table(TableName=table, **definition)
        graph = DynamoGraphStore(table, region=region)
        settings = open_settings(graph, settings.with_overrides(embed_cache=False))
        tokenizer = RegexTokenizer()
        engine = Engine(settings=settings, graph=graph, vectors=MemoryVectorIndex(), queue=MemoryQueue(),
                        embedder=make_embedder(settings, None), tokenizer=tokenizer,
                        summarizer=make_summarizer(settings, tokenizer),
                        blobs=S3BlobStore(bucket, client=boto3.client("s3", region_name=region)),
                        generator=make_generator(settings))
        attach_query_side(engine, settings, DynamoEntityStore(table, models=graph.models), MemoryVectorIndex())
        yield engine, url, sqs


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
