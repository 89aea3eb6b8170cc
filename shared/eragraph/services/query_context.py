"""One query as the retrieval modes see it (services.modes runs them): the question, its
k, budget and p, the filter, and what a mode records on the way (route, s(q), notes)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..domain.filters import Filter
from .engine import Engine


@dataclass
class QueryContext:
    """One query as the modes see it; modes record the route they took, s(q) and notes.
    ``vector`` (the question's embedding) is made on first use: a mode that never reads it
    (bm25) never loads the embedder."""
    engine: Engine
    text: str
    k: int
    budget: int | None
    p: float
    route: str = ""
    router_score: float | None = None
    router_ms: float | None = None   # features + score, when the router ran
    notes: list[str] = field(default_factory=list)
    given_vector: np.ndarray | None = field(default=None, repr=False)
    where: Filter | None = None       # the metadata filter: every list is drawn from allowed leaves
    view_only: bool = False           # ``where`` is the caller's access view alone (domain.access):
    # summaries carry their readers, so the summary modes keep every layer of the readable partitions
    embed_ms: float = 0.0             # the time spent embedding the question (the response's stages)

    @property
    def vector(self) -> np.ndarray:
        if self.given_vector is None:
            started = time.perf_counter()
            self.given_vector = self.engine.embedder.embed([self.text])[0]
            self.embed_ms += (time.perf_counter() - started) * 1000.0
        return self.given_vector


def has_entity_graph(engine: Engine) -> bool:
    return engine.entities is not None
