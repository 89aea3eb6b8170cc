"""Random corpora with metadata and random filters, and the checks a filtered query must pass in
every mode (tests/e2e/test_filters_property.py runs them on memory and local, tests/aws on moto).

A case is (filter, question, mode). Every result must be a leaf chunk of a document whose
attributes match the filter (no summary is returned under a filter: a summary mixes documents).
For the exact modes the result must be the brute-force top-k of the allowed leaves: the dense
side (collapsed, detailed, summarized and dense under a filter) by inner product with the ranking
tie rule, ``bm25`` by the unfiltered BM25 scores restricted to the allowed leaves."""

from __future__ import annotations

import os
import random
from dataclasses import replace

from eragraph.domain.filters import chunk_attrs, matches, to_json
from eragraph.domain.ranking import rank_key
from eragraph.ports.records import Hit
from eragraph.services.ingest import ingest
from eragraph.services.modes import available_modes
from eragraph.services.query import query
from eragraph.services.resummarize import drain
from random_filters import random_filter, random_metadata
from support import synthetic_docs

QUESTIONS = ["Which astronomy item is called Markerdoc3?", "bake flour butter sugar oven", "stock market dividend",
             "guitar chord melody concert", "Marker football striker league", "seed pollen flower"]
EXACT_DENSE = ("collapsed", "detailed", "summarized", "dense")
BIG_BUDGET = 1_000_000


def cases_per_profile(default: int = 1000) -> int:
    return int(os.environ.get("ERAGRAPH_FILTER_CASES", default))


def corpus(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [replace(d, metadata=random_metadata(rng)) for d in synthetic_docs(n, seed=seed, prefix="doc")]


def build(engine, docs) -> None:
    ingest(engine, docs)
    drain(engine)


def attrs_of(doc) -> dict:
    """A generated document's filter attributes (what each of its leaves must be filtered on)."""
    return chunk_attrs(doc.metadata, doc.source, doc.resolved_id, doc.title)


def _squash(text: str) -> str:
    return " ".join(text.split())


class Oracle:
    """What a filtered query must return. Which documents a filter allows comes from the
    documents the test generated (their metadata, source, id and title), never from what the
    store kept of them, so metadata lost or changed at ingest fails here. The store supplies
    only which leaves hold each document's text (checked against that text) and their vectors."""

    def __init__(self, engine, docs) -> None:
        self.engine = engine
        self.docs = {d.resolved_id: d for d in docs}
        leaves = [r.node_id for r in engine.graph.layer_refs(0)]
        self.nodes = engine.graph.get_nodes(leaves)
        self.vectors = engine.vectors.get_vectors(leaves)
        for node_id, node in self.nodes.items():
            doc = self.docs.get(node.doc_id)
            assert doc is not None, f"leaf {node_id} names {node.doc_id}, no generated document"
            assert node.source == doc.source and _squash(node.text) in _squash(doc.text), node_id
        held = {n.doc_id for n in self.nodes.values()}
        assert held == set(self.docs), f"documents without a leaf: {sorted(set(self.docs) - held)}"

    def allowed(self, f) -> set[str]:
        ok = {d for d, doc in self.docs.items() if matches(f, attrs_of(doc))}
        return {c for c, n in self.nodes.items() if n.doc_id in ok}

    def by_document(self, ranked: list[str], k: int) -> list[str]:
        """The first k of a ranking cut one document at a time: every document's best leaf in
        rank order, then the other leaves in rank order (what the leaf-level modes return)."""
        firsts, rest, seen = [], [], set()
        for c in ranked:
            doc = self.nodes[c].doc_id
            (rest if doc in seen else firsts).append(c)
            seen.add(doc)
        return (firsts + rest)[:k]

    def dense(self, vector, allowed: set[str], k: int, per_document: bool = False) -> list[str]:
        """The top k allowed leaves by similarity; ``per_document`` for the ``dense`` mode (the
        summary-graph modes under a filter rank leaves without it)."""
        ranked = [h.node_id for h in sorted((Hit(c, float(self.vectors[c] @ vector)) for c in allowed), key=rank_key)]
        return self.by_document(ranked, k) if per_document else ranked[:k]

    def bm25(self, text: str, allowed: set[str], k: int) -> list[str]:
        every = self.engine.lexical.search(text, len(self.nodes) + 10)
        return self.by_document([h.node_id for h in sorted((h for h in every if h.node_id in allowed), key=rank_key)], k)


def run_cases(engine, docs, n_cases: int, seed: int, modes: list[str] | None = None) -> dict:
    """Run ``n_cases`` random (filter, question, mode) cases; raise AssertionError on the first
    leak or wrong top-k. Returns counts by mode (and how many were checked against brute force,
    and how many allowed nothing)."""
    rng = random.Random(seed)
    oracle = Oracle(engine, docs)
    modes = modes or available_modes(engine)
    counts: dict[str, int] = {m: 0 for m in modes}
    exact = empty = 0
    for i in range(n_cases):
        f = random_filter(rng)
        text = rng.choice(QUESTIONS)
        mode = modes[i % len(modes)]
        k = rng.choice([1, 3, 5, 8])
        response = query(engine, text, mode=mode, k=k, budget=BIG_BUDGET, where=f)
        allowed = oracle.allowed(f)
        got = [r.id for r in response.results]
        where = f"case {i}: mode {mode}, k {k}, filter {to_json(f)}"
        for r in response.results:
            assert r.layer == 0, f"{where}: a summary ({r.id}) under a filter"
            assert r.id in allowed, f"{where}: {r.id} of {r.doc_id} is outside the filter"
        assert len(got) <= min(k, len(allowed)), where
        if not allowed:
            empty += 1
        elif mode != "bm25":  # BM25 may find no allowed leaf with a word of the question
            assert got, f"{where}: nothing returned though {len(allowed)} leaves are allowed"
        if mode in EXACT_DENSE:
            vector = engine.embedder.embed([text])[0]
            assert got == oracle.dense(vector, allowed, k, per_document=mode == "dense"), where
            exact += 1
        elif mode == "bm25":
            assert got == oracle.bm25(text, allowed, k), where
            exact += 1
        counts[mode] += 1
    counts["exact_checked"] = exact
    counts["nothing_allowed"] = empty
    return counts
