"""Validated settings. Values come from defaults, then ERAGRAPH_* environment variables, then
explicit overrides (CLI flags). The graph-shaping ones are recorded in a store when it is
created, and a reopened store keeps its own (see services.engine.open_settings)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from typing import Any

# Settings that shape the graph: fixed per store once it exists.
GRAPH_SETTINGS = ("s_min", "s_max", "n_planes", "seed", "max_layers", "chunk_tokens",
                  "chunk_overlap", "summary_tokens")


# The price table of the cost ledger: USD per million tokens (input, output) by model, keyed
# like the providers' identities. List prices (us-east-1, on-demand, late 2025; check current
# pricing); ERAGRAPH_PRICES (a JSON object {"model": [in, out]}) overrides or adds entries. Local
# models cost nothing per token. A model missing from the table is reported as unpriced.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # Amazon Bedrock
    "bedrock:amazon.titan-embed-text-v2:0": (0.02, 0.0),
    "bedrock:anthropic.claude-3-haiku-20240307-v1:0": (0.25, 1.25),
    "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0": (0.80, 4.00),
    "bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0": (3.00, 15.00),
    "bedrock:amazon.nova-micro-v1:0": (0.035, 0.14),
    "bedrock:amazon.nova-lite-v1:0": (0.06, 0.24),
    "bedrock:meta.llama3-1-8b-instruct-v1:0": (0.22, 0.22),
    # OpenAI-compatible endpoints (OpenAI's list prices; a self-hosted model: override with 0)
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    # local models: no per-token price
    "sentence-transformers/all-MiniLM-L6-v2": (0.0, 0.0),
    "extractive-tfidf-v1": (0.0, 0.0),
    "hashing-bow-v1": (0.0, 0.0),
}


@lru_cache(maxsize=32)
def parse_prices(raw: str) -> dict[str, tuple[float, float]]:
    """DEFAULT_PRICES updated with the JSON object ``raw`` ({"model": [usd_in, usd_out] per
    million tokens}; "" = no overrides)."""
    table = dict(DEFAULT_PRICES)
    if not raw.strip():
        return table
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"prices must be a JSON object of model -> [in, out] USD per million tokens: {exc}") from None
    if not isinstance(given, dict):
        raise ValueError("prices must be a JSON object of model -> [in, out] USD per million tokens")
    for model, pair in given.items():
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and x >= 0 for x in pair)):
            raise ValueError(f"price of {model!r} must be [in, out] USD per million tokens, got {pair!r}")
        table[str(model)] = (float(pair[0]), float(pair[1]))
    return table


@dataclass(frozen=True)
class Settings:
    # EraRAG partitioning and layering. EraRAG's public code used 8-12; we keep S_max = 12 and
    # take S_min = 6 so that S_max >= 2*S_min - 1: then every count >= S_min can be cut within
    # the bounds, split decisions flip only at small counts, and one insert re-cuts fewer
    # segments (on MuSiQue's layer 0: 1.17 changed segments per insert, at most 3, against
    # 1.49 and up to 6 with 8-12; see domain/partition.py).
    s_min: int = 6
    s_max: int = 12
    n_planes: int = 20
    seed: int = 20250601
    max_layers: int = 5
    # chunking: all-MiniLM-L6-v2 reads at most 256 word pieces (incl. [CLS]/[SEP]); 200-piece
    # chunks with a 32-piece overlap stay well inside it, so nothing is silently truncated.
    chunk_tokens: int = 200
    chunk_overlap: int = 32
    summary_tokens: int = 120
    # re-summarize a changed segment by revising its previous summary with the children that
    # joined and left, when the summarizer can and that reads fewer tokens (services.resummarize)
    delta_summaries: bool = True
    # query
    top_k: int = 5
    token_budget: int = 2000
    bias_p: float = 0.6
    # providers, by name (bootstrap picks them)
    embedder: str = "minilm"          # minilm | bedrock | hash (tests only)
    summarizer: str = "extractive"    # extractive | bedrock | openai
    generator: str = "none"           # none | bedrock | openai
    embed_batch: int = 64
    embed_cache: bool = True
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_embed_dim: int = 1024
    bedrock_text_model: str = "anthropic.claude-3-haiku-20240307-v1:0"
    openai_base_url: str = ""
    openai_model: str = ""
    # cost ledger: JSON overrides of DEFAULT_PRICES (see parse_prices)
    prices: str = ""
    max_document_bytes: int = 20 * 1024 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.s_min <= self.s_max:
            raise ValueError(f"need 1 <= s_min <= s_max (got {self.s_min}, {self.s_max})")
        if self.s_min < 2:
            raise ValueError("s_min must be at least 2, or layers would not shrink")
        if not 1 <= self.n_planes <= 62:
            raise ValueError("n_planes must be within 1..62")
        if self.max_layers < 0:
            raise ValueError("max_layers must be >= 0")
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ValueError("need 0 <= chunk_overlap < chunk_tokens")
        if self.summary_tokens < 8:
            raise ValueError("summary_tokens must be >= 8")
        if not 0.0 <= self.bias_p <= 1.0:
            raise ValueError("bias_p must be within [0, 1]")
        if self.top_k < 1:
            raise ValueError("top_k must be >= 1")
        if self.token_budget < 1:
            raise ValueError("token_budget must be >= 1")
        parse_prices(self.prices)

    def price_table(self) -> dict[str, tuple[float, float]]:
        return parse_prices(self.prices)

    def graph_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in GRAPH_SETTINGS}

    def with_overrides(self, **overrides: Any) -> Settings:
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **clean)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _coerce(kind: type, raw: str) -> Any:
    if kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    return kind(raw)


def settings_from_env(environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(Settings):
        raw = env.get("ERAGRAPH_" + f.name.upper())
        if raw is not None and raw != "":
            kind = type(getattr(Settings(), f.name))
            try:
                values[f.name] = _coerce(kind, raw)
            except ValueError as exc:
                raise ValueError(f"ERAGRAPH_{f.name.upper()}={raw!r}: {exc}") from None
    return Settings(**values).with_overrides(**overrides)
