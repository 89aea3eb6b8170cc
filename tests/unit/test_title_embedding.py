"""Titles on every chunk's embedding (domain.text.embedding_text): the text a leaf chunk is
embedded with, and every path that embeds a leaf (ingest, a retag that changes the title,
reindex's re-embedding of a missing vector) giving the embedder that text while the stored
text stays the chunk's own."""

from __future__ import annotations

import numpy as np
import pytest
from support import make_engine
from title_support import Recording

from eragraph.domain.lsh import hash_vectors
from eragraph.domain.text import embedding_text, titled_text
from eragraph.services import reindex
from eragraph.services.engine import EMBED_FORMAT
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.title_migration import migrated

BODY = " ".join(f"The engine number {i} was built in a workshop by hand." for i in range(30))


@pytest.mark.parametrize("title,text,want", [
    ("", "some text", "some text"),
    ("   ", "some text", "some text"),
    ("Ada Lovelace", "Ada Lovelace\n\nShe wrote the first program.", "Ada Lovelace\n\nShe wrote the first program."),
    ("Ada Lovelace", "She wrote the first program.", "Ada Lovelace\nShe wrote the first program."),
    ("Ada   Lovelace\n", "Ada Lovelace\n\nShe wrote", "Ada Lovelace\n\nShe wrote"),  # as titled_text writes it
    ("Ada  Lovelace", "and then", "Ada Lovelace\nand then"),
])
def test_embedding_text(title, text, want):
    assert embedding_text(title, text) == want


def test_the_first_chunk_of_a_titled_text_is_embedded_as_it_is():
    text = titled_text("  The  Analytical Engine ", BODY)
    assert embedding_text("  The  Analytical Engine ", text[:60]) == text[:60]


def _titled_engine():
    engine = make_engine()
    engine.embedder = Recording(engine.embedder)
    docs = [SourceDoc(source="mem://engine.txt", doc_id="engine", title="Analytical Engine",
                      text=titled_text("Analytical Engine", BODY)),
            SourceDoc(source="mem://plain.txt", doc_id="plain", text=BODY.replace("engine", "loom"))]
    ingest(engine, docs)
    return engine


def _leaves(engine, doc_id):
    doc = engine.graph.get_document(doc_id)
    nodes = engine.graph.get_nodes(doc.chunk_ids)
    return doc, [nodes[c] for c in doc.chunk_ids]


def test_ingest_embeds_continuation_chunks_with_the_title_and_stores_their_own_text():
    engine = _titled_engine()
    doc, chunks = _leaves(engine, "engine")
    assert len(chunks) >= 3
    assert chunks[0].text.startswith("Analytical Engine\n\n") and all(
        not c.text.startswith("Analytical Engine") for c in chunks[1:])
    given = engine.embedder.texts
    assert chunks[0].text in given  # the first chunk carries the title already: as it is
    for c in chunks[1:]:
        assert "Analytical Engine\n" + c.text in given and c.text not in given
    _, plain = _leaves(engine, "plain")
    assert all(c.text in given for c in plain)  # an untitled document's chunks: their own text
    # the vector is the titled text's, and the LSH code is hashed from it
    stored = engine.vectors.get_vectors([c.node_id for c in chunks])
    inner = engine.embedder.inner
    for c in chunks:
        want = inner.embed([embedding_text(doc.title, c.text)])
        assert np.allclose(stored[c.node_id], want[0])
        assert c.code == int(hash_vectors(engine.lsh(), want)[0])
    assert migrated(engine) and engine.graph.get_meta(EMBED_FORMAT) == 2  # a new store is marked


def test_a_retag_with_a_new_title_embeds_the_continuation_chunks_again():
    engine = _titled_engine()
    doc, chunks = _leaves(engine, "engine")
    same_text = SourceDoc(source="mem://engine.txt", doc_id="engine", title="Babbage's Engine",
                          text=titled_text("Analytical Engine", BODY))
    engine.embedder.texts.clear()
    report = ingest(engine, [same_text])
    assert report.documents_retagged == 1
    inner = engine.embedder.inner
    stored = engine.vectors.get_vectors([c.node_id for c in chunks])
    for c in chunks:  # each chunk begins with neither title but the first (the text's own)
        want = inner.embed([embedding_text("Babbage's Engine", c.text)])[0]
        assert np.allclose(stored[c.node_id], want)
    assert sorted(engine.embedder.texts) == sorted(embedding_text("Babbage's Engine", c.text) for c in chunks)
    after = engine.graph.get_nodes([c.node_id for c in chunks])
    assert [after[c.node_id].code for c in chunks] == [c.code for c in chunks]  # codes kept


def test_reindex_reembeds_a_missing_leaf_vector_with_its_title():
    engine = _titled_engine()
    doc, chunks = _leaves(engine, "engine")
    lost = chunks[1]
    engine.vectors.delete([lost.node_id])
    engine.vectors.flush()
    report: dict = {}
    reindex.reembed_missing(engine, report)
    assert report["vectors_missing_reembedded"] == 1
    got = engine.vectors.get_vectors([lost.node_id])[lost.node_id]
    assert np.allclose(got, engine.embedder.inner.embed(["Analytical Engine\n" + lost.text])[0])
