"""Attach the entity graph (services.entity_index) to an engine: its index as ``engine.entities``,
an ingest hook (NER of the new chunks) and a remove hook (the chunks' records and vectors
leave). Apart from entity_index so that the engine, which holds an EntityIndex, and this
wiring, which needs the engine, import no circle."""

from __future__ import annotations

from collections.abc import Sequence

from ..domain.model import Document, Node
from ..ports.entity import EntityStore
from . import synonyms
from .engine import Engine
from .entity_index import EntityIndex


def install(engine: Engine, extractor, store: EntityStore, vectors, embed_sentences: bool = False) -> EntityIndex:
    """Attach the entity graph to ``engine`` (idempotent): its index, the ingest hook (NER of
    new chunks) and the remove hook. The profile's bootstrap picks the extractor and the
    storage; this service never chooses an adapter."""
    if engine.entities is not None:
        return engine.entities
    index = EntityIndex(store, vectors, extractor, engine.embedder, embed_sentences,
                        settings=lambda: engine.settings.graph_retrieval)
    engine.entities = index

    forgotten = []  # the synonymy backfill's "done" taken back by this engine (once)

    def on_ingest(eng: Engine, nodes: Sequence[Node]) -> None:
        if not forgotten and not eng.settings.graph_retrieval.synonyms_on:
            # this insert keeps no synonymy edges (the walk does not weigh them): a weight set
            # later has reindex link every entity, these too (services.synonyms.backfill)
            eng.graph.delete_meta(synonyms.BACKFILL_MARK)
            forgotten.append(True)
        index.add_nodes(nodes)

    def on_remove(eng: Engine, doc: Document, chunk_ids: Sequence[str]) -> None:
        index.delete_chunks(chunk_ids)

    engine.ingest_hooks.append(on_ingest)
    engine.remove_hooks.append(on_remove)
    return index
