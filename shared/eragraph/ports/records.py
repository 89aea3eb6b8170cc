"""The value types the ports pass: an index search's hit, a summary, a summarizer's member
source and an answer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    node_id: str
    score: float


@dataclass(frozen=True)
class Summary:
    text: str
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class MemberSource:
    """Where a member text given to a summarizer comes from. ``group``: the document of a chunk
    (chunks of one document share it; a summary is a group of its own). ``at_start``: the text
    starts where its document starts (a document's first chunk, or a summary), so its first
    sentence is whole; a later chunk starts wherever its token window did. ``summary``: the
    member is a summary (its lines may carry labels, see providers.extractive). ``at_end``: the
    text ends where its document ends (a chunk shorter than a full token window, or a
    summary), so its last sentence is whole; a full window may have cut its last one."""
    group: str
    at_start: bool = True
    summary: bool = False
    at_end: bool = True


@dataclass(frozen=True)
class Answer:
    text: str
    cited_ids: tuple[str, ...]
    tokens_in: int
    tokens_out: int
    model: str
