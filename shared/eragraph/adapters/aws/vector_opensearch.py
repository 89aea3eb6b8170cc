"""OpenSearch k-NN vector index (opensearch-py).

The index is created on first use from ``infra/opensearch-index.json`` (a copy ships inside the
package as ``index_mapping.json`` so the Lambda layer carries it), with the vector dimension
replaced by the embedder's and the replica count by the deployment's (one replica per extra data
node: a replica on a one-node domain can never be assigned and leaves the index yellow). Vectors are normalized, so the space is ``innerproduct`` (HNSW,
faiss engine, which supports filtered k-NN). OpenSearch turns an inner product ``ip`` into a
score ``ip + 1`` when ``ip >= 0`` and ``1 / (1 - ip)`` otherwise; ``search`` maps it back so
hits carry the same inner product as every other VectorIndex.

A leaf's text (``meta["text"]``) goes into the same document as its vector: the ``text``
field is the lexical (BM25) index that ``lexical_opensearch.OpenSearchLexicalIndex`` queries
with ``match``. Its attributes (``meta["attrs"]``) go there too, as the typed fields of ``filter_dsl``; ``where``
compiles to a bool query in the ``filter`` of the ``knn`` clause (efficient k-NN filtering:
the engine searches the allowed set, it does not cut a top-k afterwards) or beside the
``match``. An upsert is an ``index`` action, which replaces the whole document: a chunk's new
attributes leave none of the old ones behind. An index created before attributes existed gets
their fields with the first write of attributes (a mapping can gain fields; the query function
may only read, and a filter on an unmapped field matches nothing); its vectors match no filter
until re-upserted.

Multi requests name their index in the path only (``/<index>/_bulk``, ``/<index>/_mget`` with
ids): the domain runs with ``rest.action.multi.allow_explicit_index`` false, so that an index
policy on the path is the whole truth. Writes go through ``_bulk`` (index / delete actions,
NDJSON) with per-item error handling:
items that failed with a retryable status (429, 5xx) are re-sent with backoff, any other item
error raises with the ids and reasons. ``ids()`` pages with ``search_after`` on the ``node_id``
keyword; ``get_vectors`` uses ``_mget``; ``search_many`` is one ``_msearch`` (NDJSON: an empty
header line per search, the index in the path).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np

from ...domain.filters import Filter
from ...domain.ranking import below_floor, rank_key, rank_score, top_hits
from ...ports.records import Hit
from .filter_dsl import ATTR_PROPERTIES, MARKER, attr_fields, where_clauses

BULK_ACTIONS = 500
PAGE = 1000
RETRYABLE = {429, 500, 502, 503, 504}
TIE_WINDOW = 50
MAX_K = 10000


def index_body(dim: int, replicas: int | None = None) -> dict[str, Any]:
    """The index mapping for ``dim``-dimensional vectors; ``replicas`` (None: the file's)."""
    body = json.loads(resources.files(__package__).joinpath("index_mapping.json").read_text())
    body = copy.deepcopy(body)
    body["mappings"]["properties"]["vector"]["dimension"] = int(dim)
    if replicas is not None:
        if int(replicas) < 0:
            raise ValueError(f"replicas must be >= 0, not {replicas}")
        body["settings"]["index"]["number_of_replicas"] = int(replicas)
    return body


def _tie_at_cut(scores: Sequence[float], k: int, fetch: int) -> bool:
    """A full page whose k-th best score ties its last one (``rank_score``): more hits may tie
    too, and which of them make the top k must be decided by id, so fetch more (up to MAX_K)."""
    if len(scores) < fetch or fetch >= MAX_K or len(scores) <= k:
        return False
    ordered = sorted(scores, reverse=True)
    return rank_score(ordered[-1]) >= rank_score(ordered[k - 1])


def score_to_inner_product(score: float) -> float:
    return score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score


def endpoint_address(endpoint: str) -> tuple[str, int, bool]:
    """(host, port, use_ssl) of an OpenSearch endpoint: a bare host (what the template's
    ``DomainEndpoint`` gives) is HTTPS on 443; ``https://host[:port]`` and ``http://host[:port]``
    (a local test double on loopback) keep their scheme and port."""
    from urllib.parse import urlsplit

    raw = endpoint.strip()
    parts = urlsplit(raw if "://" in raw else "https://" + raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"OpenSearch endpoint {endpoint!r}: expected host, https://host[:port] or http://host[:port]")
    if parts.path not in ("", "/"):
        raise ValueError(f"OpenSearch endpoint {endpoint!r}: a path is not supported")
    use_ssl = parts.scheme == "https"
    return parts.hostname, parts.port or (443 if use_ssl else 80), use_ssl


def make_client(endpoint: str, region: str, service: str = "es") -> Any:
    """An IAM-signed (SigV4) client; ``service`` is ``es`` for a domain, ``aoss`` for serverless.
    The endpoint's scheme and port are honoured (see ``endpoint_address``); requests are signed
    either way."""
    import boto3
    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    host, port, use_ssl = endpoint_address(endpoint)
    auth = AWSV4SignerAuth(boto3.Session().get_credentials(), region, service)
    return OpenSearch(hosts=[{"host": host, "port": port}], http_auth=auth, use_ssl=use_ssl,
                      verify_certs=use_ssl, connection_class=RequestsHttpConnection, timeout=30)


class BulkError(RuntimeError):
    def __init__(self, failures: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(failures)} bulk item(s) failed: {failures[:5]}")
        self.failures = failures


class OpenSearchVectorIndex:
    def __init__(self, client: Any, index: str, dim: int, refresh: bool | str = False,
                 replicas: int | None = None, tenant: str = "") -> None:
        """``tenant``: the namespace this index reads and writes: its documents carry a
        ``tenant`` keyword and ``<tenant>#`` before their ``_id``, and every request this adapter
        makes (search, count, ids, mget, delete) is scoped to it by a clause the adapter adds,
        never the caller. The default tenant's documents have no ``tenant`` field."""
        self.tenant = tenant
        self._prefix = f"{tenant}#" if tenant else ""
        self.client = client
        self.index = index
        self.dim = dim
        self.replicas = replicas  # for a new index; None keeps the mapping file's
        self.refresh = refresh  # tests use True; Lambda leaves near-real-time refresh on
        self._ready = False
        self._attrs_mapped = False  # the index has the attribute fields (created here, or checked)

    def ensure_index(self) -> None:
        if self._ready:
            return
        if not self.client.indices.exists(index=self.index):
            try:
                self.client.indices.create(index=self.index, body=index_body(self.dim, self.replicas))
                self._attrs_mapped = True
            except Exception as exc:  # a concurrent creator won
                if "resource_already_exists_exception" not in str(exc):
                    raise
        self._ready = True

    def _map_attr_fields(self) -> None:
        """Give an index created before filterable attributes their fields and templates (once
        per process, before the first write of attributes)."""
        if self._attrs_mapped:
            return
        mapping = next(iter(self.client.indices.get_mapping(index=self.index).values()))["mappings"]
        have = mapping.get("properties") or {}
        new = index_body(self.dim)["mappings"]
        body: dict[str, Any] = {}
        if MARKER not in have:
            body["dynamic_templates"] = new["dynamic_templates"]
            body["properties"] = {name: new["properties"][name] for name in ATTR_PROPERTIES}
        if "tenant" not in have:  # an index created before tenants
            body.setdefault("properties", {})["tenant"] = new["properties"]["tenant"]
        if body:
            self.client.indices.put_mapping(index=self.index, body=body)
        self._attrs_mapped = True

    # ----- the tenant's namespace -----
    def scope(self) -> dict[str, Any]:
        """The clause every query of this adapter carries: this tenant's documents only."""
        if self.tenant:
            return {"term": {"tenant": self.tenant}}
        return {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}

    def _doc_id(self, node_id: str) -> str:
        return self._prefix + node_id

    def _node_id(self, doc_id: str) -> str:
        return doc_id[len(self._prefix):]

    def drop_namespace(self) -> int:
        """Delete every document of this tenant (delete_by_query on the scope); how many."""
        if not self.tenant:
            raise ValueError("the default namespace is not a tenant's: it is never dropped")
        self.ensure_index()
        response = self.client.delete_by_query(index=self.index, body={"query": {"bool": {"filter": [self.scope()]}}},
                                               refresh=True, conflicts="proceed")
        return int(response.get("deleted", 0))

    # ----- writes -----
    def _bulk(self, lines: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        self.ensure_index()
        for start in range(0, len(lines), BULK_ACTIONS):
            pending = lines[start:start + BULK_ACTIONS]
            for attempt in range(6):
                body = "".join(json.dumps(a) + "\n" + (json.dumps(s) + "\n" if s is not None else "")
                               for a, s in pending)
                response = self.client.bulk(index=self.index, body=body, refresh=self.refresh)
                if not response.get("errors"):
                    break
                retry, failures = [], []
                for pair, item in zip(pending, response["items"]):
                    op, result = next(iter(item.items()))
                    status = int(result.get("status", 200))
                    if op == "delete" and status == 404:
                        continue  # deleting an absent id is not an error
                    if status >= 300:
                        (retry if status in RETRYABLE else failures).append(
                            pair if status in RETRYABLE else
                            {"id": result.get("_id"), "status": status, "error": result.get("error")})
                if failures:
                    raise BulkError(failures)
                if not retry:
                    break
                pending = retry
                time.sleep(min(0.2 * 2 ** attempt, 5.0))
            else:
                raise BulkError([{"id": a[next(iter(a))]["_id"], "status": "retries exhausted"}
                                 for a, _ in pending])

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metas: Sequence[Mapping[str, Any]]) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(ids) != len(vectors) or len(ids) != len(metas):
            raise ValueError("ids, vectors and metas must have the same length")
        if len(ids) and vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have dimension {vectors.shape[1]}, index has {self.dim}")
        tenant = {"tenant": self.tenant} if self.tenant else {}
        lines = [({"index": {"_id": self._doc_id(i)}},
                  {"node_id": i, "layer": int(m["layer"]), "doc_id": str(m.get("doc_id", "")), **tenant,
                   **({"text": str(m["text"])} if m.get("text") is not None else {}),
                   **attr_fields(m.get("attrs")),
                   "vector": [float(x) for x in v]})
                 for i, v, m in zip(ids, vectors, metas)]
        if self.tenant or any(m.get("attrs") is not None for m in metas):
            self.ensure_index()
            self._map_attr_fields()
        self._bulk(lines)

    def delete(self, ids: Iterable[str]) -> None:
        lines = [({"delete": {"_id": self._doc_id(i)}}, None) for i in dict.fromkeys(ids)]
        if lines:
            self._bulk(lines)

    # ----- reads -----
    def _filters(self, layers: Sequence[int] | None, doc_ids: Sequence[str] | None = None,
                 where: Filter | None = None) -> list[dict[str, Any]]:
        filters = [self.scope()]
        if layers is not None:
            filters.append({"terms": {"layer": [int(x) for x in layers]}})
        if doc_ids is not None:
            filters.append({"terms": {"doc_id": [str(x) for x in doc_ids]}})
        return filters + where_clauses(where)

    @staticmethod
    def _knn_body(vector: np.ndarray, fetch: int, filters: list[dict[str, Any]]) -> dict[str, Any]:
        query_vector = [float(x) for x in np.asarray(vector, dtype=np.float32).reshape(-1)]
        knn: dict[str, Any] = {"vector": query_vector, "k": fetch, "filter": {"bool": {"filter": filters}}}
        return {"size": fetch, "_source": False, "query": {"knn": {"vector": knn}}}

    def _hits_of(self, response: dict[str, Any]) -> list[Hit]:
        return [Hit(self._node_id(h["_id"]), score_to_inner_product(float(h["_score"])))
                for h in response["hits"]["hits"]]

    def search(self, vector: np.ndarray, k: int, layers: Sequence[int] | None = None,
               doc_ids: Sequence[str] | None = None, where: Filter | None = None) -> list[Hit]:
        if k <= 0:
            return []
        self.ensure_index()
        # over-fetch so that equal scores at the cut are ordered by id like every other index:
        # while the k-th score ties with the last one fetched, fetch twice as many (the FAISS
        # index does the same; a fixed window leaves the order of a long tie to the engine)
        fetch = min(2 * int(k), int(k) + TIE_WINDOW, MAX_K)
        filters = self._filters(layers, doc_ids, where)
        while True:
            hits = self._hits_of(self.client.search(index=self.index, body=self._knn_body(vector, fetch, filters)))
            if len(hits) < min(k, fetch) and fetch < MAX_K:
                # faiss answers a filter with at least k hits when the allowed set has k (an exact
                # search over it when the graph search falls short); if an engine does not, ask
                # for as many as are allowed, which makes it search them exactly
                allowed = self._allowed(filters)
                if allowed > len(hits):
                    fetch = min(max(2 * fetch, allowed), MAX_K)
                    continue
            if not _tie_at_cut([h.score for h in hits], k, fetch):
                break
            fetch = min(2 * fetch, MAX_K)
        hits.sort(key=rank_key)
        return hits[:k]

    def search_many(self, vectors: np.ndarray, k: int, layers: Sequence[int] | None = None,
                    min_score: float | None = None) -> list[list[Hit]]:
        """One ``_msearch`` request (NDJSON: an empty header, the index being in the path, and
        the k-NN body of ``search`` per row). A row that answer leaves unsettled is searched
        again alone: a tie at the cut that reaches ``min_score``, or fewer hits than asked
        while the filter allows more (one count for all such rows)."""
        if not len(vectors):
            return []
        qs = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if k <= 0:
            return [[] for _ in range(len(qs))]
        self.ensure_index()
        fetch = min(2 * int(k), int(k) + TIE_WINDOW, MAX_K)
        filters = self._filters(layers)
        body = "".join("{}\n" + json.dumps(self._knn_body(q, fetch, filters)) + "\n" for q in qs)
        responses = self.client.msearch(index=self.index, body=body)["responses"]
        failed = [r.get("error") for r in responses if r.get("error") is not None]
        if failed or len(responses) != len(qs):
            raise RuntimeError(f"_msearch: {len(failed)} of {len(qs)} searches failed: {failed[:3]}")
        rows = [self._hits_of(r) for r in responses]
        allowed = None
        out = []
        for q, hits in zip(qs, rows):
            scores = [h.score for h in hits]
            again = _tie_at_cut(scores, k, fetch) and not below_floor(min(scores), min_score)
            if len(hits) < min(k, fetch) and fetch < MAX_K:
                allowed = self._allowed(filters) if allowed is None else allowed
                again = again or allowed > len(hits)
            out.append(top_hits(self.search(q, k, layers) if again else hits, k, min_score))
        return out

    def _allowed(self, filters: list[dict[str, Any]]) -> int:
        """How many documents pass ``filters`` (a filter-only search that counts them)."""
        body = {"size": 0, "track_total_hits": True,
                "query": {"constant_score": {"filter": {"bool": {"filter": filters}}}}}
        return int(self.client.search(index=self.index, body=body)["hits"]["total"]["value"])

    def ids(self) -> set[str]:
        self.ensure_index()
        out: set[str] = set()
        after = None
        while True:
            body: dict[str, Any] = {"size": PAGE, "_source": ["node_id"], "sort": [{"node_id": "asc"}],
                                    "query": {"bool": {"filter": [self.scope()]}}}
            if after is not None:
                body["search_after"] = after
            hits = self.client.search(index=self.index, body=body)["hits"]["hits"]
            out.update(self._node_id(h["_id"]) for h in hits)
            if len(hits) < PAGE:
                return out
            after = hits[-1]["sort"]

    def get_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        self.ensure_index()
        out = {}
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), PAGE):
            docs = self.client.mget(index=self.index, body={"ids": [self._doc_id(i) for i in ids[start:start + PAGE]]})
            for d in docs["docs"]:
                if d.get("found"):
                    out[self._node_id(d["_id"])] = np.asarray(d["_source"]["vector"], dtype=np.float32)
        return out

    def count(self) -> int:
        self.ensure_index()
        return int(self.client.count(index=self.index, body={"query": {"bool": {"filter": [self.scope()]}}})["count"])

    def flush(self) -> None:
        if self._ready:
            self.client.indices.refresh(index=self.index)
