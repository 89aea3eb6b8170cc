"""Pieces every benchmark shares: loading a JSONL corpus and its questions, Recall@k over
supporting documents, percentiles, engines built fresh in a store directory, stage timing
proxies around the engine's ports, progress bars and the JSON result file."""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..config import Settings, settings_from_env
from ..domain.text import titled_text
from ..services.ingest import SourceDoc

# ----------------------------------------------------------------------------- data


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_corpus(path: str | Path, limit: int | None = None) -> list[SourceDoc]:
    """Corpus rows {"id", "text", "title"?, "increment"?, ...} as SourceDocs whose document id
    is the row id (so questions' supporting_ids name them directly) and whose text opens with
    the row's title (domain.text.titled_text, as for JSONL documents); the row's ``increment``
    (when present) is kept in ``meta``. File order; ``limit`` keeps the first rows."""
    rows = read_jsonl(path)
    if limit is not None:
        rows = rows[:limit]
    name = Path(path).parent.name or "corpus"
    docs = []
    for row in rows:
        meta = {}
        if row.get("increment") is not None:
            meta["increment"] = int(row["increment"])
        docs.append(SourceDoc(source=f"{name}/{row['id']}", text=titled_text(row.get("title", ""), row["text"]),
                              title=row.get("title", ""),
                              doc_id=str(row["id"]), meta=meta))
    return docs


def order_by_increment(docs: Sequence[SourceDoc]) -> list[SourceDoc]:
    """Stable sort by the corpus's own ``increment`` when every row has one, else file order."""
    if docs and all((d.meta or {}).get("increment") is not None for d in docs):
        return sorted(docs, key=lambda d: d.meta["increment"])
    return list(docs)


def load_questions(path: str | Path, limit: int | None = None,
                   corpus_ids: Iterable[str] | None = None) -> list[dict]:
    """Questions with a non-empty ``supporting_ids`` (null queries have none and no passage
    recall). With ``corpus_ids``, only questions whose support lies inside that corpus."""
    known = set(corpus_ids) if corpus_ids is not None else None
    out = []
    for q in read_jsonl(path):
        support = [str(s) for s in q.get("supporting_ids") or []]
        if not support:
            continue
        if known is not None and not set(support) <= known:
            continue
        out.append({**q, "supporting_ids": support})
        if limit is not None and len(out) >= limit:
            break
    return out


# ----------------------------------------------------------------------------- metrics


def recall_at_k(ranked_doc_ids: Sequence[str], supporting_ids: Iterable[str], k: int) -> float:
    """Fraction of the supporting documents found among the first ``k`` retrieved documents
    (``ranked_doc_ids`` is deduplicated here, best first)."""
    support = set(supporting_ids)
    if not support:
        raise ValueError("recall needs at least one supporting id")
    seen: list[str] = []
    for doc_id in ranked_doc_ids:
        if doc_id and doc_id not in seen:
            seen.append(doc_id)
        if len(seen) >= k:
            break
    return len(support & set(seen)) / len(support)


def result_doc_ids(results: Sequence[Any]) -> list[str]:
    """Documents credited by a ranked result list, best first. A chunk credits its document;
    a summary node credits none (its text is a digest of many documents, and crediting all
    of them would reward vagueness). The k in Recall@k counts results, not documents."""
    return [r.doc_id for r in results if getattr(r, "layer", 0) == 0 and r.doc_id]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def paired_bootstrap(groups: Sequence[Sequence[float]], resamples: int = 10_000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """Mean of paired differences (one per question: after - before) and its ``level`` percentile
    bootstrap interval. ``groups`` are the differences of separate question sets (corpora); each
    resample draws every group's questions with replacement within that group (a stratified
    bootstrap), so every corpus keeps its share of questions. Returns (mean, low, high)."""
    import numpy as np

    arrays = [np.asarray(g, dtype=np.float64) for g in groups if len(g)]
    if not arrays:
        raise ValueError("paired_bootstrap of no differences")
    total = sum(len(a) for a in arrays)
    observed = float(math.fsum(float(x) for a in arrays for x in a) / total)
    rng = np.random.default_rng(seed)
    sums = np.zeros(resamples)
    for a in arrays:
        sums += a[rng.integers(0, len(a), size=(resamples, len(a)))].sum(axis=1)
    means = sums / total
    tail = (1.0 - level) / 2.0 * 100.0
    return observed, float(np.percentile(means, tail)), float(np.percentile(means, 100.0 - tail))


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100] (numpy's default method)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError("q must be within [0, 100]")
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


# ----------------------------------------------------------------------------- engines


def bench_settings(args: Any, **overrides: Any) -> Settings:
    """Settings from the environment, then the benchmark's --embedder/--summarizer flags."""
    return settings_from_env(embedder=getattr(args, "embedder", None),
                             summarizer=getattr(args, "summarizer", None), **overrides)


def open_engine(profile: str, store: Path | None, settings: Settings):
    from ..bootstrap import build_engine

    return build_engine(profile, store, settings)  # a profile that keeps no store ignores ``store``


def fresh_dir(path: Path) -> Path:
    """An empty directory at ``path`` (removed first if present)."""
    import shutil

    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def close_engine(engine: Any) -> None:
    for part in (engine.graph, engine.vectors, engine.embedder):
        close = getattr(part, "close", None)
        if callable(close):
            close()


# ----------------------------------------------------------------------------- stage timing


@dataclass
class StageClock:
    """Exclusive wall time per stage: entering a stage pauses the one it was called from, so
    an ingest hook that embeds entity names charges that time to ``embed``, not to ``ner``."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    items: dict[str, int] = field(default_factory=dict)
    _stack: list[list] = field(default_factory=list)

    def enter(self, stage: str) -> None:
        now = time.perf_counter()
        if self._stack:
            top = self._stack[-1]
            self.seconds[top[0]] = self.seconds.get(top[0], 0.0) + now - top[1]
        self._stack.append([stage, now])

    def leave(self, items: int = 0) -> None:
        now = time.perf_counter()
        stage, since = self._stack.pop()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - since
        self.calls[stage] = self.calls.get(stage, 0) + 1
        self.items[stage] = self.items.get(stage, 0) + items
        if self._stack:
            self._stack[-1][1] = now

    def call(self, stage: str, fn, *a, items: int = 0, **kw):
        self.enter(stage)
        try:
            return fn(*a, **kw)
        finally:
            self.leave(items)


class Timed:
    """A proxy around one port: the named methods are timed under ``stage`` (``items`` counts
    the length of their first argument when it is a sequence); everything else passes through."""

    def __init__(self, inner: Any, clock: StageClock, stage: str, methods: Iterable[str]) -> None:
        self._inner = inner
        self._clock = clock
        self._stage = stage
        self._methods = frozenset(methods)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._methods or not callable(attr):
            return attr
        clock, stage = self._clock, self._stage

        def timed(*a, **kw):
            items = len(a[0]) if a and isinstance(a[0], (list, tuple)) else 0
            return clock.call(stage, attr, *a, items=items, **kw)

        return timed


WRITE_METHODS = {
    "graph": ("put_nodes", "delete_nodes", "delete_dead_nodes", "put_document", "delete_document", "get_document",
              "get_nodes", "layer_refs", "layer_sizes", "get_segments", "get_segments_by_id",
              "prefix_refs", "apply_region", "put_meta", "get_meta", "delete_meta", "add_ledger", "put_lsh",
              "get_lsh", "meta_keys"),
    "vectors": ("upsert", "delete", "flush"),
    "queue": ("send", "receive", "ack", "pending"),
}


def instrument(engine: Any, clock: StageClock) -> Any:
    """Wrap the engine's ports in timing proxies (in place) and return the engine. Stages:
    chunk (tokenizer), embed, summarize, store (graph store, vector index, queue, entity store),
    and for the entity graph when installed: ner (the extractor), embed_entities (entity-name
    vectors), ingest_hooks_other (the rest of the hook). Each stage is exclusive of the
    stages it calls."""
    engine.tokenizer = Timed(engine.tokenizer, clock, "chunk", ("offsets", "count"))
    engine.embedder = Timed(engine.embedder, clock, "embed", ("embed",))
    engine.summarizer = Timed(engine.summarizer, clock, "summarize", ("summarize",))
    engine.graph = Timed(engine.graph, clock, "store", WRITE_METHODS["graph"])
    engine.vectors = Timed(engine.vectors, clock, "store", WRITE_METHODS["vectors"])
    engine.queue = Timed(engine.queue, clock, "store", WRITE_METHODS["queue"])
    index = engine.entities
    if index is not None:
        # the entity graph keeps its own references to the models and its storage
        if hasattr(index, "extractor"):
            index.extractor = Timed(index.extractor, clock, "ner", ("extract",))
        if hasattr(index, "embedder"):
            index.embedder = Timed(index.embedder, clock, "embed_entities", ("embed",))
        for name in ("store", "vectors"):
            if hasattr(index, name):
                setattr(index, name, Timed(getattr(index, name), clock, "store",
                                           [m for m in dir(getattr(index, name)) if not m.startswith("_")]))
    hooks = engine.ingest_hooks
    if hooks:
        def wrap(hook):
            def timed_hook(eng, nodes):
                return clock.call("ingest_hooks_other", hook, eng, nodes, items=len(nodes))
            return timed_hook
        engine.ingest_hooks = [wrap(h) for h in hooks]
    return engine


# ----------------------------------------------------------------------------- output


def progress(total: int, desc: str, enabled: bool = True):
    """A tqdm bar on stderr (disabled with --no-progress or when stderr is not a terminal)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="doc", leave=False, file=sys.stderr,
                disable=not enabled or not sys.stderr.isatty())


def machine() -> dict:
    mem_kb = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_kb = int(line.split()[1])
    except OSError:
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1), "cpu": cpu,
            "python": platform.python_version(), "platform": platform.platform()}


def command_line(args: Any, name: str) -> str:
    """The command that reproduces this run (paths as given)."""
    argv = list(getattr(args, "argv", None) or sys.argv[1:])
    if argv[:2] == ["bench", name]:  # invoked as `eragraph bench NAME ...`
        argv = argv[2:]
    elif argv[:1] == [name]:
        argv = argv[1:]
    return "eragraph bench " + name + " " + " ".join(shlex.quote(a) for a in argv)


def git_commit(where: str | Path | None = None) -> str:
    """The commit of the checkout holding this package (``+dirty`` when tracked files differ
    from it), or "not recorded" outside a git checkout."""
    cwd = Path(where) if where else Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return "not recorded"
        # ":/shared": the checkout's top-level shared/ (a plain "shared" would be read relative to
        # this package's folder, where it matches nothing, so a changed tree went unmarked)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/shared"],
                               cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "not recorded"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


_STARTED: dict[str, str] = {}  # the commit read when the run began (mark_start)


def mark_start() -> None:
    """Read the commit of the code as the run begins (`eragraph bench` calls it first): an
    hour-long run has imported its code by the time it ends, when HEAD may have moved on."""
    _STARTED.setdefault("commit", git_commit())


def run_record(where: str | Path | None = None) -> dict:
    """What every results file records about its run, under one key ``run``: the date (UTC),
    the git commit of the code that ran (read at ``mark_start`` when it was called), and the
    machine (CPU model, cores, Python)."""
    commit = _STARTED["commit"] if where is None and "commit" in _STARTED else git_commit(where)
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit, "machine": machine()}


def finish(result: dict, args: Any, name: str) -> dict:
    """Stamp the result with the command and its run (date, commit, machine: run_record);
    write --out when given."""
    result.setdefault("benchmark", name)
    result["command"] = command_line(args, name)
    result["run"] = run_record()
    out = getattr(args, "out", None)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def add_common_options(p: Any) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", metavar="FILE.json", help="also write the result to this file")
    p.add_argument("--embedder", help="override the embedder (minilm, hash, bedrock)")
    p.add_argument("--summarizer", help="override the summarizer (extractive, bedrock, openai)")
    p.add_argument("--profile", choices=("local", "memory"), default="local",
                   help="local: SQLite + FAISS stores under --store (default); memory: in-process")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
