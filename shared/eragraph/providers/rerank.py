"""Second-stage reranking behind ports.Reranker on AWS: Amazon Bedrock's Rerank API
(bedrock-agent-runtime ``rerank``: amazon.rerank-v1:0, cohere.rerank-v3-5:0). The local
cross-encoder is providers.cross_encoder (it needs torch, which no Lambda layer holds)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..domain.model import BadInputError
from .prompts import ModelCallError
from .bedrock import _BedrockCaller

BEDROCK_RERANK_MODELS = ("amazon.rerank-v1:0", "cohere.rerank-v3-5:0")
BEDROCK_RERANK_MAX_SOURCES = 1000   # the API's limit on sources per call
BEDROCK_DOCS_PER_QUERY = 100        # Bedrock bills a rerank "query" per 100 documents


def make_agent_runtime_client(region_name: str | None = None) -> Any:
    """A bedrock-agent-runtime client with botocore's retries off (the caller retries)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=10, read_timeout=60)
    return boto3.client("bedrock-agent-runtime", region_name=region_name, config=config)


def _model_id(model: str) -> str:
    """A foundation-model ARN's model id (an id is kept as given)."""
    return model.rsplit("foundation-model/", 1)[-1] if model.startswith("arn:") else model


def model_arn(model: str, region: str) -> str:
    """``model`` as the ARN Rerank wants (an ARN is kept as given)."""
    if model.startswith("arn:"):
        return model
    if not region:
        raise ValueError(f"the Bedrock reranker {model!r} needs an AWS region to build its model ARN")
    return f"arn:aws:bedrock:{region}::foundation-model/{model}"


class BedrockReranker:
    """Scores passages with one Rerank call (up to 1000 of them)."""

    def __init__(self, model: str = "amazon.rerank-v1:0", client: Any = None, *, region_name: str | None = None,
                 max_attempts: int = 6, base_delay: float = 0.5, max_delay: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep, models: Sequence[str] = ()) -> None:
        """``models``: the other rerank models (ids or ARNs) a query may name (``with_model``);
        by default none: a request naming another model is refused, never sent to Bedrock under
        a role that may not call it (the template grants the configured model only)."""
        if client is None:
            client = make_agent_runtime_client(region_name)
        self.region = region_name or client.meta.region_name
        self.arn = model_arn(model, self.region)
        # a foundation-model ARN is named (and priced) by its model id
        self.model = _model_id(model)
        self.identity = f"bedrock:{self.model}"
        self._caller = _BedrockCaller(client, self.region, max_attempts, base_delay, max_delay, sleep)
        self._options = dict(max_attempts=max_attempts, base_delay=base_delay, max_delay=max_delay, sleep=sleep)
        self.models = tuple(_model_id(m) for m in models)

    def with_model(self, model: str) -> BedrockReranker:
        """The same client asking another rerank model (a query's RerankSpec.model), if allowed:
        BadInputError in words for one this deployment does not rerank with."""
        if _model_id(model) not in self.models:
            allowed = ", ".join((self.model, *self.models))
            raise BadInputError(f"rerank model {_model_id(model)} is not one this deployment reranks with; "
                                f"allowed: {allowed} (ERAGRAPH_RERANK_MODEL, ERAGRAPH_RERANK_MODELS)")
        return BedrockReranker(model, self._caller.client, region_name=self.region, models=self.models,
                               **self._options)

    @staticmethod
    def billed_queries(n: int) -> int:
        return math.ceil(n / BEDROCK_DOCS_PER_QUERY) if n else 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        texts = list(texts)
        if not texts:
            return []
        if len(texts) > BEDROCK_RERANK_MAX_SOURCES:
            raise ValueError(f"Bedrock Rerank takes at most {BEDROCK_RERANK_MAX_SOURCES} passages, not {len(texts)}")
        client = self._caller.client
        request = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
                        for t in texts],
            "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfResults": len(texts), "modelConfiguration": {"modelArn": self.arn}}},
        }
        response = self._caller.call(f"rerank ({self.model})", lambda: client.rerank(**request))
        scores: list[float | None] = [None] * len(texts)
        for r in response.get("results", []):
            scores[int(r["index"])] = float(r["relevanceScore"])
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise ModelCallError(f"Bedrock rerank ({self.model}) returned no score for passages {missing[:10]}")
        return [float(s) for s in scores]  # type: ignore[arg-type]
