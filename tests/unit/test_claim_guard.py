"""A JWT tenant claim users could write is refused (bootstrap.claim_guard): with a Cognito issuer,
the API reads every app client of the pool (moto) and trusts the claim only while none lets users
write it; claims that are no user attribute (a pre-token-generation trigger's) are trusted."""

from __future__ import annotations

import pytest

from eragraph.bootstrap.claim_guard import CHECK_TTL_SECONDS, ClaimGuard, cognito_pool, writing_clients
from eragraph.bootstrap.identity import TenantForbidden, TenantIdentity


def jwt_event(claims: dict) -> dict:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims}}}}


@pytest.fixture
def cognito():
    from contract.aws_factories import fake_credentials

    fake_credentials()
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("cognito-idp", region_name="us-east-1")
        pool = client.create_user_pool(PoolName="users", Schema=[
            {"Name": "tenant", "AttributeDataType": "String", "Mutable": False}])["UserPool"]["Id"]
        yield client, pool


def issuer(pool: str) -> str:
    return f"https://cognito-idp.us-east-1.amazonaws.com/{pool}"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def identity(client, pool: str, claim: str = "custom:tenant", clock=None) -> TenantIdentity:
    guard = ClaimGuard(claim, issuer(pool), client=client, clock=clock or Clock())
    return TenantIdentity(claim=claim, claim_guard=guard)


def test_a_claim_the_api_client_excludes_but_another_client_lets_users_write_is_refused(cognito):
    client, pool = cognito
    client.create_user_pool_client(UserPoolId=pool, ClientName="api", WriteAttributes=["email"])
    other = client.create_user_pool_client(UserPoolId=pool, ClientName="app",
                                           WriteAttributes=["email", "custom:tenant"])["UserPoolClient"]["ClientId"]
    with pytest.raises(TenantForbidden, match="can be written by its users") as refused:
        identity(client, pool).tenant(jwt_event({"custom:tenant": "acme"}))
    assert pool not in str(refused.value) and other not in str(refused.value)  # the detail stays in the log


def test_a_client_without_write_attributes_writes_every_attribute_so_the_claim_is_refused(cognito):
    client, pool = cognito
    client.create_user_pool_client(UserPoolId=pool, ClientName="api")
    with pytest.raises(TenantForbidden):
        identity(client, pool).tenant(jwt_event({"custom:tenant": "acme"}))
    with pytest.raises(TenantForbidden):  # a standard attribute is the user's too
        identity(client, pool, claim="email").tenant(jwt_event({"email": "acme"}))


def test_a_claim_no_client_may_write_is_the_tenant(cognito):
    client, pool = cognito
    client.create_user_pool_client(UserPoolId=pool, ClientName="api", WriteAttributes=["email"])
    client.create_user_pool_client(UserPoolId=pool, ClientName="admin", WriteAttributes=["name"])
    assert identity(client, pool).tenant(jwt_event({"custom:tenant": "acme"})) == "acme"


def test_a_claim_set_by_a_trigger_is_no_attribute_and_is_trusted(cognito):
    client, pool = cognito
    client.create_user_pool_client(UserPoolId=pool, ClientName="api")  # writes every attribute
    assert identity(client, pool, claim="tenant").tenant(jwt_event({"tenant": "acme"})) == "acme"


def test_the_verdict_is_read_again_after_the_ttl(cognito):
    client, pool = cognito
    made = client.create_user_pool_client(UserPoolId=pool, ClientName="api", WriteAttributes=["email"])
    clock = Clock()
    caller = identity(client, pool, clock=clock)
    assert caller.tenant(jwt_event({"custom:tenant": "acme"})) == "acme"
    client.update_user_pool_client(UserPoolId=pool, ClientId=made["UserPoolClient"]["ClientId"],
                                   WriteAttributes=["email", "custom:tenant"])
    assert caller.tenant(jwt_event({"custom:tenant": "acme"})) == "acme"  # cached
    clock.now += CHECK_TTL_SECONDS + 1
    with pytest.raises(TenantForbidden):
        caller.tenant(jwt_event({"custom:tenant": "acme"}))


def test_a_pool_that_cannot_be_read_refuses_the_claim(cognito):
    client, _ = cognito
    with pytest.raises(TenantForbidden):
        identity(client, "us-east-1_Missing1").tenant(jwt_event({"custom:tenant": "acme"}))


def test_other_issuers_and_iam_callers_are_not_checked():
    assert cognito_pool("https://example.auth0.com/") is None
    assert cognito_pool("https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab12/") == ("eu-west-1", "eu-west-1_Ab12")
    assert ClaimGuard("custom:tenant", "https://example.auth0.com/").problem() is None
    assert writing_clients([{"ClientId": "a", "WriteAttributes": ["custom:tenant"]}], "cognito:groups") == []


def test_from_env_checks_the_issuer_it_is_given():
    env = {"ERAGRAPH_TENANT_CLAIM": "custom:tenant",
           "ERAGRAPH_JWT_ISSUER": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Abc123"}
    guard = TenantIdentity.from_env(env).claim_guard
    assert guard is not None and guard.pool == ("us-east-1", "us-east-1_Abc123")
    assert TenantIdentity.from_env({"ERAGRAPH_TENANT_CLAIM": "custom:tenant"}).claim_guard is None
