"""`eragraph bench ingest`: throughput of the whole ingest pipeline (ingest + drain: chunk,
embed, NER hooks, hash/partition, summarize, write) next to the models alone on the same
texts — the physical limit on this machine.

The pipeline runs in a fresh store with the embedding cache off. Stages are timed by proxies
around the engine's ports (tokenizer → chunk, embedder → embed, summarizer → summarize, graph
store + vector index + queue → store; the entity graph's extractor → ner, its entity-name
embedding → embed_entities, the rest of its hook → ingest_hooks_other), each exclusive of the stages it
calls; whatever is left of the wall time is the services' own work (LSH hashing,
partitioning, segment diffs, bookkeeping). Models are loaded and warmed before any clock
starts. The standalone embedder then embeds the very chunk texts the pipeline produced
(the chunks and the summaries), in batches of the same size."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from ..bootstrap.profiles import keeps_store
from ..services.ingest import ingest
from ..services.resummarize import drain
from .common import (StageClock, add_common_options, bench_settings, close_engine, finish, fresh_dir,
                     instrument, load_corpus, open_engine, progress)

MODEL_STAGES = ("embed", "embed_entities", "ner")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ingest", help="ingest throughput vs. the models alone, with a stage breakdown",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True, help="corpus JSONL ({id, text, title?})")
    p.add_argument("--store", help="working directory (its contents are replaced; default: a temporary one)")
    p.add_argument("--limit", type=int, help="use only the first N documents")
    p.add_argument("--batch-docs", type=int, default=64, help="documents per ingest batch")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def find_extractor(engine: Any) -> Any | None:
    """The entity graph's extractor, if the engine has an entity graph."""
    index = engine.entities
    extractor = getattr(index, "extractor", None)
    return extractor if callable(getattr(extractor, "extract", None)) else None


def standalone(fn, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        fn(texts[i : i + batch])
    return time.perf_counter() - started


def rate(n: int, seconds: float) -> float | None:
    return round(n / seconds, 2) if seconds > 0 else None


def run_in(store: Path, args: Any) -> dict:
    docs = load_corpus(args.corpus, limit=args.limit)
    settings = bench_settings(args, embed_cache=False)
    engine = open_engine(args.profile, fresh_dir(store / "pipeline") if keeps_store(args.profile) else None, settings)
    extractor = find_extractor(engine)
    # load and warm the models outside every clock
    engine.embedder.embed(["warm up the embedder"])
    engine.tokenizer.offsets("warm up the tokenizer")
    if extractor is not None:
        extractor.extract(["Warm up the entity extractor in Paris."])

    clock = StageClock()
    instrument(engine, clock)
    started = time.perf_counter()
    with progress(len(docs), "ingest", not args.no_progress) as bar:
        report = ingest(engine, docs, progress=bar.update, batch_docs=args.batch_docs)
    ingest_seconds = time.perf_counter() - started
    report.merge(drain(engine))
    total = time.perf_counter() - started

    refs = [r.node_id for layer in sorted(engine.graph.layer_sizes()) for r in engine.graph.layer_refs(layer)]
    nodes = engine.graph.get_nodes(refs)
    chunk_texts = [nodes[i].text for i in refs if i in nodes and nodes[i].layer == 0]
    summary_texts = [nodes[i].text for i in refs if i in nodes and nodes[i].layer > 0]
    embedded_texts = chunk_texts + summary_texts
    inner = engine.embedder._inner
    inner = getattr(inner, "inner", inner)  # the model itself, not its cost-ledger meter
    embed_alone = standalone(inner.embed, embedded_texts, max(settings.embed_batch, 1) * 4)
    ner_alone = standalone(extractor.extract, chunk_texts, 64) if extractor is not None else None
    close_engine(engine)

    stages = {k: round(v, 3) for k, v in sorted(clock.seconds.items())}
    other = total - sum(clock.seconds.values())
    stages["hash_partition_other"] = round(other, 3)
    models = sum(clock.seconds.get(s, 0.0) for s in MODEL_STAGES)
    embed_in_pipeline = clock.seconds.get("embed", 0.0)
    result: dict[str, Any] = {
        "corpus": args.corpus, "documents": len(docs), "chunks": len(chunk_texts),
        "summaries": len(summary_texts), "embedder": settings.embedder, "summarizer": settings.summarizer,
        "profile": args.profile, "ner": getattr(extractor, "identity", None),
        "seconds": {"total": round(total, 3), "ingest": round(ingest_seconds, 3),
                    "drain": round(total - ingest_seconds, 3)},
        "stages_seconds": stages,
        "stages_share": {k: round(v / total, 4) for k, v in stages.items()} if total > 0 else {},
        "pipeline": {"documents_per_s": rate(len(docs), total), "chunks_per_s": rate(len(chunk_texts), total)},
        "embedder_alone": {"texts": len(embedded_texts), "seconds": round(embed_alone, 3),
                           "texts_per_s": rate(len(embedded_texts), embed_alone),
                           "chunks_per_s_equivalent": rate(len(chunk_texts), embed_alone)},
        "embed_in_pipeline": {"texts": clock.items.get("embed", 0), "seconds": round(embed_in_pipeline, 3),
                              "texts_per_s": rate(clock.items.get("embed", 0), embed_in_pipeline)},
        "outside_models_share": round((total - models) / total, 4) if total > 0 else None,
        "summarize_calls": report.cost.summarize_calls, "tokens_in": report.cost.tokens_in,
    }
    alone_rate = result["embedder_alone"]["texts_per_s"]
    inside_rate = result["embed_in_pipeline"]["texts_per_s"]
    result["embed_efficiency"] = round(inside_rate / alone_rate, 4) if alone_rate and inside_rate else None
    if ner_alone is not None:
        ner_in = clock.seconds.get("ner", 0.0)
        result["ner_alone"] = {"texts": len(chunk_texts), "seconds": round(ner_alone, 3),
                               "texts_per_s": rate(len(chunk_texts), ner_alone)}
        result["ner_in_pipeline"] = {"seconds": round(ner_in, 3), "texts_per_s": rate(len(chunk_texts), ner_in)}
        result["ner_efficiency"] = round(ner_alone / ner_in, 4) if ner_in > 0 else None
    return result


def run(args: Any) -> dict:
    if args.store:
        result = run_in(Path(args.store), args)
    else:
        with tempfile.TemporaryDirectory(prefix="eragraph-bench-ingest-") as tmp:
            result = run_in(Path(tmp), args)
    return finish(result, args, "ingest")
