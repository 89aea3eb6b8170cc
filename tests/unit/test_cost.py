"""The cost ledger: every model call recorded with kind, model, tokens and seconds; prices from
configuration; per-query usage; embedding token counts per embedder."""

from __future__ import annotations

import numpy as np
import pytest
from botocore.stub import Stubber

from eragraph.adapters.memory.graph_memory import MemoryGraphStore
from eragraph.bootstrap import build_engine
from eragraph.bootstrap.providers import make_embedder
from eragraph.config import DEFAULT_PRICES, Settings, settings_from_env
from eragraph.providers.bedrock import BedrockEmbedder
from eragraph.services import cost
from eragraph.services.ingest import ingest
from eragraph.services.query import query
from eragraph.services.resummarize import drain
from eragraph.services.stats import stats
from support import synthetic_docs
from test_bedrock import client, titan_body, titan_params  # noqa: F401  (the stubbed client fixture)

SMALL = dict(embedder="hash", s_min=3, s_max=5, n_planes=12, chunk_tokens=40, chunk_overlap=8, summary_tokens=30)


def test_price_keys_ignore_dimension_weights_digest_and_region_prefix():
    assert cost.price_key("bedrock:amazon.titan-embed-text-v2:0@1024") == "bedrock:amazon.titan-embed-text-v2:0"
    assert cost.price_key("sentence-transformers/all-MiniLM-L6-v2#weights-sha256:0123456789abcdef") == \
        "sentence-transformers/all-MiniLM-L6-v2"
    assert cost.price_key("bedrock:us.anthropic.claude-3-haiku-20240307-v1:0") == \
        "bedrock:anthropic.claude-3-haiku-20240307-v1:0"
    assert cost.price_key("hashing-bow-v1@256") == "hashing-bow-v1"
    assert cost.price_key("openai:gpt-4o-mini") == "openai:gpt-4o-mini"


def test_cost_from_the_price_table_and_overrides():
    table = Settings().price_table()
    assert table == DEFAULT_PRICES
    haiku = "bedrock:anthropic.claude-3-haiku-20240307-v1:0"
    assert cost.cost_usd(haiku, 1_000_000, 1_000_000, table) == pytest.approx(0.25 + 1.25)
    assert cost.cost_usd("bedrock:amazon.titan-embed-text-v2:0@256", 2_000_000, 0, table) == pytest.approx(0.04)
    assert cost.cost_usd("openai:my-local-llama", 10, 10, table) is None
    custom = settings_from_env({"ERAGRAPH_PRICES": '{"openai:my-local-llama": [0, 0], "%s": [1, 2]}' % haiku})
    prices = custom.price_table()
    assert cost.cost_usd("openai:my-local-llama", 10, 10, prices) == 0.0
    assert cost.cost_usd(haiku, 1_000_000, 1_000_000, prices) == pytest.approx(3.0)
    assert prices["bedrock:amazon.titan-embed-text-v2:0"] == DEFAULT_PRICES["bedrock:amazon.titan-embed-text-v2:0"]
    for bad in ('{"m": [1]}', '{"m": [-1, 0]}', "[1, 2]", "not json"):
        with pytest.raises(ValueError):
            settings_from_env({"ERAGRAPH_PRICES": bad})


def test_unpriced_models_are_listed_never_counted_as_free():
    rows = [cost.Call("generate", "openai:unknown", 100, 10, 1.0),
            cost.Call("embed", "bedrock:amazon.titan-embed-text-v2:0@1024", 1_000_000, 0, 2.0, calls=7)]
    out = cost.summarize(rows, DEFAULT_PRICES)
    assert out["unpriced"] == ["openai:unknown"]
    assert out["total"]["cost_usd"] == pytest.approx(0.02) and out["total"]["calls"] == 8
    assert out["by_kind"]["generate"]["cost_usd"] == 0.0 and out["calls"][1]["cost_usd"] is None


def test_old_ledger_rows_without_a_model_still_read():
    graph = MemoryGraphStore()
    graph.add_ledger("summarize", 2, 10, 5, 0.5)  # a row recorded before models were
    cost.record(graph, "summarize", "extractive-tfidf-v3", 7, 3, 0.25)
    report = cost.ledger_report(graph, DEFAULT_PRICES)
    assert {(r["kind"], r["model"]) for r in report["calls"]} == {("summarize", ""), ("summarize", "extractive-tfidf-v3")}
    assert report["by_kind"]["summarize"]["calls"] == 3 and report["by_kind"]["summarize"]["tokens_in"] == 17
    assert report["unpriced"] == ["(unrecorded)"]


def test_every_model_call_of_a_build_and_a_query_is_in_the_ledger():
    engine = build_engine("memory", settings=Settings(**SMALL))
    docs = synthetic_docs(24)
    report = ingest(engine, docs)
    report.merge(drain(engine))
    ledger = engine.graph.ledger()
    assert set(ledger) == {"embed|hashing-bow-v1@256", "summarize|extractive-tfidf-v3"}
    summ = ledger["summarize|extractive-tfidf-v3"]
    assert (summ["calls"], summ["tokens_in"], summ["tokens_out"]) == (
        report.cost.summarize_calls, report.cost.tokens_in, report.cost.tokens_out)
    # the embedder read every chunk and every summary once (the cache holds them afterwards):
    # its tokens are their words and punctuation marks
    nodes = {}
    for layer in engine.graph.layer_sizes():
        nodes.update(engine.graph.get_nodes(r.node_id for r in engine.graph.layer_refs(layer)))
    texts = {n.text for n in nodes.values()}
    embed = ledger["embed|hashing-bow-v1@256"]
    assert embed["tokens_in"] >= sum(engine.tokenizer.count(t) for t in texts) > 0 and embed["tokens_out"] == 0

    response = query(engine, "telescope comet orbit", k=3)
    assert response.usage["calls"] == [{"kind": "embed", "model": "hashing-bow-v1@256", "tokens_in": 3,
                                        "tokens_out": 0, "seconds": pytest.approx(0.0, abs=1.0),
                                        "calls": 1, "cost_usd": 0.0}]
    assert response.to_dict()["usage"]["total"]["tokens_in"] == 3
    assert engine.graph.ledger()["embed|hashing-bow-v1@256"]["tokens_in"] == embed["tokens_in"] + 3
    again = query(engine, "telescope comet orbit", k=3)  # cached: no model call, nothing to pay
    assert again.usage["calls"] == [] and again.usage["total"]["tokens_in"] == 0
    out = stats(engine)["ledger"]
    assert out["by_kind"]["embed"]["tokens_in"] == embed["tokens_in"] + 3
    assert out["by_kind"]["summarize"]["calls"] == report.cost.summarize_calls


def test_minilm_embedding_tokens_are_word_pieces_cut_where_the_model_cuts():
    from eragraph.bootstrap.providers import MINILM_READS, embed_token_counter
    from eragraph.providers.minilm import MiniLMTokenizer

    count = embed_token_counter(Settings(embedder="minilm"))
    tok = MiniLMTokenizer()
    short, long = "Radium was discovered by Marie Curie.", "word " * 400
    assert count([short]) == tok.count(short) == 9  # radium: ra ##dium
    assert tok.count(long) == 400 and count([short, long]) == 9 + MINILM_READS


def test_bedrock_embedding_tokens_are_titans_own_counts(client):  # noqa: F811
    graph = MemoryGraphStore()
    inner = BedrockEmbedder(dim=256, client=client, max_workers=1)
    emb = cost.MeteredEmbedder(inner, graph)
    with Stubber(client) as stub:
        for text, tokens in (("alpha beta", 4), ("gamma", 2)):
            stub.add_response("invoke_model", titan_body(np.ones(256), tokens), titan_params(text, 256))
        with cost.track() as calls:
            emb.embed(["alpha beta", "gamma"])
    row = graph.ledger()["embed|bedrock:amazon.titan-embed-text-v2:0@256"]
    assert (row["calls"], row["tokens_in"], row["tokens_out"]) == (1, 6, 0)
    assert [(c.kind, c.tokens_in) for c in calls] == [("embed", 6)]
    assert cost.calls_report(calls, DEFAULT_PRICES)["total"]["cost_usd"] == pytest.approx(6 * 0.02 / 1e6)


def test_the_cache_sits_in_front_of_the_meter():
    graph = MemoryGraphStore()
    emb = make_embedder(Settings(embedder="hash"), None, graph)
    emb.embed(["one two", "three"])
    emb.embed(["one two", "three", "four"])  # only "four" reaches the model
    assert graph.ledger()["embed|hashing-bow-v1@256"] == {"calls": 2, "tokens_in": 4, "tokens_out": 0,
                                                          "seconds": pytest.approx(0.0, abs=1.0)}
