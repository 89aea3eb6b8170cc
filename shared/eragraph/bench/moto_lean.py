"""moto's DynamoDB without its two costs that grow with the table, for benchmarks at size.

moto 5 answers correctly but does two things in time proportional to the whole table, so a
benchmark that builds a table of thousands of chunks through it grows quadratically (a
1,000-chunk build passed 12 GB before this):

* ``transact_write_items`` backs up a table by deep-copying it, once per item of the
  transaction. The journalled version here keeps, before each operation, a copy of the one
  item at that key (or its absence), and a cancelled transaction puts those back, newest
  first.
* ``Table.query`` on the table's own key lists and sorts every item of the table, then keeps
  those of the asked partition. The version here hands it that partition's items only; the
  rest of moto's query (range conditions, order, limit, paging, filters, projection) runs
  unchanged. Queries on an index are left alone. The partition is handed over per thread (the
  adapters query several partitions at once from a thread pool).

``lean_moto()`` swaps both in while the block runs. Requests and their answers are the same
(tests/bench/test_moto_lean.py runs the same requests through stock and lean moto and compares
the answers and the tables). Benchmark-only: nothing in the product imports it.
"""
from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterator
from typing import Any


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    # Follows moto 5.2 DynamoDBBackend.transact_write_items (Apache-2.0) step by step; only
    # the backup differs.
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )
    from moto.dynamodb.comparisons import get_filter_expression as filter_expression
    from moto.dynamodb.models.dynamo_type import DynamoType

    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    journal: list[tuple[Any, Any, Any, Any]] = []  # (table, hash value, range value, item before)

    def remember(table_name: str, key: dict[str, Any]) -> None:
        table = self.get_table(table_name)
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        before = table.get_item(hash_value, range_value)
        journal.append((table, hash_value, range_value, copy.deepcopy(before)))

    def roll_back() -> None:
        for table, hash_value, range_value, before in reversed(journal):
            if before is None:
                table.delete_item(hash_value, range_value)
            elif range_value is None:
                table.items[hash_value] = before
            else:
                table.items[hash_value][range_value] = before

    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[Any, Any, Any]] = []
    for item in transact_items:
        original_item: dict[str, Any] | None = None
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            check_unicity(table_name, key)
            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = filter_expression(condition_expression, names, values)
                if not condition_op.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                remember(table_name, key)
            if op_type == "Put":
                self.put_item(table_name, op["Item"], condition_expression=condition_expression,
                              expression_attribute_names=names, expression_attribute_values=values)
            elif op_type == "Delete":
                self.delete_item(table_name, key, condition_expression=condition_expression,
                                 expression_attribute_names=names, expression_attribute_values=values)
            elif op_type == "Update":
                self.update_item(table_name, key, update_expression=op["UpdateExpression"],
                                 condition_expression=condition_expression,
                                 expression_attribute_names=names, expression_attribute_values=values)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            roll_back()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))
        except Exception as e:  # noqa: BLE001 - moto reports any other failure per item
            errors.append((type(e).__name__, str(e), original_item))
    if any(code is not None for code, _, _ in errors):
        roll_back()
        raise TransactionCanceledException(errors)


# the partition a query of this thread reads, by table: the adapters query from several threads
# at once (meta_dynamodb's partition reads), so the partition is handed over per thread
_QUERYING = threading.local()


def _partition_all_items(stock: Callable[..., Any]) -> Callable[..., Any]:
    def all_items(self: Any) -> Any:
        partition = getattr(_QUERYING, "partitions", {}).get(id(self))
        return stock(self) if partition is None else list(partition.values())
    return all_items


def _partition_query(stock: Callable[..., Any]) -> Callable[..., Any]:
    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name is not None or hash_key is None or not self.range_key_attr:
            return stock(self, hash_key, *args, **kwargs)
        partitions = _QUERYING.__dict__.setdefault("partitions", {})
        # moto's query filters all_items() by hash key: hand it this partition's items only
        partitions[id(self)] = self.items.get(hash_key) or {}
        try:
            return stock(self, hash_key, *args, **kwargs)
        finally:
            del partitions[id(self)]
    return query


@contextlib.contextmanager
def lean_moto() -> Iterator[None]:
    """Inside the block moto's DynamoDB uses the journalled TransactWriteItems and queries a
    partition by reading that partition only."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    stock_transact, stock_query, stock_all = DynamoDBBackend.transact_write_items, Table.query, Table.all_items
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    Table.query = _partition_query(stock_query)  # type: ignore[method-assign]
    Table.all_items = _partition_all_items(stock_all)  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.transact_write_items = stock_transact  # type: ignore[method-assign]
        Table.query = stock_query  # type: ignore[method-assign]
        Table.all_items = stock_all  # type: ignore[method-assign]
