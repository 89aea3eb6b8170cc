"""Export and import (services.portable): local -> memory -> local round trips are digest-equal
(documents, nodes per layer, segments, counters, vector ids, the entity graph) and queries answer
the same top-k, with no embedder or summarizer call on the way in; a dump of another version or
format is refused saying why; a target that is not empty or opens with another embedder is refused."""

from __future__ import annotations

import pytest
from chaos import digest, first_difference
from support import synthetic_docs

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.services import portable
from eragraph.services.ingest import ingest
from eragraph.services.query import query

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_S_MIN": "2", "ERAGRAPH_S_MAX": "3"}
USES = ("embedder", "summarizer", "ner")
QUESTIONS = ["What is item d7 called?", "comet telescope galaxy", "bake bread oven", "Markerd3"]


def top_k(engine, mode="collapsed"):
    return [[(r.id, round(r.score, 5)) for r in query(engine, q, mode=mode, k=4).results] for q in QUESTIONS]


class Refusing:
    """An embedder/summarizer in place of the engine's: any call fails the import."""

    def __getattr__(self, name):
        raise AssertionError(f"the import called the model ({name})")


def test_local_memory_local_round_trips_are_digest_equal(tmp_path):
    source = build_engine("local", tmp_path / "a", settings_from_env(ENV), uses=USES)
    ingest(source, synthetic_docs(30))
    records = list(portable.dump(source))
    assert records[0]["format"] == "eragraph-dump" and records[0]["version"] == portable.DUMP_VERSION

    memory = build_engine("memory", settings=settings_from_env(ENV), uses=USES)
    summarizer, memory.summarizer = memory.summarizer, Refusing()
    portable.load(memory, iter(records))
    memory.summarizer = summarizer
    assert memory.graph.ledger() == source.graph.ledger()  # the cost ledger came along
    assert digest(memory) == digest(source), first_difference(digest(memory), digest(source))
    assert top_k(memory) == top_k(source) and top_k(memory, "tri_graph") == top_k(source, "tri_graph")

    from eragraph.services.store_providers import adopt

    # a bare environment: the target opens with the dump's providers (what `eragraph import` does)
    back = build_engine("local", tmp_path / "b", adopt(records[0]["providers"], settings_from_env({})), uses=USES)
    portable.load(back, portable.dump(memory))
    assert back.settings.embedder == "hash"  # the store opened itself from the dump's providers
    assert digest(back) == digest(source), first_difference(digest(back), digest(source))
    reopened = build_engine("local", tmp_path / "b", settings_from_env({}), uses=USES)
    assert top_k(reopened) == top_k(source)


def test_bad_dumps_and_targets_are_refused_in_words(tmp_path):
    source = build_engine("memory", settings=settings_from_env(ENV), uses=USES)
    ingest(source, synthetic_docs(6))
    records = list(portable.dump(source))
    target = build_engine("memory", settings=settings_from_env(ENV), uses=USES)
    with pytest.raises(portable.DumpError, match="this dump is version 99; this eragraph reads version 1, 2: upgrade"):
        portable.load(target, iter([{**records[0], "version": 99}, *records[1:]]))
    with pytest.raises(portable.DumpError, match="not an eragraph dump"):
        portable.load(target, iter([{"documents": []}]))
    with pytest.raises(portable.DumpError, match="the target store is not empty"):
        portable.load(source, iter(records))
    minilm_like = dict(records[0], lsh={**records[0]["lsh"], "embedder_id": "bedrock:x", "dim": 8})
    with pytest.raises(portable.DumpError, match="built with embedder 'bedrock:x' \\(8-d\\)"):
        portable.load(target, iter([minilm_like]))
