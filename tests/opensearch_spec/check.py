"""Requests checked against OpenSearch's published API specification (bundle.json, made by
bundle.py from the opensearch-api-specification project), as a cluster checks them: a request
the cluster would refuse raises ``Refused`` with the status, error type and reason it answers.

- the route (method and path) must be one of the operation's, the path and query parameters
  must be the operation's and fit their schemas (an unknown parameter is refused with
  ``illegal_argument_exception``, "request [...] contains unrecognized parameter");
- the body (JSON, or the NDJSON lines of ``_bulk`` and ``_msearch``, each checked by its place:
  action or source, header or search) must fit the operation's schema, with JSON Schema 2020-12
  (OpenAPI 3.1's dialect; its ``x-*`` and ``discriminator`` keywords annotate only).

Two readings make the spec as strict as the cluster's parsers, which are stricter than the
schemas say:
- an object schema that lists its ``properties`` (and allows no others) is closed: OpenSearch's
  parsers refuse a key they do not know (``unevaluatedProperties: false``, set on the schema
  that composes the parts, never on a part inside an ``allOf``);
- ``oneOf`` reads as ``anyOf``: the spec lists alternative forms, and a parser takes the first
  that fits even when two do.

The validators are compiled once per process (``spec()``). A document found valid is remembered
by its shape (``_shape``: each vector, a long list of numbers, read as one of the same length,
types and integrality), so that a search with a new query vector is not checked number by number
again: the bundle constrains a number by its type alone (``tests/aws/test_opensearch_spec.py``
checks that it still does), so a vector that fits one schema in that shape fits it in any."""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

BUNDLE = Path(__file__).resolve().with_name("bundle.json")
INPLACE = ("allOf", "anyOf", "oneOf")


class Refused(Exception):
    """What the cluster answers: ``status``, ``error_type`` and ``reason``; ``body()`` is its JSON."""

    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(f"{status} {error_type}: {reason}")
        self.status, self.error_type, self.reason = status, error_type, reason

    def body(self) -> dict:
        cause = {"type": self.error_type, "reason": self.reason}
        return {"error": {"root_cause": [cause], **cause}, "status": self.status}


# ----- the strict reading -----
def _children(node: dict) -> list[tuple[Any, bool]]:
    """(subschema, whether it applies in place to the same instance)."""
    out: list[tuple[Any, bool]] = []
    for key in INPLACE:
        out += [(x, True) for x in node.get(key, [])]
    for key in ("if", "then", "else", "not"):
        if isinstance(node.get(key), dict):
            out.append((node[key], True))
    for key in ("properties", "patternProperties", "dependentSchemas"):
        out += [(x, False) for x in (node.get(key) or {}).values()]
    for key in ("items", "additionalProperties", "propertyNames", "contains", "unevaluatedItems"):
        if isinstance(node.get(key), dict):
            out.append((node[key], False))
    out += [(x, False) for x in node.get("prefixItems", [])]
    return [(c, inplace) for c, inplace in out if isinstance(c, dict)]


def _parts(node: dict) -> list:
    """The schemas an ``allOf`` composes (one alone, with nothing beside it, is an alias)."""
    items = node.get("allOf", [])
    return items if len(items) > 1 or "properties" in node else []


def _strict(defs: dict, known: dict | None = None) -> dict:
    """``defs`` read strictly (a copy); ``known``: the definitions their references name, if
    not among them."""
    defs = copy.deepcopy(defs)
    table = {**(known or {}), **defs}
    parts: set[str] = set()  # definitions that are a part of an allOf somewhere

    def mark(node: dict) -> None:
        ref = node.get("$ref")
        if ref and ref.rsplit("/", 1)[-1] not in parts:
            parts.add(name := ref.rsplit("/", 1)[-1])
            mark(table[name])
        for child, inplace in _children(node):
            if inplace:
                mark(child)

    def find_parts(node: dict) -> None:
        for item in _parts(node):
            mark(item)
        for child, _ in _children(node):
            find_parts(child)

    for node in defs.values():
        find_parts(node)

    def open_somewhere(node: dict, seen: set[str]) -> bool:
        if node.get("additionalProperties", False) is not False or "patternProperties" in node:
            return True
        ref = node.get("$ref")
        if ref and (name := ref.rsplit("/", 1)[-1]) not in seen:
            seen.add(name)
            if open_somewhere(table[name], seen):
                return True
        return any(open_somewhere(c, seen) for c, inplace in _children(node) if inplace)

    def close(node: dict, name: str, part: bool) -> None:
        for key in ("oneOf",):
            if key in node:
                node["anyOf"] = node.pop(key) + node.get("anyOf", [])
        if (not part and ("properties" in node or "allOf" in node) and "unevaluatedProperties" not in node
                and not open_somewhere(node, set())):
            node["unevaluatedProperties"] = False
            node["x-closed"] = name
        for child, inplace in _children(node):
            close(child, name, part and inplace or any(child is p for p in _parts(node)))

    for name, node in defs.items():
        close(node, name, name in parts)
    return defs


# ----- the compiled spec -----
class Spec:
    def __init__(self, bundle: dict) -> None:
        from jsonschema import Draft202012Validator

        self.defs = _strict(bundle["$defs"])
        self.upstream = bundle["upstream"]
        self.operations = bundle["operations"]

        def validator(schema: dict) -> Any:
            root = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": self.defs,
                    **_strict({"_": schema}, self.defs)["_"]}
            return Draft202012Validator(root)

        self.bodies = {name: validator(op["body"]["schema"]) for name, op in self.operations.items()
                       if op["body"] and op["body"]["content_type"] == "application/json"}
        self.lines = {name: validator(ref) for name, ref in bundle["lines"].items()}
        self.params = {(name, where, param): validator(schema) for name, op in self.operations.items()
                       for where in ("path", "query") for param, schema in op[where].items()}


@functools.cache
def spec() -> Spec:
    return Spec(json.loads(BUNDLE.read_text()))


# ----- the checks -----
def check_route(operation: str, method: str, route: str, path: dict[str, str], query: dict[str, Any]) -> None:
    """``route`` is the spec's template (``/{index}/_search``), ``path`` its values."""
    s = spec()
    op = s.operations[operation]
    if [method, route] not in op["routes"]:
        raise Refused(405, "method_not_allowed",
                      f"Incorrect HTTP method for uri [{route}] and method [{method}]")
    for where, values in (("path", path), ("query", query)):
        for name, value in values.items():
            v = s.params.get((operation, where, name))
            if v is None:
                raise Refused(400, "illegal_argument_exception",
                              f"request [{route}] contains unrecognized parameter: [{name}]")
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if not v.is_valid(text) and (parsed is None or not v.is_valid(parsed)):
                raise Refused(400, "illegal_argument_exception", f"invalid value for [{name}]: [{text}]")


def check_body(operation: str, body: Any) -> None:
    """A JSON body of ``operation`` (search, count, mget, delete_by_query, indices.create,
    indices.put_mapping)."""
    _raise(operation, spec().bodies[operation], body)


def check_line(kind: str, line: Any, number: int) -> None:
    """An NDJSON line: ``msearch.header``, ``msearch.body``, ``bulk.action``, ``bulk.update``,
    ``bulk.source`` (a document of an index or create action: any object)."""
    if not isinstance(line, dict):
        raise Refused(400, "illegal_argument_exception", f"Malformed action/metadata line [{number}], "
                                                         f"expected START_OBJECT")
    if kind == "bulk.action" and len(line) == 1:
        action = next(iter(line))
        if action not in ("index", "create", "update", "delete"):
            raise Refused(400, "illegal_argument_exception",
                          f"Malformed action/metadata line [{number}], expected field [create], [delete], "
                          f"[index] or [update] but found [{action}]")
    if kind != "bulk.source":
        _raise(kind.split(".")[0], spec().lines[kind], line, line=number)


UNEXPECTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _position(instance: Any, path: list) -> list[float]:
    """Where ``path`` is in the document's order (a place sorts after the places inside it)."""
    out: list[float] = []
    for part in path:
        out.append(list(instance).index(part) if isinstance(instance, dict) else part)
        instance = instance[part]
    return out + [float("inf")]


def _leaves(errors: Any) -> list:
    out = []
    for error in errors:
        out += _leaves(error.context) if error.context else [error]
    return out


VECTOR = 8  # a list of at least this many numbers is read by its shape (module docstring)
KNOWN_VALID = 20_000  # shapes remembered as valid, at most (then forgotten, and learnt again)
_valid: set[tuple[int, str]] = set()


def _is_number(x: Any) -> bool:
    return type(x) is int or type(x) is float


def _shape(instance: Any) -> Any:
    """``instance`` with each vector replaced by its shape: 0 for an int, 0.0 for an integral
    float, 0.5 for another (what JSON Schema's ``integer`` and ``number`` tell apart); the same
    object when it holds no vector."""
    if isinstance(instance, dict):
        out = {k: _shape(v) for k, v in instance.items()}
        return instance if all(out[k] is v for k, v in instance.items()) else out
    if isinstance(instance, list):
        if len(instance) >= VECTOR and all(_is_number(x) for x in instance):
            return [0 if type(x) is int else 0.0 if x.is_integer() else 0.5 for x in instance]
        out = [_shape(v) for v in instance]
        return instance if all(a is b for a, b in zip(out, instance)) else out
    return instance


def _raise(operation: str, validator: Any, instance: Any, line: int | None = None) -> None:
    """What a parser stumbles on first: the first error in the document's order, a deeper one
    before the one it is inside (an alternative form that does not fit fails higher up), and at
    one place a value of the wrong form before a key it does not know (a failed part of a schema
    leaves its keys unevaluated too). A document whose shape is known valid, or is found valid
    now, is valid; any other is checked as it is, for the error it answers."""
    shape = _shape(instance)
    key = (id(validator), json.dumps(shape, sort_keys=True, default=repr))
    if key in _valid:
        return
    errors = list(validator.iter_errors(shape))
    if not errors:  # valid in its shape: valid, whatever numbers its vectors hold
        if len(_valid) >= KNOWN_VALID:
            _valid.clear()
        _valid.add(key)
        return
    if shape is not instance:
        errors = list(validator.iter_errors(instance))
        if not errors:
            return
    leaves = _leaves(errors)
    error = min(leaves, key=lambda e: (_position(instance, list(e.absolute_path)),
                                       e.validator == "unevaluatedProperties"))
    raise Refused(400, *_as_cluster(operation, error, line))


def _as_cluster(operation: str, error: Any, line: int | None) -> tuple[str, str]:
    """The error type and reason a cluster gives for what ``error`` found."""
    path = list(error.absolute_path)
    where = "/".join(str(p) for p in path) or "(root)"
    if error.validator == "unevaluatedProperties":
        names = UNEXPECTED.findall(error.message)
        key = names[0] if names else "?"
        closed = error.schema.get("x-closed", "")
        if line is not None and operation == "bulk":
            return "illegal_argument_exception", f"Action/metadata line [{line}] contains an unknown parameter [{key}]"
        if len(path) >= 2 and path[-2] == "knn":  # the k-NN plugin's ObjectParser
            return "x_content_parse_exception", f"[1:1] [knn] unknown field [{key}]"
        if closed.endswith(":QueryContainer"):
            return "parsing_exception", f"unknown query [{key}]"
        if closed.endswith("Query") and path:
            return "parsing_exception", f"[{path[-1]}] query does not support [{key}]"
        if operation in ("indices.create", "indices.put_mapping"):
            if path and path[0] == "settings":
                return "illegal_argument_exception", f"unknown setting [{'.'.join(map(str, path[1:] + [key]))}]"
            return "mapper_parsing_exception", f"unknown parameter [{key}] at [{where}]"
        if not path:
            value = error.instance.get(key)
            kind = ("START_OBJECT" if isinstance(value, dict) else "START_ARRAY" if isinstance(value, list)
                     else "VALUE_BOOLEAN" if isinstance(value, bool) else "VALUE_STRING" if isinstance(value, str)
                     else "VALUE_NUMBER")
            return "parsing_exception", f"Unknown key for a {kind} in [{key}]."
        return "parsing_exception", f"[{path[-1]}] unknown field [{key}]"
    if error.validator == "required" and len(path) >= 2 and path[-2] == "knn":  # KNNQueryBuilder.Builder
        return "illegal_argument_exception", "[knn] requires query vector"
    if "knn" in path[-4:-1]:
        i = len(path) - 1 - path[::-1].index("knn")
        field = path[i + 2] if len(path) > i + 2 else "?"
        return "x_content_parse_exception", f"[1:1] [knn] failed to parse field [{field}]: {error.message}"
    if operation in ("indices.create", "indices.put_mapping"):
        return "mapper_parsing_exception", f"failed to parse [{where}]: {error.message}"
    return "parsing_exception", f"[{where}] {error.message}"
