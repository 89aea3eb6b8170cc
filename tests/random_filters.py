"""Random document metadata and random filters over it, for the tests that compare an adapter's
filtered answers with ``domain.filters.matches`` (brute force over the allowed set).

The attributes mix every kind a document may carry (strings, whole and fractional numbers,
booleans, lists of strings) under a few keys, each key missing from some documents and of
another type in others (``year`` is sometimes the string ``"2020"``), so that strict typing,
list membership and the negations' "matches a chunk without the key" are all exercised. The
filters draw every operator, values of every type, and ``andAll``/``orAll`` nested a few levels,
over those keys, the built-in ``source``/``doc_id``/``title`` and a key no document has."""

from __future__ import annotations

import random
from typing import Any

from eragraph.domain.filters import COMPARISONS, All, AnyOf, Cond, Filter, chunk_attrs

STRINGS = ["en", "de", "fr", "english", "e", "", "2020", "news", "new"]
TAGS = ["a", "ab", "b", "news", "new", "x y", "é"]
PREFIXES = ["e", "en", "n", "ne", "new", "a", "d", "s3://", "s3://b/", "doc", "T", "é", "2"]
NUMBERS = [2018, 2019, 2020, 2020.0, 2020.5, 2021, 2022, -1, 0, 1]
KEYS = ["lang", "year", "draft", "tags", "score", "kind"]
FILTER_KEYS = KEYS + ["source", "doc_id", "title", "absent"]


def random_metadata(rng: random.Random) -> dict[str, Any]:
    """A document's metadata: each key present with probability 3/4, of a type that varies."""
    out: dict[str, Any] = {}
    if rng.random() < 0.75:
        out["lang"] = rng.choice(STRINGS)
    if rng.random() < 0.75:
        out["year"] = rng.choice(NUMBERS + ["2020"])
    if rng.random() < 0.75:
        out["draft"] = rng.random() < 0.5
    if rng.random() < 0.75:
        out["tags"] = rng.sample(TAGS, rng.randint(0, 3))
    if rng.random() < 0.75:
        out["score"] = rng.choice([0.25, 0.5, 0.75, 1, 2.5, True])
    if rng.random() < 0.75:
        out["kind"] = rng.choice(["report", "memo", 3, False, ["report", "memo"]])
    return out


def random_attrs(rng: random.Random, doc_id: str) -> dict[str, Any]:
    """The attributes of the chunks of document ``doc_id``: random metadata and the built-ins."""
    source = f"s3://b/{rng.choice(['x', 'y'])}/{doc_id}.txt"
    title = rng.choice(["", "Title " + doc_id, "Tale"])
    return chunk_attrs(random_metadata(rng), source, doc_id, title)


# the values a key usually holds: most conditions draw from them, the rest from any type
TYPICAL = {"lang": STRINGS, "year": NUMBERS + ["2020"], "draft": [True, False], "tags": TAGS,
           "score": [0.25, 0.5, 0.75, 1, 2.5], "kind": ["report", "memo", 3, False],
           "title": ["Tale", "Title doc3", ""]}


def _scalar(rng: random.Random, key: str) -> Any:
    if key == "doc_id":
        return f"doc{rng.randint(0, 12)}"
    if key == "source":
        return f"s3://b/{rng.choice(['x', 'y'])}/doc{rng.randint(0, 12)}.txt"
    if key in TYPICAL and rng.random() < 0.75:
        return rng.choice(TYPICAL[key])
    kind = rng.random()
    if kind < 0.45:
        return rng.choice(STRINGS + TAGS + ["report", "memo"])
    if kind < 0.85:
        return rng.choice(NUMBERS + [0.25, 0.5, 2.5, 3])
    return rng.random() < 0.5


def random_condition(rng: random.Random) -> Cond:
    op = rng.choice(COMPARISONS)
    key = rng.choice(FILTER_KEYS)
    if op in ("in", "notIn"):
        return Cond(op, key, tuple(_scalar(rng, key) for _ in range(rng.randint(1, 4))))
    if op == "startsWith":
        return Cond(op, key, rng.choice(PREFIXES))
    if op.startswith(("greater", "less")):
        return Cond(op, key, rng.choice(NUMBERS + [0.3, 2.5]))
    return Cond(op, key, _scalar(rng, key))


def random_filter(rng: random.Random, depth: int = 3) -> Filter:
    """A condition, or an andAll/orAll of 1-3 random filters nested up to ``depth`` levels."""
    if depth <= 1 or rng.random() < 0.4:
        return random_condition(rng)
    items = tuple(random_filter(rng, depth - 1) for _ in range(rng.randint(1, 3)))
    return All(items) if rng.random() < 0.5 else AnyOf(items)


def random_filters(seed: int, n: int) -> list[Filter]:
    rng = random.Random(seed)
    return [random_filter(rng) for _ in range(n)]
