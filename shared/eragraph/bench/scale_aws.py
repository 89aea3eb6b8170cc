"""The scale benchmark's AWS part (`eragraph bench scale --aws-sizes`): one size on the AWS
profile's storage under moto (bench/moto.MotoProfile: the DynamoDB table of template.yaml, S3,
SQS FIFO; OpenSearch through the repository's request-checking fake when it is beside the
template, else vectors in memory).

The store of ``n`` chunks is made one of two ways (``--aws-build``):

* ``services``: ingest + drain through the services on the moto engine, request by request
  (an in-process queue, one drain); faithful but slow (about 1,000 s at 10k chunks);
* ``load``: the same corpus built by the local profile (bench/scale_build.build_store: the
  child process `eragraph ingest` runs), then written into the moto engine by
  services/portable's dump and load (the engine's ports, no model called: the nodes, segments,
  summaries, entity records and vectors are the local build's). The load's wall time is
  recorded.

Then, the same either way, through the normal AWS path with the SQS queue: single-document
inserts and deletes (ingest + drain, remove + drain; ``--repeats``, medians), counting
DynamoDB requests and items (botocore hooks: counting.DynamoCounter), OpenSearch requests by
operation (counting.CountingOpenSearch) and SQS requests and messages (counting.SqsCounter);
per question and mode (collapsed, dense, tri_graph, the other core modes, then every other
mode the engine offers), the same counts (DynamoDB round trips too: bench/counting) and the wall
time, with the first question's counts apart (the warm-up: the first entity mode's reads the
entity graph into memory, as a query function's first walk does, adapters/aws/entity_warm); a
cold query function's first ``tri_graph`` question without and with the entity graph's snapshot
(``cold_start``: the snapshot written as the scheduled reindex writes it, adapters/aws/
entity_snapshot_s3); and ``/stats`` (services.stats.stats) called twice, the
second call's counts (warm: what every later call costs)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from ..config import Settings
from .counting import CountingOpenSearch, DynamoCounter, SqsCounter, count_ports, median_row, median_snapshots
from .moto import moto_engine, opensearch_stand_in
from .scale_build import build_and_open
from .scale_corpus import Precomputed, insert_delete, probe_docs, synthetic_rows, write_corpus

BUILDS = ("services", "load")
QUERY_MODES = ("collapsed", "dense", "tri_graph", "detailed", "summarized")


class Counters:
    """The request counters of one moto engine, reset and read together."""

    def __init__(self, engine: Any, sqs: Any, opensearch: CountingOpenSearch | None) -> None:
        self.dynamodb = DynamoCounter()
        self.dynamodb.attach(engine.graph.models.item._get_connection().connection.client)
        self.sqs = SqsCounter()
        self.sqs.attach(sqs)
        self.opensearch = opensearch

    def reset(self) -> None:
        for c in self.all():
            c.reset()

    def all(self) -> list[Any]:
        return [c for c in (self.dynamodb, self.opensearch, self.sqs) if c is not None]

    def snapshot(self) -> dict:
        out = {"dynamodb": self.dynamodb.snapshot(), "sqs": self.sqs.snapshot()}
        if self.opensearch is not None:
            out["opensearch"] = self.opensearch.snapshot()
        return out


def build_by_services(engine: Any, n: int, args: Any) -> dict:
    from ..services.ingest import SourceDoc, ingest
    from ..services.resummarize import drain

    started = time.perf_counter()
    rows = synthetic_rows(n, args.seed)
    ingest(engine, (SourceDoc(source=f"synthetic/{r['id']}", doc_id=r["id"], text=r["text"]) for r in rows),
           batch_docs=args.batch_docs)
    drain(engine)
    return {"how": "services", "seconds": round(time.perf_counter() - started, 3)}


def build_local(n: int, work: Path, args: Any, settings: Settings) -> tuple[Any, dict]:
    """The local profile's store of the same corpus, built in a child process; (engine, figures)."""
    corpus = write_corpus(work / f"aws-corpus-{n}.jsonl", n, args.seed)
    engine, build = build_and_open(work / f"aws-source-{n}", corpus, args, settings)
    if not args.keep:
        corpus.unlink(missing_ok=True)
    return engine, build


def load_into(target: Any, source: Any) -> dict:
    """Dump ``source`` and load it into ``target`` (services.portable), timed; what was written."""
    from ..services.portable import dump, load

    started = time.perf_counter()
    counts = load(target, dump(source))
    return {"seconds": round(time.perf_counter() - started, 3), "records": counts}


def query_counts(engine: Any, counters: Counters, texts: list[str], k: int = 5) -> dict:
    """Per mode: the median requests of one query (and its wall time under moto)."""
    from ..services.modes import available_modes
    from ..services.query import query

    offered = set(available_modes(engine))
    inner = engine.embedder
    engine.embedder = Precomputed(inner, texts)
    out = {}
    try:
        for mode in [m for m in QUERY_MODES if m in offered] + [m for m in offered if m not in QUERY_MODES]:
            counters.reset()
            query(engine, texts[0], mode=mode, k=k)  # warm-up: the layer sizes, the index's mapping
            first = counters.snapshot()  # the first entity mode's also reads the entity graph in
            rows, seconds = [], []
            for text in texts:
                counters.reset()
                started = time.perf_counter()
                query(engine, text, mode=mode, k=k)
                seconds.append(time.perf_counter() - started)
                rows.append(counters.snapshot())
            out[mode] = {"n": len(texts), **median_snapshots(rows),
                         "seconds_median": median_row([{"s": s} for s in seconds])["s"],
                         "first_query": {"dynamodb": {key: first["dynamodb"][key] for key in
                                                      ("requests", "round_trips", "items_read", "by_operation")}}}
    finally:
        engine.embedder = inner
    return out


def cold_start_counts(engine: Any, counters: Counters, text: str, k: int = 5) -> dict:
    """A cold query function's first ``tri_graph`` question, without and with the entity graph's
    snapshot (adapters/aws/entity_snapshot_s3), which is first written as the scheduled reindex
    writes it: the DynamoDB requests and round trips, and the S3 GetObjects."""
    from ..adapters.aws.entity_warm import WarmEntityReads
    from ..services.query import query

    warm = engine.entities.store
    if not isinstance(warm, WarmEntityReads) or warm.snapshots is None:
        return {}
    gets: list[str] = []
    warm.snapshots.client.meta.events.register("before-call.s3.GetObject", lambda **_: gets.append("GetObject"))
    started = time.perf_counter()
    written = warm.keep_snapshot()
    out: dict = {"snapshot": {**written, "seconds": round(time.perf_counter() - started, 3)}}
    inner = engine.embedder
    engine.embedder = Precomputed(inner, [text])
    try:
        for name, snapshots in (("without_snapshot", None), ("with_snapshot", warm.snapshots)):
            engine.entities.store = WarmEntityReads(warm.store, warm._chunk_ids, snapshots=snapshots)
            counters.reset()
            gets.clear()
            began = time.perf_counter()
            query(engine, text, mode="tri_graph", k=k)
            d = counters.snapshot()["dynamodb"]
            out[name] = {"dynamodb": {key: d[key] for key in ("requests", "round_trips", "items_read", "by_operation")},
                         "s3_get_object": len(gets), "seconds": round(time.perf_counter() - began, 3)}
    finally:
        engine.embedder = inner
        engine.entities.store = warm
    return out


def corpus_questions(n: int, count: int, seed: int) -> list[str]:
    """``count`` questions made of stored documents' texts (spread over the corpus of ``n``):
    each names the capitalized entities of its document, so the graph modes find entities
    in it and walk the entity graph instead of falling back to the dense side."""

    picks = {round(i * (n - 1) / max(count - 1, 1)) for i in range(count)}
    return [row["text"].rstrip(".") + "?" for i, row in enumerate(synthetic_rows(n, seed)) if i in picks]


def stats_counts(engine: Any, counters: Counters) -> dict:
    """``/stats`` (services.stats.stats) twice; the second call's requests."""
    from ..services.stats import stats

    stats(engine)
    counters.reset()
    started = time.perf_counter()
    stats(engine)
    return {"seconds": round(time.perf_counter() - started, 3), **counters.snapshot()}


def aws_size(n: int, work: Path, args: Any, settings: Settings) -> dict:
    from ..adapters.aws.queue_sqs import SqsQueue

    how = getattr(args, "aws_build", "services")
    if how not in BUILDS:
        raise ValueError(f"--aws-build is one of {', '.join(BUILDS)}, not {how!r}")
    source, local_build = (build_local(n, work, args, settings) if how == "load" else (None, None))
    opensearch = opensearch_stand_in(args)
    try:
        with moto_engine(f"scale-{n}", args, settings, opensearch_client=opensearch) as (engine, url, sqs):
            if source is not None:
                build = {"how": "load", "local_build": local_build, "load": load_into(engine, source)}
                build["seconds"] = build["load"]["seconds"]
            else:
                build = build_by_services(engine, n, args)
            engine.queue = SqsQueue(url, client=sqs)
            counters = Counters(engine, sqs, opensearch)
            stats_figures = stats_counts(engine, counters)
            questions = corpus_questions(n, max(args.repeats, 1), args.seed)
            queries = query_counts(engine, counters, questions)
            cold = cold_start_counts(engine, counters, questions[0])
            ports = count_ports(engine)
            ops = insert_delete(engine, ports, probe_docs(args.repeats, args.seed, f"aws{n}-"), extra_counter=counters)
            sizes = engine.graph.layer_sizes()
    finally:
        if source is not None:
            from .common import close_engine

            close_engine(source)
            if not args.keep:
                shutil.rmtree(work / f"aws-source-{n}", ignore_errors=True)
    return {"chunks": sizes.get(0, 0), "layers": {str(k): v for k, v in sorted(sizes.items())},
            "build": build, "build_seconds_under_moto": build["seconds"],
            "opensearch": "the repository's OpenSearch fake (counted)" if opensearch is not None else "in memory",
            "insert": ops["insert"], "delete": ops["delete"], "query": queries, "cold_start": cold,
            "stats": stats_figures}
