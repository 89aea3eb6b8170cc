"""The deployment's tenant registry on DynamoDB (ports.TenantRegistry): one ``TENANTS`` /
``T#<id>`` item per tenant in the default namespace of the graph table, read strongly
consistent (a deletion elsewhere is seen at once). Beside them, ``TENANTS`` / ``A#<id>`` items
hold each tenant's audit clock (``A#`` alone: the default tenant): ``audited``, the end of its
last whole audit, or ``since``, when the clock started for a tenant never audited; so the
reindex fan-out reads every tenant and every audit time in one query."""

from __future__ import annotations

import json
import time
from typing import Any

from pynamodb.exceptions import PutError

REGISTRY_PK = "TENANTS"
TENANT = "T#"
AUDIT = "A#"


class DynamoTenantRegistry:
    def __init__(self, item: Any) -> None:
        self.item = item  # the graph table's pynamodb model (DynamoGraphStore.Item), default namespace

    def register_tenant(self, tenant: str) -> None:
        self.item(PK=REGISTRY_PK, SK=f"{TENANT}{tenant}", value=json.dumps({"created": time.time()})).save()

    def has_tenant(self, tenant: str) -> bool:
        try:
            self.item.get(REGISTRY_PK, f"{TENANT}{tenant}", consistent_read=True)
            return True
        except self.item.DoesNotExist:
            return False

    def tenants(self) -> list[str]:
        return sorted(i.SK[len(TENANT):] for i in self.item.query(REGISTRY_PK, self.item.SK.startswith(TENANT),
                                                                   consistent_read=True))

    def delete_tenant(self, tenant: str) -> None:
        self.item(PK=REGISTRY_PK, SK=f"{TENANT}{tenant}").delete()
        self.item(PK=REGISTRY_PK, SK=f"{AUDIT}{tenant}").delete()

    def record_audit(self, tenant: str, at: float) -> None:
        self.item(PK=REGISTRY_PK, SK=f"{AUDIT}{tenant}", value=json.dumps({"audited": at})).save()

    def watch_audits(self, tenant: str, at: float) -> None:
        try:
            self.item(PK=REGISTRY_PK, SK=f"{AUDIT}{tenant}", value=json.dumps({"since": at})).save(
                condition=self.item.PK.does_not_exist())
        except PutError as exc:
            if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
                raise

    def audit_since(self) -> dict[str, float]:
        created: dict[str, float] = {}
        audits: dict[str, float] = {}
        for i in self.item.query(REGISTRY_PK, consistent_read=True):
            value = json.loads(i.value) if i.value else {}
            if i.SK.startswith(TENANT):
                created[i.SK[len(TENANT):]] = float(value.get("created", 0.0))
            elif i.SK.startswith(AUDIT):
                audits[i.SK[len(AUDIT):]] = float(value.get("audited", value.get("since", 0.0)))
        return {**created, **audits}
