"""Tenant ids, a key's tenant, a document's tenant (domain.tenants) and the API caller's tenant
from its identity (bootstrap.identity: JWT claims, a Lambda authorizer's context, an IAM
principal's tag read from IAM, kept for a while per principal)."""

from __future__ import annotations

import pytest

from eragraph.bootstrap.identity import TAG_TTL_SECONDS, TenantForbidden, TenantIdentity, principal_of
from eragraph.domain.filters import MetadataError, check_metadata
from eragraph.domain.model import BadInputError
from eragraph.domain.tenants import DEFAULT, MAX_LENGTH, TenantError, check_tenant, resolve, tenant_of_key

ACCOUNT = "123456789012"


# --------------------------------------------------------------------------- tenant ids

@pytest.mark.parametrize("tenant", ["a", "acme", "acme-corp", "acme_2", "0day", "x" * MAX_LENGTH])
def test_check_tenant_accepts_valid_ids(tenant):
    assert check_tenant(tenant) == tenant


@pytest.mark.parametrize("tenant", ["", "Acme", "-acme", "_acme", "ac me", "acme/x", "acme.corp", "BAD!",
                                    "x" * (MAX_LENGTH + 1), None, 7, ["acme"]])
def test_check_tenant_refuses_invalid_ids(tenant):
    with pytest.raises(TenantError):
        check_tenant(tenant)


def test_tenant_error_is_bad_input():
    assert issubclass(TenantError, BadInputError)


def test_a_long_bad_id_is_cut_in_the_message():
    with pytest.raises(TenantError) as info:
        check_tenant("X" * 10_000)
    assert len(str(info.value)) < 400


# --------------------------------------------------------------------------- a key's tenant

@pytest.mark.parametrize("key, tenant", [
    ("tenants/acme/x.txt", "acme"),
    ("tenants/acme/deep/dir/x.txt", "acme"),
    ("docs/x.txt", DEFAULT),
    ("x.txt", DEFAULT),
    ("tenant/acme/x.txt", DEFAULT),
    ("Tenants/acme/x.txt", DEFAULT),
    ("docs/tenants/acme/x.txt", DEFAULT),
])
def test_tenant_of_key(key, tenant):
    assert tenant_of_key(key) == tenant


@pytest.mark.parametrize("key", ["tenants/BAD!/x", "tenants/Acme/x.txt", "tenants//x.txt", "tenants/x",
                                 "tenants/"])
def test_tenant_of_key_refuses_a_bad_tenant_directory(key):
    with pytest.raises(TenantError):
        tenant_of_key(key)


def test_a_key_naming_no_tenant_directory_says_so():
    with pytest.raises(TenantError, match="names no tenant directory"):
        tenant_of_key("tenants/x")


# --------------------------------------------------------------------------- a document's tenant

def test_resolve_without_a_tenant_attribute_keeps_the_given_tenant():
    assert resolve("", None, "doc") == ("", {})
    assert resolve("acme", {"lang": "en"}, "doc") == ("acme", {"lang": "en"})


def test_resolve_takes_the_attribute_and_removes_it():
    metadata = {"tenant": "acme", "lang": "en"}
    assert resolve("", metadata, "doc") == ("acme", {"lang": "en"})
    assert metadata == {"tenant": "acme", "lang": "en"}  # the caller's mapping is not changed
    assert resolve("acme", metadata, "doc") == ("acme", {"lang": "en"})


def test_resolve_refuses_two_different_tenants_naming_where():
    with pytest.raises(TenantError, match="s3://b/tenants/acme/x.txt"):
        resolve("acme", {"tenant": "other"}, "s3://b/tenants/acme/x.txt")


def test_resolve_refuses_an_invalid_attribute():
    with pytest.raises(TenantError):
        resolve("", {"tenant": "Not Valid"}, "doc")
    with pytest.raises(TenantError):
        resolve("", {"tenant": 3}, "doc")


def test_check_metadata_accepts_a_valid_tenant_and_refuses_a_bad_one():
    assert check_metadata({"tenant": "acme", "lang": "en"}) == {"tenant": "acme", "lang": "en"}
    for bad in ("BAD!", "", 5, ["acme"]):
        with pytest.raises(MetadataError, match="tenant"):
            check_metadata({"tenant": bad})


def test_the_other_built_in_attributes_stay_reserved():
    for key in ("source", "doc_id", "title"):
        with pytest.raises(MetadataError, match="reserved"):
            check_metadata({key: "x"})


# --------------------------------------------------------------------------- the API caller's tenant

def jwt_event(claims: dict) -> dict:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": None}}}}


def lambda_event(context: dict) -> dict:
    return {"requestContext": {"authorizer": {"lambda": context}}}


def iam_event(arn: str) -> dict:
    return {"requestContext": {"authorizer": {"iam": {"accessKey": "ASIAEXAMPLE", "accountId": ACCOUNT,
                                                      "userArn": arn, "userId": "AROAEXAMPLE:me"}}}}


def test_jwt_claim():
    identity = TenantIdentity(required=False)
    assert identity.tenant(jwt_event({"sub": "u1", "tenant": "acme"})) == "acme"
    assert identity.tenant(jwt_event({"sub": "u1"})) == DEFAULT
    assert TenantIdentity(claim="custom:tenant", required=False).tenant(jwt_event({"custom:tenant": "acme", "tenant": "x"})) == "acme"


def test_lambda_authorizer_context():
    identity = TenantIdentity(required=False)
    assert identity.tenant(lambda_event({"tenant": "acme", "user": "u1"})) == "acme"
    assert identity.tenant(lambda_event({"user": "u1"})) == DEFAULT
    assert identity.tenant(lambda_event({"tenant": ""})) == DEFAULT


def test_no_authorizer_is_the_default_tenant():
    identity = TenantIdentity(required=False)
    for event in ({}, {"requestContext": {}}, {"requestContext": {"authorizer": None}},
                  {"requestContext": {"authorizer": {}}}):
        assert identity.tenant(event) == DEFAULT


@pytest.mark.parametrize("value", ["Acme", "BAD!", "../b", "x" * 64, 7, ["acme"], {"id": "acme"}])
def test_an_invalid_tenant_value_is_forbidden(value):
    identity = TenantIdentity(required=False)
    with pytest.raises(TenantForbidden, match="no valid tenant"):
        identity.tenant(jwt_event({"tenant": value}))
    with pytest.raises(TenantForbidden):
        identity.tenant(lambda_event({"tenant": value}))


def test_required_mode_refuses_a_caller_without_tenant():
    identity = TenantIdentity(required=True)
    for event in ({}, jwt_event({"sub": "u1"}), jwt_event({"tenant": ""}), lambda_event({}),
                  iam_event(f"arn:aws:iam::{ACCOUNT}:root")):
        with pytest.raises(TenantForbidden, match="requires one"):
            identity.tenant(event)
    assert identity.tenant(jwt_event({"tenant": "acme"})) == "acme"


def test_tenant_forbidden_is_a_permission_error():
    assert issubclass(TenantForbidden, PermissionError)


def test_from_env():
    identity = TenantIdentity.from_env({"ERAGRAPH_TENANT_CLAIM": "custom:tenant", "ERAGRAPH_TENANT_TAG": "team",
                                        "ERAGRAPH_TENANT_REQUIRED": "True"})
    assert (identity.claim, identity.tag, identity.required) == ("custom:tenant", "team", True)
    default = TenantIdentity.from_env({})  # fail closed unless told otherwise
    assert (default.claim, default.tag, default.required) == ("tenant", "eragraph-tenant", True)
    assert TenantIdentity().required is True
    for word, required in (("1", True), ("yes", True), (" TRUE ", True), ("false", False), ("0", False),
                           ("", True), ("no", False), (" False ", False)):
        assert TenantIdentity.from_env({"ERAGRAPH_TENANT_REQUIRED": word}).required is required, word


@pytest.mark.parametrize("arn, principal", [
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/Role/session", ("role", "Role")),
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/Role/user@example.com", ("role", "Role")),
    (f"arn:aws:iam::{ACCOUNT}:role/Role", ("role", "Role")),
    (f"arn:aws:iam::{ACCOUNT}:role/service-role/Role", ("role", "Role")),
    (f"arn:aws:iam::{ACCOUNT}:user/alice", ("user", "alice")),
    (f"arn:aws:iam::{ACCOUNT}:user/division/alice", ("user", "alice")),
    (f"arn:aws-cn:iam::{ACCOUNT}:user/alice", ("user", "alice")),
    (f"arn:aws:iam::{ACCOUNT}:root", (None, "")),
    (f"arn:aws:sts::{ACCOUNT}:federated-user/bob", (None, "")),
    (f"arn:aws:sts::{ACCOUNT}:assumed-role/Role", (None, "")),
    ("not an arn", (None, "")),
    ("", (None, "")),
])
def test_principal_of(arn, principal):
    assert principal_of(arn) == principal


# ----- IAM principal tags (moto)

class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingIam:
    """The IAM client, counting the tag reads."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls: list[tuple[str, str]] = []

    def list_role_tags(self, RoleName):
        self.calls.append(("role", RoleName))
        return self.client.list_role_tags(RoleName=RoleName)

    def list_user_tags(self, UserName):
        self.calls.append(("user", UserName))
        return self.client.list_user_tags(UserName=UserName)


@pytest.fixture
def iam():
    from contract.aws_factories import fake_credentials

    fake_credentials()
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("iam", region_name="us-east-1")
        client.create_role(RoleName="Reader", AssumeRolePolicyDocument="{}",
                           Tags=[{"Key": "eragraph-tenant", "Value": "acme"}, {"Key": "team", "Value": "x"}])
        client.create_role(RoleName="Untagged", AssumeRolePolicyDocument="{}")
        client.create_role(RoleName="BadTag", AssumeRolePolicyDocument="{}",
                           Tags=[{"Key": "eragraph-tenant", "Value": "Not Valid!"}])
        client.create_user(UserName="alice", Tags=[{"Key": "eragraph-tenant", "Value": "globex"}])
        client.create_user(UserName="bob")
        yield client


def test_iam_assumed_role_tag(iam):
    identity = TenantIdentity(required=False, iam_client=iam)
    assert identity.tenant(iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/session-1")) == "acme"
    assert identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:role/Reader")) == "acme"


def test_iam_user_tag(iam):
    identity = TenantIdentity(required=False, iam_client=iam)
    assert identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:user/alice")) == "globex"


def test_iam_tag_name_is_configurable(iam):
    identity = TenantIdentity(tag="team", required=False, iam_client=iam)
    assert identity.tenant(iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/s")) == "x"


def test_iam_principal_without_the_tag(iam):
    arns = (f"arn:aws:sts::{ACCOUNT}:assumed-role/Untagged/s", f"arn:aws:iam::{ACCOUNT}:user/bob")
    for arn in arns:
        assert TenantIdentity(required=False, iam_client=iam).tenant(iam_event(arn)) == DEFAULT
        with pytest.raises(TenantForbidden, match="requires one"):
            TenantIdentity(required=True, iam_client=iam).tenant(iam_event(arn))


def test_iam_tag_with_an_invalid_tenant_is_forbidden(iam):
    with pytest.raises(TenantForbidden, match="no valid tenant"):
        TenantIdentity(required=False, iam_client=iam).tenant(iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/BadTag/s"))


class DenyingIam:
    """An IAM client whose reads fail as a missing permission does (AccessDenied)."""

    def __init__(self, inner) -> None:
        self.inner, self.deny = inner, True

    def _call(self, name, **kw):
        if self.deny:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, name)
        return getattr(self.inner, name)(**kw)

    def list_role_tags(self, **kw):
        return self._call("list_role_tags", **kw)

    def list_user_tags(self, **kw):
        return self._call("list_user_tags", **kw)


def test_iam_tags_that_cannot_be_read_are_forbidden_never_the_default(iam):
    identity = TenantIdentity(iam_client=DenyingIam(iam))
    with pytest.raises(TenantForbidden, match="could not be read"):
        identity.tenant(iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/s"))
    with pytest.raises(TenantForbidden, match="could not be read"):
        identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:user/nobody"))


def test_a_principal_iam_does_not_know_has_no_tenant(iam):
    """A role of another account is not found here: no tag, so the default tenant, or a 403
    when a tenant is required."""
    arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/NoSuchRole/s"
    assert TenantIdentity(required=False, iam_client=iam).tenant(iam_event(arn)) == ""
    with pytest.raises(TenantForbidden, match="requires one"):
        TenantIdentity(iam_client=iam, required=True).tenant(iam_event(arn))


def test_iam_arn_without_tags_reads_nothing(iam):
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting)
    for arn in (f"arn:aws:iam::{ACCOUNT}:root", "", None, 5):
        assert identity.tenant(iam_event(arn)) == DEFAULT
    assert counting.calls == []


def test_iam_tags_are_cached_per_principal_until_the_ttl(iam):
    clock = Clock()
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting, clock=clock)
    role = iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/s")
    user = iam_event(f"arn:aws:iam::{ACCOUNT}:user/alice")
    assert identity.tenant(role) == "acme"
    assert identity.tenant(user) == "globex"
    assert counting.calls == [("role", "Reader"), ("user", "alice")]
    iam.tag_role(RoleName="Reader", Tags=[{"Key": "eragraph-tenant", "Value": "initech"}])
    iam.untag_user(UserName="alice", TagKeys=["eragraph-tenant"])
    clock.now += TAG_TTL_SECONDS - 1
    assert identity.tenant(role) == "acme"  # cached: the change is not seen yet
    assert identity.tenant(user) == "globex"
    assert len(counting.calls) == 2
    clock.now += 1  # the TTL has passed: read again
    assert identity.tenant(role) == "initech"
    assert identity.tenant(user) == DEFAULT
    assert len(counting.calls) == 4
    clock.now += 10
    assert identity.tenant(role) == "initech" and identity.tenant(user) == DEFAULT
    assert len(counting.calls) == 4  # the fresh reads are cached again


def test_iam_cache_keeps_an_absent_tag_too(iam):
    clock = Clock()
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting, clock=clock)
    event = iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Untagged/s")
    assert identity.tenant(event) == DEFAULT
    iam.tag_role(RoleName="Untagged", Tags=[{"Key": "eragraph-tenant", "Value": "acme"}])
    assert identity.tenant(event) == DEFAULT and len(counting.calls) == 1
    clock.now += TAG_TTL_SECONDS
    assert identity.tenant(event) == "acme" and len(counting.calls) == 2


def test_iam_cache_is_per_principal_every_session_of_a_role_shares_it(iam):
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting, clock=Clock())
    for session in ("s1", "s2", "s1", "s3"):
        assert identity.tenant(iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/{session}")) == "acme"
    assert identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:role/Reader")) == "acme"
    assert counting.calls == [("role", "Reader")]


def test_iam_cache_is_bounded(iam, monkeypatch):
    from eragraph.bootstrap import identity as module

    monkeypatch.setattr(module, "TAG_CACHE_SIZE", 3)
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting, clock=Clock())
    for n in range(10):
        identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:user/u{n}"))
    assert len(identity._tags) == 3
    identity.tenant(iam_event(f"arn:aws:iam::{ACCOUNT}:user/u0"))  # dropped: read again
    assert counting.calls[-1] == ("user", "u0") and len(counting.calls) == 11


def test_a_principal_of_another_account_is_never_looked_up_here(iam):
    """Role "Reader" exists (tagged acme) in the API's account; the same name in another
    account is another principal: no tag read, no tenant."""
    counting = CountingIam(iam)
    event = iam_event("arn:aws:sts::999999999999:assumed-role/Reader/s")
    event["requestContext"]["accountId"] = ACCOUNT
    with pytest.raises(TenantForbidden, match="requires one"):
        TenantIdentity(iam_client=counting).tenant(event)
    assert TenantIdentity(required=False, iam_client=counting).tenant(event) == DEFAULT
    assert counting.calls == []
    own = iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/s")
    own["requestContext"]["accountId"] = ACCOUNT
    assert TenantIdentity(iam_client=counting).tenant(own) == "acme"


def test_each_fallback_to_the_default_tenant_is_logged(caplog):
    identity = TenantIdentity(required=False)
    with caplog.at_level("WARNING", logger="eragraph.bootstrap.identity"):
        assert identity.tenant(jwt_event({"sub": "user-7"})) == DEFAULT
        assert identity.tenant(jwt_event({"sub": "user-8"})) == DEFAULT
        assert identity.tenant(jwt_event({"sub": "user-9", "tenant": "acme"})) == "acme"
    fallbacks = [r for r in caplog.records if "tenant fallback" in r.getMessage()]
    assert [r.caller for r in fallbacks] == ["user-7", "user-8"]


def test_a_failed_read_is_not_cached(iam):
    denying = DenyingIam(iam)
    identity = TenantIdentity(iam_client=denying, clock=Clock())
    event = iam_event(f"arn:aws:sts::{ACCOUNT}:assumed-role/Reader/s")
    with pytest.raises(TenantForbidden):
        identity.tenant(event)
    denying.deny = False
    assert identity.tenant(event) == "acme"  # no TTL wait after a failure


def test_jwt_wins_over_other_authorizer_kinds(iam):
    counting = CountingIam(iam)
    identity = TenantIdentity(required=False, iam_client=counting)
    event = {"requestContext": {"authorizer": {
        "jwt": {"claims": {"tenant": "acme"}},
        "lambda": {"tenant": "other"},
        "iam": {"userArn": f"arn:aws:iam::{ACCOUNT}:user/alice"}}}}
    assert identity.tenant(event) == "acme"
    assert counting.calls == []
