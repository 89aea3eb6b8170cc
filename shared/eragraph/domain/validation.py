"""Readable sentences for pydantic validation errors: the field, the rule and the limit in words,
and what was given (``k must be at most 100 (got 100000)``). Shared by the HTTP API
(eragraph.entrypoints.http.api) and the reindex function's event check. Only what the sentence needs is read from
an error (its loc, type, ctx and input), so no Python or pydantic internals reach a client."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

MAX_SHOWN = 40  # characters of a given string shown back


def field_name(loc: Sequence[Any], skip: tuple[str, ...] = ("body",), whole: str = "the body") -> str:
    parts = [str(p) for p in loc if p not in skip]
    return ".".join(parts) or whole


def shown(value: Any) -> str:
    """What was given, briefly and by kind: a string quoted (cut), a number as it is."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if not value:
            return "an empty string"
        cut = value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "..."
        return f"the string {cut!r}"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_KINDS = {"int": "an integer", "float": "a number", "string": "a string", "bool": "true or false",
          "dict": "an object", "model": "an object", "list": "an array"}


def describe(error: dict, skip: tuple[str, ...] = ("body",), known: Iterable[str] = (), whole: str = "the body") -> str:
    """One sentence for one pydantic error dict; ``skip``: loc parts left out of the field name
    (the body of an HTTP request), ``whole``: the name of what has no field name left."""
    name = field_name(error.get("loc", ()), skip, whole)
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    given = error.get("input")
    got = f" (got {shown(given)})" if "input" in error else ""
    if kind == "missing":
        return f"{name} is required"
    if kind == "extra_forbidden":
        listed = ", ".join(known)
        return f"{name} is not a known field" + (f" (known: {listed})" if listed else "")
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return f"{name} must not be empty"
        return f"{name} must be at least {ctx.get('min_length')} characters long (got {len(given or '')})"
    if kind == "string_too_long":
        return f"{name} must be at most {ctx.get('max_length')} characters long (got {len(given or '')})"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        limit = ctx.get({"greater_than_equal": "ge", "greater_than": "gt", "less_than_equal": "le",
                         "less_than": "lt"}[kind])
        words = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most",
                 "less_than": "less than"}[kind]
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)  # "at least 0", not "at least 0.0"
        return f"{name} must be {words} {limit}{got}"
    if kind in ("too_short", "too_long"):
        words, limit = ("at least", ctx.get("min_length")) if kind == "too_short" else ("at most", ctx.get("max_length"))
        count = len(given) if isinstance(given, (list, dict, str)) else ctx.get("actual_length")
        return f"{name} must have {words} {limit} items (got {count})"
    if kind == "finite_number":
        return f"{name} must be a finite number{got}"
    if kind == "int_from_float":
        return f"{name} must be a whole number{got}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{name} must be a JSON object{got}"
    for prefix, words in _KINDS.items():
        if kind in (f"{prefix}_type", f"{prefix}_parsing"):
            return f"{name} must be {words}{got}"
    return f"{name}: {error.get('msg') or kind}{got}"


def describe_all(errors: Iterable[dict], skip: tuple[str, ...] = ("body",), known: Iterable[str] = (),
                 whole: str = "the body") -> str:
    known = list(known)
    return "; ".join(describe(e, skip, known, whole) for e in errors)
