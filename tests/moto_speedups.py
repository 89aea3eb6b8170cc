"""Three costs of moto (5.2.5), replaced for the whole suite by what they compute, cheaper. The
first two are DynamoDB's and grow with the table: they made the moto tests quadratic in the size
of their stores (a profile of a 60-document ingest over moto spent 63 % of its time in them:
135 s sorting the table for Query, 78 s copying tables for TransactWriteItems, of 338 s on a
loaded machine). The third is every service's, per attribute of every response.

* **TransactWriteItems' rollback.** moto deep-copies every table a transaction names (once per
  item of the transaction) before the first write, and puts the copies back if it is cancelled:
  O(table) per transaction. Here only the items the transaction names are saved, and restored
  (or the new ones deleted) when it is cancelled: the same rollback, O(items named).
* **Query on the table's own key.** moto sorts every item of the table, then keeps the ones of
  the partition the query names: O(table log table) per query. Here it reads that one partition
  (which the query then sorts by its range key, as it does the table's). Index queries and scans are unchanged.
* **The response serializer's attribute picker.** For each member of each structure of a
  response (each of the ten members of every DynamoDB AttributeValue, say) moto builds six alias
  providers and asks each which names the member may have in the result, then looks each name
  up: after the two fixes above, a third of that ingest's moto time (15 % of the test's). For a
  result that is a plain ``dict`` the names depend only on the picker, the member's shape and its
  parent, so they are worked out once per member and kept; the lookup is the same, in the same
  order. Objects other than dicts, and pickers with response transformers, go through moto's own.

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


def _install_picker(serialize) -> bool:
    Picker = serialize.AttributePicker
    call = Picker.__call__
    if getattr(call, "cached_names", False):
        return True
    if "for possible_key in self.get_possible_keys(context)" not in inspect.getsource(call):
        return False
    missing, get_value = serialize.MISSING, serialize.get_value
    # (picker class, alias providers, member shape, its parent, key) -> (names, and the objects
    # whose ids the key holds: kept alive, so that an id is never another object's)
    names: dict[tuple, tuple] = {}

    def cached_call(self, context):
        obj = context.obj
        if type(obj) is not dict or self.response_transformers:
            return call(self, context)
        shape = context.shape
        parent = getattr(shape, "parent", None)
        key = (type(self), id(self.alias_providers), id(shape), id(parent), context.key)
        found = names.get(key)
        if found is None:
            found = names[key] = (tuple(self.get_possible_keys(context)), self.alias_providers, shape, parent)
        for name in found[0]:
            value = get_value(obj, name, missing) if "." in name else obj.get(name, missing)
            if value is not missing:
                return value
        return None

    cached_call.cached_names = True
    ORIGINALS.update(picker=call)
    Picker.__call__ = cached_call
    return True


@contextlib.contextmanager
def unpatched():
    """moto's own TransactWriteItems, Query and attribute picker for the duration (what the
    speed-ups are checked against)."""
    from moto.core import serialize
    from moto.dynamodb import models
    from moto.dynamodb.models import table as table_module

    now = (models.copy, models.DynamoDBBackend.transact_write_items, table_module.Table.query,
           table_module.Table.all_items, serialize.AttributePicker.__call__)
    models.copy, models.DynamoDBBackend.transact_write_items = ORIGINALS["copy"], ORIGINALS["transact_write_items"]
    table_module.Table.query, table_module.Table.all_items = ORIGINALS["query"], ORIGINALS["all_items"]
    serialize.AttributePicker.__call__ = ORIGINALS["picker"]
    try:
        yield
    finally:
        (models.copy, models.DynamoDBBackend.transact_write_items, table_module.Table.query,
         table_module.Table.all_items, serialize.AttributePicker.__call__) = now


def install() -> bool:
    """Patch moto's TransactWriteItems, Query and attribute picker if they are the ones described
    above; False if moto is absent or any differs (then that one is left as it is)."""
    try:
        from moto.core import serialize
        from moto.dynamodb import models
        from moto.dynamodb.models import table as table_module
    except ImportError:
        return False
    return _install_transactions(models) & _install_queries(table_module) & _install_picker(serialize)
