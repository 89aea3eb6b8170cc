"""Reindex audits the entity graph against the chunks on the memory and the local (SQLite +
FAISS) profiles: a chunk whose entity records were deleted is extracted again, the records a
deleted chunk left behind are removed, and the entity vectors follow; the result equals an
entity graph built from scratch from the live chunks."""

from __future__ import annotations

import pytest
from support import make_engine, synthetic_docs, with_entity_graph

from eragraph.adapters.memory.entity_memory import MemoryEntityStore
from eragraph.ports.entity import ChunkEntities
from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor
from eragraph.services import entity_index, ingest, reindex, resummarize

ENTITY_METRICS = ("EntityChunksReextracted", "EntityChunksOrphanedRemoved", "EntityCountsRepaired",
                  "EntityVectorsReembedded", "EntityVectorsOrphanedDeleted")


def engine_for(profile: str, tmp_path):
    if profile == "memory":
        engine = make_engine()
        with_entity_graph(engine)
        return engine
    from eragraph.bootstrap.local import build_local_engine
    from eragraph.config import Settings

    settings = Settings(embedder="hash", s_min=3, s_max=5, n_planes=12, chunk_tokens=40, chunk_overlap=8,
                        summary_tokens=30, embed_cache=False)
    return build_local_engine(tmp_path / "store", settings)


def by_name(store) -> dict:
    m = store.export()
    contain = {(m.chunks[i], m.entities[j]): float(v) for i, j, v in zip(*m.contain.nonzero(), m.contain.data)}
    coo = m.cooccurrence.tocoo()
    cooc = {(m.entities[i], m.entities[j]): float(v) for i, j, v in zip(coo.row, coo.col, coo.data)}
    return {"entities": m.entities, "contain": contain, "cooc": cooc, "sentences": m.sentences,
            "frequency": dict(zip(m.entities, m.frequency.tolist())), "count": store.entity_count()}


def from_scratch(engine) -> dict:
    chunks = engine.graph.get_nodes(r.node_id for r in engine.graph.layer_refs(0))
    ids = sorted(chunks)
    extracted = CapitalizedPhraseExtractor().extract([chunks[i].text for i in ids])
    fresh = MemoryEntityStore()
    fresh.add_chunks([ChunkEntities(i, tuple(s)) for i, s in zip(ids, extracted)])
    return by_name(fresh)


@pytest.mark.parametrize("profile", ["memory", "sqlite"])
def test_reindex_repairs_the_entity_graph(profile, tmp_path):
    engine = engine_for(profile, tmp_path)
    ingest.ingest(engine, synthetic_docs(12))
    resummarize.drain(engine)
    store, vectors = engine.entities.store, engine.entities.vectors
    clean = reindex.run(engine)
    assert all(clean["metrics"][k] == 0 for k in ENTITY_METRICS), clean["metrics"]
    # 1. a chunk whose entity records were deleted (its unique entities' vectors stay behind)
    docs = engine.graph.list_documents()
    stripped = docs[0].chunk_ids[0]
    store.delete_chunks([stripped])
    # 2. a removal that died after deleting a document's chunks, before the entity hook
    dead = docs[1]
    engine.graph.delete_nodes(dead.chunk_ids)
    engine.vectors.delete(dead.chunk_ids)
    engine.graph.delete_document(dead.doc_id)
    engine.vectors.flush()
    # 3. an entity's name vector lost, a name vector of no entity
    import numpy as np

    lost = sorted(vectors.ids())[0]
    vectors.delete([lost])
    vectors.upsert(["ent:Nobody Ever"], np.ones((1, engine.embedder.dim), dtype=np.float32),
                   [{"layer": entity_index.ENTITY_LAYER, "doc_id": ""}])
    vectors.flush()
    assert stripped not in store.chunk_ids() and set(dead.chunk_ids) <= store.chunk_ids()
    report = reindex.run(engine)
    metrics = report["metrics"]
    assert metrics["EntityChunksReextracted"] == 1
    assert metrics["EntityChunksOrphanedRemoved"] == len(dead.chunk_ids)
    assert metrics["EntityVectorsReembedded"] == 1 and metrics["EntityVectorsOrphanedDeleted"] == 1
    assert report["invariants"]["ok"], report["invariants"]
    assert by_name(store) == from_scratch(engine)
    assert vectors.ids() == {f"ent:{e}" for e in store.export().entities}
    again = reindex.run(engine)
    assert all(again["metrics"][k] == 0 for k in ENTITY_METRICS), again["metrics"]
