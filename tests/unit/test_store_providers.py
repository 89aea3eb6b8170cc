"""A store records the providers it was built with and opens with them: a provider setting the
environment or a flag did not choose takes the store's value; a chosen embedder or NER that
differs is refused naming both; a chosen question parser wins (it shapes nothing stored)."""

from __future__ import annotations

import pytest

from eragraph.bootstrap import build_engine
from eragraph.config import Settings, settings_from_env
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.query import query
from eragraph.services.store_providers import PROVIDERS_KEY, ProviderConflict, open_providers

DOCS = [SourceDoc(source=f"mem://{i}.txt", doc_id=f"d{i}", title=f"t{i}",
                  text=f"The Vellichor comet number {i} was seen through the Starglass telescope. " * 4)
        for i in range(4)]


@pytest.fixture()
def hash_store(tmp_path):
    engine = build_engine("local", tmp_path, settings_from_env({"ERAGRAPH_EMBEDDER": "hash"}),
                          uses=("embedder", "summarizer"))
    ingest(engine, DOCS)
    engine.graph.close()
    return tmp_path


def test_a_store_records_its_providers_and_a_bare_environment_opens_it(hash_store):
    engine = build_engine("local", hash_store, settings_from_env({}), uses=("embedder", "summarizer"))
    record = engine.graph.get_meta(PROVIDERS_KEY)
    assert record == {"embedder": "hash", "embedder_id": engine.embedder.identity, "dim": 256,
                      "ner": "capitalized", "parser": "spacy"}
    # the defaults (minilm, auto -> spacy) gave way to the store's
    assert engine.settings.embedder == "hash" and engine.settings.entity_extractor() == "capitalized"
    assert engine.vectors.count() > 0
    hits = query(engine, "Which telescope saw the comet?", k=2).results
    assert hits and "Starglass" in hits[0].text


def test_a_chosen_embedder_that_differs_is_an_error_naming_both(hash_store):
    for chosen in (settings_from_env({"ERAGRAPH_EMBEDDER": "minilm"}), settings_from_env({}, embedder="minilm")):
        with pytest.raises(ProviderConflict) as err:
            build_engine("local", hash_store, chosen)
        message = str(err.value)
        assert "hash (hashing-bow" in message and "256-d" in message and "'minilm'" in message
        assert "ERAGRAPH_EMBEDDER" in message
    # the same choice as the store's is no conflict
    assert build_engine("local", hash_store, settings_from_env({"ERAGRAPH_EMBEDDER": "hash"}),
                        uses=("embedder",)).settings.embedder == "hash"


def test_a_chosen_ner_that_differs_is_an_error_and_a_chosen_parser_wins(hash_store):
    with pytest.raises(ProviderConflict, match=r"'capitalized' NER.*ERAGRAPH_NER asks for 'spacy'"):
        build_engine("local", hash_store, settings_from_env({"ERAGRAPH_NER": "spacy"}))
    engine = build_engine("local", hash_store, settings_from_env({"ERAGRAPH_PARSER": "none"}),
                          uses=("embedder", "summarizer"))
    assert engine.settings.parser == "none" and engine.question_parser is None


def test_a_store_from_before_the_record_is_opened_with_the_embedder_of_its_hyperplanes(hash_store):
    engine = build_engine("local", hash_store, settings_from_env({}), uses=("embedder", "summarizer"))
    engine.graph.delete_meta(PROVIDERS_KEY)
    engine.graph.close()
    again = build_engine("local", hash_store, settings_from_env({}), uses=("embedder", "summarizer"))
    assert again.settings.embedder == "hash" and again.graph.get_meta(PROVIDERS_KEY) is None
    assert query(again, "Starglass", k=1).results


def test_a_bedrock_store_opens_with_its_model_and_dimension(tmp_path):
    from eragraph.adapters.memory.graph_memory import MemoryGraphStore

    graph = MemoryGraphStore()
    assert open_providers(graph, Settings()) == Settings()  # nothing recorded: as requested
    graph.put_meta(PROVIDERS_KEY, {"embedder": "bedrock", "embedder_id": "bedrock:amazon.titan-embed-text-v2:0",
                                   "dim": 512, "bedrock_embed_model": "amazon.titan-embed-text-v2:0",
                                   "bedrock_embed_dim": 512, "ner": "spacy", "parser": "spacy"})
    opened = open_providers(graph, settings_from_env({}))
    assert (opened.embedder, opened.bedrock_embed_model, opened.bedrock_embed_dim) == (
        "bedrock", "amazon.titan-embed-text-v2:0", 512)
    with pytest.raises(ProviderConflict, match=r"ERAGRAPH_BEDROCK_EMBED_DIM asks for 1024 \(the store's: 512\)"):
        open_providers(graph, settings_from_env({"ERAGRAPH_BEDROCK_EMBED_DIM": "1024"}))
    # the engine composed over that store: Bedrock's embedder at the recorded dimension (no call made)
    from eragraph.bootstrap.memory import MemoryProfile
    from eragraph.bootstrap.profile import compose

    class Recorded(MemoryProfile):
        def graph(self):
            return graph

    engine = compose(Recorded(), settings_from_env({"ERAGRAPH_EMBED_CACHE": "false"}))
    assert engine.embedder.identity.startswith("bedrock:amazon.titan-embed-text-v2:0") and engine.embedder.dim == 512


def test_settings_know_what_was_chosen():
    s = settings_from_env({"ERAGRAPH_NER": "auto"}, embedder="hash", generator=None)
    assert s.chosen("ner") and s.chosen("embedder") and not s.chosen("parser") and not s.chosen("generator")
    assert Settings(embedder="hash").chosen("embedder") and not Settings().chosen("embedder")
    assert Settings(**s.to_dict()).explicit == s.explicit
