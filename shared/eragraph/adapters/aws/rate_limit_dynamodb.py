"""The per-tenant token buckets of the query API in the graph table: one item per tenant,
``PK = RATE#<tenant>`` (``RATE#-`` the default tenant), ``SK = BUCKET``, read consistently and
written back on the condition that no other request wrote it meanwhile (domain.rate_limit is
the arithmetic). The query role may write these keys and its ledger's only (template.yaml:
dynamodb:LeadingKeys)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ...domain.rate_limit import Bucket, Decision, LimitStoreUnavailable, take

LOG = logging.getLogger(__name__)

ATTEMPTS = 4  # conditional writes lost to concurrent requests of one tenant before refusing
# DynamoDB's answers that mean "too many requests now": the caller is refused with a 429 and a
# retry time, never a 500
THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
                       "TransactionConflictException"})
THROTTLED_RETRY_AFTER = 1


class DynamoRateLimiter:
    def __init__(self, table: str, client: Any, rate: float, burst: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.table, self.client, self.rate, self.burst, self.clock = table, client, rate, burst, clock

    @staticmethod
    def key(tenant: str) -> dict[str, dict[str, str]]:
        return {"PK": {"S": f"RATE#{tenant or '-'}"}, "SK": {"S": "BUCKET"}}

    def acquire(self, tenant: str) -> Decision:
        try:
            return self._acquire(tenant)
        except Exception as exc:  # botocore's ClientError, without importing botocore here
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")
            if code not in THROTTLED:
                LOG.error("the rate bucket of tenant %r could not be read or written", tenant, exc_info=True)
                raise LimitStoreUnavailable() from exc
            return Decision(False, Bucket(0.0, self.clock()), THROTTLED_RETRY_AFTER)

    def _acquire(self, tenant: str) -> Decision:
        key = self.key(tenant)
        bucket = None
        for _ in range(ATTEMPTS):
            item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            bucket = None if item is None else Bucket(float(item["tokens"]["N"]), float(item["at"]["N"]))
            decision = take(bucket, self.clock(), self.rate, self.burst)
            if not decision.allowed:
                return decision
            condition = ({"ConditionExpression": "attribute_not_exists(PK)"} if item is None else
                         {"ConditionExpression": "#at = :seen", "ExpressionAttributeNames": {"#at": "at"},
                          "ExpressionAttributeValues": {":seen": item["at"]}})
            try:
                self.client.put_item(TableName=self.table, Item={
                    **key, "tokens": {"N": repr(decision.bucket.tokens)}, "at": {"N": repr(decision.bucket.at)}},
                    **condition)
                return decision
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # another request of this tenant took a token meanwhile: read again
        return Decision(False, bucket or Bucket(0.0, self.clock()), 1)
