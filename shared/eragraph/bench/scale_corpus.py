"""The scale benchmark's corpus and single-document measurements, shared by its local part
(bench/scale.py) and its AWS part (bench/scale_aws.py): synthetic one-chunk documents of random
words (seeded, a few words capitalized so the entity graph has names), probe documents and
questions; ``insert_delete`` (one document's ingest + drain, then remove + drain, counted); and
``Precomputed`` (question vectors computed before the clock starts)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .counting import median_methods, median_row, median_snapshots, reset, totals

WORDS_PER_DOC = 40


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
    """Insert each probe document (ingest + drain), then delete it (remove + drain); medians.
    ``extra_counter``: request counters (scale_aws.Counters) reset before each operation, whose
    snapshots' medians are added as ``<service>_median``."""
    import copy

    from ..services.ingest import ingest
    from ..services.remove import remove
    from ..services.resummarize import drain

    result: dict[str, Any] = {}
    for op in ("insert", "delete"):
        result[op] = {"rows": [], "methods": [], "requests": []}
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
                result[op]["requests"].append(extra_counter.snapshot())
    out = {}
    for op, data in result.items():
        out[op] = {"median": median_row(data["rows"]), "runs": len(data["rows"]),
                   "seconds_all": [round(r["seconds"], 4) for r in data["rows"]],
                   "ports_median": median_methods(data["methods"])}
        if data["requests"]:
            out[op].update(median_snapshots(data["requests"]))
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
