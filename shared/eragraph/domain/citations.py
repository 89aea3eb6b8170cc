"""The evidence an answer cites, and which part of the answer cites it: a generated answer
cites evidence ids in square brackets (``[chk-abc]``, ``[2]``, ``[chk-a, sum-b]``), and each
sentence's brackets name the evidence that supports it. ``cited_parts`` cuts an answer into the
parts Bedrock's RetrieveAndGenerate citations span (``generatedResponsePart.textResponsePart.span``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_BRACKET = re.compile(r"\[([^\[\]\n]{1,400})\]")
_SPLIT = re.compile(r"[,;\s]+")


def parse_citations(text: str, evidence_ids: Sequence[str]) -> tuple[str, ...]:
    """Evidence ids cited in square brackets in ``text``, in order of first citation, without
    repeats. Only ids given as evidence count; ``[2]`` counts as the 2nd evidence id, and one
    bracket may hold several ids (``[chk-a, sum-b]``)."""
    known = list(evidence_ids)
    allowed = set(known)
    cited: list[str] = []
    for group in _BRACKET.findall(text):
        for token in _SPLIT.split(group):
            token = token.strip("'\"`.:()")
            if token.lower().startswith("evidence"):
                continue
            eid = token if token in allowed else None
            if eid is None and token.isascii() and token.isdigit() and 1 <= int(token) <= len(known):
                eid = known[int(token) - 1]
            if eid is not None and eid not in cited:
                cited.append(eid)
    return tuple(cited)


# a part ends at white space after a sentence's end or a closing bracket, unless a citation
# bracket follows (it belongs to the sentence before it)
_BOUNDARY = re.compile(r"(?<=[.!?\]])\s+(?!\[)")


def cited_parts(text: str, evidence_ids: Sequence[str]) -> list[tuple[int, int, tuple[str, ...]]]:
    """``text`` cut into parts, each (start, end, cited ids) with ``end`` inclusive (Bedrock's
    span): a part runs through a sentence that cites evidence, taking any uncited sentences
    before it; uncited sentences at the end join the last part. An answer that cites nothing
    is one part citing nothing. Linear in the text's length."""
    if not text:
        return []
    cuts = [m.end() for m in _BOUNDARY.finditer(text)]
    starts = [0] + cuts
    ends = [c for c in cuts] + [len(text)]
    parts: list[tuple[int, int, tuple[str, ...]]] = []
    open_at = 0
    for s, e in zip(starts, ends):
        ids = parse_citations(text[s:e], evidence_ids)
        if ids:
            parts.append((open_at, e, ids))
            open_at = e
    if not parts:
        return [(0, len(text) - 1, ())]
    if open_at < len(text):
        s, _, ids = parts[-1]
        parts[-1] = (s, len(text), ids)
    return [(s, max(e - 1, s), ids) for s, e, ids in [(s, len(text[:e].rstrip()), ids) for s, e, ids in parts]]
