"""Two ingests of one document race: the second runs to completion between the first one's
chunk writes and its (conditional) document write. Exactly one version ends up stored, with
exactly its chunks, vectors and entity records: nothing orphaned, nothing missing."""

from __future__ import annotations

import pytest
from support import make_engine, with_entity_graph

from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.services import remove
from eragraph.services.ingest import SourceDoc, ingest

OLD = "Ada Lovelace wrote notes on the Analytical Engine. " * 4
ONE = "Grace Hopper built the first compiler for the Harvard Mark machine. " * 4
TWO = "Alan Turing described the Turing Machine and the Imitation Game in Manchester. " * 4


class RacingGraphStore(MemoryGraphStore):
    """Runs ``interloper()`` once, just before the next conditional document write."""

    interloper = None

    def put_document(self, doc, *args, **kwargs):
        run, self.interloper = self.interloper, None
        if run is not None:
            run()
        return super().put_document(doc, *args, **kwargs)


def engine_with_entities():
    engine = make_engine()
    engine.graph = RacingGraphStore()
    with_entity_graph(engine)
    return engine


def doc_of(text: str, version: str) -> SourceDoc:
    return SourceDoc(source="s3://bucket/race.txt", text=text, **({"version": version} if version else {}))


def state(engine, doc_id: str) -> dict:
    doc = engine.graph.get_document(doc_id)
    chunks = {r.node_id for r in engine.graph.layer_refs(0)}
    store = engine.entities.store
    return {"listed": sorted(doc.chunk_ids) if doc else [], "chunks": sorted(chunks),
            "vectors": sorted(engine.vectors.ids()), "entity_chunks": sorted(store.chunk_ids()),
            "hash": doc.content_hash if doc else None, "version": doc.version if doc else None}


@pytest.mark.parametrize("first,second,winner", [
    ("0B", "0C", "0C"),   # the interloper is newer: the first call is stale and undoes its chunks
    ("0C", "0B", "0C"),   # the interloper is older: the first call replaces it
    ("", "", ""),         # no versions (local files): both complete, one consistent result
])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "replacing"])
def test_racing_ingests_of_one_document(first, second, winner, existing):
    engine = engine_with_entities()
    source = "s3://bucket/race.txt"
    if existing:
        ingest(engine, [doc_of(OLD, "0A" if first else "")])
    engine.graph.interloper = lambda: ingest(engine, [doc_of(TWO, second)])
    ingest(engine, [doc_of(ONE, first)])
    [doc] = engine.graph.find_documents(source)
    got = state(engine, doc.doc_id)
    assert got["version"] == winner
    if winner == "0C":
        from eragraph.domain.ids import content_hash

        assert got["hash"] == content_hash(ONE if first == "0C" else TWO)
    assert got["listed"] and got["listed"] == got["chunks"] == got["vectors"] == got["entity_chunks"]
    remove.remove(engine, [source])
    assert state(engine, doc.doc_id)["chunks"] == []


def test_a_newer_unchanged_version_is_reingested_when_other_content_won_meanwhile():
    """Stored: OLD at 0A. The newest event (0C) carries OLD again and only needs its version
    recorded, but an event in between (0B, other content) commits first: 0C must put OLD back."""
    from eragraph.domain.ids import content_hash

    engine = engine_with_entities()
    ingest(engine, [doc_of(OLD, "0A")])
    engine.graph.interloper = lambda: ingest(engine, [doc_of(TWO, "0B")])
    report = ingest(engine, [doc_of(OLD, "0C")])
    [doc] = engine.graph.find_documents("s3://bucket/race.txt")
    got = state(engine, doc.doc_id)
    assert (got["hash"], got["version"]) == (content_hash(OLD), "0C")
    assert got["listed"] == got["chunks"] == got["vectors"] == got["entity_chunks"]
    assert report.documents_replaced == 1
