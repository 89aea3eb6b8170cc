"""Filtered queries leak nothing and return the true top-k, on the memory and local profiles:
random corpora with metadata, random filters of every operator, every mode (filter_cases.py).
ERAGRAPH_FILTER_CASES sets the cases per profile (default 1,000)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eragraph.adapters.local import FaissVectorIndex, FsBlobStore, LocalQueue, SqliteGraphStore
from eragraph.adapters.local.entity_sqlite import SqliteEntityStore
from eragraph.adapters.local.lexical_fts5 import Fts5LexicalIndex
from eragraph.adapters.memory.lexical_memory import MemoryLexicalIndex
from filter_cases import build, cases_per_profile, corpus, run_cases
from support import make_engine, with_entity_graph

# longer than the suite's per-test limit (pyproject.toml): 1,000 random cases per profile
pytestmark = pytest.mark.timeout(900)

N_DOCS = 48


def test_memory_profile_filters_every_mode_without_a_leak():
    engine = make_engine()
    engine.lexical = MemoryLexicalIndex(engine.graph)
    with_entity_graph(engine)
    docs = corpus(N_DOCS, seed=11)
    build(engine, docs)
    counts = run_cases(engine, docs, cases_per_profile(), seed=1)
    assert counts["exact_checked"] > 0 and all(counts[m] > 0 for m in ("tri_graph", "concept_ppr", "local_global"))


def test_local_profile_filters_every_mode_without_a_leak(tmp_path):
    memory = make_engine()
    graph = SqliteGraphStore(tmp_path / "graph.db")
    engine = replace(memory, graph=graph, vectors=FaissVectorIndex(tmp_path / "vectors", memory.embedder.dim),
                     queue=LocalQueue(), blobs=FsBlobStore(tmp_path / "blobs"), lexical=Fts5LexicalIndex(graph))
    with_entity_graph(engine, store=SqliteEntityStore(tmp_path / "entities.db"),
                      vectors=FaissVectorIndex(tmp_path / "entity-vectors", memory.embedder.dim))
    docs = corpus(N_DOCS, seed=12)
    build(engine, docs)
    counts = run_cases(engine, docs, cases_per_profile(), seed=2)
    assert counts["exact_checked"] > 0
