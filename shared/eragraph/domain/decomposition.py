"""Query decomposition (Bedrock's ``QUERY_DECOMPOSITION``): a question split by a model into the
simpler questions it needs, each retrieved for separately, the result lists fused by reciprocal
rank (domain.fusion.rrf).

The model's reply is read defensively, in linear time over a capped prefix:

- at most MAX_REPLY_CHARS of the reply are read; a JSON array of strings is taken as it is,
  anything else line by line, each line stripped of list markers (``1.``, ``-``, ``Q2:``) and
  quotes;
- a line that introduces a list (it ends with ``:``), is empty, longer than
  MAX_SUB_QUESTION_CHARS or a repeat is dropped;
- at most MAX_SUB_QUESTIONS are kept, in the model's order;
- a reply that leaves none is no decomposition: the original question is retrieved for, and
  the decomposition says so (``how``: ``original``, with its ``note``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .fusion import rrf

MAX_SUB_QUESTIONS = 4         # sub-questions retrieved for (the rest of a longer list is dropped)
MAX_SUB_QUESTION_CHARS = 300  # a longer line is no sub-question
MAX_REPLY_CHARS = 4000        # the reply's prefix that is read

MODEL, ORIGINAL = "model", "original"

_MARKER = re.compile(r"^\s*(?:(?:sub-?question|q)\s*\d*\s*[:.)-]|\d{1,2}\s*[.):-]|[-*•·]|\(\d{1,2}\))\s*",
                     re.IGNORECASE)
_QUOTES = "\"'“”‘’`"


@dataclass(frozen=True)
class Decomposition:
    """The questions retrieval runs on and how they were made: ``model`` (the model's split)
    or ``original`` (its reply held none: the question itself, ``note`` says why)."""

    questions: tuple[str, ...]
    how: str = MODEL
    note: str = ""
    dropped: int = 0  # lines of the reply that were not taken (too long, repeats, past the cap)
    found: dict[str, tuple[int, ...]] = field(default_factory=dict)  # result id -> the questions that found it

    def to_dict(self) -> dict:
        out = {"questions": list(self.questions), "how": self.how,
               "found": {k: list(v) for k, v in self.found.items()}}
        if self.note:
            out["note"] = self.note
        return out


def _lines(reply: str) -> list[str]:
    head = reply[:MAX_REPLY_CHARS].strip()
    if head.startswith("["):
        try:
            items = json.loads(head)
        except ValueError:
            items = None
        if isinstance(items, list) and all(isinstance(i, str) for i in items):
            return items
    return head.splitlines()


def _clean(line: str) -> str:
    text = _MARKER.sub("", " ".join(line.split()), count=1)
    return text.strip(_QUOTES + " ").strip()


def parse_sub_questions(reply: str, question: str) -> Decomposition:
    """The sub-questions of a model's ``reply`` (see the module's rules); ``question`` itself,
    said in ``note``, when the reply holds none."""
    kept: list[str] = []
    seen: set[str] = set()
    dropped = 0
    for line in _lines(reply if isinstance(reply, str) else ""):
        text = _clean(line)
        if not text or text.endswith(":"):
            continue
        key = text.casefold()
        if len(text) > MAX_SUB_QUESTION_CHARS or key in seen or len(kept) >= MAX_SUB_QUESTIONS:
            dropped += 1
            continue
        seen.add(key)
        kept.append(text)
    if not kept:
        return Decomposition((question,), ORIGINAL, "the model's reply held no usable sub-question, so the "
                             "original question was retrieved for", dropped)
    note = f"{dropped} line(s) of the model's reply were not used (over {MAX_SUB_QUESTIONS} sub-questions, " \
           f"longer than {MAX_SUB_QUESTION_CHARS} characters, or repeated)" if dropped else ""
    return Decomposition(tuple(kept), MODEL, note, dropped)


def fuse(ranked: Sequence[Sequence[str]], k: int) -> tuple[list[tuple[str, float]], dict[str, tuple[int, ...]]]:
    """The best ``k`` ids of the per-question ranked lists by reciprocal rank fusion, and for
    each of them the (0-based) questions whose list held it."""
    fused = rrf(ranked)[:k]
    found: dict[str, list[int]] = {item: [] for item, _ in fused}
    for i, items in enumerate(ranked):
        for item in set(items):
            if item in found:
                found[item].append(i)
    return fused, {item: tuple(sorted(ids)) for item, ids in found.items()}
