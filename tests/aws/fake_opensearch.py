"""A fake opensearch-py client: records every request, checks it against OpenSearch's published
API specification and the k-NN plugin's limits (tests/opensearch_spec), then against the
documented shapes of the OpenSearch k-NN API, and answers k-NN from numpy so services run end to
end.

What a cluster refuses raises ``Refused`` (a ShapeError, and opensearch-py's ``RequestError``, as
the real client raises it), carrying the cluster's status, error type and JSON: the route and its
parameters, each body and NDJSON line against the operation's schema (an unknown key:
``parsing_exception``, or ``x_content_parse_exception`` inside ``knn``), k above 10,000
(``illegal_argument_exception``), a ``knn_vector`` method its engine does not take
(``mapper_parsing_exception``), an invalid index name (``invalid_index_name_exception``).

Checked shapes (OpenSearch 2.x docs: k-NN index, k-NN search with filters, bulk, mget):
* index creation: ``settings.index.knn`` true; a ``knn_vector`` field with ``dimension`` and a
  ``method`` (name ``hnsw``, an ``engine``, a ``space_type``); mapping keys ``dynamic``,
  ``date_detection``, ``_meta``, ``dynamic_templates`` (``path_match`` + ``mapping``) and
  ``properties`` only;
* ``_bulk``: NDJSON, an action line (``index``/``create``/``delete``/``update`` with ``_id``)
  followed by a source line for every action but ``delete``; sources must fit the mapping: a
  field outside a ``strict`` object is refused, one inside a ``dynamic`` object is mapped by the
  first dynamic template whose ``path_match`` fits (and recorded in the mapping, as OpenSearch
  does), and values must be of their field's type (keyword a string, double a number that is
  not a boolean, boolean a boolean; arrays of them);
* k-NN search: ``query.knn.<field>`` with ``vector`` (of the mapped dimension) and ``k``, and an
  optional ``filter`` (a query clause); ``size``;
* scoring of ``innerproduct`` (faiss): ip >= 0 -> ip + 1, else 1 / (1 - ip);
* lexical search: ``query.bool.must`` one ``match`` on a ``text`` field plus ``filter`` clauses,
  scored by BM25 (k1 1.2, b 0.75: eragraph.domain.bm25, OpenSearch's default similarity) with
  the statistics of every document that has the field (a filter selects, it does not rescore);
* any other query (``match_all``, ``constant_score``, ``bool``...): the documents it matches,
  ``hits.total`` (``track_total_hits``), ``size``, ``sort`` on ``node_id`` and ``search_after``;
* ``_msearch``: NDJSON, a header line (an object: ``index`` only when explicit indexes are
  allowed, which the domain refuses) followed by a body line per search, each body checked as
  ``_search`` checks it; a ``responses`` list in order, each with its ``status``;
* ``_bulk`` ``update`` with a ``{"doc": {...}}`` partial document; ``indices.get_mapping`` and
  ``indices.put_mapping`` (new ``properties``, ``dynamic_templates`` and ``_meta`` only: a mapped
  field cannot change).

Query clauses are evaluated as OpenSearch does (``matches``): ``bool`` (``must``, ``filter``,
``should`` with ``minimum_should_match``, whose default is 1 without ``must``/``filter`` and 0
with them, capped at the number of ``should`` clauses, ``must_not``), ``term``, ``terms``, ``range`` (numeric fields), ``prefix`` (keyword),
``exists``, ``constant_score``, ``match_all``. A field is an array of values: a term matches when
one value does; a missing field, an empty array or an unmapped field matches nothing. Doubles
compare like Lucene's points (-0.0 sorts below 0.0 and does not equal it). A query value of the
wrong type for its field (a number against a keyword...) and any other clause raise ShapeError:
the adapter never means to send them.
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import json
import math
from typing import Any

import numpy as np
from opensearch_spec import check, knn_plugin
from opensearchpy.exceptions import RequestError

SPACES = {"innerproduct", "cosinesimil", "l2"}
MAPPING_KEYS = {"dynamic", "date_detection", "_meta", "dynamic_templates", "properties"}
NUMERIC = {"integer", "long", "double"}


class ShapeError(AssertionError):
    pass


class Refused(ShapeError, RequestError):
    """A request the cluster refuses: ``status_code``, ``error`` (its type) and ``info`` (its JSON),
    as opensearch-py's RequestError carries them."""


@contextlib.contextmanager
def _as_cluster():
    """A refusal of the specification or the k-NN plugin, raised as the client raises the cluster's."""
    try:
        yield
    except check.Refused as exc:
        raise Refused(exc.status, exc.error_type, exc.body()) from None


def _spec(operation: str, method: str, route: str, index: str | None = None, query: dict | None = None,
          body: Any = None) -> None:
    """The request against the API specification: its route, parameters and JSON body."""
    with _as_cluster():
        check.check_route(operation, method, route, {"index": index} if index is not None else {},
                          {k: v for k, v in (query or {}).items() if v is not None})
        if body is not None:
            check.check_body(operation, body)


def _ndjson(lines: list, kinds: list[str]) -> None:
    with _as_cluster():
        for number, (line, kind) in enumerate(zip(lines, kinds), 1):
            check.check_line(kind, line, number)


def _index_name(index: str) -> None:
    """OpenSearch's rules for a new index's name (MetadataCreateIndexService.validateIndexOrAliasName)."""
    why = ("must be lowercase" if index != index.lower() else
           "must not contain the following characters [ , \", *, \\, <, |, ,, >, /, ?, #]"
           if any(c in index for c in ' "*\\<|,>/?#') else
           "must not start with '_', '-', or '+'" if index[:1] in ("_", "-", "+") else
           "must not be '.' or '..'" if index in (".", "..") else
           "index name is too long" if len(index.encode()) > 255 else "")
    if why:
        reason = f"Invalid index name [{index}], {why}"
        cause = {"type": "invalid_index_name_exception", "reason": reason, "index": index}
        raise Refused(400, "invalid_index_name_exception", {"error": {"root_cause": [cause], **cause}, "status": 400})


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ShapeError(msg)


def _one(clause: Any, what: str) -> tuple[str, Any]:
    _need(isinstance(clause, dict) and len(clause) == 1, f"{what} must be an object with one key: {clause!r}")
    return next(iter(clause.items()))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _double(v: float) -> tuple[float, float]:
    """A double as Lucene orders it (Double.compare): -0.0 below 0.0, and not equal to it."""
    v = float(v)
    return (v, math.copysign(1.0, v))


def _merge_templates(old: list, new: list) -> list:
    _need(isinstance(new, list), "dynamic_templates is a list")
    names = [_one(t, "a dynamic template")[0] for t in new]
    for template in new:
        (_, spec), = template.items()
        _need(set(spec) <= {"path_match", "match_mapping_type", "mapping"} and "path_match" in spec
              and "mapping" in spec and spec.get("match_mapping_type", "*") == "*",
              f"the fake's dynamic templates are path_match + mapping: {template}")
    return [t for t in old if next(iter(t)) not in names] + list(new)


class _Indices:
    def __init__(self, owner: FakeOpenSearch) -> None:
        self.owner = owner

    def exists(self, index: str) -> bool:
        self.owner.requests.append(("HEAD", f"/{index}", None))
        _spec("indices.exists", "HEAD", "/{index}", index)
        return index in self.owner.indexes

    def create(self, index: str, body: dict) -> dict:
        self.owner.requests.append(("PUT", f"/{index}", body))
        _spec("indices.create", "PUT", "/{index}", index, body=body)
        _index_name(index)
        if index in self.owner.indexes:
            raise RuntimeError("resource_already_exists_exception")
        _need(body["settings"]["index"]["knn"] is True, "index.knn must be true for k-NN")
        replicas = body["settings"]["index"].get("number_of_replicas", 1)
        _need(isinstance(replicas, int) and replicas >= 0, "number_of_replicas must be an integer >= 0")
        mappings = copy.deepcopy(body["mappings"])
        _need(set(mappings) <= MAPPING_KEYS, f"unexpected mapping keys {set(mappings) - MAPPING_KEYS}")
        props = mappings["properties"]
        vec_fields = {k: v for k, v in props.items() if v.get("type") == "knn_vector"}
        _need(len(vec_fields) == 1, "exactly one knn_vector field expected")
        (field, spec), = vec_fields.items()
        _need(isinstance(spec.get("dimension"), int) and spec["dimension"] > 0, "knn_vector needs a dimension")
        with _as_cluster():
            knn_plugin.check_method(field, spec)
        method = spec.get("method", {})
        _need(method.get("name") == "hnsw", "method.name must be hnsw")
        _need(method.get("engine") in {"faiss", "lucene", "nmslib"}, "unknown k-NN engine")
        _need(method.get("space_type") in SPACES, "unknown space_type")
        self.owner.indexes[index] = {"field": field, "dim": spec["dimension"], "space": method["space_type"],
                                     "props": props, "docs": {}, "replicas": replicas,
                                     "meta": mappings.get("_meta") or {}, "dynamic": mappings.get("dynamic", True),
                                     "templates": _merge_templates([], mappings.get("dynamic_templates", []))}
        return {"acknowledged": True, "index": index}

    def get_mapping(self, index: str) -> dict:
        self.owner.requests.append(("GET", f"/{index}/_mapping", None))
        _spec("indices.get_mapping", "GET", "/{index}/_mapping", index)
        idx = self.owner._index(index)
        mappings = {"dynamic": idx["dynamic"], "properties": copy.deepcopy(idx["props"]),
                    **({"_meta": idx["meta"]} if idx.get("meta") else {}),
                    **({"dynamic_templates": copy.deepcopy(idx["templates"])} if idx["templates"] else {})}
        return {index: {"mappings": mappings}}

    def put_mapping(self, index: str, body: dict) -> dict:
        self.owner.requests.append(("PUT", f"/{index}/_mapping", body))
        _spec("indices.put_mapping", "PUT", "/{index}/_mapping", index, body=body)
        idx = self.owner._index(index)
        _need(set(body) <= {"properties", "_meta", "dynamic_templates"}, f"unexpected mapping keys {set(body)}")
        for field, spec in body.get("properties", {}).items():
            old = idx["props"].get(field)
            _need(old is None or all(old.get(k) == v for k, v in spec.items() if k != "properties"),
                  f"cannot change the mapping of {field}")
            if old is None:
                idx["props"][field] = copy.deepcopy(spec)
        if "dynamic_templates" in body:
            idx["templates"] = _merge_templates(idx["templates"], body["dynamic_templates"])
        if "_meta" in body:
            idx["meta"] = body["_meta"]
        return {"acknowledged": True}

    def refresh(self, index: str) -> dict:
        self.owner.requests.append(("POST", f"/{index}/_refresh", None))
        _spec("indices.refresh", "POST", "/{index}/_refresh", index)
        return {}


class FakeOpenSearch:
    def __init__(self) -> None:
        self.indexes: dict[str, dict] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.indices = _Indices(self)
        self.fail_next: list[int] = []  # statuses to return for the next bulk items (tests)
        # the domain's rest.action.multi.allow_explicit_index (template.yaml: false): a multi
        # request (_bulk, _mget) naming an index in its body is refused, as OpenSearch does
        self.allow_explicit_index = False
        # tests: a filtered k-NN search whose allowed set is larger than k returns at most this
        # many hits (an engine whose filtered graph search falls short); None: exact
        self.filtered_ann_limit: int | None = None
        # what a search derives from the stored documents, kept for the next search while the
        # documents are the same objects (a write, or a test's own edit, makes new ones): each
        # vector as an array (id of its list -> (list, array)), and each index's BM25 statistics
        self._arrays: dict[int, tuple[list, np.ndarray]] = {}
        self._corpora: dict[tuple[int, str], tuple[list, Any, dict]] = {}

    def _vector(self, values: list) -> np.ndarray:
        """``np.asarray(values)``, made once per stored list."""
        hit = self._arrays.get(id(values))
        if hit is None or hit[0] is not values:
            if len(self._arrays) > 500_000:
                self._arrays.clear()
            hit = self._arrays[id(values)] = (values, np.asarray(values))
        return hit[1]

    def _corpus(self, idx: dict, field: str) -> Any:
        """The BM25 statistics of ``field`` over the index's documents, made again only when a
        document, or its text, is not the object it was."""
        from eragraph.domain.bm25 import Bm25Corpus

        now = [(i, src, src[field]) for i, src in idx["docs"].items() if field in src]
        hit = self._corpora.get((id(idx), field))
        if hit is not None and hit[2] is idx and len(hit[0]) == len(now) and all(
                a[0] == b[0] and a[1] is b[1] and a[2] is b[2] for a, b in zip(hit[0], now)):
            return hit[1]
        corpus = Bm25Corpus()  # the statistics of the whole index: a filter selects, it does not rescore
        for i, _, text in now:
            corpus.add(i, text)
        self._corpora[(id(idx), field)] = (now, corpus, idx)
        return corpus

    def _index(self, name: str) -> dict:
        _need(name in self.indexes, f"no such index {name}")
        return self.indexes[name]

    # ----- the mapping -----
    def _check_source(self, idx: dict, source: dict) -> None:
        self._check_object(idx, idx["props"], source, "", idx["dynamic"])

    def _check_object(self, idx: dict, props: dict, source: dict, path: str, dynamic: Any) -> None:
        for key, value in source.items():
            name = path + key
            spec = props.get(key)
            if spec is None:
                _need(dynamic in (True, "true"), f"field {name} not in the strict mapping")
                spec = props[key] = self._dynamic_mapping(idx, name)
            kind = spec.get("type", "object")
            if kind == "object":
                _need(isinstance(value, dict), f"{name} must be an object")
                self._check_object(idx, spec.setdefault("properties", {}), value, name + ".",
                                   spec.get("dynamic", dynamic))
            elif kind == "knn_vector":
                _need(isinstance(value, list) and len(value) == idx["dim"], "vector of the wrong dimension")
            else:
                for v in value if isinstance(value, list) else [value]:
                    self._value(kind, v, name)

    @staticmethod
    def _dynamic_mapping(idx: dict, name: str) -> dict:
        for template in idx["templates"]:
            (_, spec), = template.items()
            if fnmatch.fnmatchcase(name, spec["path_match"]):
                return copy.deepcopy(spec["mapping"])
        raise ShapeError(f"no dynamic template maps {name} (the fake maps new fields by templates only)")

    @staticmethod
    def _value(kind: str, v: Any, field: str) -> Any:
        """A value (of a document or a query) for a field of type ``kind``, as the field compares it."""
        if kind in ("keyword", "text"):
            _need(isinstance(v, str), f"{field} ({kind}) takes strings, not {v!r}")
            return v
        if kind in ("integer", "long"):
            _need(isinstance(v, int) and not isinstance(v, bool), f"{field} ({kind}) takes integers, not {v!r}")
            return v
        if kind == "double":
            _need(_is_number(v) and math.isfinite(v), f"{field} (double) takes finite numbers, not {v!r}")
            return _double(v)
        if kind == "boolean":
            _need(isinstance(v, bool), f"{field} (boolean) takes true or false, not {v!r}")
            return v
        raise ShapeError(f"{field}: the fake does not compare fields of type {kind}")

    @staticmethod
    def _field_type(idx: dict, field: str) -> str | None:
        props: dict | None = idx["props"]
        spec: dict = {}
        for part in field.split("."):
            if not props or part not in props:
                return None
            spec = props[part]
            props = spec.get("properties")
        return spec.get("type", "object")

    @staticmethod
    def _values(source: dict, field: str) -> list:
        node: Any = source
        for part in field.split("."):
            if not isinstance(node, dict) or part not in node:
                return []
            node = node[part]
        return [v for v in (node if isinstance(node, list) else [node]) if v is not None]

    # ----- query clauses -----
    def _leaf(self, idx: dict, source: dict, spec: Any, what: str) -> tuple[str | None, list, Any]:
        """(field type, the document's values of the field, the query's argument)."""
        field, arg = _one(spec, what)
        kind = self._field_type(idx, field)
        values = [] if kind is None else [self._value(kind, v, field) for v in self._values(source, field)]
        return kind, values, (field, arg)

    def _matches(self, idx: dict, source: dict, clause: dict) -> bool:
        kind, spec = _one(clause, "a query clause")
        if kind == "match_all":
            _need(spec == {}, "match_all takes no arguments")
            return True
        if kind == "bool":
            return self._bool(idx, source, spec)
        if kind == "constant_score":
            _need(isinstance(spec, dict) and set(spec) == {"filter"}, "constant_score takes a filter")
            return self._matches(idx, source, spec["filter"])
        if kind == "exists":
            _need(isinstance(spec, dict) and set(spec) == {"field"}, "exists takes a field")
            return self._field_type(idx, spec["field"]) is not None and bool(self._values(source, spec["field"]))
        _need(kind in ("term", "terms", "prefix", "range"), f"unsupported query clause {kind}")
        ftype, values, (field, arg) = self._leaf(idx, source, spec, kind)
        _need(ftype != "text", f"{kind} on {field}, a text field (analyzed: the adapter matches text with match)")
        if kind in ("term", "terms", "prefix") and isinstance(arg, dict):
            _need(kind != "terms" and set(arg) == {"value"}, f"{kind} on {field}: unexpected {arg!r}")
            arg = arg["value"]
        if kind == "term":
            return ftype is not None and self._value(ftype, arg, field) in values
        if kind == "terms":
            _need(isinstance(arg, list), f"terms on {field} takes a list")
            return ftype is not None and any(self._value(ftype, a, field) in values for a in arg)
        if kind == "prefix":
            _need(isinstance(arg, str) and arg != "", f"prefix on {field} takes a string")
            _need(ftype in (None, "keyword"), f"prefix on {field}, a {ftype} field")
            return any(v.startswith(arg) for v in values)
        # range: numeric fields only
        _need(isinstance(arg, dict) and arg and set(arg) <= {"gt", "gte", "lt", "lte"},
              f"range on {field} takes gt, gte, lt, lte")
        if ftype is None:
            return False
        _need(ftype in NUMERIC, f"range on {field}, a {ftype} field (the adapter ranges numbers only)")
        bounds = {op: self._value(ftype, b, field) for op, b in arg.items()}
        tests = {"gt": lambda v, b: v > b, "gte": lambda v, b: v >= b,
                 "lt": lambda v, b: v < b, "lte": lambda v, b: v <= b}
        return any(all(tests[op](v, b) for op, b in bounds.items()) for v in values)

    def _bool(self, idx: dict, source: dict, spec: Any) -> bool:
        _need(isinstance(spec, dict), "bool takes an object")
        _need(set(spec) <= {"must", "filter", "should", "must_not", "minimum_should_match"},
              f"unexpected bool keys {set(spec)}")

        def clauses(name: str) -> list:
            value = spec.get(name, [])
            return value if isinstance(value, list) else [value]

        should = clauses("should")
        msm = spec.get("minimum_should_match", 0 if clauses("must") or clauses("filter") else 1)
        _need(isinstance(msm, int) and not isinstance(msm, bool) and msm >= 0,
              "minimum_should_match: the fake takes an integer >= 0")
        return (all(self._matches(idx, source, c) for c in clauses("must") + clauses("filter"))
                and not any(self._matches(idx, source, c) for c in clauses("must_not"))
                and sum(self._matches(idx, source, c) for c in should) >= min(msm, len(should)))

    def select(self, index: str, clause: dict) -> set[str]:
        """The ids of the documents of ``index`` that ``clause`` matches (tests)."""
        idx = self._index(index)
        return {i for i, src in idx["docs"].items() if self._matches(idx, src, clause)}

    # ----- the API -----
    def bulk(self, body: str, index: str | None = None, refresh: Any = None) -> dict:
        self.requests.append(("POST", "/_bulk", body))
        _spec("bulk", "POST", "/{index}/_bulk" if index else "/_bulk", index, {"refresh": refresh})
        _need(isinstance(body, str) and body.endswith("\n"), "_bulk body must be NDJSON ending in a newline")
        lines = [json.loads(x) for x in body.splitlines()]
        kinds, i = [], 0
        while i < len(lines):  # an action line, and a source line after each but delete
            action = next(iter(lines[i]), None) if isinstance(lines[i], dict) else None
            kinds.append("bulk.action")
            if action in ("index", "create", "update"):
                kinds.append("bulk.update" if action == "update" else "bulk.source")
            i = len(kinds)
        _ndjson(lines, kinds)
        items, errors, i = [], False, 0
        while i < len(lines):
            action = lines[i]
            _need(len(action) == 1, "action line must have one key")
            (op, meta), = action.items()
            _need(op in {"index", "create", "delete", "update"}, f"unknown bulk action {op}")
            _need(self.allow_explicit_index or "_index" not in meta,
                  "explicit index in bulk is not allowed (rest.action.multi.allow_explicit_index is false)")
            name = meta.get("_index", index)
            idx = self._index(name)
            _need("_id" in meta, "bulk action needs _id")
            source = None
            if op != "delete":
                _need(i + 1 < len(lines), "bulk action without a source line")
                source = lines[i + 1]
                if op == "update":
                    _need(set(source) == {"doc"}, "an update source is {\"doc\": {...}}")
                    self._check_source(idx, source["doc"])
                else:
                    self._check_source(idx, source)
                i += 2
            else:
                i += 1
            status = self.fail_next.pop(0) if self.fail_next else None
            if status is not None:
                errors = True
                items.append({op: {"_id": meta["_id"], "status": status, "error": {"type": "fake_failure"}}})
                continue
            if op == "delete":
                found = idx["docs"].pop(meta["_id"], None) is not None
                items.append({op: {"_id": meta["_id"], "status": 200 if found else 404}})
            elif op == "update":
                if meta["_id"] not in idx["docs"]:
                    items.append({op: {"_id": meta["_id"], "status": 404, "error": {"type": "document_missing"}}})
                    errors = True
                    continue
                idx["docs"][meta["_id"]] = {**idx["docs"][meta["_id"]], **source["doc"]}
                items.append({op: {"_id": meta["_id"], "status": 200}})
            else:
                idx["docs"][meta["_id"]] = source
                items.append({op: {"_id": meta["_id"], "status": 201}})
        return {"took": 1, "errors": errors, "items": items}

    def _score(self, space: str, q: np.ndarray, v: np.ndarray) -> float:
        if space == "innerproduct":
            ip = float(q @ v)
            return ip + 1.0 if ip >= 0 else 1.0 / (1.0 - ip)
        if space == "cosinesimil":
            return (1.0 + float(q @ v) / (np.linalg.norm(q) * np.linalg.norm(v))) / 2.0
        return 1.0 / (1.0 + float(np.sum((q - v) ** 2)))

    def search(self, index: str, body: dict) -> dict:
        self.requests.append(("POST", f"/{index}/_search", body))
        _spec("search", "POST", "/{index}/_search", index, body=body)
        return self._search(index, body)

    def _search(self, index: str, body: dict) -> dict:
        idx = self._index(index)
        _need(set(body) <= {"size", "_source", "query", "sort", "search_after", "track_total_hits"},
              f"unexpected search keys {set(body)}")
        query = body.get("query", {"match_all": {}})
        if "knn" in query:
            return self._knn(idx, body)
        if "bool" in query and query["bool"].get("must"):
            return self._lexical(idx, body)
        docs = sorted((i, s) for i, s in idx["docs"].items() if self._matches(idx, s, query))
        track = body.get("track_total_hits", 10000)
        total = {"value": len(docs), "relation": "eq"}
        if track is not True and len(docs) > track:
            total = {"value": track, "relation": "gte"}
        sort = body.get("sort")
        if sort:
            _need(sort == [{"node_id": "asc"}], "ids() must sort on the node_id keyword")
            after = body.get("search_after")
            if after is not None:
                docs = [d for d in docs if d[1]["node_id"] > after[0]]
        docs = docs[: body.get("size", 10)]
        return {"hits": {"total": total, "hits": [{"_id": k, "_score": 1.0, "_source": {"node_id": s["node_id"]},
                                                   "sort": [s["node_id"]]} for k, s in docs]}}

    def msearch(self, body: str, index: str | None = None) -> dict:
        self.requests.append(("POST", f"/{index}/_msearch" if index else "/_msearch", body))
        _spec("msearch", "POST", "/{index}/_msearch" if index else "/_msearch", index)
        _need(isinstance(body, str) and body.endswith("\n"), "_msearch body must be NDJSON ending in a newline")
        lines = [json.loads(x) for x in body.splitlines()]
        _need(len(lines) % 2 == 0 and lines, "_msearch takes a header line and a body line per search")
        _ndjson(lines, ["msearch.header", "msearch.body"] * (len(lines) // 2))
        responses = []
        for header, search in zip(lines[0::2], lines[1::2]):
            _need(isinstance(header, dict) and set(header) <= {"index"}, f"unexpected _msearch header {header!r}")
            _need(self.allow_explicit_index or "index" not in header,
                  "explicit index in _msearch is not allowed (rest.action.multi.allow_explicit_index is false)")
            name = header.get("index", index)
            _need(name is not None, "_msearch without an index in its path or its header")
            _need(isinstance(search, dict), "an _msearch body line is a search body")
            responses.append({**self._search(name, search), "status": 200})
        return {"took": 1, "responses": responses}

    def _knn(self, idx: dict, body: dict) -> dict:
        knn = body["query"]["knn"]
        _need(list(knn) == [idx["field"]], "knn query must name the knn_vector field")
        spec = knn[idx["field"]]
        _need(set(spec) <= {"vector", "k", "filter"}, f"unexpected knn keys {set(spec)}")
        _need(len(spec["vector"]) == idx["dim"], "query vector of the wrong dimension")
        with _as_cluster():
            knn_plugin.check_k(spec["k"])
        _need(isinstance(spec["k"], int), "k must be an integer")
        q = np.asarray(spec["vector"], dtype=np.float32)
        clause = spec.get("filter")
        hits = []
        for doc_id, src in idx["docs"].items():
            if clause is not None and not self._matches(idx, src, clause):
                continue
            hits.append({"_id": doc_id, "_score": self._score(idx["space"], q, self._vector(src[idx["field"]])),
                         **({"_source": src} if body.get("_source", True) else {})})
        hits.sort(key=lambda h: -h["_score"])
        allowed = len(hits)
        hits = hits[: min(spec["k"], body.get("size", 10))]
        if clause is not None and self.filtered_ann_limit is not None and allowed > spec["k"]:
            hits = hits[: self.filtered_ann_limit]
        return {"hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits}}

    def _lexical(self, idx: dict, body: dict) -> dict:
        from eragraph.domain.bm25 import top_k

        spec = body["query"]["bool"]
        _need(set(spec) <= {"must", "filter"}, f"unexpected bool keys {set(spec)}")
        (clause,) = spec["must"]
        _need(list(clause) == ["match"], "lexical search is one match clause")
        (field, text), = clause["match"].items()
        _need(idx["props"].get(field, {}).get("type") == "text", f"match on {field}, which is not a text field")
        _need(isinstance(text, str), "match takes the query string")
        _need(isinstance(body.get("size"), int), "size must be given")
        flt = {"bool": {"filter": spec.get("filter", [])}}
        corpus = self._corpus(idx, field)
        scored = [(i, s) for i, s in corpus.search(text, len(corpus)) if self._matches(idx, idx["docs"][i], flt)]
        hits = [{"_id": i, "_score": s} for i, s in top_k(scored, body["size"])]
        return {"hits": {"total": {"value": len(hits), "relation": "eq"}, "hits": hits}}

    def mget(self, index: str, body: dict) -> dict:
        self.requests.append(("POST", f"/{index}/_mget", body))
        _spec("mget", "POST", "/{index}/_mget", index, body=body)
        idx = self._index(index)
        _need("ids" in body, "mget needs ids")
        _need(self.allow_explicit_index or "docs" not in body, "explicit index in multi get is not allowed")
        return {"docs": [{"_id": i, "found": i in idx["docs"], **({"_source": idx["docs"][i]} if i in idx["docs"] else {})}
                         for i in body["ids"]]}

    def count(self, index: str, body: dict | None = None) -> dict:
        self.requests.append(("GET", f"/{index}/_count", body))
        _spec("count", "POST" if body is not None else "GET", "/{index}/_count", index, body=body)
        idx = self._index(index)
        if body is None:
            return {"count": len(idx["docs"])}
        _need(set(body) == {"query"}, f"unexpected count keys {set(body)}")
        return {"count": sum(1 for s in idx["docs"].values() if self._matches(idx, s, body["query"]))}

    def delete_by_query(self, index: str, body: dict, refresh: Any = None, conflicts: str | None = None) -> dict:
        self.requests.append(("POST", f"/{index}/_delete_by_query", body))
        _spec("delete_by_query", "POST", "/{index}/_delete_by_query", index, {"refresh": refresh, "conflicts": conflicts},
              body)
        idx = self._index(index)
        _need(set(body) == {"query"}, f"unexpected delete_by_query keys {set(body)}")
        _need(conflicts in (None, "abort", "proceed"), f"conflicts={conflicts!r}")
        gone = [i for i, s in idx["docs"].items() if self._matches(idx, s, body["query"])]
        for i in gone:
            del idx["docs"][i]
        return {"deleted": len(gone), "failures": []}
