"""The entity graph stays exact under incremental inserts and deletes: every count equals a
from-scratch recount, postings point to live chunks only, and an engine's delete removes a
document's entities (memory and SQLite stores)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from eragraph.adapters.local.entity_sqlite import SqliteEntityStore
from eragraph.adapters.memory_entity import MemoryEntityStore
from eragraph.ports_entity import ChunkEntities, EntityStore, SentenceMentions
from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor, normalize_entity

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]


def random_chunk(rng: random.Random, cid: str) -> ChunkEntities:
    sentences = []
    for i in range(rng.randint(1, 4)):
        ents = tuple(rng.choice(NAMES) for _ in range(rng.randint(0, 3)))
        sentences.append(SentenceMentions(f"{cid} sentence {i}", ents))
    return ChunkEntities(cid, tuple(sentences))


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request, tmp_path):
    counter = iter(range(1000))

    def make() -> EntityStore:
        if request.param == "memory":
            return MemoryEntityStore()
        return SqliteEntityStore(tmp_path / f"entities{next(counter)}.sqlite")

    return make


def snapshot_of(store: EntityStore) -> dict:
    m = store.export()
    contain = {(m.chunks[i], m.entities[j]): v for i, j, v in zip(*m.contain.nonzero(), m.contain.data)}
    mention = {(m.sentences[i], m.entities[j]) for i, j in zip(*m.mention.nonzero())}
    coo = m.cooccurrence.tocoo()
    cooc = {(m.entities[i], m.entities[j]): v for i, j, v in zip(coo.row, coo.col, coo.data)}
    freq = dict(zip(m.entities, m.frequency.tolist()))
    reads = {
        "postings": store.postings(NAMES),
        "cooccurring": store.cooccurring(NAMES),
        "sentences_of": store.sentences_of(NAMES),
        "frequencies": store.frequencies(NAMES),
    }
    return {"contain": contain, "mention": mention, "cooc": cooc, "freq": freq, "reads": reads,
            "count": store.entity_count()}


def test_incremental_equals_recount(make_store):
    rng = random.Random(7)
    chunks = {f"c{i}": random_chunk(rng, f"c{i}") for i in range(40)}
    store = make_store()
    store.add_chunks(list(chunks.values())[:25])
    store.add_chunks(list(chunks.values())[25:])
    removed = rng.sample(sorted(chunks), 15)
    gen = store.generation()
    gone = store.remove_chunks(removed)
    assert store.generation() > gen
    live = {c: v for c, v in chunks.items() if c not in removed}
    fresh = make_store()
    fresh.add_chunks(list(live.values()))
    assert snapshot_of(store) == snapshot_of(fresh)
    # postings point to live chunks only; vanished entities are reported
    for e, row in store.postings(NAMES).items():
        assert set(row) <= set(live)
    still = {e for c in live.values() for e in c.counts()}
    assert set(gone) == ({e for c in chunks.values() for e in c.counts()} - still)
    assert store.existing(NAMES) == still


def test_counts_and_neighbourhood_reads(make_store):
    store = make_store()
    new = store.add_chunks([
        ChunkEntities("k1", (SentenceMentions("A met B.", ("alice", "bob")),
                             SentenceMentions("A again, A.", ("alice", "alice")))),
        ChunkEntities("k2", (SentenceMentions("B met C.", ("bob", "carol")),)),
    ])
    assert set(new) == {"alice", "bob", "carol"}
    assert store.postings(["alice", "bob"]) == {"alice": {"k1": 3}, "bob": {"k1": 1, "k2": 1}}
    assert store.frequencies(["alice", "bob", "zed"]) == {"alice": 3, "bob": 2}
    assert store.cooccurring(["bob"]) == {"bob": {"alice": 1, "carol": 1}}
    assert store.sentences_of(["alice"]) == {"alice": ["k1#s0", "k1#s1"]}
    assert store.chunk_entities(["k2"]) == {"k2": {"bob": 1, "carol": 1}}
    s = store.get_sentences(["k1#s1"])["k1#s1"]
    assert (s.chunk_id, s.text, s.entities) == ("k1", "A again, A.", ("alice",))
    assert sorted(store.sentence_ids_of_chunks(["k1", "k2"])) == ["k1#s0", "k1#s1", "k2#s0"]
    # a new chunk reuses known entities: only the unseen one is new
    assert store.add_chunks([ChunkEntities("k3", (SentenceMentions("C, D.", ("carol", "dave")),))]) == ["dave"]
    assert store.remove_chunks(["k1"]) == ["alice"]
    assert store.postings(["bob"]) == {"bob": {"k2": 1}}
    assert store.cooccurring(["bob"]) == {"bob": {"carol": 1}}
    m = store.export()
    assert m.contain.shape == (2, 3) and set(m.entities) == {"bob", "carol", "dave"}


def test_sqlite_store_persists(tmp_path):
    path = tmp_path / "e.sqlite"
    store = SqliteEntityStore(path)
    store.add_chunks([ChunkEntities("k1", (SentenceMentions("A, B.", ("alice", "bob")),))])
    store.close()
    again = SqliteEntityStore(path)
    assert again.postings(["alice"]) == {"alice": {"k1": 1}}
    assert again.export().contain.sum() == 2


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

    from eragraph.services.entity_index import entity_vector_id, install
    from eragraph.services.ingest import ingest
    from eragraph.services.remove import remove
    from eragraph.services.resummarize import drain

    engine = make_engine()
    store = SqliteEntityStore(tmp_path / "e.sqlite") if backend == "sqlite" else MemoryEntityStore()
    index = install(engine, extractor=CapitalizedPhraseExtractor(), store=store)
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
