"""moto's DynamoDB keeps a backup of each table a TransactWriteItems names, for the rollback, by
deep-copying the table once for every item of the transaction (moto 5.2.5: up to 100 copies of the
same table, all made before the first write, the last one kept). ``install`` makes that one copy
per table and transaction: the same backup, so the same behaviour, at the cost of one copy. The
tests whose stores write in transactions (every put of nodes, every region) spent most of their
time in those copies, the more the larger the table.

tests/conftest.py installs it in the test process, where the moto mocks and servers run."""

from __future__ import annotations

import copy
import inspect
import threading
from typing import Any

_local = threading.local()


class _OneCopyPerTransaction:
    """Stands for the ``copy`` module in moto.dynamodb.models: within a transaction, a table
    already copied is not copied again."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, obj: Any, memo: dict | None = None) -> Any:
        copies = getattr(_local, "copies", None)
        if copies is None or memo is not None or not isinstance(obj, self._table_type):
            return copy.deepcopy(obj, memo)
        if id(obj) not in copies:
            copies[id(obj)] = (obj, copy.deepcopy(obj))  # the table is held, so its id stays its own
        return copies[id(obj)][1]


def install() -> bool:
    """Patch moto's TransactWriteItems if it is the one described above; False if moto is absent
    or makes its backup otherwise (then nothing is changed)."""
    try:
        from moto.dynamodb import models
    except ImportError:
        return False
    original = models.DynamoDBBackend.transact_write_items
    if getattr(original, "one_copy_per_transaction", False):
        return True
    if "original_table_state[table_name] = copy.deepcopy(" not in inspect.getsource(original):
        return False

    def transact_write_items(self, transact_items):
        _local.copies = {}
        try:
            return original(self, transact_items)
        finally:
            _local.copies = None

    transact_write_items.one_copy_per_transaction = True
    models.copy = _OneCopyPerTransaction(models.Table)
    models.DynamoDBBackend.transact_write_items = transact_write_items
    return True
