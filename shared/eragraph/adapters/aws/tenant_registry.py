"""The deployment's tenant registry on DynamoDB (ports.TenantRegistry): one ``TENANTS`` /
``T#<id>`` item per tenant in the default namespace of the graph table, read strongly
consistent (a deletion elsewhere is seen at once)."""

from __future__ import annotations

import json
import time
from typing import Any

REGISTRY_PK = "TENANTS"


class DynamoTenantRegistry:
    def __init__(self, item: Any) -> None:
        self.item = item  # the graph table's pynamodb model (DynamoGraphStore.Item), default namespace

    def register_tenant(self, tenant: str) -> None:
        self.item(PK=REGISTRY_PK, SK=f"T#{tenant}", value=json.dumps({"created": time.time()})).save()

    def has_tenant(self, tenant: str) -> bool:
        try:
            self.item.get(REGISTRY_PK, f"T#{tenant}", consistent_read=True)
            return True
        except self.item.DoesNotExist:
            return False

    def tenants(self) -> list[str]:
        return sorted(i.SK[2:] for i in self.item.query(REGISTRY_PK, consistent_read=True))

    def forget_tenant(self, tenant: str) -> None:
        self.item(PK=REGISTRY_PK, SK=f"T#{tenant}").delete()
