"""Entity extraction and the entity graph inside an engine: normalization, the extractors, and
an engine's delete removing a document's entities. The stores' own behaviour (counts equal a
from-scratch recount, postings point to live chunks) is the contract in
tests/contract/test_entity_store.py, run against every store."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.adapters.local.entity_sqlite import SqliteEntityStore
from eragraph.adapters.memory.entity_memory import MemoryEntityStore
from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor, normalize_entity


def test_normalize_entity():
    assert normalize_entity("  The   Beatles' ") == "beatles"
    assert normalize_entity("Kim Wilde's") == "kim wilde"
    assert normalize_entity("U.S.") == "u.s"
    assert normalize_entity("--") == ""
    ents = CapitalizedPhraseExtractor().extract(["In 1961 the Duke of York met Kim Wilde. She sang."])[0]
    assert [s.entities for s in ents] == [("duke of york", "kim wilde"), ()]


def _docs():
    from eragraph.services.ingest import SourceDoc

    return [
        SourceDoc(source="m://1", doc_id="d1", text="Marie Curie was born in Warsaw. Marie Curie met Pierre Curie."),
        SourceDoc(source="m://2", doc_id="d2", text="The Vistula flows through Warsaw and Krakow."),
        SourceDoc(source="m://3", doc_id="d3", text="Krakow has the Wawel Castle. Pierre Curie lived in Paris."),
    ]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_engine_delete_removes_a_documents_entities(backend, tmp_path):
    from support import make_engine

    from eragraph.services.entity_hooks import install
    from eragraph.services.entity_index import entity_vector_id
    from eragraph.services.ingest import ingest
    from eragraph.services.remove import remove
    from eragraph.services.resummarize import drain

    engine = make_engine()
    store = SqliteEntityStore(tmp_path / "e.sqlite") if backend == "sqlite" else MemoryEntityStore()
    from eragraph.adapters.memory.vector_memory import MemoryVectorIndex

    index = install(engine, CapitalizedPhraseExtractor(), store, MemoryVectorIndex())
    ingest(engine, _docs())
    drain(engine)
    chunk_of = {d.doc_id: set(d.chunk_ids) for d in engine.graph.list_documents()}
    assert set(store.postings(["warsaw"])["warsaw"]) == chunk_of["d1"] | chunk_of["d2"]
    assert entity_vector_id("vistula") in index.vectors.ids()
    remove(engine, ["d2"])
    drain(engine)
    live = {c for d in engine.graph.list_documents() for c in d.chunk_ids}
    assert "vistula" not in store.existing(["vistula"])
    assert entity_vector_id("vistula") not in index.vectors.ids()
    assert set(store.postings(["warsaw"])["warsaw"]) == chunk_of["d1"]
    for e, row in store.postings(store.export().entities).items():
        assert set(row) <= live, e
    assert np.all(store.export().frequency > 0)
    # re-ingesting the same document restores exactly the former graph
    ingest(engine, _docs())
    assert set(store.postings(["vistula"])["vistula"]) == chunk_of["d2"]


@pytest.mark.model
def test_spacy_extractor_sentences_and_normalized_entities():
    from eragraph.providers.spacy_ner import SpacyEntityExtractor

    x = SpacyEntityExtractor()
    [sentences] = x.extract(["Kim Wilde was born in London on 18 November 1960. She has two brothers."])
    assert len(sentences) == 2
    assert "kim wilde" in sentences[0].entities and "london" in sentences[0].entities
    assert not any(ch.isdigit() for e in sentences[0].entities for ch in e)  # DATE/CARDINAL dropped
    assert x.query_entities("Where was Kim Wilde born?") == ["kim wilde"]


@pytest.mark.model
def test_one_spacy_pipeline_serves_every_use_as_separate_loads_did():
    """Entities (with the sentence recognizer or, for noun chunks, the parser) and the router's
    question parse come out of the one shared pipeline exactly as out of the pipelines each use
    used to load for itself."""
    import spacy

    from eragraph.providers import spacy_ner
    from eragraph.providers.question_parser import SpacyQuestionParser
    from eragraph.providers.spacy_ner import MODEL_NAME, SpacyEntityExtractor

    texts = ["Kim Wilde was born in London on 18 November 1960. She has two brothers.",
             "Which river flows through Vienna and Budapest before it reaches the Black Sea?",
             "The Treaty of Versailles was signed in 1919 by Germany and the Allied Powers in France. "
             "Woodrow Wilson attended; the U.S. Senate never ratified it.",
             "who directed the film that won best picture the year titanic sank in the atlantic"]
    senter = spacy.load(MODEL_NAME, disable=["lemmatizer", "parser"])
    senter.enable_pipe("senter")
    separate = {False: senter, True: spacy.load(MODEL_NAME, disable=["lemmatizer"])}
    parse_only = spacy.load(MODEL_NAME, disable=["lemmatizer", "ner"])
    for noun_chunks in (False, True):
        shared = SpacyEntityExtractor(noun_chunks=noun_chunks)
        own = separate[noun_chunks]  # what this use loaded for itself before
        extract_old = [[(s.text.strip(), tuple(shared._entities(s))) for s in doc.sents if s.text.strip()]
                       for doc in own.pipe(texts)]
        assert [[(m.text, m.entities) for m in doc] for doc in shared.extract(texts)] == extract_old
        for text in texts:
            assert shared.query_entities(text) == list(dict.fromkeys(shared._entities(own(text))))
    parser = SpacyQuestionParser()
    for text in texts:
        doc = parse_only(text)
        assert [(t.text, t.pos, t.tag, t.dep, t.head) for t in parser.parse(text).tokens] == \
               [(t.text, t.pos_, t.tag_, t.dep_, t.head.i) for t in doc]
    assert len(spacy_ner._models) == 1  # one load served the extractors and the parser
    # the entity-only passes run ner (and senter for passages) without the shared tok2vec, the
    # tagger, the parser or the attribute ruler -- and gave the same entities above
    plain = SpacyEntityExtractor()
    ran = lambda skip: [n for n in plain.nlp.pipe_names if n not in skip]  # noqa: E731
    assert ran(plain.skip(sentences=True)) == ["senter", "ner"]
    assert ran(plain.skip(sentences=False)) == ["ner"]
