"""EntityStore contract: every adapter (memory, SQLite, DynamoDB under moto) keeps postings,
mentions, co-occurrence weights and frequencies equal to a from-scratch recount under any
sequence of adds, replaces and removes, answers the neighbourhood reads alike, and exports the
same matrices."""

from __future__ import annotations

import random
from collections.abc import Iterable
from itertools import combinations

import pytest

from eragraph.adapters.memory.entity_memory import MemoryEntityStore
from eragraph.ports.entity import ChunkEntities, EntityStore, SentenceMentions

from .conftest import Backend, _backend

NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]


@pytest.fixture
def entity_store_backend(request, tmp_path):
    yield from _backend(request, tmp_path, "entity_store")


@pytest.fixture
def entity_store(entity_store_backend) -> EntityStore:
    return entity_store_backend.open()


def fresh_store(backend: Backend, tag: str) -> EntityStore:
    """A second, empty store of the same backend (its own workdir, hence its own table/file)."""
    other = Backend(backend.name, backend.factory, backend.workdir.parent / f"{backend.workdir.name}-{tag}")
    other.workdir.mkdir(parents=True, exist_ok=True)
    backend._open.append(store := other.open())
    return store


def random_chunk(rng: random.Random, cid: str) -> ChunkEntities:
    sentences = []
    for i in range(rng.randint(1, 4)):
        ents = tuple(rng.choice(NAMES) for _ in range(rng.randint(0, 3)))
        sentences.append(SentenceMentions(f"{cid} sentence {i}", ents))
    return ChunkEntities(cid, tuple(sentences))


def recount(chunks: Iterable[ChunkEntities]) -> dict:
    """The entity graph of ``chunks`` computed from scratch, keyed by names."""
    postings: dict[str, dict[str, int]] = {}
    sentences: dict[str, set[str]] = {}
    cooc: dict[str, dict[str, int]] = {}
    for chunk in chunks:
        for e, n in chunk.counts().items():
            postings.setdefault(e, {})[chunk.chunk_id] = n
        for sid, s in zip(chunk.sentence_ids(), chunk.sentences):
            for e in set(s.entities):
                sentences.setdefault(e, set()).add(sid)
            for a, b in combinations(sorted(set(s.entities)), 2):
                cooc.setdefault(a, {})[b] = cooc.get(a, {}).get(b, 0) + 1
                cooc.setdefault(b, {})[a] = cooc.get(b, {}).get(a, 0) + 1
    freq = {e: sum(row.values()) for e, row in postings.items()}
    return {"postings": postings, "frequencies": freq,
            "cooccurring": {e: cooc.get(e, {}) for e in postings},
            "sentences_of": {e: sorted(sentences.get(e, ())) for e in postings},
            "existing": set(postings), "count": len(postings)}


def reads_of(store: EntityStore) -> dict:
    return {"postings": store.postings(NAMES), "frequencies": store.frequencies(NAMES),
            "cooccurring": store.cooccurring(NAMES), "sentences_of": store.sentences_of(NAMES),
            "existing": store.existing(NAMES), "count": store.entity_count()}


def matrices_by_name(store: EntityStore) -> dict:
    m = store.export()
    contain = {(m.chunks[i], m.entities[j]): float(v) for i, j, v in zip(*m.contain.nonzero(), m.contain.data)}
    mention = {(m.sentences[i], m.entities[j]) for i, j in zip(*m.mention.nonzero())}
    coo = m.cooccurrence.tocoo()
    cooc = {(m.entities[i], m.entities[j]): float(v) for i, j, v in zip(coo.row, coo.col, coo.data)}
    return {"entities": m.entities, "chunks": m.chunks, "sentences": m.sentences, "contain": contain,
            "mention": mention, "cooc": cooc, "frequency": dict(zip(m.entities, m.frequency.tolist())),
            "sentence_chunk": [m.chunks[i] for i in m.sentence_chunk]}


def test_counts_and_neighbourhood_reads(entity_store):
    store = entity_store
    assert store.generation() == 0 and store.entity_count() == 0
    new = store.add_chunks([
        ChunkEntities("k1", (SentenceMentions("A met B.", ("alice", "bob")),
                             SentenceMentions("A again, A.", ("alice", "alice")))),
        ChunkEntities("k2", (SentenceMentions("B met C.", ("bob", "carol")),)),
    ])
    assert set(new) == {"alice", "bob", "carol"}
    assert store.generation() == 1 and store.entity_count() == 3
    assert store.postings(["alice", "bob", "zed"]) == {"alice": {"k1": 3}, "bob": {"k1": 1, "k2": 1}}
    assert store.frequencies(["alice", "bob", "zed"]) == {"alice": 3, "bob": 2}
    assert store.existing(["alice", "zed"]) == {"alice"}
    assert store.cooccurring(["bob", "zed"]) == {"bob": {"alice": 1, "carol": 1}}
    assert store.sentences_of(["alice", "zed"]) == {"alice": ["k1#s0", "k1#s1"]}
    assert store.chunk_entities(["k2", "k9"]) == {"k2": {"bob": 1, "carol": 1}}
    got = store.get_sentences(["k1#s1", "k1#s0", "k1#s7", "k9#s0", "junk"])
    assert set(got) == {"k1#s0", "k1#s1"}
    s = got["k1#s1"]
    assert (s.sentence_id, s.chunk_id, s.text, s.entities) == ("k1#s1", "k1", "A again, A.", ("alice",))
    assert sorted(got["k1#s0"].entities) == ["alice", "bob"]
    assert sorted(store.sentence_ids_of_chunks(["k1", "k2", "k9"])) == ["k1#s0", "k1#s1", "k2#s0"]
    # a new chunk reuses known entities: only the unseen one is new
    assert store.add_chunks([ChunkEntities("k3", (SentenceMentions("C, D.", ("carol", "dave")),))]) == ["dave"]
    assert store.generation() == 2 and store.entity_count() == 4
    assert store.delete_chunks(["k1"]) == ["alice"]
    assert store.generation() == 3 and store.entity_count() == 3
    assert store.postings(["alice", "bob"]) == {"bob": {"k2": 1}}
    assert store.cooccurring(["bob", "alice"]) == {"bob": {"carol": 1}}
    assert store.sentences_of(["alice"]) == {}
    assert store.get_sentences(["k1#s0"]) == {}
    m = store.export()
    assert m.contain.shape == (2, 3) and set(m.entities) == {"bob", "carol", "dave"}
    # removing unknown chunks changes nothing
    assert store.delete_chunks(["k1", "nope"]) == []
    assert store.generation() == 3


def test_replacing_a_chunk_rewrites_its_records(entity_store):
    store = entity_store
    store.add_chunks([ChunkEntities("k1", (SentenceMentions("A and B.", ("alice", "bob")),)),
                      ChunkEntities("k2", (SentenceMentions("B alone.", ("bob",)),))])
    new = store.add_chunks([ChunkEntities("k1", (SentenceMentions("C and B.", ("carol", "bob")),
                                                 SentenceMentions("C.", ("carol",))))])
    assert new == ["carol"]
    assert reads_of(store) == recount([
        ChunkEntities("k1", (SentenceMentions("C and B.", ("carol", "bob")), SentenceMentions("C.", ("carol",)))),
        ChunkEntities("k2", (SentenceMentions("B alone.", ("bob",)),))])
    assert store.get_sentences(["k1#s0"])["k1#s0"].text == "C and B."


@pytest.mark.parametrize("seed", [3, 11])
def test_incremental_equals_recount(entity_store_backend, seed):
    rng = random.Random(seed)
    store = entity_store_backend.open()
    live: dict[str, ChunkEntities] = {}
    ever: set[str] = set()
    serial = 0
    for _ in range(7):
        action = rng.random()
        if action < 0.5 or not live:
            batch = []
            for _ in range(rng.randint(1, 5)):
                if live and rng.random() < 0.25:  # replace a live chunk with new content
                    cid = rng.choice(sorted(live))
                else:
                    cid, serial = f"c{serial}", serial + 1
                batch.append(random_chunk(rng, cid))
            batch = list({c.chunk_id: c for c in batch}.values())
            kept = [c for cid, c in live.items() if cid not in {b.chunk_id for b in batch}]
            new = store.add_chunks(batch)
            # unseen entities, and those only the replaced versions mentioned, are new
            assert set(new) == {e for c in batch for e in c.counts()} - recount(kept)["existing"]
            for c in batch:
                live[c.chunk_id] = c
        else:
            drop = rng.sample(sorted(live), rng.randint(1, min(4, len(live))))
            before = set(recount(live.values())["existing"])
            for c in drop:
                del live[c]
            gone = store.delete_chunks(drop + ["never-added"])
            assert set(gone) == before - recount(live.values())["existing"]
        ever |= set(live)
        assert reads_of(store) == recount(live.values())
    got = store.chunk_entities(sorted(ever))
    assert {c: row for c, row in got.items() if row} == {c: v.counts() for c, v in live.items() if v.counts()}
    assert sorted(store.sentence_ids_of_chunks(sorted(ever))) == sorted(
        sid for c in live.values() for sid in c.sentence_ids())
    fresh = fresh_store(entity_store_backend, "fresh")
    fresh.add_chunks(list(live.values()))
    assert matrices_by_name(store) == matrices_by_name(fresh)


def expected_matrices(chunks: Iterable[ChunkEntities]) -> dict:
    """What export() must hold for ``chunks``, by name, from the from-scratch recount (no store)."""
    rec = recount(chunks)
    contain = {(c, e): float(n) for e, row in rec["postings"].items() for c, n in row.items()}
    mention = {(sid, e) for e, sids in rec["sentences_of"].items() for sid in sids}
    sentences = sorted({sid for sid, _ in mention})
    return {"entities": sorted(rec["postings"]), "chunks": sorted({c for c, _ in contain}), "sentences": sentences,
            "contain": contain, "mention": mention,
            "cooc": {(a, b): float(n) for a, row in rec["cooccurring"].items() for b, n in row.items()},
            "frequency": {e: float(n) for e, n in rec["frequencies"].items()},
            "sentence_chunk": [sid.split("#")[0] for sid in sentences]}


def test_export_equals_the_recount_of_the_live_chunks(entity_store):
    rng = random.Random(5)
    chunks = [random_chunk(rng, f"c{i}") for i in range(24)]
    replaced = random_chunk(random.Random(9), "c7")
    entity_store.add_chunks(chunks[:16])
    entity_store.add_chunks(chunks[16:])
    entity_store.delete_chunks(["c2", "c7", "c19"])
    entity_store.add_chunks([replaced])
    live = [c for c in chunks if c.chunk_id not in ("c2", "c7", "c19")] + [replaced]
    mine = matrices_by_name(entity_store)
    mine["frequency"] = {e: float(n) for e, n in mine["frequency"].items()}
    want = expected_matrices(live)
    assert want["cooc"] and want["mention"] and len(want["chunks"]) >= 15  # a graph worth comparing
    assert mine == want
    m = entity_store.export()
    assert m.generation == entity_store.generation()
    assert m.cooccurrence.shape == (len(m.entities), len(m.entities))
    assert (m.cooccurrence != m.cooccurrence.T).nnz == 0


@pytest.mark.persistent
def test_a_second_handle_sees_the_same_graph(entity_store_backend):
    first = entity_store_backend.open()
    first.add_chunks([ChunkEntities("k1", (SentenceMentions("A, B.", ("alice", "bob")),))])
    second = entity_store_backend.open()
    assert second.postings(["alice"]) == {"alice": {"k1": 1}}
    second.add_chunks([ChunkEntities("k2", (SentenceMentions("A.", ("alice",)),))])
    assert first.frequencies(["alice"]) == {"alice": 2}
    assert first.generation() == second.generation() == 2
    reopened = entity_store_backend.reopen(first)
    assert reopened.export().contain.sum() == 3


def tamper(store: EntityStore) -> None:
    """Drift as a writer that died between its updates would leave it: alice's frequency off by
    5, the bob-carol co-occurrence gone (one direction), a co-occurrence of no sentence (and,
    where kept as a counter, the entity count off by 3)."""
    name = type(store).__name__
    if name == "MemoryEntityStore":
        store._freq["alice"] += 5
        del store._cooc["bob"]["carol"]
        store._cooc["alice"]["zed"] = 2
    elif name == "SqliteEntityStore":
        with store._conn:
            store._conn.execute("UPDATE ent_freq SET n = n + 5 WHERE entity = 'alice'")
            store._conn.execute("DELETE FROM ent_cooc WHERE a = 'bob' AND b = 'carol'")
            store._conn.execute("INSERT INTO ent_cooc(a, b, w) VALUES ('alice', 'zed', 2)")
    elif name == "DynamoEntityStore":
        Item = store.Item
        Item(PK="ENT#alice", SK="ENT").update(actions=[Item.freq.add(5)])
        Item(PK="ENT#bob", SK="COOC#carol").delete()
        Item(PK="ENT#alice", SK="COOC#zed").update(actions=[Item.weight.add(2)])
        Item(PK="META", SK="ENTITY#COUNT").update(actions=[Item.version.add(3)])
    else:
        pytest.skip(f"no way to corrupt a {name}")


def test_repair_counts_restores_the_recount(entity_store):
    rng = random.Random(8)
    chunks = [random_chunk(rng, f"c{i}") for i in range(10)]
    chunks.append(ChunkEntities("k1", (SentenceMentions("A, B, C.", ("alice", "bob", "carol")),
                                       SentenceMentions("D.", ("dave",)))))
    entity_store.add_chunks(chunks)
    expected = recount(chunks)
    assert reads_of(entity_store) == expected
    assert not any(entity_store.repair_counts().values())  # nothing drifted: nothing rewritten
    generation = entity_store.generation()
    tamper(entity_store)
    assert reads_of(entity_store) != expected
    fixed = entity_store.repair_counts()
    assert fixed["frequencies"] >= 1 and fixed["cooccurrence"] >= 2
    assert reads_of(entity_store) == expected
    assert entity_store.generation() > generation
    assert not any(entity_store.repair_counts().values())
    assert entity_store.chunk_ids() == {c.chunk_id for c in chunks}


# ---------------------------------------------------------------- synonymy edges


def synonymy_by_name(store: EntityStore) -> dict:
    m = store.export()
    coo = m.synonymy.tocoo()
    return {(m.entities[i], m.entities[j]): round(float(v), 6) for i, j, v in zip(coo.row, coo.col, coo.data)}


def test_synonymy_edges_are_symmetric_idempotent_and_leave_with_their_entity(entity_store):
    store = entity_store
    store.add_chunks([ChunkEntities("k1", (SentenceMentions("A and B.", ("alice", "bob")),)),
                      ChunkEntities("k2", (SentenceMentions("C.", ("carol",)),)),
                      ChunkEntities("k3", (SentenceMentions("D, B.", ("dave", "bob")),))])
    generation = store.generation()
    # a pair found from both ends (the larger weight kept), a self-edge and a weightless one dropped
    edges = [("alice", "carol", 0.9), ("carol", "alice", 0.875), ("bob", "dave", 0.8125),
             ("carol", "carol", 1.0), ("bob", "erin", 0.0)]
    assert store.add_synonyms(edges) == 2
    assert store.generation() > generation
    want = {"alice": {"carol": 0.9}, "carol": {"alice": 0.9}, "bob": {"dave": 0.8125}, "dave": {"bob": 0.8125}}
    assert store.synonyms(["alice", "bob", "carol", "dave", "zed"]) == want
    assert synonymy_by_name(store) == {("alice", "carol"): 0.9, ("carol", "alice"): 0.9,
                                       ("bob", "dave"): 0.8125, ("dave", "bob"): 0.8125}
    # the same edges again (a redelivered insert): nothing doubles
    assert store.add_synonyms(edges) == 2
    assert store.synonyms(["alice", "bob", "carol", "dave"]) == want
    assert store.add_synonyms([]) == 0
    # carol and dave leave (their only chunks go): their edges go, in both directions; bob stays (k1)
    assert set(store.delete_chunks(["k2", "k3"])) == {"carol", "dave"}
    assert store.synonyms(["alice", "bob", "carol", "dave"]) == {}
    assert synonymy_by_name(store) == {}
    # a reborn entity starts without edges; replacing a chunk that held an entity's only
    # occurrence takes its edges too (the memory store's reference behaviour)
    store.add_chunks([ChunkEntities("k4", (SentenceMentions("C.", ("carol",)),))])
    assert store.synonyms(["carol"]) == {}
    store.add_synonyms([("carol", "alice", 0.95)])
    store.add_chunks([ChunkEntities("k4", (SentenceMentions("E.", ("erin",)),))])
    assert store.synonyms(["alice", "carol"]) == {}


def test_entity_page_lists_every_entity_once(entity_store):
    rng = random.Random(4)
    chunks = [random_chunk(rng, f"c{i}") for i in range(12)]
    entity_store.add_chunks(chunks)
    seen, after, pages = [], None, 0
    while True:
        names, after = entity_store.entity_page(after, 3)
        seen += names
        pages += 1
        if after is None:
            break
        assert pages < 50
    assert sorted(seen) == sorted(recount(chunks)["existing"]) and len(seen) == len(set(seen))
