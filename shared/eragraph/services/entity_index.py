"""The entity graph, built at ingestion without an LLM and kept incremental.

``install(engine)`` (called by bootstrap) attaches an ``EntityIndex`` to the engine:
- an ingest hook: sentence segmentation + NER of the new layer-0 chunks, their postings,
  mentions and co-occurrences written to the entity store, embeddings of new entity names and
  of entity-bearing sentences written to a second vector index (``engine.extras["entity_vectors"]``:
  entity names under layer -1, sentences under layer -2, so that no summary-graph search sees them);
- a remove hook: the chunks' records leave the store, the entities no live chunk mentions any
  more and the chunks' sentences leave the entity vector index;
The graph retrieval modes (services.graph_query) are listed in the mode registry
(services.modes) and run when an engine has an ``entity_index``.

Storage by profile: a local store (graph store with a ``path``) gets ``entities.sqlite`` and
``entity_vectors/`` (FAISS) beside ``graph.sqlite``; the memory profile gets memory adapters; an
engine whose bootstrap already put an ``entity_store`` / ``entity_vectors`` in extras (the AWS
profile) keeps them. The NER provider is spaCy unless the engine runs the model-free hashing
embedder (tests, smoke runs), which gets the capitalized-phrase extractor; ``ERAGRAPH_NER``
(``spacy`` | ``spacy+nouns`` | ``capitalized``) overrides either choice.

Sentence vectors (LinearRAG's sim(q, s), eq. 4) cost a second embedding pass over the corpus
(about as much as the chunks themselves); by default a sentence is scored with its chunk's
vector instead (corpus passages are a few sentences long), and ``ERAGRAPH_SENTENCE_VECTORS=1``
embeds every entity-bearing sentence on its own (layer -2 of the entity vector index).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..domain.model import Document, Node
from ..ports_entity import ChunkEntities, EntityStore
from .engine import Engine

from .entity_ids import ENTITY_LAYER, SENTENCE_LAYER, entity_vector_id

__all__ = ["ENTITY_LAYER", "SENTENCE_LAYER", "EntityIndex", "entity_vector_id", "install", "make_extractor"]


class EntityIndex:
    def __init__(self, store: EntityStore, vectors, extractor, embedder, embed_sentences: bool = False) -> None:
        self.embed_sentences = embed_sentences
        self.store = store
        self.vectors = vectors
        self.extractor = extractor
        self.embedder = embedder

    def add_nodes(self, nodes: Sequence[Node]) -> int:
        chunks = [n for n in nodes if n.layer == 0]
        if not chunks:
            return 0
        extracted = self.extractor.extract([n.text for n in chunks])
        records = [ChunkEntities(n.node_id, tuple(sents)) for n, sents in zip(chunks, extracted)]
        new = self.store.add_chunks(records)
        # also names recorded by an earlier call that died before embedding them (a redelivery
        # finds its chunks recorded, so add_chunks reports nothing new)
        named = sorted({e for rec in records for sent in rec.sentences for e in sent.entities} - set(new))
        have = self.vectors.get_vectors([entity_vector_id(e) for e in named]) if named else {}
        ids, texts, metas = [], [], []
        for name in list(new) + [e for e in named if entity_vector_id(e) not in have]:
            ids.append(entity_vector_id(name))
            texts.append(name)
            metas.append({"layer": ENTITY_LAYER, "doc_id": ""})
        for node, rec in zip(chunks, records) if self.embed_sentences else ():
            for sid, sent in zip(rec.sentence_ids(), rec.sentences):
                if sent.entities:
                    ids.append(sid)
                    texts.append(sent.text)
                    metas.append({"layer": SENTENCE_LAYER, "doc_id": node.doc_id})
        if ids:
            self.vectors.upsert(ids, self.embedder.embed(texts), metas)
            self.vectors.flush()
        return len(new)

    def remove_chunks(self, chunk_ids: Sequence[str]) -> list[str]:
        """Vectors first, records second: a call that dies in between leaves records whose
        vectors are gone, which the redelivered call (or reindex) finishes; the other order
        would leave vectors that nothing names any more once the records are gone."""
        chunk_ids = list(chunk_ids)
        sentence_ids = self.store.sentence_ids_of_chunks(chunk_ids)
        # an entity leaves when the leaving chunks hold all its occurrences (its frequency):
        # no read of the postings, which for a common name span the corpus
        held: dict[str, int] = {}
        for counts in self.store.chunk_entities(chunk_ids).values():
            for e, n in counts.items():
                held[e] = held.get(e, 0) + n
        going = [e for e, f in self.store.frequencies(held).items() if f <= held[e]]
        self.vectors.delete([entity_vector_id(e) for e in going] + sentence_ids)
        self.vectors.flush()
        return self.store.remove_chunks(chunk_ids)


def make_extractor(engine: Engine):
    choice = os.environ.get("ERAGRAPH_NER", "").strip().lower()
    if not choice:
        choice = "capitalized" if engine.settings.embedder == "hash" else "spacy"
    from ..providers.spacy_ner import CapitalizedPhraseExtractor, SpacyEntityExtractor

    if choice == "capitalized":
        return CapitalizedPhraseExtractor()
    if choice == "spacy":
        return SpacyEntityExtractor()
    if choice == "spacy+nouns":
        return SpacyEntityExtractor(noun_chunks=True)
    raise ValueError(f"ERAGRAPH_NER={choice!r}: choose spacy, spacy+nouns or capitalized")


def _default_storage(engine: Engine):
    path = getattr(engine.graph, "path", None)
    if path is not None and str(path) not in ("", ":memory:"):
        from ..adapters.local.entity_sqlite import SqliteEntityStore
        from ..adapters.local.vector_faiss import FaissVectorIndex

        store_dir = Path(path).parent
        return (SqliteEntityStore(store_dir / "entities.sqlite"),
                FaissVectorIndex(store_dir / "entity_vectors", engine.embedder.dim))
    from ..adapters.memory import MemoryGraphStore, MemoryVectorIndex
    from ..adapters.memory_entity import MemoryEntityStore

    if isinstance(engine.graph, MemoryGraphStore):
        return MemoryEntityStore(), MemoryVectorIndex()
    return None, None  # a cloud graph store: its profile must supply a durable entity store


def install(engine: Engine, extractor=None, store: EntityStore | None = None, vectors=None) -> EntityIndex | None:
    """Attach the entity graph and its retrieval modes to ``engine`` (idempotent). An engine
    on a cloud graph store whose profile put no ``entity_store``/``entity_vectors`` in its
    extras gets no entity graph (an in-memory one would vanish with the function instance)."""
    existing = engine.extras.get("entity_index")
    if isinstance(existing, EntityIndex):
        return existing
    store = store or engine.extras.get("entity_store")
    vectors = vectors or engine.extras.get("entity_vectors")
    if store is None or vectors is None:
        default_store, default_vectors = _default_storage(engine)
        store = store or default_store
        vectors = vectors or default_vectors
        if store is None or vectors is None:
            return None
    embed_sentences = os.environ.get("ERAGRAPH_SENTENCE_VECTORS", "").strip().lower() in ("1", "true", "yes")
    index = EntityIndex(store, vectors, extractor or make_extractor(engine), engine.embedder, embed_sentences)
    engine.extras["entity_index"] = index
    engine.extras["entity_store"] = store
    engine.extras["entity_vectors"] = vectors

    def on_ingest(eng: Engine, nodes: Sequence[Node]) -> None:
        index.add_nodes(nodes)

    def on_remove(eng: Engine, doc: Document, chunk_ids: Sequence[str]) -> None:
        index.remove_chunks(chunk_ids)

    engine.extras.setdefault("ingest_hooks", []).append(on_ingest)
    engine.extras.setdefault("remove_hooks", []).append(on_remove)
    return index
