"""Document metadata and the filter language over it.

**Metadata** is a flat object of a document's attributes: each value a string, a number, a
boolean or a list of strings (``check_metadata``). Every leaf chunk carries its document's
metadata plus the built-in attributes ``source``, ``doc_id`` and ``title`` (``chunk_attrs``);
those names are reserved and cannot be set by a document.

**Filters** take Amazon Bedrock Knowledge Bases' operator set and JSON shape
(``{"equals": {"key": "year", "value": 2020}}``, ``{"andAll": [f, g]}``):
``equals``, ``notEquals``, ``in``, ``notIn``, ``greaterThan``, ``greaterThanOrEquals``,
``lessThan``, ``lessThanOrEquals``, ``startsWith``, ``andAll``, ``orAll``. ``parse_filter``
validates one (pydantic; an unknown key or a bad operator is a FilterError naming it) into the
small tree of ``Cond``/``All``/``AnyOf`` that every adapter compiles to its own query language;
``matches`` is the reference semantics that the adapters must agree with:

* Types are strict: ``"2020"`` does not equal ``2020``, and ``true`` is not a number.
* A list attribute matches ``equals``/``in``/``startsWith`` when one of its strings does.
* ``notEquals``/``notIn`` are the negation of ``equals``/``in``: they match a chunk without the key.
* ``greaterThan``... compare numbers only: a chunk whose value is not a number does not match.

``parse_expression`` reads the CLI's short form (``year>=2020``, ``source in [a,b]``,
``lang!=de``, ``title^=Intro``; several ``--filter`` flags are joined by ``andAll``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from .access import ATTRIBUTE as ACCESS, EVERYONE, READERS, AccessError, Caller, check_access, readers_of
from .model import EragraphError

# --------------------------------------------------------------------------- metadata

KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
RESERVED = ("source", "doc_id", "title", "tenant", "readers")  # built-in attributes of every chunk
MAX_KEYS = 50
MAX_STRING = 1024
MAX_LIST = 100
MAX_CONDITIONS = 64
MAX_DEPTH = 6

Value = Union[str, int, float, bool, tuple[str, ...]]
_KEY = re.compile(KEY_PATTERN)


class MetadataError(EragraphError):
    """Document metadata that is not a flat object of strings, numbers, booleans and lists of
    strings under valid keys."""

    refusal = "metadata"  # its words are the rule broken (domain.refusals)


class FilterError(EragraphError):
    """A filter that is not valid: an unknown operator, a bad key or value, too deep."""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _tenant_value(value: Any, where: str) -> str:
    from .tenants import TenantError, check_tenant

    try:
        return check_tenant(value)
    except TenantError as exc:
        raise MetadataError(f"{where}.tenant: {exc}") from None


def check_metadata(metadata: Any, where: str = "metadata", allow_reserved: bool = False) -> dict[str, Any]:
    """A document's metadata, validated and normalized (lists of strings become tuples are kept
    as lists for JSON; numbers that are whole stay as given). Raises MetadataError naming the
    key and the rule."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise MetadataError(f"{where} must be a JSON object of attributes")
    if len(metadata) > MAX_KEYS:
        raise MetadataError(f"{where} has {len(metadata)} keys; at most {MAX_KEYS}")
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not _KEY.match(key):
            raise MetadataError(f"{where}: key {key!r} must be 1-64 letters, digits, '_' or '-', "
                                "starting with a letter or '_'")
        if key == "tenant" and not allow_reserved:
            out[key] = _tenant_value(value, where)  # routes the document (domain.tenants)
            continue
        if key == ACCESS:  # who may read the document (domain.access): its own rule
            try:
                out[key] = check_access(value, where)
            except AccessError as exc:
                raise MetadataError(str(exc)) from None
            continue
        if key in RESERVED and not allow_reserved:
            raise MetadataError(f"{where}: key {key!r} is reserved (built-in: {', '.join(RESERVED)})")
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                raise MetadataError(f"{where}.{key}: a string of at most {MAX_STRING} characters")
            out[key] = value
        elif isinstance(value, bool):
            out[key] = value
        elif _is_number(value):
            if not math.isfinite(value):
                raise MetadataError(f"{where}.{key}: numbers must be finite")
            out[key] = value
        elif isinstance(value, (list, tuple)):
            if len(value) > MAX_LIST or not all(isinstance(v, str) and len(v) <= MAX_STRING for v in value):
                raise MetadataError(f"{where}.{key}: a list must hold at most {MAX_LIST} strings "
                                    f"of at most {MAX_STRING} characters")
            out[key] = list(value)
        else:
            raise MetadataError(f"{where}.{key}: values are strings, numbers, booleans or lists of strings "
                                f"(got {type(value).__name__})")
    return out


def chunk_attrs(metadata: Mapping[str, Any] | None, source: str, doc_id: str, title: str = "",
                tenant: str = "") -> dict[str, Any]:
    """What a leaf chunk is filtered on: its document's metadata and the built-in attributes."""
    out = dict(metadata or {})
    out["source"] = source
    out["doc_id"] = doc_id
    if title:
        out["title"] = title
    if tenant:
        out["tenant"] = tenant
    out[READERS] = readers_of(out.get(ACCESS))  # who may read it: a caller's view selects on it
    return out


# --------------------------------------------------------------------------- the filter tree

COMPARISONS = ("equals", "notEquals", "greaterThan", "greaterThanOrEquals", "lessThan", "lessThanOrEquals",
               "in", "notIn", "startsWith")
RANGES = {"greaterThan": "gt", "greaterThanOrEquals": "gte", "lessThan": "lt", "lessThanOrEquals": "lte"}


@dataclass(frozen=True)
class Cond:
    """One comparison: ``op`` one of COMPARISONS, ``value`` a scalar or (in/notIn) a tuple."""
    op: str
    key: str
    value: Any


@dataclass(frozen=True)
class All:
    items: tuple[Filter, ...]


@dataclass(frozen=True)
class AnyOf:
    items: tuple[Filter, ...]


Filter = Union[Cond, All, AnyOf]


def _eq(attr: Any, value: Any) -> bool:
    """Strict equality (a bool is not a number); a list attribute matches by any element."""
    if isinstance(attr, (list, tuple)):
        return isinstance(value, str) and value in attr
    if isinstance(attr, bool) or isinstance(value, bool):
        return isinstance(attr, bool) and isinstance(value, bool) and attr == value
    if _is_number(attr):
        return _is_number(value) and attr == value
    return isinstance(attr, str) and isinstance(value, str) and attr == value


def matches(f: Filter | None, attrs: Mapping[str, Any]) -> bool:
    """The reference semantics of a filter over one chunk's attributes."""
    if f is None:
        return True
    if isinstance(f, All):
        return all(matches(g, attrs) for g in f.items)
    if isinstance(f, AnyOf):
        return any(matches(g, attrs) for g in f.items)
    attr = attrs.get(f.key)
    op = f.op
    if op == "equals":
        return attr is not None and _eq(attr, f.value)
    if op == "notEquals":
        return not (attr is not None and _eq(attr, f.value))
    if op == "in":
        return attr is not None and any(_eq(attr, v) for v in f.value)
    if op == "notIn":
        return not (attr is not None and any(_eq(attr, v) for v in f.value))
    if op == "startsWith":
        if isinstance(attr, (list, tuple)):
            return any(a.startswith(f.value) for a in attr)
        return isinstance(attr, str) and attr.startswith(f.value)
    if op in RANGES:
        if not _is_number(attr):
            return False
        return {"gt": attr > f.value, "gte": attr >= f.value, "lt": attr < f.value,
                "lte": attr <= f.value}[RANGES[op]]
    raise FilterError(f"unknown operator {op!r}")


def conditions(f: Filter) -> list[Cond]:
    if isinstance(f, Cond):
        return [f]
    return [c for g in f.items for c in conditions(g)]


def depth(f: Filter) -> int:
    return 1 if isinstance(f, Cond) else 1 + max((depth(g) for g in f.items), default=0)


def keys(f: Filter) -> set[str]:
    return {c.key for c in conditions(f)}


def to_json(f: Filter) -> dict[str, Any]:
    """The Bedrock-shaped JSON of a filter (parse_filter(to_json(f)) == f)."""
    if isinstance(f, All):
        return {"andAll": [to_json(g) for g in f.items]}
    if isinstance(f, AnyOf):
        return {"orAll": [to_json(g) for g in f.items]}
    value = list(f.value) if isinstance(f.value, tuple) else f.value
    return {f.op: {"key": f.key, "value": value}}


def cache_key(f: Filter | None) -> str:
    return "" if f is None else json.dumps(to_json(f), sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- validation (pydantic)

_Key = Annotated[StrictStr, Field(pattern=KEY_PATTERN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Condition(_Strict):
    """Structure only; the value's type is checked per operator (``_value``), for one clear line."""
    key: _Key
    value: Any


class FilterModel(_Strict):
    """One node of a filter: exactly one of its fields is set (Bedrock's RetrievalFilter)."""
    equals: _Condition | None = None
    notEquals: _Condition | None = None
    greaterThan: _Condition | None = None
    greaterThanOrEquals: _Condition | None = None
    lessThan: _Condition | None = None
    lessThanOrEquals: _Condition | None = None
    in_: _Condition | None = Field(default=None, alias="in")
    notIn: _Condition | None = None
    startsWith: _Condition | None = None
    andAll: Annotated[list[FilterModel], Field(min_length=1, max_length=MAX_CONDITIONS)] | None = None
    orAll: Annotated[list[FilterModel], Field(min_length=1, max_length=MAX_CONDITIONS)] | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


OPERATORS = COMPARISONS + ("andAll", "orAll")


def _tree(m: FilterModel, where: str) -> Filter:
    given = [name for name in m.model_fields_set]
    if len(given) != 1:
        names = ", ".join("in" if g == "in_" else g for g in given) or "none"
        raise FilterError(f"{where} must have exactly one operator (one of {', '.join(OPERATORS)}); got {names}")
    name = given[0]
    body = getattr(m, name)
    op = "in" if name == "in_" else name
    if op in ("andAll", "orAll"):
        items = tuple(_tree(g, f"{where}.{op}[{i}]") for i, g in enumerate(body))
        return All(items) if op == "andAll" else AnyOf(items)
    return Cond(op, body.key, _value(op, body.value, f"{where}.{op}.value"))


def _scalar_ok(v: Any) -> bool:
    if isinstance(v, str):
        return len(v) <= MAX_STRING
    return isinstance(v, bool) or (_is_number(v) and math.isfinite(v))


def _value(op: str, value: Any, where: str) -> Any:
    from .validation import shown

    if op in RANGES:
        if not _is_number(value) or not math.isfinite(value):
            raise FilterError(f"{where} must be a finite number (got {shown(value)})")
        return value
    if op == "startsWith":
        if not isinstance(value, str) or not value or len(value) > MAX_STRING:
            raise FilterError(f"{where} must be a non-empty string of at most {MAX_STRING} characters "
                              f"(got {shown(value)})")
        return value
    if op in ("in", "notIn"):
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_LIST or not all(map(_scalar_ok, value)):
            raise FilterError(f"{where} must be an array of 1 to {MAX_LIST} strings, numbers or booleans "
                              f"(got {shown(value)})")
        return tuple(value)
    if not _scalar_ok(value):
        raise FilterError(f"{where} must be a string, a finite number or a boolean (got {shown(value)})")
    return value


def _message(exc: ValidationError) -> str:
    from .validation import describe

    lines = []
    for error in exc.errors(include_url=False)[:5]:
        loc = tuple("in" if p == "in_" else p for p in error.get("loc", ()))
        where = "filter" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[:-1])
        if error.get("type") == "extra_forbidden" and len(loc) and not isinstance(loc[-1], int):
            if len(loc) >= 2 and loc[-2] in COMPARISONS:
                lines.append(f"{where}: unknown field {loc[-1]!r} (a condition has key and value)")
            else:
                lines.append(f"{where}: unknown operator {loc[-1]!r} (operators: {', '.join(OPERATORS)})")
            continue
        if error.get("type") == "string_pattern_mismatch":
            lines.append(f"{where}.key must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'")
            continue
        lines.append(describe({**error, "loc": ("filter",) + loc}, skip=(), whole="filter"))
    return "; ".join(dict.fromkeys(lines))


def _raw_depth(data: Any) -> int:
    """How deep a JSON value nests (iteratively: a hostile body must not recurse)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, d = stack.pop()
        deepest = max(deepest, d)
        if d > 4 * MAX_DEPTH:
            return d
        if isinstance(value, dict):
            stack.extend((v, d + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, d + 1) for v in value)
    return deepest


def parse_filter(data: Any) -> Filter | None:
    """A filter from its JSON (a dict, or a JSON string); None for None or an empty object.
    Raises FilterError with one readable line."""
    if data is None:
        return None
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise FilterError(f"filter is not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise FilterError(f"filter is nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(data, FilterModel):
        model = data
    else:
        if not isinstance(data, dict):
            raise FilterError("filter must be a JSON object such as {\"equals\": {\"key\": \"k\", \"value\": \"v\"}}")
        if not data:
            return None
        if _raw_depth(data) > 2 * MAX_DEPTH + 2:
            raise FilterError(f"filter is nested deeper than {MAX_DEPTH} levels")
        try:
            model = FilterModel.model_validate(data)
        except ValidationError as exc:
            raise FilterError(_message(exc)) from None
        except RecursionError:
            raise FilterError(f"filter is nested deeper than {MAX_DEPTH} levels") from None
    tree = _tree(model, "filter")
    if depth(tree) > MAX_DEPTH:
        raise FilterError(f"filter is nested deeper than {MAX_DEPTH} levels")
    if len(conditions(tree)) > MAX_CONDITIONS:
        raise FilterError(f"filter has more than {MAX_CONDITIONS} conditions")
    return tree


# --------------------------------------------------------------------------- the CLI's short form

_EXPR = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*"
                   r"(?P<op>>=|<=|!=|==|\^=|=|>|<|\s+not\s+in\s+|\s+in\s+)\s*(?P<value>.*?)\s*$",
                   re.IGNORECASE | re.DOTALL)
_SHORT_OPS = {">=": "greaterThanOrEquals", "<=": "lessThanOrEquals", "!=": "notEquals", "==": "equals",
              "=": "equals", ">": "greaterThan", "<": "lessThan", "^=": "startsWith", "in": "in", "not in": "notIn"}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if _NUMBER.match(text):
        number = float(text)
        return int(number) if re.match(r"^[+-]?\d+$", text) else number
    return text


def _split_list(text: str) -> list[str]:
    items, current, quote = [], "", ""
    for ch in text:
        if quote:
            current += ch
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            current += ch
        elif ch == ",":
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return [i for i in (x.strip() for x in items) if i]


def parse_expression(text: str) -> Filter:
    """One CLI filter: ``KEY OP VALUE`` with OP one of = == != > >= < <= ^= (startsWith),
    ``in [a, b]``, ``not in [a, b]``; or a Bedrock-shaped JSON object. Values: a number, true or
    false, a quoted string, else the bare text as a string."""
    stripped = text.strip()
    if stripped.startswith("{"):
        tree = parse_filter(stripped)
        if tree is None:
            raise FilterError("filter: an empty JSON object filters nothing; leave the flag out")
        return tree
    m = _EXPR.match(text)
    if not m:
        raise FilterError(f"cannot read filter {text!r}: write KEY OP VALUE with OP one of "
                          "= != > >= < <= ^= 'in [a,b]' 'not in [a,b]', or a JSON filter")
    op = _SHORT_OPS[" ".join(m.group("op").lower().split())]
    raw = m.group("value")
    if op in ("in", "notIn"):
        if not (raw.startswith("[") and raw.endswith("]")):
            raise FilterError(f"filter {text!r}: '{'not in' if op == 'notIn' else 'in'}' takes a list, e.g. [a, b]")
        value: Any = [_scalar(v) for v in _split_list(raw[1:-1])]
    else:
        if not raw:
            raise FilterError(f"filter {text!r} has no value")
        value = _scalar(raw)
        if op == "startsWith" and not isinstance(value, str):
            value = raw
    tree = parse_filter({op: {"key": m.group("key"), "value": value}})
    assert tree is not None
    return tree


def view_of(caller: Caller | None) -> Filter | None:
    """The filter of the nodes ``caller`` may read (domain.access): a ``readers`` value among
    its principals (or ``*``, when the open partition is readable); None: everything (the
    operator). A node without ``readers`` (written before access lists) matches no view."""
    if caller is None or caller.principals is None:
        return None
    return Cond("in", READERS, tuple(caller.principals) + ((EVERYONE,) if caller.open_readable else ()))


def combine(filters: Sequence[Filter | None]) -> Filter | None:
    """Several filters that must all hold (the CLI's repeated --filter)."""
    given = [f for f in filters if f is not None]
    if not given:
        return None
    return given[0] if len(given) == 1 else All(tuple(given))
