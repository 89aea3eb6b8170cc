"""Helpers of the titles migration's tests (services.title_migration): titled documents, a store
made what the earlier version built, and the check that every leaf vector is its titled text's.

Imported as `from title_support import ...` (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import numpy as np
from support import synthetic_docs

from eragraph.domain.text import embedding_text, titled_text
from eragraph.services.engine import EMBED_FORMAT
from eragraph.services.ingest import SourceDoc, leaf_meta


class Recording:
    """The engine's embedder, keeping every text it is given."""

    def __init__(self, inner) -> None:
        self.inner, self.identity, self.dim = inner, inner.identity, inner.dim
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)


def titled_docs(n: int = 8) -> list[SourceDoc]:
    """Documents of several chunks, titled as a JSONL line's (the title begins the text), and
    two untitled ones."""
    docs = [SourceDoc(source=f"mem://{d.doc_id}", doc_id=d.doc_id, title=d.title,
                      text=titled_text(d.title, " ".join([d.text] * 3))) for d in synthetic_docs(n)]
    return docs + [SourceDoc(source=f"mem://plain{i}", doc_id=f"plain{i}", text=d.text * 2)
                   for i, d in enumerate(synthetic_docs(2, seed=5))]


def leaves(engine) -> dict:
    """Every live leaf chunk: id -> (node, its document)."""
    ids = [r.node_id for r in engine.graph.layer_refs(0)]
    nodes = engine.graph.get_nodes(ids)
    return {i: (nodes[i], engine.graph.get_document(nodes[i].doc_id)) for i in ids}


def make_old(engine) -> list[str]:
    """Make ``engine``'s store what the earlier version built: each leaf vector the embedding of
    the chunk's own text, no format mark. Returns the chunks the migration must re-embed."""
    chunks = leaves(engine)
    ids = sorted(chunks)
    engine.vectors.upsert(ids, engine.embedder.embed([chunks[i][0].text for i in ids]),
                          [leaf_meta(chunks[i][0], chunks[i][1], engine.tenant) for i in ids])
    engine.vectors.flush()
    engine.graph.delete_meta(EMBED_FORMAT)
    return sorted(i for i, (n, d) in chunks.items() if embedding_text(d.title, n.text) != n.text)


def assert_titled(engine) -> None:
    chunks = leaves(engine)
    stored = engine.vectors.get_vectors(list(chunks))
    for i, (node, doc) in chunks.items():
        assert np.allclose(stored[i], engine.embedder.embed([embedding_text(doc.title, node.text)])[0]), i


def migrate_page_by_page(open_engine, page: int = 4) -> tuple[list[str], list[dict]]:
    """The titles migration run until it completes, each run on a new engine from
    ``open_engine()`` and stopped after its first page: (the texts embedded over all runs, each
    run's report). Every stopped run's saved cursor counts what it has seen."""
    from eragraph.services.title_migration import CURSOR, migrate_titles

    embedded: list[str] = []
    runs: list[dict] = []
    for _ in range(100):
        engine = open_engine()
        engine.embedder = Recording(engine.embedder)
        out = migrate_titles(engine, out_of_time=lambda: True, page=page)
        embedded += engine.embedder.texts
        runs.append(out)
        if out["complete"]:
            break
        assert engine.graph.get_meta(CURSOR)["seen"] == out["totals"]["seen"]
    return embedded, runs
