"""Metadata filters (``domain.filters``) in OpenSearch: a leaf chunk's attributes as typed fields of
its document, and a filter tree compiled to the query DSL that selects exactly the documents
``matches`` accepts.

**Fields.** A vector given ``attrs`` (``domain.filters.chunk_attrs``) carries ``has_attrs: true``
and its attributes split by type into three objects, each mapped by a dynamic template of the
index mapping (``index_mapping.json``), so a new key needs no mapping change:

* ``attrs_s.<key>`` keyword: a string, or a list of strings (an array of keywords);
* ``attrs_n.<key>`` double: a number (-0.0 is written as 0.0: Lucene orders -0.0 below 0.0);
* ``attrs_b.<key>`` boolean.

One field per type makes the filter type-strict in OpenSearch itself: ``equals 2020`` is a term on
``attrs_n.year`` and can never match the string ``"2020"`` (kept in ``attrs_s.year``), a range
reads doubles only (so never a string or a boolean), and a term on an array of keywords matches
when one element does (the list semantics of ``matches``). A string and a list of strings share
``attrs_s``: every operator treats a string like a list of that one string. Numbers are compared
as doubles, exact for integers up to 2^53.

**Queries.** ``equals``/``in`` are ``term``/``terms`` on the field of each value's type (an ``in``
over several types is a ``should`` of them, ``minimum_should_match`` 1); ``notEquals``/``notIn``
are the ``must_not`` of those, so they match a chunk without the key; ``startsWith`` is a
``prefix`` on the keyword; the ranges are a ``range`` on the double; ``andAll`` a ``bool``
``filter``, ``orAll`` a ``bool`` ``should`` with ``minimum_should_match`` 1. ``where_clauses``
adds the ``has_attrs`` term: a vector without attributes (a summary, an entity, a chunk written
before attributes existed) matches no filter, not even a negation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...domain.filters import KEY_PATTERN, RANGES, All, AnyOf, Cond, Filter, FilterError

MARKER = "has_attrs"
STRINGS, NUMBERS, BOOLEANS = "attrs_s", "attrs_n", "attrs_b"
ATTR_PROPERTIES = (MARKER, STRINGS, NUMBERS, BOOLEANS)  # what index_mapping.json adds for attributes
_KEY = re.compile(KEY_PATTERN)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number(v: int | float) -> int | float:
    return 0.0 if v == 0 and isinstance(v, float) else v  # -0.0 -> 0.0; integers stay integers


def _field(kind: str, key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise FilterError(f"filter key {key!r} must be 1-64 letters, digits, '_' or '-', "
                          "starting with a letter or '_'")
    return f"{kind}.{key}"


def attr_fields(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of an OpenSearch document that carry a vector's ``attrs`` ({} for None)."""
    if attrs is None:
        return {}
    typed: dict[str, dict[str, Any]] = {STRINGS: {}, NUMBERS: {}, BOOLEANS: {}}
    for key, value in attrs.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise ValueError(f"attribute key {key!r} is not a valid metadata key")
        if isinstance(value, str):
            typed[STRINGS][key] = value
        elif isinstance(value, (list, tuple)):
            if not all(isinstance(v, str) for v in value):
                raise ValueError(f"attribute {key!r}: a list must hold strings only")
            if value:  # an empty list has no value to match, like a missing key
                typed[STRINGS][key] = list(value)
        elif isinstance(value, bool):
            typed[BOOLEANS][key] = value
        elif _is_number(value) and math.isfinite(value):
            typed[NUMBERS][key] = _number(value)
        elif value is not None:
            raise ValueError(f"attribute {key!r}: a string, a finite number, a boolean or a list of strings, "
                             f"not {type(value).__name__}")
    return {MARKER: True, **{field: values for field, values in typed.items() if values}}


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return STRINGS
    if isinstance(value, bool):
        return BOOLEANS
    if _is_number(value) and math.isfinite(value):
        return NUMBERS
    raise FilterError(f"filter value {value!r}: a string, a finite number or a boolean")


def _equals(key: str, values: Sequence[Any]) -> dict[str, Any]:
    """Matches when the attribute equals one of ``values`` (strictly typed, any list element)."""
    groups: dict[str, list[Any]] = {}
    for v in values:
        kind = _kind(v)
        v = _number(v) if kind == NUMBERS else v
        group = groups.setdefault(kind, [])  # one type per group: 1 == True cannot collide
        if v not in group:
            group.append(v)
    clauses = [{"term": {_field(kind, key): vs[0]}} if len(vs) == 1 else {"terms": {_field(kind, key): vs}}
               for kind, vs in groups.items()]
    if not clauses:
        raise FilterError(f"filter on {key!r}: an empty list of values")
    return clauses[0] if len(clauses) == 1 else {"bool": {"should": clauses, "minimum_should_match": 1}}


def compile_filter(f: Filter) -> dict[str, Any]:
    """The query clause that matches a document exactly when ``matches(f, attrs)`` holds for the
    ``attrs`` it was written with (given ``has_attrs``: see ``where_clauses``)."""
    if isinstance(f, All):
        return {"bool": {"filter": [compile_filter(g) for g in f.items]}}
    if isinstance(f, AnyOf):
        if not f.items:  # OpenSearch caps minimum_should_match at the should clauses: 0 of none
            return {"bool": {"must_not": [{"match_all": {}}]}}
        return {"bool": {"should": [compile_filter(g) for g in f.items], "minimum_should_match": 1}}
    if not isinstance(f, Cond):
        raise FilterError(f"not a filter: {f!r}")
    if f.op in ("equals", "notEquals"):
        clause = _equals(f.key, (f.value,))
    elif f.op in ("in", "notIn"):
        if not isinstance(f.value, (list, tuple)):
            raise FilterError(f"{f.op} on {f.key!r} takes a list of values")
        clause = _equals(f.key, f.value)
    elif f.op == "startsWith":
        if not isinstance(f.value, str) or not f.value:
            raise FilterError(f"startsWith on {f.key!r} takes a non-empty string")
        return {"prefix": {_field(STRINGS, f.key): f.value}}
    elif f.op in RANGES:
        if _kind(f.value) != NUMBERS:
            raise FilterError(f"{f.op} on {f.key!r} takes a finite number")
        return {"range": {_field(NUMBERS, f.key): {RANGES[f.op]: _number(f.value)}}}
    else:
        raise FilterError(f"unknown operator {f.op!r}")
    return {"bool": {"must_not": [clause]}} if f.op in ("notEquals", "notIn") else clause


def where_clauses(where: Filter | None) -> list[dict[str, Any]]:
    """The ``filter`` clauses of a search restricted to ``where`` ([] for None)."""
    if where is None:
        return []
    return [{"term": {MARKER: True}}, compile_filter(where)]
