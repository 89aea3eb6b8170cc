"""`eragraph bench warm`: the memory a function holds per chunk for its entity walks
(adapters/aws/entity_warm), on stores built by `eragraph bench retrieval`.

    eragraph bench warm --stores stores/full --datasets musique,popqa,hotpotqa,multihop_rag \\
        --out bench-results/warm-memory.json

For each store: its chunks' entity records as the AWS profile keeps them (services/portable's
``entity_chunk`` records: the rows of the DynamoDB store and of the snapshot object), encoded as
the snapshot object (adapters/aws/entity_snapshot_s3); then, traced by tracemalloc, the object
decoded and held by a ``WarmEntityReads`` as a cold function takes it: the records and the
indexes a walk reads. The result gives the bytes a chunk holds (after the hold, and at the peak
of decoding and holding, the object's own bytes, read before, included), the object's bytes a chunk,
the seconds a take costs (median of 3, untraced: a cold function's first walk pays them), and, per function memory, the chunks the
shipped cap lets it hold (``held_chunk_cap``) beside what the largest measured peak would fit."""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

from .common import add_common_options, finish

MEMORY_MB = (1024, 2048, 4096, 10240)
REPEATS = 3  # timed takes of each snapshot (median)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("warm", help="memory a function holds per chunk for its entity walks, on built stores",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stores", required=True, help="the directory of the stores, one per dataset")
    p.add_argument("--datasets", required=True, help="comma-separated store names under --stores")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def measure(path: Path) -> dict:
    """One store's entity records, held as a cold function holds them."""
    from ..adapters.aws.entity_snapshot_s3 import Snapshot, decode, encode
    from ..adapters.aws.entity_warm import WarmEntityReads
    from ..adapters.local.entity_sqlite import SqliteEntityStore
    from ..ports.entity import ChunkEntities, SentenceMentions
    from ..services.portable import entity_chunk_records

    store = SqliteEntityStore(path / "entities.sqlite")
    try:
        records = {r["chunk_id"]: ChunkEntities(r["chunk_id"], tuple(SentenceMentions(t, tuple(e))
                                                                      for t, e in r["sentences"]))
                   for r in entity_chunk_records(store, sorted(store.chunk_ids()))}
    finally:
        store.close()
    data = encode(Snapshot(1, 0.0, records))
    chunks, sentences = len(records), sum(len(r.sentences) for r in records.values())
    del records
    gc.collect()
    seconds = []
    for _ in range(REPEATS):  # untraced: tracemalloc slows allocation
        started = time.perf_counter()
        timed = WarmEntityReads(store=None, chunk_ids=list)
        snapshot = decode(data)
        timed._hold(snapshot.records, snapshot.generation)
        seconds.append(time.perf_counter() - started)
        del timed, snapshot
        gc.collect()
    tracemalloc.start()
    try:
        warm = WarmEntityReads(store=None, chunk_ids=list)
        snapshot = decode(data)
        warm._hold(snapshot.records, snapshot.generation)
        del snapshot
        gc.collect()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"chunks": chunks, "sentences": sentences, "entities": len(warm._post), "snapshot_bytes": len(data),
            "held_mb": round(held / 2 ** 20, 1), "peak_mb": round((peak + len(data)) / 2 ** 20, 1),
            "held_bytes_per_chunk": round(held / max(chunks, 1)),
            "peak_bytes_per_chunk": round((peak + len(data)) / max(chunks, 1)),
            "snapshot_bytes_per_chunk": round(len(data) / max(chunks, 1)),
            "take_seconds": round(statistics.median(seconds), 3),
            "take_ms_per_1k_chunks": round(1000 * statistics.median(seconds) / max(chunks, 1) * 1000, 1)}


def run(args: Any) -> dict:
    from ..adapters.aws.entity_warm import BASELINE_MB, HELD_BYTES_PER_CHUNK, held_chunk_cap

    stores = {name: measure(Path(args.stores) / name) for name in args.datasets.split(",") if name}
    worst = max((s["peak_bytes_per_chunk"] for s in stores.values()), default=0)
    caps = [{"memory_mb": mb, "cap_chunks": held_chunk_cap(mb),
             "fits_at_worst_peak": (mb - BASELINE_MB) * 2 ** 20 // worst if worst else None}
            for mb in MEMORY_MB]
    result = {"stores": stores, "held_bytes_per_chunk_assumed": HELD_BYTES_PER_CHUNK, "baseline_mb": BASELINE_MB,
              "worst_peak_bytes_per_chunk": worst, "caps": caps,
              "cap_is_safe": all(c["cap_chunks"] <= c["fits_at_worst_peak"] for c in caps) if worst else None}
    return finish(result, args, "warm")
