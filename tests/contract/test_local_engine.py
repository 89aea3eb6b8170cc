"""The whole engine on the local adapters (SQLite + FAISS + in-process queue): it builds exactly
the graph the memory adapters build, and a reopened store serves the same graph and answers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from eragraph.adapters.local import FaissVectorIndex, FsBlobStore, LocalQueue, SqliteGraphStore
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.remove import remove
from eragraph.services.resummarize import drain
from support import make_engine, synthetic_docs

QUERIES = ["Which astronomy item is called Markerd13?", "bake flour butter sugar oven",
           "stock market inflation dividend", "guitar chord melody concert"]


def local_engine(folder):
    memory = make_engine()
    return replace(memory, graph=SqliteGraphStore(folder / "graph.db"),
                   vectors=FaissVectorIndex(folder / "vectors", memory.embedder.dim),
                   queue=LocalQueue(), blobs=FsBlobStore(folder / "blobs"))


def snapshot(engine) -> dict:
    g = engine.graph
    sizes = g.layer_sizes()
    node_ids = [r.node_id for layer in sizes for r in g.layer_refs(layer)]
    return {
        "sizes": sizes,
        "refs": {layer: g.layer_refs(layer) for layer in sizes},
        "nodes": g.get_nodes(node_ids),
        "segments": {layer: g.get_segments(layer) for layer in range(max(sizes, default=0) + 2)},
        "index": {layer: g.prefix_refs(layer, 0, 2 ** 62) for layer in range(max(sizes, default=0) + 2)},
        "documents": g.list_documents(),
        "lsh": g.get_lsh(),
        "dirty": g.meta_keys("dirty:"),
        "vector_ids": engine.vectors.ids(),
    }


def answers(engine) -> list[list[tuple[str, float]]]:
    out = []
    for text in QUERIES:
        for mode in ("collapsed", "dense", "detailed"):
            out.append([(r.id, r.score) for r in query(engine, text, mode=mode, k=8).results])
    return out


def assert_same_answers(got, want):
    assert [[i for i, _ in rows] for rows in got] == [[i for i, _ in rows] for rows in want]
    for g_rows, w_rows in zip(got, want):
        assert [s for _, s in g_rows] == pytest.approx([s for _, s in w_rows], abs=1e-5)


def test_local_adapters_build_the_memory_graph_and_survive_reopen(tmp_path):
    docs = synthetic_docs(60)
    memory = make_engine()
    local = local_engine(tmp_path)
    for engine in (memory, local):
        ingest(engine, docs)
        drain(engine)
    built = snapshot(local)
    assert built == snapshot(memory)
    assert len(built["sizes"]) >= 3 and built["dirty"] == []
    assert built["vector_ids"] == set(built["nodes"])
    some = sorted(built["vector_ids"])[::7]
    got, want = local.vectors.get_vectors(some), memory.vectors.get_vectors(some)
    assert all(np.array_equal(got[i], want[i]) for i in some)
    before = answers(local)
    assert_same_answers(before, answers(memory))

    local.graph.close()
    reopened = local_engine(tmp_path)
    assert snapshot(reopened) == built
    assert_same_answers(answers(reopened), before)

    # keep growing the reopened store: removals, replacements and new documents
    changed = [SourceDoc(source=d.source, doc_id=d.doc_id, title=d.title, text=d.text + " Revised edition.")
               for d in docs[10:12]]
    more = synthetic_docs(15, seed=3, prefix="n")
    for engine in (memory, reopened):
        remove(engine, [d.doc_id for d in docs[:5]])
        ingest(engine, changed + more)
        drain(engine)
    assert snapshot(reopened) == snapshot(memory)
    assert_same_answers(answers(reopened), answers(memory))

    reopened.graph.close()
    final = local_engine(tmp_path)
    assert snapshot(final) == snapshot(memory)
    final.graph.close()
