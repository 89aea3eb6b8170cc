"""The rerankers: Bedrock Rerank against a real boto3 bedrock-agent-runtime client answered by
botocore's Stubber (exact request, scores back in input order, retries), and the local
CrossEncoder loading a tiny BERT cross-encoder written to disk here (real loading and scoring)."""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from eragraph.ports.providers import Reranker
from eragraph.providers.prompts import ModelCallError
from eragraph.providers.cross_encoder import CrossEncoderReranker
from eragraph.providers.rerank import BedrockReranker, make_agent_runtime_client, model_arn

TEXTS = ["Otters hold hands.", "Paris is in France.", "Rivers flow to the sea."]


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return make_agent_runtime_client("eu-central-1")


def rerank_params(model: str, texts: list[str], query: str = "where is Paris?") -> dict:
    return {"queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                        for t in texts],
            "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfResults": len(texts),
                "modelConfiguration": {"modelArn": f"arn:aws:bedrock:eu-central-1::foundation-model/{model}"}}}}


def test_bedrock_rerank_request_and_scores_in_input_order(client):
    sleeps: list[float] = []
    rr = BedrockReranker("amazon.rerank-v1:0", client, base_delay=0.01, sleep=sleeps.append)
    assert isinstance(rr, Reranker) and rr.identity == "bedrock:amazon.rerank-v1:0"
    with Stubber(client) as stub:
        stub.add_client_error("rerank", "ThrottlingException", "slow down", 429)
        stub.add_response("rerank", {"results": [{"index": 1, "relevanceScore": 0.9},
                                                 {"index": 2, "relevanceScore": 0.2},
                                                 {"index": 0, "relevanceScore": 0.05}]},
                          rerank_params("amazon.rerank-v1:0", TEXTS))
        assert rr.score("where is Paris?", TEXTS) == [0.05, 0.9, 0.2]
        stub.assert_no_pending_responses()
    assert len(sleeps) == 1


def test_bedrock_rerank_other_model_and_errors(client):
    from eragraph.domain.model import BadInputError

    # another model only when the deployment allows it (ERAGRAPH_RERANK_MODELS): never sent to
    # Bedrock under a role that may not call it
    with pytest.raises(BadInputError, match="rerank model cohere.rerank-v3-5:0 is not one this deployment"):
        BedrockReranker("amazon.rerank-v1:0", client).with_model("cohere.rerank-v3-5:0")
    allowing = BedrockReranker("amazon.rerank-v1:0", client, models=["cohere.rerank-v3-5:0"])
    rr = allowing.with_model(f"arn:aws:bedrock:{client.meta.region_name}::foundation-model/cohere.rerank-v3-5:0")
    assert rr.identity == "bedrock:cohere.rerank-v3-5:0" and rr.models == allowing.models
    with Stubber(client) as stub:
        stub.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]},
                          rerank_params("cohere.rerank-v3-5:0", TEXTS[:2]))
        with pytest.raises(ModelCallError, match=r"no score for passages \[1\]"):
            rr.score("where is Paris?", TEXTS[:2])
        stub.add_client_error("rerank", "AccessDeniedException", "not allowed", 403)
        with pytest.raises(ModelCallError, match="AccessDeniedException: not allowed"):
            rr.score("where is Paris?", TEXTS[:1])
    assert rr.score("q", []) == []
    assert BedrockReranker.billed_queries(100) == 1 and BedrockReranker.billed_queries(101) == 2
    assert model_arn("arn:aws:bedrock:x", "") == "arn:aws:bedrock:x"
    by_arn = BedrockReranker("arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0", client)
    assert by_arn.identity == "bedrock:cohere.rerank-v3-5:0" and by_arn.arn.startswith("arn:aws:bedrock:")


def tiny_cross_encoder(folder) -> None:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer
    import torch

    words = "where is paris otters hold hands france rivers flow to the sea in".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "."]
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, num_labels=1,
                        initializer_range=0.5)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)


def test_cross_encoder_loads_from_disk_and_scores_like_the_model(tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path / "tiny-ce"
    tiny_cross_encoder(folder)
    rr = CrossEncoderReranker(str(folder))
    assert isinstance(rr, Reranker) and rr.identity == "cross-encoder:tiny-ce"
    scores = rr.score("where is paris?", TEXTS)
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        want = model(**tok(["where is paris?"] * 3, TEXTS, padding=True, return_tensors="pt")).logits[:, 0]
    want = torch.sigmoid(want)  # CrossEncoder's default activation for one label
    assert scores == pytest.approx(want.tolist(), abs=1e-5)
    assert len(set(round(s, 6) for s in scores)) == 3  # a real score per passage, not a constant


def test_cross_encoder_bad_paths_name_the_setting(tmp_path):
    with pytest.raises(ValueError, match="ERAGRAPH_RERANK_MODEL"):
        CrossEncoderReranker(str(tmp_path / "missing"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="ERAGRAPH_RERANK_MODEL=.*not a loadable cross-encoder"):
        CrossEncoderReranker(str(tmp_path / "junk")).score("q", ["t"])


def test_cli_query_rerank_with_a_cross_encoder_from_settings(tmp_path, monkeypatch, capsys):
    from eragraph.cli.app import main

    folder = tmp_path / "tiny-ce"
    tiny_cross_encoder(folder)
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    for i, text in enumerate(TEXTS):
        (docs / f"{i}.txt").write_text(text, encoding="utf-8")
    assert main(["ingest", str(docs), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["query", "where is paris?", "--store", str(store), "--rerank", "--quiet"]) == 2
    assert "no reranker is configured" in capsys.readouterr().err
    monkeypatch.setenv("ERAGRAPH_RERANKER", "cross-encoder")
    monkeypatch.setenv("ERAGRAPH_RERANK_MODEL", str(folder))
    assert main(["query", "where is paris?", "--store", str(store), "--rerank", "3", "--json", "--quiet"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["rerank"]["model"] == "cross-encoder:tiny-ce" and out["rerank"]["candidates"] == 3
    want = CrossEncoderReranker(str(folder)).score("where is paris?", [r["text"] for r in out["results"]])
    assert [r["score"] for r in out["results"]] == pytest.approx(want, abs=1e-6)
    assert want == sorted(want, reverse=True)  # kept in the reranker's order


def test_a_query_naming_a_rerank_model_the_deployment_does_not_allow_is_refused(client):
    """Through the query service (what Retrieve's rerankingConfiguration and POST /query's
    rerank reach): a BadQueryError in words, and Bedrock is never called."""
    from support import make_engine

    from eragraph.config import ProcessSettings
    from eragraph.domain.rerank import RerankSpec
    from eragraph.services import ingest
    from eragraph.services.query import BadQueryError, query

    engine = make_engine()
    ingest.ingest(engine, [ingest.SourceDoc(source="a.txt", text="Paris is the capital of France.")])
    engine.reranker = BedrockReranker("amazon.rerank-v1:0", client)
    with Stubber(client) as stub:  # no response queued: a call to Bedrock would fail the test
        with pytest.raises(BadQueryError, match="allowed: amazon.rerank-v1:0 \\(ERAGRAPH_RERANK_MODEL"):
            query(engine, "where is Paris?", rerank=RerankSpec(model="cohere.rerank-v3-5:0"))
        stub.assert_no_pending_responses()
    assert ProcessSettings.from_env({}).rerank_models == ()
    assert ProcessSettings.from_env({"ERAGRAPH_RERANK_MODELS": " cohere.rerank-v3-5:0, ,x"}).rerank_models == (
        "cohere.rerank-v3-5:0", "x")
