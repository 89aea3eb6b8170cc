"""What the scale benchmark counts: ``Counting``, a proxy around a port that counts every call
with the items it was given and returned (generic over adapters; ``count_ports`` wraps an
engine's ports); ``DynamoCounter``, the DynamoDB requests and items of one client seen
through botocore event hooks; ``CountingOpenSearch``, an OpenSearch client's requests by
operation; ``SqsCounter``, an SQS client's requests and messages; with the medians of
repeated runs."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ..adapters.aws import round_trips

WRITE_METHODS = ("put_", "delete_", "upsert", "apply_", "add_", "flush", "remove_", "set_")


# ----------------------------------------------------------------------------- counting ports


def size_of(x: Any) -> int:
    """Items in an argument or a result: a collection counts its members, an array its rows,
    None nothing, anything else (a key, a node, a number) one."""
    if x is None:
        return 0
    if isinstance(x, (str, bytes, int, float, bool)):
        return 1
    if isinstance(x, np.ndarray):
        return int(x.shape[0]) if x.ndim > 1 else 1
    if isinstance(x, (Mapping, list, tuple, set, frozenset)):
        return len(x)
    return 1


def is_write(method: str) -> bool:
    return method.startswith(WRITE_METHODS)


class Counting:
    """A proxy around one port: every public method call is counted under its name with the
    items it was given (the first argument's size; ``apply_region``: the items it writes) and
    the items it returned. One-shot iterators among the arguments are materialized first so
    they can be counted (the port sees the same items)."""

    def __init__(self, inner: Any, counts: dict[str, dict[str, int]]) -> None:
        self._inner = inner
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr):
            return attr
        counts = self._counts

        def counted(*a, **kw):
            a = tuple(list(x) if isinstance(x, Iterator) else x for x in a)
            result = attr(*a, **kw)
            if name == "apply_region":
                change = a[0] if a else kw["change"]
                given = sum(len(x) for x in (change.assign, change.drop, change.add, change.remove,
                                             change.above_add, change.above_remove))
            else:
                given = size_of(a[0]) if a else size_of(next(iter(kw.values()), None))
            row = counts.setdefault(name, {"calls": 0, "items_in": 0, "items_out": 0})
            row["calls"] += 1
            row["items_in"] += given
            row["items_out"] += size_of(result)
            return result

        return counted


def count_ports(engine: Any) -> dict[str, dict[str, dict[str, int]]]:
    """Wrap the engine's graph store and vector index (and the entity graph's store and vector
    index when installed) in counting proxies, in place; returns the live counters."""
    counters: dict[str, dict[str, dict[str, int]]] = {"graph": {}, "vectors": {}}
    engine.graph = Counting(engine.graph, counters["graph"])
    engine.vectors = Counting(engine.vectors, counters["vectors"])
    index = engine.entities
    if index is not None:
        for attr, key in (("store", "entity_store"), ("vectors", "entity_vectors")):
            if hasattr(index, attr):
                counters[key] = {}
                setattr(index, attr, Counting(getattr(index, attr), counters[key]))
    return counters


def totals(counters: dict[str, dict[str, dict[str, int]]]) -> dict[str, int]:
    out = {"calls": 0, "items_read": 0, "items_written": 0}
    for methods in counters.values():
        for method, row in methods.items():
            out["calls"] += row["calls"]
            if is_write(method):
                out["items_written"] += row["items_in"]
            else:
                out["items_read"] += row["items_out"]
    return out


def reset(counters: dict) -> None:
    for methods in counters.values():
        methods.clear()


# ----------------------------------------------------------------------------- medians


def median_row(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))]
    return {k: round(statistics.median(r[k] for r in rows), 6) for k in keys}


def median_methods(runs: list[dict[str, dict[str, dict[str, int]]]]) -> dict:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for port in sorted({p for run in runs for p in run}):
        for method in sorted({m for run in runs for m in run.get(port, {})}):
            vals = [run.get(port, {}).get(method, {"calls": 0, "items_in": 0, "items_out": 0}) for run in runs]
            out.setdefault(port, {})[method] = {k: statistics.median(v[k] for v in vals)
                                                for k in ("calls", "items_in", "items_out")}
    return out


# ----------------------------------------------------------------------------- DynamoDB requests


class DynamoCounter:
    """Counts DynamoDB requests and items with botocore event hooks on one client:
    ``before-parameter-build`` (the request: items written by PutItem/UpdateItem/DeleteItem,
    BatchWriteItem, TransactWriteItems) and ``after-call`` (the response: items returned by
    GetItem, BatchGetItem, TransactGetItems, Query/Scan ``Count`` and ``ScannedCount``, and
    ``ConsumedCapacity`` when the response carries it; unprocessed batch items are not counted
    as written). ``round_trips``: the sequential waits of the calling thread since ``reset``
    (adapters/aws/round_trips: requests fanned out side by side over w lanes cost one wait
    per w; read in the thread that reset the counter). Written items are also tallied by partition key, to show how one insert's
    writes spread over partitions (a partition takes at most 1,000 write units a second):
    ``partitions_written``, ``hottest_partition_writes`` and, per kind of partition (the key
    up to its first ``#``), ``writes_by_kind``; ``meta_*`` for the store's metadata
    partitions (dirty markers, outbox, follow-ups, retired texts: keys starting ``META``)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: dict[str, int] = {}
        self.started_at = round_trips.now()
        self.items_read = 0
        self.items_scanned = 0
        self.items_written = 0
        self.capacity = 0.0
        self.partitions: dict[str, int] = {}

    def _wrote(self, key: dict | None) -> None:
        pk = ((key or {}).get("PK") or {}).get("S")
        if pk is not None:
            self.partitions[pk] = self.partitions.get(pk, 0) + 1

    def _tally(self, op: str, params: dict) -> None:
        if op == "PutItem":
            self._wrote(params.get("Item"))
        elif op in ("UpdateItem", "DeleteItem"):
            self._wrote(params.get("Key"))
        elif op == "BatchWriteItem":
            for requests in (params.get("RequestItems") or {}).values():
                for r in requests:
                    self._wrote((r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key"))
        elif op == "TransactWriteItems":
            for t in params.get("TransactItems") or []:
                if "Put" in t:
                    self._wrote(t["Put"].get("Item"))
                elif "Update" in t or "Delete" in t:
                    self._wrote((t.get("Update") or t.get("Delete")).get("Key"))

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, params: dict, model: Any, **_: Any) -> None:
        op = model.name
        self.requests[op] = self.requests.get(op, 0) + 1
        round_trips.tick()
        self._tally(op, params)
        if op in ("PutItem", "UpdateItem", "DeleteItem"):
            self.items_written += 1
        elif op == "BatchWriteItem":
            self.items_written += sum(len(v) for v in (params.get("RequestItems") or {}).values())
        elif op == "TransactWriteItems":
            self.items_written += len(params.get("TransactItems") or [])

    def after(self, http_response: Any, parsed: dict, model: Any, **_: Any) -> None:
        op = model.name
        if op == "GetItem":
            self.items_read += 1 if parsed.get("Item") else 0
        elif op == "BatchGetItem":
            self.items_read += sum(len(v) for v in (parsed.get("Responses") or {}).values())
        elif op == "TransactGetItems":
            self.items_read += sum(1 for r in parsed.get("Responses") or [] if r.get("Item"))
        elif op in ("Query", "Scan"):
            self.items_read += int(parsed.get("Count") or 0)
            self.items_scanned += int(parsed.get("ScannedCount") or 0)
        elif op == "BatchWriteItem":
            self.items_written -= sum(len(v) for v in (parsed.get("UnprocessedItems") or {}).values())
        cap = parsed.get("ConsumedCapacity")
        for c in cap if isinstance(cap, list) else [cap] if cap else []:
            self.capacity += float(c.get("CapacityUnits") or 0.0)

    def snapshot(self) -> dict:
        kinds: dict[str, int] = {}
        for pk, n in self.partitions.items():
            kinds[pk.split("#", 1)[0]] = kinds.get(pk.split("#", 1)[0], 0) + n
        meta = [n for pk, n in self.partitions.items() if pk.startswith("META")]
        return {"requests": sum(self.requests.values()), "round_trips": round_trips.now() - self.started_at,
                "items_read": self.items_read,
                "items_scanned": self.items_scanned, "items_written": self.items_written,
                "consumed_capacity": self.capacity, "by_operation": dict(self.requests),
                "partitions_written": len(self.partitions),
                "hottest_partition_writes": max(self.partitions.values(), default=0),
                "meta_partitions_written": len(meta), "meta_hottest_partition_writes": max(meta, default=0),
                "writes_by_kind": kinds}


def median_dynamo(rows: list[dict]) -> dict:
    out = median_row(rows)
    for field in ("by_operation", "writes_by_kind"):
        names = sorted({name for r in rows for name in r[field]})
        out[field] = {name: statistics.median(r[field].get(name, 0) for r in rows) for name in names}
    return out


# ----------------------------------------------------------------------------- OpenSearch and SQS


BULK_ACTIONS = ('{"index"', '{"create"', '{"delete"', '{"update"')


def search_kind(body: Any) -> str:
    """What a ``_search`` body asks: ``knn_search`` (k-NN, filtered or not), ``lexical_search``
    (a ``bool.must`` match), ``count_search`` (``size`` 0: a filter that counts) or ``search``
    (a filtered listing: ``ids()``'s pages)."""
    query = (body or {}).get("query") or {}
    if "knn" in query:
        return "knn_search"
    if "bool" in query and query["bool"].get("must"):
        return "lexical_search"
    if (body or {}).get("size") == 0:
        return "count_search"
    return "search"


class _CountingIndices:
    def __init__(self, owner: CountingOpenSearch) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._owner.inner.indices, name)

        def counted(*a: Any, **kw: Any) -> Any:
            self._owner.tally(kw.get("index", a[0] if a else ""), f"indices.{name}")
            return attr(*a, **kw)

        return counted


class CountingOpenSearch:
    """An opensearch-py client (or its stand-in) that counts every request by index and
    operation: ``bulk`` (and its actions in ``bulk_actions``), ``search`` by ``search_kind``,
    ``msearch`` (and the searches it carries in ``msearch_searches``),
    ``mget``, ``count``, ``delete_by_query``, ``indices.*``; ``snapshot`` gives the counts,
    ``reset`` clears them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.indices = _CountingIndices(self)
        self.reset()

    def reset(self) -> None:
        self.requests: dict[str, int] = {}
        self.by_index: dict[str, int] = {}
        self.bulk_actions = 0
        self.msearch_searches = 0

    def tally(self, index: str, op: str) -> None:
        self.requests[op] = self.requests.get(op, 0) + 1
        self.by_index[str(index)] = self.by_index.get(str(index), 0) + 1

    def bulk(self, body: str, index: str | None = None, **kw: Any) -> Any:
        self.tally(index or "", "bulk")
        self.bulk_actions += sum(1 for line in body.splitlines() if line.startswith(BULK_ACTIONS))
        return self.inner.bulk(body=body, index=index, **kw)

    def search(self, index: str, body: dict, **kw: Any) -> Any:
        self.tally(index, search_kind(body))
        return self.inner.search(index=index, body=body, **kw)

    def msearch(self, body: str, index: str | None = None, **kw: Any) -> Any:
        self.tally(index or "", "msearch")
        self.msearch_searches += sum(1 for line in body.splitlines() if line.startswith('{"size"'))
        return self.inner.msearch(body=body, index=index, **kw)

    def mget(self, index: str, body: dict, **kw: Any) -> Any:
        self.tally(index, "mget")
        return self.inner.mget(index=index, body=body, **kw)

    def count(self, index: str, body: dict | None = None, **kw: Any) -> Any:
        self.tally(index, "count")
        return self.inner.count(index=index, body=body, **kw)

    def delete_by_query(self, index: str, body: dict, **kw: Any) -> Any:
        self.tally(index, "delete_by_query")
        return self.inner.delete_by_query(index=index, body=body, **kw)

    def snapshot(self) -> dict:
        return {"requests": sum(self.requests.values()), "by_operation": dict(self.requests),
                "by_index": dict(self.by_index), "bulk_actions": self.bulk_actions,
                "msearch_searches": self.msearch_searches}


class SqsCounter:
    """SQS requests of one client through botocore event hooks, with the messages sent
    (SendMessage, SendMessageBatch entries), received (messages in ReceiveMessage answers) and
    deleted (DeleteMessage, DeleteMessageBatch entries)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.requests: dict[str, int] = {}
        self.sent = self.received = self.deleted = 0

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-parameter-build.sqs", self.before)
        client.meta.events.register("after-call.sqs", self.after)

    def before(self, params: dict, model: Any, **_: Any) -> None:
        op = model.name
        self.requests[op] = self.requests.get(op, 0) + 1
        if op == "SendMessage":
            self.sent += 1
        elif op == "SendMessageBatch":
            self.sent += len(params.get("Entries") or [])
        elif op == "DeleteMessage":
            self.deleted += 1
        elif op == "DeleteMessageBatch":
            self.deleted += len(params.get("Entries") or [])

    def after(self, parsed: dict, model: Any, **_: Any) -> None:
        if model.name == "ReceiveMessage":
            self.received += len(parsed.get("Messages") or [])

    def snapshot(self) -> dict:
        return {"requests": sum(self.requests.values()), "by_operation": dict(self.requests),
                "messages_sent": self.sent, "messages_received": self.received, "messages_deleted": self.deleted}


def median_counts(rows: list[dict]) -> dict:
    """Medians of CountingOpenSearch / SqsCounter snapshots (their numbers and their
    ``by_*`` tables)."""
    out = median_row(rows)
    for field in ("by_operation", "by_index"):
        if field in rows[0]:
            names = sorted({name for r in rows for name in r[field]})
            out[field] = {name: statistics.median(r[field].get(name, 0) for r in rows) for name in names}
    return out


def median_snapshots(rows: list[dict]) -> dict:
    """``{dynamodb_median, opensearch_median, sqs_median}`` of snapshots that hold a
    DynamoCounter's, a CountingOpenSearch's and an SqsCounter's under those names."""
    out = {}
    for name in rows[0]:
        values = [r[name] for r in rows]
        out[f"{name}_median"] = median_dynamo(values) if name == "dynamodb" else median_counts(values)
    return out
