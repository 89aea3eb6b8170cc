"""The entity graph, built at ingestion without an LLM and kept incremental.

``services.entity_hooks.install(engine, extractor, store, vectors)`` (called by each profile's
bootstrap, which picks the NER provider and the storage) attaches an ``EntityIndex`` as
``engine.entities``:
- an ingest hook: sentence segmentation + NER of the new layer-0 chunks, their postings,
  mentions and co-occurrences written to the entity store, embeddings of new entity names and
  of entity-bearing sentences written to a second vector index (entity names under layer -1,
  sentences under layer -2, so that no summary-graph search sees them);
- synonymy edges (services.synonyms): the entities whose names this insert embeds are
  searched over the entity names in one batched search, each joined to its nearest ones
  above the threshold;
- a remove hook: the chunks' records leave the store, the entities no live chunk mentions any
  more (with their synonymy edges) and the chunks' sentences leave the entity vector index.
The graph retrieval modes (services.graph_query) are listed in the mode registry
(services.modes) and run when an engine has ``entities``.

Sentence vectors (LinearRAG's sim(q, s), eq. 4) cost a second embedding pass over the corpus
(about as much as the chunks themselves); by default a sentence is scored with its chunk's
vector instead (corpus passages are a few sentences long), and the ``sentence_vectors``
setting embeds every entity-bearing sentence on its own (layer -2 of the entity vector index).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..config import GraphSettings
from ..domain.model import Node
from ..ports.entity import ChunkEntities, EntityStore
from . import synonyms
from .entity_ids import ENTITY_LAYER, SENTENCE_LAYER, entity_vector_id

__all__ = ["ENTITY_LAYER", "SENTENCE_LAYER", "EntityIndex", "entity_vector_id"]


class EntityIndex:
    def __init__(self, store: EntityStore, vectors, extractor, embedder, embed_sentences: bool = False,
                 settings: Callable[[], GraphSettings] = GraphSettings) -> None:
        self.embed_sentences = embed_sentences
        self.settings = settings  # read per insert: the synonymy threshold and top
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
            vecs = self.embedder.embed(texts)
            self.vectors.upsert(ids, vecs, metas)
            self.vectors.flush()
            names = [i for i, m in enumerate(metas) if m["layer"] == ENTITY_LAYER]
            synonyms.link_new(self.store, self.vectors, [texts[i] for i in names], vecs[names], self.settings())
        return len(new)

    def delete_chunks(self, chunk_ids: Sequence[str]) -> list[str]:
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
        return self.store.delete_chunks(chunk_ids)
