"""What a query asks of the rerank stage (ports.Reranker; services.query)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RerankSpec:
    """Rerank the retrieved results: ``candidates`` results are retrieved (None: the query's k),
    re-scored by the reranker, and the best k kept. ``model``: the reranker model asked for (a
    Bedrock model id or ARN); None is the configured one."""

    candidates: int | None = None
    model: str | None = None
