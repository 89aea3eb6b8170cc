"""The deployed functions under the template's default tenancy parameters, end to end: uploads
under ``tenants/acme/`` pass the bucket's own notification filter (the template's, applied by
moto) and land in tenant acme; a caller whose IAM role is tagged acme reads them and nothing of
the default tenant; a caller whose identity names no tenant is refused (TenantRequired=true)."""

from __future__ import annotations

import copy
import json

import iam_judge
import pytest
from lambda_support import event

import deployed as dp
from deployed import SMALL_GRAPH, drain_summarize, upload_and_ingest
from test_deployed_handlers import QUESTION, sample_documents

# the template's tenancy defaults (no ERAGRAPH_TENANT_REQUIRED override: "true" from the template)
DEFAULTS = {k: v for k, v in SMALL_GRAPH.items() if not k.startswith("ERAGRAPH_TENANT_")}


def test_the_template_default_fails_closed():
    template = dp.load_template(dp.ROOT / "template.yaml")
    assert template["Parameters"]["TenantRequired"]["Default"] == "true"


@pytest.fixture(scope="module")
def functions(launch):
    return {name: launch(name, DEFAULTS) for name in ("ingest", "summarize", "query")}


@pytest.fixture(scope="module")
def uploaded(cloud, functions):
    docs = sorted(sample_documents().items())
    tenant_docs = {key.replace("docs/", "tenants/acme/", 1): text for key, text in docs[::2]}
    default_docs = dict(docs[1::2])
    delivered = upload_and_ingest(cloud, functions["ingest"], {**tenant_docs, **default_docs})
    drain_summarize(cloud, functions["summarize"])
    import boto3

    iam = boto3.client("iam", endpoint_url=cloud.endpoint, region_name=dp.REGION,
                       **{k.lower(): v for k, v in dp.FAKE_CREDENTIALS.items()})
    iam.create_role(Path="/eragraph/", RoleName="acme-reader", AssumeRolePolicyDocument="{}",
                    Tags=[{"Key": "eragraph-tenant", "Value": "acme"}])
    iam.create_role(Path="/eragraph/", RoleName="untagged-reader", AssumeRolePolicyDocument="{}")
    return {"tenant": tenant_docs, "default": default_docs, "delivered": delivered}


def query_as(query_fn, role: str, text: str = QUESTION) -> tuple[int, dict]:
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["requestContext"]["authorizer"]["iam"]["userArn"] = f"arn:aws:sts::{dp.ACCOUNT}:assumed-role/{role}/s"
    ev["body"] = json.dumps({"query": text, "k": 10})
    out = query_fn.result(ev)
    return out["statusCode"], json.loads(out["body"])


def test_tenant_uploads_pass_the_templates_notification_filter(uploaded):
    # every upload's event reached the ingest queue (plus S3's test event of the configuration)
    assert uploaded["delivered"] >= len(uploaded["tenant"]) + len(uploaded["default"])


def test_a_tagged_caller_reads_its_tenant_only(cloud, functions, uploaded):
    status, body = query_as(functions["query"], "acme-reader")
    assert status == 200, body
    sources = {r["source"] for r in body["results"]} - {""}  # summaries have no source
    assert sources and all(s.startswith(f"s3://{cloud.bucket}/tenants/acme/") for s in sources), sources


@pytest.mark.parametrize("role", ["untagged-reader", "no-such-role"])
def test_a_caller_without_a_tenant_gets_403(functions, uploaded, role):
    # a role that does not exist is under no path the query role may read: IAM refuses the tag
    # read (AccessDenied, where moto says NoSuchEntity); either way the caller has no tenant
    with iam_judge.captured() as refused:
        status, body = query_as(functions["query"], role)
    assert status == 403, body
    assert (refused == []) is (role == "untagged-reader"), refused
    assert all("iam:ListRoleTags on arn:aws:iam::123456789012:role/no-such-role" in r for r in refused), refused
    assert "names no tenant" in body["message"]
