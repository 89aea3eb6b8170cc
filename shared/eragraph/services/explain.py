"""Why the entity-graph modes ranked what they ranked (POST /query ``explain``, `eragraph query
--explain`): the question's entities matched in the graph (seeds, with their match scores), the
entities activation reached (with their weights), each returned passage's restart weight, final
score and rank, the entities that connect it, and a short "why" in words.

A recorder, like cost.track: ``recording()`` opens one for a query, and services.graph_query
``note``s what it computed on the way. Without an open recorder ``note`` returns at once (one
context-variable read), so a query that does not explain pays nothing for it. ``report`` turns
what was noted and the query's final results into the response's ``explain`` (bounded: at most
MAX_ENTITIES entities and MAX_PASSAGES passages)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_ENTITIES = 50
MAX_PASSAGES = 30
GRAPH_ROUTES = ("tri_graph", "paths", "concept_ppr", "local_global", "fusion")  # the modes explain covers


@dataclass
class Recorder:
    """What the graph modes of one query noted: the mode, seeds and activated entities (name ->
    score/weight) and passages' restart weights (chunk id -> weight)."""

    mode: str = ""
    seeds: dict[str, float] = field(default_factory=dict)
    activated: dict[str, float] = field(default_factory=dict)
    restart: dict[str, float] = field(default_factory=dict)


_ACTIVE: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar("eragraph_explain", default=None)


@contextmanager
def recording(enabled: bool = True) -> Iterator[Recorder | None]:
    """A recorder for the block (None when not ``enabled``: nothing is noted)."""
    if not enabled:
        yield None
        return
    rec = Recorder()
    token = _ACTIVE.set(rec)
    try:
        yield rec
    finally:
        _ACTIVE.reset(token)


def _named(values: Any, names: Sequence[str] | None) -> dict[str, float]:
    """``values`` as name -> positive value: a mapping (keys may be ("e"|"c", name) pairs), or an
    array aligned with ``names``."""
    if values is None:
        return {}
    if isinstance(values, Mapping):
        out = {}
        for key, v in values.items():
            name = key[1] if isinstance(key, tuple) else key
            if float(v) > 0:
                out[str(name)] = max(out.get(str(name), 0.0), float(v))
        return out
    arr = np.asarray(values, dtype=np.float64)
    idx = np.flatnonzero(arr > 0)
    return {str(names[i]): float(arr[i]) for i in idx if names is not None and i < len(names)}


def note(mode: str, *, seeds: Any = None, activated: Any = None, restart: Any = None,
         entities: Sequence[str] | None = None, chunks: Sequence[str] | None = None) -> None:
    """Record what a graph mode computed (a no-op unless a query is explaining). ``seeds`` and
    ``activated``: per entity (a mapping, or an array aligned with ``entities``); ``restart``:
    per passage (a mapping whose keys are chunk ids or ("c", id) pairs, or an array aligned with
    ``chunks``; entity keys of a mapping are left out)."""
    rec = _ACTIVE.get()
    if rec is None:
        return
    rec.mode = rec.mode or mode
    for name, v in _named(seeds, entities).items():
        rec.seeds[name] = max(rec.seeds.get(name, 0.0), v)
    for name, v in _named(activated, entities).items():
        rec.activated[name] = max(rec.activated.get(name, 0.0), v)
    if isinstance(restart, Mapping):
        restart = {k: v for k, v in restart.items() if not (isinstance(k, tuple) and k[0] != "c")}
    rec.restart.update(_named(restart, chunks))


def _why(rank: int, ents: list[str], seeds: Mapping[str, float], activated: Mapping[str, float],
         restart: float, shared: Mapping[str, int]) -> str:
    parts = []
    seeded = [e for e in ents if e in seeds]
    if seeded:
        parts.append("seeded by " + ", ".join(f"{e} ({seeds[e]:.2f})" for e in seeded[:3]))
    reached = sorted((e for e in ents if e not in seeds and e in activated), key=lambda e: -activated[e])
    if reached:
        parts.append("reached through " + ", ".join(f"{e} ({activated[e]:.2f})" for e in reached[:3]))
    links = [f"{e} with #{shared[e]}" for e in ents if e in shared and shared[e] != rank][:2]
    if links:
        parts.append("shares " + ", ".join(links))
    if not parts:
        parts.append(f"similar to the question (restart {restart:.2f})" if restart > 0
                     else "no entity of the question leads here: filled by similarity")
    return "; ".join(parts)


def report(rec: Recorder | None, route: str, results: Sequence[Any], chunk_entities,
           in_view: bool = False) -> dict[str, Any] | None:
    """The response's ``explain`` of a query routed to ``route`` whose final ``results`` (each
    with ``id`` and ``score``, in order) came from what ``rec`` noted; ``chunk_entities(ids)``
    reads the entities of those passages (the entity store). None: ``route`` is no graph mode.
    ``in_view``: the query ran in a caller's view (domain.access), whose results are passages it
    may read: the seeds and activated entities listed are then only those the shown passages
    hold (an entity the graph walk reached may be named by documents the caller may not read)."""
    if rec is None or route not in GRAPH_ROUTES:
        return None
    kept = sorted({**rec.activated, **rec.seeds}, key=lambda e: (e not in rec.seeds,
                                                                -rec.seeds.get(e, rec.activated.get(e, 0.0)), e))
    shown = list(results)[:MAX_PASSAGES]
    if in_view:
        counts = chunk_entities([r.id for r in shown]) if shown and kept else {}
        held = {e for found in counts.values() for e in found}
        kept = [e for e in kept if e in held]
    kept = kept[:MAX_ENTITIES]
    wanted = set(kept)
    if not in_view:
        counts = chunk_entities([r.id for r in shown]) if shown and wanted else {}
    ents_of = {r.id: sorted((e for e in counts.get(r.id, {}) if e in wanted),
                            key=lambda e: (e not in rec.seeds, e)) for r in shown}
    first: dict[str, int] = {}  # entity -> the best rank of a passage holding it
    for rank, r in enumerate(shown, 1):
        for e in ents_of[r.id]:
            first.setdefault(e, rank)
    passages = []
    for rank, r in enumerate(shown, 1):
        restart = round(rec.restart.get(r.id, 0.0), 6)
        passages.append({"id": r.id, "restart": restart, "score": r.score, "rank": rank, "entities": ents_of[r.id],
                         "why": _why(rank, ents_of[r.id], rec.seeds, rec.activated, restart, first)})
    return {"mode": route,
            "seeds": [{"entity": e, "score": round(v, 6)} for e, v in sorted(rec.seeds.items(), key=lambda x: -x[1])
                      if e in wanted],
            "activated": [{"entity": e, "weight": round(rec.activated.get(e, rec.seeds.get(e, 0.0)), 6)}
                          for e in kept],
            "passages": passages,
            "edges": [{"entity": e, "passage": p["id"]} for p in passages for e in p["entities"]]}
