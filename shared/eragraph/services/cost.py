"""The cost ledger: every model call (summarize, embed, generate) is recorded in the graph
store with its kind, model, tokens in and out and seconds, and priced from the settings' price
table (config.DEFAULT_PRICES, overridable with ERAGRAPH_PRICES).

A ledger row's key is ``<kind>|<model>`` (MetaStore.add_ledger keeps one counter row per key);
a key without ``|`` is a row recorded before models were (model ""). ``track()`` collects the
calls made inside a block as well, so a query reports its own tokens and cost.

Embedding calls are recorded by ``MeteredEmbedder``, which the bootstrap puts between the
embedding cache and the model, so only texts actually sent to the model count. Token counts:
Titan reports its own (``inputTextTokenCount``); MiniLM's are its word pieces as the model reads
them ([CLS]/[SEP] excluded, each text cut at 254 pieces as the model truncates it); the hashing
embedder's are words and punctuation marks. Embedding has no output tokens."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..domain.lsh import WEIGHTS_TAG
from ..ports.graph import MetaStore
from ..ports.providers import Embedder

SEP = "|"
KINDS = ("embed", "summarize", "generate")
BEDROCK_REGION_PREFIXES = ("us.", "eu.", "apac.", "global.")  # cross-region inference profiles


def ledger_key(kind: str, model: str) -> str:
    if SEP in kind:
        raise ValueError(f"a ledger kind may not contain {SEP!r}: {kind!r}")
    return f"{kind}{SEP}{model}" if model else kind


def split_key(key: str) -> tuple[str, str]:
    kind, _, model = key.partition(SEP)
    return kind, model


@dataclass(frozen=True)
class Call:
    kind: str
    model: str
    tokens_in: int
    tokens_out: int
    seconds: float
    calls: int = 1


_TRACKERS: contextvars.ContextVar[tuple[list[Call], ...]] = contextvars.ContextVar("eragraph_cost_trackers",
                                                                                  default=())


_DEFERRED: contextvars.ContextVar[tuple[MetaStore, list] | None] = contextvars.ContextVar("eragraph_cost_deferred",
                                                                                        default=None)


def record(graph: MetaStore, kind: str, model: str, tokens_in: int, tokens_out: int, seconds: float,
           calls: int = 1) -> None:
    """Add one ledger entry (and show it to every ``track()`` block this call runs in); inside
    a ``deferred(graph)`` block, the entry waits for the write that takes it."""
    entry = (ledger_key(kind, model), calls, int(tokens_in), int(tokens_out), float(seconds))
    held = _DEFERRED.get()
    if held is not None and held[0] is graph:
        held[1].append(entry)
    else:
        graph.add_ledger(*entry)
    call = Call(kind, model, int(tokens_in), int(tokens_out), float(seconds), calls)
    for tracker in _TRACKERS.get():
        tracker.append(call)


@contextmanager
def deferred(graph: MetaStore) -> Iterator[list[tuple[str, int, int, int, float]]]:
    """Inside the block, the ledger entries of model calls recorded in ``graph`` (a summarize
    call, a metered embedding) wait in the list yielded, for a write that stores them with what
    the calls made (a region's apply: RegionChange.ledger, which then clears the list); what no
    write took is added when the block ends, however it ends."""
    pending: list[tuple[str, int, int, int, float]] = []
    token = _DEFERRED.set((graph, pending))
    try:
        yield pending
    finally:
        _DEFERRED.reset(token)
        flush(graph, pending)


def summed(pending: Sequence[tuple[str, int, int, int, float]]) -> tuple[tuple[str, int, int, int, float], ...]:
    """The pending entries summed per ledger key (one ADD per kind)."""
    rows: dict[str, list] = {}
    for key, calls, tokens_in, tokens_out, seconds in pending:
        row = rows.setdefault(key, [key, 0, 0, 0, 0.0])
        row[1] += calls
        row[2] += tokens_in
        row[3] += tokens_out
        row[4] = round(row[4] + seconds, 6)
    return tuple((k, c, i, o, s) for k, c, i, o, s in rows.values())


def flush(graph: MetaStore, pending: list[tuple[str, int, int, int, float]]) -> None:
    """Add the pending entries to the ledger, and forget them."""
    for row in summed(pending):
        graph.add_ledger(*row)
    pending.clear()


@contextmanager
def track() -> Iterator[list[Call]]:
    """The model calls recorded inside the block (in this thread / context)."""
    calls: list[Call] = []
    token = _TRACKERS.set(_TRACKERS.get() + (calls,))
    try:
        yield calls
    finally:
        _TRACKERS.reset(token)


# ----------------------------------------------------------------------------- prices
def price_key(model: str) -> str:
    """A model identity as the price table names it: without the weights digest, without an
    embedding dimension (``@1024``) and without a Bedrock cross-region prefix (``us.``)."""
    base = model.partition(WEIGHTS_TAG)[0]
    head, at, tail = base.rpartition("@")
    if at and tail.isdigit():
        base = head
    provider, colon, rest = base.partition(":")
    if colon and provider == "bedrock":
        for prefix in BEDROCK_REGION_PREFIXES:
            if rest.startswith(prefix):
                return f"bedrock:{rest[len(prefix):]}"
    return base


def cost_usd(model: str, tokens_in: int, tokens_out: int, prices: Mapping[str, tuple[float, float]]) -> float | None:
    """Dollars for those tokens, or None when the model has no price."""
    price = prices.get(model) or prices.get(price_key(model))
    if price is None:
        return None
    return (tokens_in * price[0] + tokens_out * price[1]) / 1e6


def bedrock_spend(calls: Sequence[Call], prices: Mapping[str, tuple[float, float]]) -> tuple[float, list[str]]:
    """Dollars of the Bedrock calls among ``calls`` (models ``bedrock:...``, priced from the
    ledger's table) and the Bedrock models without a price (left out, never counted as free)."""
    usd, unpriced = 0.0, set()
    for c in calls:
        if not c.model.startswith("bedrock:"):
            continue
        cost = cost_usd(c.model, c.tokens_in, c.tokens_out, prices)
        if cost is None:
            unpriced.add(c.model)
        else:
            usd += cost
    return usd, sorted(unpriced)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 8)


def summarize(rows: Sequence[Call], prices: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """Rows with their cost, totals per kind and overall. Unpriced models are listed and left
    out of the dollar totals (never counted as free)."""
    out_rows, by_kind, unpriced = [], {}, set()
    total = {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0, "cost_usd": 0.0}
    for r in sorted(rows, key=lambda c: (c.kind, c.model)):
        usd = cost_usd(r.model, r.tokens_in, r.tokens_out, prices)
        out_rows.append({**asdict(r), "seconds": round(r.seconds, 4), "cost_usd": _round(usd)})
        kind = by_kind.setdefault(r.kind, {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0,
                                           "cost_usd": 0.0})
        for agg in (kind, total):
            agg["calls"] += r.calls
            agg["tokens_in"] += r.tokens_in
            agg["tokens_out"] += r.tokens_out
            agg["seconds"] += r.seconds
            agg["cost_usd"] += usd or 0.0
        if usd is None:
            unpriced.add(r.model or "(unrecorded)")
    for agg in (*by_kind.values(), total):
        agg["seconds"] = round(agg["seconds"], 4)
        agg["cost_usd"] = _round(agg["cost_usd"])
    return {"calls": out_rows, "by_kind": by_kind, "total": total, "unpriced": sorted(unpriced)}


def ledger_rows(ledger: Mapping[str, Mapping[str, float]]) -> list[Call]:
    """MetaStore.ledger() as calls (one per kind and model)."""
    out = []
    for key, row in ledger.items():
        kind, model = split_key(key)
        out.append(Call(kind, model, int(row.get("tokens_in", 0)), int(row.get("tokens_out", 0)),
                        float(row.get("seconds", 0.0)), int(row.get("calls", 0))))
    return out


def ledger_report(graph: MetaStore, prices: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """The whole store's ledger, priced."""
    return summarize(ledger_rows(graph.ledger()), prices)


def calls_report(calls: Sequence[Call], prices: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
    """Calls collected by ``track()`` (merged per kind and model), priced."""
    merged: dict[tuple[str, str], Call] = {}
    for c in calls:
        m = merged.get((c.kind, c.model))
        merged[(c.kind, c.model)] = c if m is None else Call(
            c.kind, c.model, m.tokens_in + c.tokens_in, m.tokens_out + c.tokens_out, m.seconds + c.seconds,
            m.calls + c.calls)
    return summarize(list(merged.values()), prices)


# ----------------------------------------------------------------------------- embeddings
class MeteredEmbedder:
    """An Embedder that records each call to ``inner`` in the ledger: kind ``embed``, the
    embedder's identity, tokens in (``count_tokens(texts)``, or the growth of ``inner.tokens_in``
    when the model reports its own counts) and seconds."""

    def __init__(self, inner: Embedder, graph: MetaStore,
                 count_tokens: Callable[[Sequence[str]], int] | None = None) -> None:
        if count_tokens is None and not hasattr(inner, "tokens_in"):
            raise ValueError(f"{inner.identity}: give count_tokens, it reports no token counts")
        self.inner = inner
        self.graph = graph
        self.count_tokens = count_tokens
        self.dim = inner.dim
        self._lock = threading.Lock()  # a reported-count delta is only ours if calls do not overlap

    @property
    def identity(self) -> str:
        return self.inner.identity

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self.inner.embed(texts)
        if self.count_tokens is not None:
            started = time.perf_counter()
            vectors = self.inner.embed(texts)
            seconds = time.perf_counter() - started
            tokens = int(self.count_tokens(texts))
        else:
            with self._lock:
                before = int(getattr(self.inner, "tokens_in"))
                started = time.perf_counter()
                vectors = self.inner.embed(texts)
                seconds = time.perf_counter() - started
                tokens = int(getattr(self.inner, "tokens_in")) - before
        record(self.graph, "embed", self.inner.identity, tokens, 0, seconds)
        return vectors
