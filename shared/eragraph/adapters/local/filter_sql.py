"""A metadata filter (domain.filters) compiled to an SQLite condition over a JSON object of
chunk attributes, with exactly ``domain.filters.matches``' semantics:

* types are strict (``json_type``: ``'text'``, ``'integer'``/``'real'``, ``'true'``/``'false'``,
  ``'array'``), so ``"2020"`` does not equal ``2020`` and ``true`` is not a number;
* a list attribute matches ``equals``/``in``/``startsWith`` when one of its strings does
  (``json_each`` over the list);
* ``notEquals``/``notIn`` are the negation of ``equals``/``in``, so they match a chunk without
  the key (every atom below is 0 or 1, never NULL, so a negation is never lost to NULL);
* ranges compare numbers only;
* a row whose JSON is NULL (no attributes: a summary) matches no filter at all.

``compile(f, "attrs")`` gives ``(sql, params)`` for ``WHERE`` with ``?`` placeholders in order.
Value lists travel as one JSON array parameter each (``json_each(?)``), so a filter of any size
stays well under SQLite's variable limit."""

from __future__ import annotations

import json
import re
from typing import Any

from ...domain.filters import KEY_PATTERN, RANGES, All, AnyOf, Filter, FilterError, _is_number

_KEY = re.compile(KEY_PATTERN)
_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _path(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise FilterError(f"filter key {key!r} must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'")
    return f'$."{key}"'


def _number(value: Any) -> Any:
    """A bound number (an int beyond int64 cannot be bound: as a float, as SQLite reads it)."""
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        return float(value)
    return value


def _arr(values: list) -> str:
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


class _Compiler:
    def __init__(self, json_expr: str) -> None:
        self.j = json_expr
        self.params: list[Any] = []

    def _type(self, path: str) -> str:
        self.params.append(path)
        return f"coalesce(json_type({self.j}, ?), '')"

    def _value(self, path: str) -> str:
        self.params.append(path)
        return f"json_extract({self.j}, ?)"

    def _elements(self, path: str, condition: str) -> str:
        """Some string of the list at ``path`` meets ``condition`` (over ``e.value``)."""
        self.params.append(path)
        return f"EXISTS (SELECT 1 FROM json_each({self.j}, ?) AS e WHERE e.type = 'text' AND {condition})"

    def member(self, key: str, values: tuple) -> str:
        """The attribute equals one of ``values`` (a list attribute: one of its strings does)."""
        path = _path(key)
        strs = [v for v in values if isinstance(v, str)]
        nums = [v for v in values if _is_number(v)]
        bools = {v for v in values if isinstance(v, bool)}
        parts = []
        if strs:
            parts.append(f"({self._type(path)} = 'text' AND {self._value(path)} IN (SELECT value FROM json_each(?)))")
            self.params.append(_arr(strs))
            parts.append(f"({self._type(path)} = 'array' AND "
                         f"{self._elements(path, 'e.value IN (SELECT value FROM json_each(?))')})")
            self.params.append(_arr(strs))
        if nums:
            parts.append(f"({self._type(path)} IN ('integer', 'real') AND "
                         f"{self._value(path)} IN (SELECT value FROM json_each(?)))")
            self.params.append(_arr(nums))
        for b in sorted(bools):
            parts.append(f"{self._type(path)} = '{'true' if b else 'false'}'")
        return "(" + " OR ".join(parts) + ")" if parts else "0"

    def starts_with(self, key: str, prefix: str) -> str:
        path = _path(key)
        n = len(prefix)
        text = f"({self._type(path)} = 'text' AND substr({self._value(path)}, 1, {n}) = ?)"
        self.params.append(prefix)
        in_list = f"({self._type(path)} = 'array' AND {self._elements(path, f'substr(e.value, 1, {n}) = ?')})"
        self.params.append(prefix)
        return f"({text} OR {in_list})"

    def range(self, key: str, op: str, value: Any) -> str:
        path = _path(key)
        sql = f"({self._type(path)} IN ('integer', 'real') AND {self._value(path)} {_RANGE_SQL[RANGES[op]]} ?)"
        self.params.append(_number(value))
        return sql

    def tree(self, f: Filter) -> str:
        if isinstance(f, All):
            return "(" + " AND ".join(self.tree(g) for g in f.items) + ")" if f.items else "1"
        if isinstance(f, AnyOf):
            return "(" + " OR ".join(self.tree(g) for g in f.items) + ")" if f.items else "0"
        if f.op == "equals":
            return self.member(f.key, (f.value,))
        if f.op == "notEquals":
            return f"NOT {self.member(f.key, (f.value,))}"
        if f.op == "in":
            return self.member(f.key, tuple(f.value))
        if f.op == "notIn":
            return f"NOT {self.member(f.key, tuple(f.value))}"
        if f.op == "startsWith":
            return self.starts_with(f.key, f.value)
        if f.op in RANGES:
            return self.range(f.key, f.op, f.value)
        raise FilterError(f"unknown operator {f.op!r}")


def compile(f: Filter, json_expr: str) -> tuple[str, list[Any]]:  # noqa: A001 (the module's one verb)
    """``(sql, params)``: a condition true exactly for the rows whose ``json_expr`` (an SQL
    expression giving a JSON object, or NULL for none) ``matches`` ``f``."""
    c = _Compiler(json_expr)
    body = c.tree(f)
    return f"({json_expr} IS NOT NULL AND {body})", c.params
