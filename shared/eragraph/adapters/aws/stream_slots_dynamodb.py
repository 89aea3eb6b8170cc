"""Open streams per tenant across every stream function environment, in the graph table: one item
per tenant, ``PK = RATE#<tenant>`` (``RATE#-`` the default tenant; the rate limiter's partition,
which the stream role may write), ``SK = STREAMS``, holding the tenant's leases (a map: lease id
-> when it lapses). A stream reads it consistently and writes it back on the condition that no
other stream wrote it meanwhile (domain.stream_slots is the arithmetic); its end removes its
lease. A lease lapses after LEASE_SECONDS, above the stream function's timeout (template.yaml),
so an environment stopped mid-answer frees its slot by then."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from ...domain.rate_limit import LimitStoreUnavailable
from ...domain.stream_slots import SlotDecision, open_slot
from .rate_limit_dynamodb import ATTEMPTS, THROTTLED

LOG = logging.getLogger(__name__)
LEASE_SECONDS = 180.0  # the stream function's Timeout (120 s) and a margin


class DynamoStreamSlots:
    def __init__(self, table: str, client: Any, limit: int, clock: Callable[[], float] = time.time,
                 lease_seconds: float = LEASE_SECONDS) -> None:
        self.table, self.client, self.limit, self.clock, self.lease_seconds = table, client, limit, clock, lease_seconds

    @staticmethod
    def key(tenant: str) -> dict[str, dict[str, str]]:
        return {"PK": {"S": f"RATE#{tenant or '-'}"}, "SK": {"S": "STREAMS"}}

    def acquire(self, tenant: str) -> tuple[SlotDecision, str]:
        """(the decision, the lease id to release when the stream ends). DynamoDB's throttling
        is a refusal to retry after a second, as the rate limiter's; any other error raises."""
        lease = uuid.uuid4().hex
        key = self.key(tenant)
        decision = SlotDecision(False, {}, 1)
        for _ in range(ATTEMPTS):
            try:
                item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            except Exception as exc:  # botocore's ClientError, without importing botocore here
                if _code(exc) in THROTTLED:
                    return SlotDecision(False, {}, 1), lease
                LOG.error("the open streams of tenant %r could not be read or written", tenant, exc_info=True)
                raise LimitStoreUnavailable() from exc
            leases = {k: float(v["N"]) for k, v in ((item or {}).get("leases", {}).get("M") or {}).items()}
            decision = open_slot(leases, self.clock(), self.limit, lease, self.lease_seconds)
            if not decision.allowed:
                return decision, lease
            version = int((item or {}).get("v", {}).get("N", "0"))
            condition = ({"ConditionExpression": "attribute_not_exists(PK)"} if item is None else
                         {"ConditionExpression": "v = :seen", "ExpressionAttributeValues": {":seen": {"N": str(version)}}})
            try:
                self.client.put_item(TableName=self.table, Item={
                    **key, "v": {"N": str(version + 1)},
                    "leases": {"M": {k: {"N": repr(v)} for k, v in decision.leases.items()}}}, **condition)
                return decision, lease
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # another stream of this tenant opened or closed meanwhile: read again
            except Exception as exc:
                if _code(exc) in THROTTLED:
                    return SlotDecision(False, {}, 1), lease
                LOG.error("the open streams of tenant %r could not be read or written", tenant, exc_info=True)
                raise LimitStoreUnavailable() from exc
        return SlotDecision(False, decision.leases, 1), lease

    def release(self, tenant: str, lease: str) -> None:
        """Remove the lease (a failure leaves it to lapse)."""
        try:
            self.client.update_item(TableName=self.table, Key=self.key(tenant),
                                    UpdateExpression="REMOVE leases.#lease ADD v :one",
                                    ExpressionAttributeNames={"#lease": lease},
                                    ExpressionAttributeValues={":one": {"N": "1"}},
                                    ConditionExpression="attribute_exists(PK)")
        except Exception:  # noqa: BLE001 (the lease lapses on its own)
            LOG.warning("a stream's lease of tenant %r was not removed; it lapses", tenant,
                                                exc_info=True)


def _code(exc: Exception) -> str:
    return (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")
