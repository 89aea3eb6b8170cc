"""The model ports: embedder, tokenizer, summarizers, generator and reranker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .records import Answer, MemberSource, Summary


@runtime_checkable
class Embedder(Protocol):
    identity: str
    dim: int
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized float32 vectors, one row per text."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens the way the embedder reads them, and gives token character spans."""
    def count(self, text: str) -> int: ...
    def offsets(self, text: str) -> list[tuple[int, int]]: ...


@runtime_checkable
class Summarizer(Protocol):
    identity: str
    def summarize(self, texts: Sequence[str], max_tokens: int,
                  sources: Sequence[MemberSource] | None = None) -> Summary:
        """One summary of ``texts`` (a segment's members) in at most ``max_tokens``;
        ``sources`` says where each text comes from (a summarizer may ignore it)."""
        ...


@runtime_checkable
class RevisingSummarizer(Summarizer, Protocol):
    """A summarizer that can update an earlier summary of a segment instead of reading all of
    its children again (services.resummarize uses it when that is cheaper)."""
    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> Summary:
        """``previous`` summarized the segment before ``added`` children joined and ``removed``
        ones left; ``previous_share`` is the fraction of the new segment it stands for."""
        ...


@runtime_checkable
class Generator(Protocol):
    """Writes an answer from evidence. A generator that can stream also has
    ``stream(question, evidence) -> Iterator[str | Answer]``: the text in pieces, in order, as
    it is generated, then one Answer (the whole text, its citations and token counts) as the
    last item. services.generation.stream_answer gives every generator that shape. A model
    generator (Bedrock, OpenAI-compatible) also has ``rewrite(question, conversation) -> Answer``
    (a follow-up made standalone: services.conversation) and ``decompose(question) -> Answer``
    (its reply: the sub-questions, one a line, that domain.decomposition parses)."""
    identity: str
    def answer(self, question: str, evidence: Sequence[tuple[str, str]]) -> Answer:
        """evidence: (result id, text) pairs; the answer cites result ids."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs for a second-stage re-ordering of retrieved results."""
    identity: str
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in the order given (higher is more relevant)."""
        ...
