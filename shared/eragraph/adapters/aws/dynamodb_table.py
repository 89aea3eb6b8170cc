"""What every DynamoDB store of the graph table shares: the batch and transaction limits, the
test of a lost condition, an item's size, and the base class of the graph store's parts (its
model, a strongly consistent read, the model's own connection)."""

from __future__ import annotations

from typing import Any

from .models import TableModels

TRANSACT_LIMIT = 100
BATCH_GET = 100


def item_bytes(attrs: dict[str, Any]) -> int:
    """An upper estimate of a DynamoDB item's size: names and UTF-8 strings as their bytes, a
    number 21 bytes at most, a list 3 bytes plus 1 per element plus the elements."""
    def size(value) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return len(value.encode("utf-8"))
        if isinstance(value, bool):
            return 1
        if isinstance(value, (int, float)):
            return 21
        if isinstance(value, (list, tuple)):
            return 3 + sum(1 + size(v) for v in value)
        return len(str(value).encode("utf-8"))
    return sum(len(k.encode("utf-8")) + size(v) for k, v in attrs.items() if v is not None)


def _is_condition_failure(exc: Exception) -> bool:
    code = getattr(exc, "cause_response_code", None)
    if code in ("ConditionalCheckFailedException", "TransactionCanceledException"):
        reasons = getattr(exc, "cancellation_reasons", None) or []
        if code == "TransactionCanceledException" and reasons:
            return any(r is not None and r.code == "ConditionalCheckFailed" for r in reasons)
        return True
    return False


def _is_lost_race(exc: Exception) -> bool:
    """A lost condition, or a transaction cancelled because another one held one of its items
    (``TransactionConflict``): either way the writer re-reads and tries again."""
    if _is_condition_failure(exc):
        return True
    reasons = getattr(exc, "cancellation_reasons", None) or []
    return any(r is not None and r.code == "TransactionConflict" for r in reasons)


class DynamoTable:
    """The graph table as the store's parts (meta_dynamodb, documents_dynamodb,
    status_dynamodb, nodes_dynamodb) read it; graph_dynamodb.DynamoGraphStore sets both."""

    models: TableModels
    Item: Any

    def _get(self, pk: str, sk: str):
        try:
            return self.Item.get(pk, sk, consistent_read=True)
        except self.Item.DoesNotExist:
            return None

    def _batch_get(self, keys: list[tuple[str, str]]) -> list[Any]:
        """The items of ``keys`` that exist (BatchGetItem, BATCH_GET keys a request, strongly
        consistent like ``_get``), in no particular order."""
        out: list[Any] = []
        for start in range(0, len(keys), BATCH_GET):
            out += self.Item.batch_get(keys[start:start + BATCH_GET], consistent_read=True)
        return out

    def _raw_get(self, pk: str, sk: str) -> dict[str, Any] | None:
        """The item at (pk, sk) with every attribute, as DynamoDB returns it (None: absent),
        strongly consistent: the model drops the attributes it does not declare."""
        return self.Item._get_connection().get_item(self.Item.PK.serialize(pk), sk, consistent_read=True).get("Item")

    def _raw_query(self, pk: str):
        """(model item, raw item) of every item of partition ``pk``, strongly consistent: the
        raw one keeps the attributes the model does not declare (ref_counts' counts)."""
        conn = self.Item._get_connection()
        key = self.Item.PK.serialize(pk)
        start = None
        while True:
            page = conn.query(key, consistent_read=True, exclusive_start_key=start)
            for raw in page.get("Items", []):
                yield self.Item.from_raw_data(raw), raw
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _connection(self):
        """The model's own connection (one botocore client for every request of this store; a
        client per transaction cost its creation each time, and hid the transactions from
        anything watching the model's client)."""
        return self.Item._get_connection().connection
