"""The identity lookup ports (ports.identity) over IAM and Cognito through boto3: an IAM
principal's tags (ListRoleTags / ListUserTags) and a Cognito user pool's app clients
(ListUserPoolClients, DescribeUserPoolClient). Each client is made on first use (a cold start
that never meets an IAM caller makes none)."""

from __future__ import annotations

from typing import Any

from ...ports.identity import LookupFailed


def _no_such_entity(exc: Exception) -> bool:
    return (getattr(exc, "response", None) or {}).get("Error", {}).get("Code") == "NoSuchEntity"


class IamPrincipalTags:
    """ports.identity.PrincipalTags over IAM (``client``: a boto3 IAM client, else one made for
    ``endpoint``)."""

    def __init__(self, client: Any = None, endpoint: str | None = None) -> None:
        self.client = client
        self.endpoint = endpoint

    def tags(self, kind: str, name: str) -> dict[str, str] | None:
        if self.client is None:
            import boto3

            self.client = boto3.client("iam", endpoint_url=self.endpoint)
        try:
            if kind == "role":
                listed = self.client.list_role_tags(RoleName=name)["Tags"]
            else:
                listed = self.client.list_user_tags(UserName=name)["Tags"]
        except Exception as exc:  # noqa: BLE001 (any failure but a missing principal: LookupFailed)
            if _no_such_entity(exc):  # a principal of another account: it has no tag here
                return None
            raise LookupFailed(type(exc).__name__) from None
        return {t["Key"]: t["Value"] for t in listed if "Key" in t}


class CognitoPoolClients:
    """ports.identity.PoolClients over Cognito (``client``: a boto3 cognito-idp client, else one
    made for ``region`` and ``endpoint``)."""

    def __init__(self, region: str | None = None, client: Any = None, endpoint: str | None = None) -> None:
        self.region = region
        self.client = client
        self.endpoint = endpoint

    def clients(self, pool: str) -> list[dict[str, Any]]:
        try:
            if self.client is None:
                import boto3

                self.client = boto3.client("cognito-idp", region_name=self.region, endpoint_url=self.endpoint)
            out, token = [], None
            while True:
                page = self.client.list_user_pool_clients(UserPoolId=pool, MaxResults=60,
                                                          **({"NextToken": token} if token else {}))
                for listed in page.get("UserPoolClients", []):
                    out.append(self.client.describe_user_pool_client(
                        UserPoolId=pool, ClientId=listed["ClientId"])["UserPoolClient"])
                token = page.get("NextToken")
                if not token:
                    return out
        except Exception as exc:  # noqa: BLE001 (a pool that cannot be read: LookupFailed)
            raise LookupFailed(type(exc).__name__) from None
