"""Two costs of moto's DynamoDB (5.2.5) that grow with the table, replaced for the whole suite by
what they compute, cheaper. Both made the moto tests quadratic in the size of their stores: a
profile of a 60-document ingest over moto spent 63 % of its time in them (135 s sorting the
table for Query, 78 s copying tables for TransactWriteItems, of 338 s on a loaded machine).

* **TransactWriteItems' rollback.** moto deep-copies every table a transaction names (once per
  item of the transaction) before the first write, and puts the copies back if it is cancelled:
  O(table) per transaction. Here only the items the transaction names are saved, and restored
  (or the new ones deleted) when it is cancelled: the same rollback, O(items named).
* **Query on the table's own key.** moto sorts every item of the table, then keeps the ones of
  the partition the query names: O(table log table) per query. Here it reads that one partition
  (which the query then sorts by its range key, as it does the table's). Index queries and scans are unchanged.

The deployed harness's moto server (tests/deployed/deployed.py) runs in the test process, so it
serves with the same two. moto's DynamoDB calls are applied one at a time in the process
(tests/aws_limits.py), and the partition a query reads is kept per thread besides.

tests/conftest.py installs it; tests/deployed/test_harness.py and tests/unit/test_moto_speedups.py
check that rollbacks, pages and partitions answer as moto's own code does."""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
from typing import Any

_local = threading.local()
# moto's own methods, as found (tests/unit/test_moto_speedups.py runs both and compares)
ORIGINALS: dict[str, Any] = {}


def _saved_items(backend, transact_items) -> list[tuple[Any, Any, Any, Any]]:
    """(table, hash key, range key, a copy of the item or None) for each item the transaction
    names; items with a malformed key are left to moto's own checks (they write nothing)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    saved = []
    for entry in transact_items:
        try:
            _, op = next(iter(entry.items()))
            table = backend.tables.get(op.get("TableName"))
            if table is None:
                continue
            attrs = op["Key"] if "Key" in op else op.get("Item") or {}
            h = DynamoType(attrs[table.hash_key_attr])
            r = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
        except Exception:  # noqa: BLE001 - a malformed op: moto refuses it before any write
            continue
        current = table.items.get(h)
        if r is not None and current is not None:
            current = current.get(r)
        saved.append((table, h, r, copy.deepcopy(current)))
    return saved


def _restore(saved) -> None:
    for table, h, r, item in reversed(saved):
        if r is None:
            if item is None:
                table.items.pop(h, None)
            else:
                table.items[h] = item
        elif item is None:
            part = table.items.get(h)
            if part is not None:
                part.pop(r, None)
        else:
            table.items[h][r] = item


class _NoTableCopy:
    """Stands for the ``copy`` module in moto.dynamodb.models: a table is not copied (its items
    named by the transaction are saved instead)."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, obj: Any, memo: dict | None = None) -> Any:
        if getattr(_local, "in_transaction", False) and isinstance(obj, self._table_type):
            return obj
        return copy.deepcopy(obj, memo)


def _install_transactions(models) -> bool:
    original = models.DynamoDBBackend.transact_write_items
    if getattr(original, "item_rollback", False):
        return True
    if "original_table_state[table_name] = copy.deepcopy(" not in inspect.getsource(original):
        return False

    def transact_write_items(self, transact_items):
        if len(transact_items) > 100 or any(
                getattr(t, "stream_shard", None) is not None for t in self.tables.values()):
            return original(self, transact_items)  # moto's own: refused first / streams copied too
        saved = _saved_items(self, transact_items)
        _local.in_transaction = True
        try:
            return original(self, transact_items)
        except Exception:
            _restore(saved)
            raise
        finally:
            _local.in_transaction = False

    transact_write_items.item_rollback = True
    ORIGINALS.update(copy=models.copy, transact_write_items=original)
    models.copy = _NoTableCopy(models.Table)
    models.DynamoDBBackend.transact_write_items = transact_write_items
    return True


def _install_queries(table_module) -> bool:
    Table = table_module.Table
    query, all_items = Table.query, Table.all_items
    if getattr(query, "one_partition", False):
        return True
    if "for item in self.all_items()" not in inspect.getsource(query):
        return False

    def partition_items(table):
        part = getattr(_local, "partition", None)
        if part is None or part[0] is not table:
            return all_items(table)
        found = table.items.get(part[1])
        if found is None:
            return []
        return list(found.values()) if table.range_key_attr else [found]  # query sorts them by range key

    def partition_query(table, hash_key, *args, **kwargs):
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        _local.partition = None if index_name or hash_key is None else (table, hash_key)
        try:
            return query(table, hash_key, *args, **kwargs)
        finally:
            _local.partition = None

    partition_query.one_partition = True
    ORIGINALS.update(query=query, all_items=all_items)
    Table.query = partition_query
    Table.all_items = partition_items
    return True


@contextlib.contextmanager
def unpatched():
    """moto's own TransactWriteItems and Query for the duration (what the speed-ups are checked
    against)."""
    from moto.dynamodb import models
    from moto.dynamodb.models import table as table_module

    now = (models.copy, models.DynamoDBBackend.transact_write_items, table_module.Table.query,
           table_module.Table.all_items)
    models.copy, models.DynamoDBBackend.transact_write_items = ORIGINALS["copy"], ORIGINALS["transact_write_items"]
    table_module.Table.query, table_module.Table.all_items = ORIGINALS["query"], ORIGINALS["all_items"]
    try:
        yield
    finally:
        (models.copy, models.DynamoDBBackend.transact_write_items, table_module.Table.query,
         table_module.Table.all_items) = now


def install() -> bool:
    """Patch moto's TransactWriteItems and Query if they are the ones described above; False if
    moto is absent or either differs (then that one is left as it is)."""
    try:
        from moto.dynamodb import models
        from moto.dynamodb.models import table as table_module
    except ImportError:
        return False
    return _install_transactions(models) & _install_queries(table_module)
