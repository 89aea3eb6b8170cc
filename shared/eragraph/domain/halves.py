"""Two halves of a question set, fixed by the question's id: a tuning half and a held-out half
that stay the same across runs, machines and orderings (no random seed, no Python ``hash``).

``half_of(id)`` is the lowest bit of the first byte of sha256(id): about half the ids of any
set fall in each half, and adding or removing questions never moves another one. Used by
``eragraph router train`` (train on one half of every dataset, score the other) and by any
paired comparison that tunes on one half and reads the other."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def half_of(question_id: object) -> int:
    """0 or 1: the half the question with this id belongs to."""
    return hashlib.sha256(str(question_id).encode("utf-8")).digest()[0] & 1


def halves(ids: Iterable[object]) -> list[int]:
    """The half of every id, in order."""
    return [half_of(i) for i in ids]
