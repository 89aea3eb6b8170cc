"""A fake opensearch-py client: records every request, checks it against the documented shapes
of the OpenSearch k-NN API, and answers k-NN from numpy so services run end to end.

Checked shapes (OpenSearch 2.x docs: k-NN index, k-NN search with filters, bulk, mget):
* index creation: ``settings.index.knn`` true; a ``knn_vector`` field with ``dimension`` and a
  ``method`` (name ``hnsw``, an ``engine``, a ``space_type``);
* ``_bulk``: NDJSON, an action line (``index``/``create``/``delete``/``update`` with ``_id``)
  followed by a source line for every action but ``delete``; sources must fit the mapping;
* k-NN search: ``query.knn.<field>`` with ``vector`` (of the mapped dimension) and ``k``, and an
  optional ``filter`` (a query clause); ``size``;
* scoring of ``innerproduct`` (faiss): ip >= 0 -> ip + 1, else 1 / (1 - ip);
* lexical search: ``query.bool.must`` one ``match`` on a ``text`` field plus ``filter`` clauses,
  scored by BM25 (k1 1.2, b 0.75: eragraph.domain.bm25, OpenSearch's default similarity);
* ``_bulk`` ``update`` with a ``{"doc": {...}}`` partial document; ``indices.get_mapping`` and
  ``indices.put_mapping`` (new ``properties`` and ``_meta`` only: a mapped field cannot change).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

SPACES = {"innerproduct", "cosinesimil", "l2"}


class ShapeError(AssertionError):
    pass


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ShapeError(msg)


class _Indices:
    def __init__(self, owner: FakeOpenSearch) -> None:
        self.owner = owner

    def exists(self, index: str) -> bool:
        self.owner.requests.append(("HEAD", f"/{index}", None))
        return index in self.owner.indexes

    def create(self, index: str, body: dict) -> dict:
        self.owner.requests.append(("PUT", f"/{index}", body))
        if index in self.owner.indexes:
            raise RuntimeError("resource_already_exists_exception")
        _need(body["settings"]["index"]["knn"] is True, "index.knn must be true for k-NN")
        replicas = body["settings"]["index"].get("number_of_replicas", 1)
        _need(isinstance(replicas, int) and replicas >= 0, "number_of_replicas must be an integer >= 0")
        props = body["mappings"]["properties"]
        vec_fields = {k: v for k, v in props.items() if v.get("type") == "knn_vector"}
        _need(len(vec_fields) == 1, "exactly one knn_vector field expected")
        (field, spec), = vec_fields.items()
        _need(isinstance(spec.get("dimension"), int) and spec["dimension"] > 0, "knn_vector needs a dimension")
        method = spec.get("method", {})
        _need(method.get("name") == "hnsw", "method.name must be hnsw")
        _need(method.get("engine") in {"faiss", "lucene", "nmslib"}, "unknown k-NN engine")
        _need(method.get("space_type") in SPACES, "unknown space_type")
        self.owner.indexes[index] = {"field": field, "dim": spec["dimension"], "space": method["space_type"],
                                     "props": dict(props), "docs": {}, "replicas": replicas,
                                     "meta": body["mappings"].get("_meta") or {}}
        return {"acknowledged": True, "index": index}

    def get_mapping(self, index: str) -> dict:
        self.owner.requests.append(("GET", f"/{index}/_mapping", None))
        idx = self.owner._index(index)
        mappings = {"properties": idx["props"], **({"_meta": idx["meta"]} if idx.get("meta") else {})}
        return {index: {"mappings": mappings}}

    def put_mapping(self, index: str, body: dict) -> dict:
        self.owner.requests.append(("PUT", f"/{index}/_mapping", body))
        idx = self.owner._index(index)
        _need(set(body) <= {"properties", "_meta"}, f"unexpected mapping keys {set(body)}")
        for field, spec in body.get("properties", {}).items():
            _need(field not in idx["props"] or idx["props"][field] == spec, f"cannot change the mapping of {field}")
            idx["props"][field] = spec
        if "_meta" in body:
            idx["meta"] = body["_meta"]
        return {"acknowledged": True}

    def refresh(self, index: str) -> dict:
        self.owner.requests.append(("POST", f"/{index}/_refresh", None))
        return {}


class FakeOpenSearch:
    def __init__(self) -> None:
        self.indexes: dict[str, dict] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.indices = _Indices(self)
        self.fail_next: list[int] = []  # statuses to return for the next bulk items (tests)

    def _index(self, name: str) -> dict:
        _need(name in self.indexes, f"no such index {name}")
        return self.indexes[name]

    def _check_source(self, idx: dict, source: dict) -> None:
        props = idx["props"]
        for key, value in source.items():
            _need(key in props, f"field {key} not in the strict mapping")
            kind = props[key]["type"]
            if kind == "knn_vector":
                _need(isinstance(value, list) and len(value) == idx["dim"], "vector of the wrong dimension")
            elif kind == "integer":
                _need(isinstance(value, int), f"{key} must be an integer")
            elif kind in ("keyword", "text"):
                _need(isinstance(value, str), f"{key} must be a string")

    def bulk(self, body: str, index: str | None = None, refresh: Any = None) -> dict:
        self.requests.append(("POST", "/_bulk", body))
        _need(isinstance(body, str) and body.endswith("\n"), "_bulk body must be NDJSON ending in a newline")
        lines = [json.loads(x) for x in body.splitlines()]
        items, errors, i = [], False, 0
        while i < len(lines):
            action = lines[i]
            _need(len(action) == 1, "action line must have one key")
            (op, meta), = action.items()
            _need(op in {"index", "create", "delete", "update"}, f"unknown bulk action {op}")
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

    @staticmethod
    def _matches(source: dict, clause: dict) -> bool:
        (kind, spec), = clause.items()
        if kind == "bool":
            return all(FakeOpenSearch._matches(source, c) for c in spec.get("filter", []) + spec.get("must", []))
        if kind == "terms":
            (field, values), = spec.items()
            return source.get(field) in values
        if kind == "term":
            (field, value), = spec.items()
            return source.get(field) == (value["value"] if isinstance(value, dict) else value)
        if kind == "match_all":
            return True
        raise ShapeError(f"unsupported filter clause {kind}")

    def _score(self, space: str, q: np.ndarray, v: np.ndarray) -> float:
        if space == "innerproduct":
            ip = float(q @ v)
            return ip + 1.0 if ip >= 0 else 1.0 / (1.0 - ip)
        if space == "cosinesimil":
            return (1.0 + float(q @ v) / (np.linalg.norm(q) * np.linalg.norm(v))) / 2.0
        return 1.0 / (1.0 + float(np.sum((q - v) ** 2)))

    def search(self, index: str, body: dict) -> dict:
        self.requests.append(("POST", f"/{index}/_search", body))
        idx = self._index(index)
        query = body.get("query", {"match_all": {}})
        if "knn" in query:
            knn = query["knn"]
            _need(list(knn) == [idx["field"]], "knn query must name the knn_vector field")
            spec = knn[idx["field"]]
            _need(set(spec) <= {"vector", "k", "filter"}, f"unexpected knn keys {set(spec)}")
            _need(len(spec["vector"]) == idx["dim"], "query vector of the wrong dimension")
            _need(isinstance(spec["k"], int) and 1 <= spec["k"] <= 10000, "k must be within 1..10000")
            q = np.asarray(spec["vector"], dtype=np.float32)
            clause = spec.get("filter")
            hits = []
            for doc_id, src in idx["docs"].items():
                if clause is not None and not self._matches(src, clause):
                    continue
                hits.append({"_id": doc_id, "_score": self._score(idx["space"], q, np.asarray(src[idx["field"]])),
                             **({"_source": src} if body.get("_source", True) else {})})
            hits.sort(key=lambda h: -h["_score"])
            hits = hits[: min(spec["k"], body.get("size", 10))]
            return {"hits": {"total": {"value": len(hits)}, "hits": hits}}
        if "bool" in query and query["bool"].get("must"):
            return self._lexical(idx, body)
        _need("match_all" in query, "only knn, match and match_all queries are expected")
        sort = body.get("sort")
        docs = sorted(idx["docs"].items())
        if sort:
            _need(sort == [{"node_id": "asc"}], "ids() must sort on the node_id keyword")
            after = body.get("search_after")
            if after is not None:
                docs = [d for d in docs if d[1]["node_id"] > after[0]]
        docs = docs[: body.get("size", 10)]
        return {"hits": {"hits": [{"_id": k, "_score": 1.0, "_source": {"node_id": s["node_id"]},
                                   "sort": [s["node_id"]]} for k, s in docs]}}

    def _lexical(self, idx: dict, body: dict) -> dict:
        from eragraph.domain.bm25 import Bm25Corpus

        spec = body["query"]["bool"]
        _need(set(spec) <= {"must", "filter"}, f"unexpected bool keys {set(spec)}")
        (clause,) = spec["must"]
        _need(list(clause) == ["match"], "lexical search is one match clause")
        (field, text), = clause["match"].items()
        _need(idx["props"].get(field, {}).get("type") == "text", f"match on {field}, which is not a text field")
        _need(isinstance(text, str), "match takes the query string")
        _need(isinstance(body.get("size"), int), "size must be given")
        flt = {"bool": {"filter": spec.get("filter", [])}}
        corpus = Bm25Corpus()
        for doc_id, src in idx["docs"].items():
            if field in src and self._matches(src, flt):
                corpus.add(doc_id, src[field])
        hits = [{"_id": i, "_score": s} for i, s in corpus.search(text, body["size"])]
        return {"hits": {"total": {"value": len(hits)}, "hits": hits}}

    def mget(self, index: str, body: dict) -> dict:
        self.requests.append(("POST", f"/{index}/_mget", body))
        idx = self._index(index)
        _need("ids" in body, "mget needs ids")
        return {"docs": [{"_id": i, "found": i in idx["docs"], **({"_source": idx["docs"][i]} if i in idx["docs"] else {})}
                         for i in body["ids"]]}

    def count(self, index: str) -> dict:
        self.requests.append(("GET", f"/{index}/_count", None))
        return {"count": len(self._index(index)["docs"])}
