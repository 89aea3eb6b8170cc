"""The scale benchmark's build: ``build_store`` runs what `eragraph ingest CORPUS.jsonl` runs in
a child process (``python -m eragraph.bench.scale_build --build-child ...``) and reports its wall
time, peak RSS (the build's, and each phase's: the streamed ingest, the drain, and the built store
opened again for one question, "index") and the vector index's resident memory;
``build_and_open`` opens the result."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..config import Settings


def build_child(argv: list[str]) -> int:
    """``python -m eragraph.bench.scale_build --build-child STORE CORPUS REPORT BATCH SETTINGS``: the
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
    phases = {"ingest": rss_before_drain}
    fresh = reset_peak()
    report.merge(drain(engine))
    report.seconds = time.perf_counter() - service_started
    report.errors = errors + report.errors
    phases["drain"] = peak_kb() if fresh else None
    rss_peak = max(rss_before_drain, phases["drain"] or 0) if fresh else peak_kb()
    resident = index_resident_kb(engine)
    close_all(engine)
    phases["index"] = reopened_peak_kb(store, settings) if reset_peak() else None
    out = {"exit_code": 1 if report.errors else 0, "cli": report.to_dict(), "rss_before_drain_kb": rss_before_drain,
           "ingest_phase_seconds": ingest_phase, "rss_peak_kb": rss_peak, "rss_phase_peak_kb": phases,
           "vector_index_resident_kb": resident}
    Path(report_path).write_text(json.dumps(out), encoding="utf-8")
    return out["exit_code"]


def reset_peak() -> bool:
    """Start this process's peak resident memory (VmHWM) afresh from its current size (Linux:
    ``5`` written to /proc/self/clear_refs), so the next ``peak_kb`` is one phase's; False
    where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def close_all(engine: Any) -> None:
    """Release what the build's engine holds (its stores and the entity graph's), and hand the
    freed heap back, so the next phase starts from what the process holds without it."""
    import gc

    from ..adapters.local.vector_faiss_ivf import release_freed
    from .common import close_engine

    close_engine(engine)
    for part in (getattr(engine.entities, "vectors", None), getattr(engine.entities, "store", None)):
        close = getattr(part, "close", None)
        if callable(close):
            close()
    gc.collect()
    release_freed()


def reopened_peak_kb(store: Any, settings: Settings) -> int:
    """The peak of the built store opened again and one question answered (the vector index
    read from its snapshot and log: what `eragraph query` pays on the store)."""
    from ..bootstrap import build_engine
    from ..services.query import query

    engine = build_engine("local", Path(store), settings)
    query(engine, "a question", mode="collapsed", k=5)
    return peak_kb()


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
    proc = subprocess.Popen([sys.executable, "-m", "eragraph.bench.scale_build", "--build-child", str(store), str(corpus),
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
            "peak_rss_phases_mb": {phase: None if kb is None else round(kb / 1024, 1)
                                   for phase, kb in child.get("rss_phase_peak_kb", {}).items()},
            "vector_index_resident_mb": (None if child.get("vector_index_resident_kb") is None
                                         else round(child["vector_index_resident_kb"] / 1024, 1)),
            "peak_rss_beyond_index_mb": (None if child.get("vector_index_resident_kb") is None else
                                         round((child["rss_peak_kb"] - child["vector_index_resident_kb"]) / 1024, 1)),
            "documents_added": cli_out["documents_added"], "chunks_added": cli_out["chunks_added"],
            "summarize_calls": cli_out["summarize_calls"], "store_mb": store_mb(store)}


def store_mb(store: Path) -> dict[str, float]:
    """The built store's size on disk, MB, by its top-level entry: the blocks its files take (a
    directory: its files' sum, so a file of a few bytes counts its block; SQLite's write-ahead
    logs counted with their database)."""
    sizes: dict[str, float] = {}
    for entry in sorted(store.iterdir()):
        files = [entry] if entry.is_file() else [f for f in entry.rglob("*") if f.is_file()]
        name = entry.name.removesuffix("-wal").removesuffix("-shm")
        sizes[name] = sizes.get(name, 0.0) + sum(f.stat().st_blocks * 512 for f in files) / 2**20
    return {name: round(mb, 1) for name, mb in sizes.items()}


def build_and_open(store: Path, corpus: Path, args: Any, settings: Settings) -> tuple[Any, dict]:
    """A fresh local store built from ``corpus`` in a child process (build_store), then opened
    with the same settings: (engine, build figures)."""
    from ..bootstrap import build_engine

    if store.exists():
        shutil.rmtree(store)
    build = build_store(store, corpus, args.batch_docs, settings)
    return build_engine("local", store, settings), build


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--build-child":
        raise SystemExit(build_child(sys.argv[2:]))
    raise SystemExit("run it as `eragraph bench scale`")
