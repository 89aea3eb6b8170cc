"""Least privilege, by evaluating template.yaml's policy documents (tests/policy_eval.py): the
query role's own policy and the OpenSearch domain's access policy each refuse every write a
query does not make (bulk writes, deletes, scans, other items), and allow the reads it makes.
Within one account either policy suffices for OpenSearch, so each is checked alone."""

from __future__ import annotations

import pytest

from contract.aws_factories import load_template
from policy_eval import allowed, domain_statements_for, resolve, resource_arns, role_statements

TEMPLATE = load_template()
IAM = {"UseJwt": False, "HasAlarmEmail": False, "NoAlarmEmail": True, "UseEventBridge": False, "MultiAz": False,
       "FineGrainedAccess": False, "UseVpc": False, "ReserveQuery": True, "ReserveReindex": True,
       "UseBedrockReranker": False, "HasAnswerModels": False, "HasDataSourceBuckets": False, "PublicWebAdapter": True, "ReserveStream": True, "CreateRerankEndpoint": False}
JWT = {**IAM, "UseJwt": True}
ARNS = resource_arns(TEMPLATE)
DOMAIN = "arn:aws:es:us-east-1:123456789012:domain/eragraph-dev"
TABLE = ARNS["GraphTable.Arn"]
ROLES = ("IngestRole", "SummarizeRole", "QueryRole", "ReindexRole", "StreamRole")
READERS = ("QueryRole", "StreamRole")  # the query function's and the stream function's


def es(method: str, path: str) -> tuple[str, str]:
    return f"es:ESHttp{method.capitalize()}", f"{DOMAIN}/{path}"


QUERY_MAY = [es("HEAD", "eragraph-nodes"), es("GET", "eragraph-nodes/_mapping"), es("POST", "eragraph-nodes/_search"),
             es("POST", "eragraph-nodes/_count"), es("GET", "eragraph-nodes/_count"), es("POST", "eragraph-nodes/_mget"),
             es("POST", "eragraph-entities/_search"), es("POST", "eragraph-entities/_mget"),
             es("POST", "eragraph-entities/_msearch")]
QUERY_MAY_NOT = [es("POST", "eragraph-nodes/_bulk"), es("PUT", "eragraph-nodes/_bulk"), es("POST", "_bulk"),
                 es("POST", "eragraph-nodes/_delete_by_query"), es("POST", "eragraph-nodes/_update_by_query"),
                 es("DELETE", "eragraph-nodes"), es("DELETE", "eragraph-nodes/_doc/x"), es("PUT", "eragraph-nodes"),
                 es("PUT", "eragraph-nodes/_mapping"), es("POST", "eragraph-nodes/_doc"), es("POST", "_mget"),
                 es("POST", "_msearch"), es("POST", "other-index/_search"), es("GET", "_cat/indices"),
                 es("DELETE", "eragraph-entities")]


@pytest.mark.parametrize("role", READERS)
@pytest.mark.parametrize("conditions", [IAM, JWT], ids=["iam", "jwt"])
@pytest.mark.parametrize("action, resource", QUERY_MAY_NOT)
def test_the_query_role_cannot_write_or_delete_in_opensearch(conditions, action, resource, role):
    assert not allowed(role_statements(TEMPLATE, role, conditions), action, resource)
    assert not allowed(domain_statements_for(TEMPLATE, role, conditions), action, resource)


@pytest.mark.parametrize("role", READERS)
@pytest.mark.parametrize("action, resource", QUERY_MAY)
def test_the_query_role_reads_what_a_query_reads(action, resource, role):
    assert allowed(role_statements(TEMPLATE, role, IAM), action, resource)
    assert allowed(domain_statements_for(TEMPLATE, role, IAM), action, resource)


def leading(key: str) -> dict:
    return {"dynamodb:LeadingKeys": [key]}


@pytest.mark.parametrize("role", READERS)
def test_the_query_role_cannot_delete_bulk_write_or_scan_the_table(role):
    query = role_statements(TEMPLATE, role, IAM)
    for action in ("DeleteItem", "BatchWriteItem", "Scan", "DeleteTable", "UpdateTable", "TransactWriteItems"):
        assert not allowed(query, f"dynamodb:{action}", TABLE, leading("LEDGER")), action
    for key in ("DOC#a", "NODE#n", "T#acme#DOC#a", "T#acme#NODE#n", "COUNT", "TENANTS", "T#acme#SEG#0"):
        for action in ("PutItem", "UpdateItem"):
            assert not allowed(query, f"dynamodb:{action}", TABLE, leading(key)), (action, key)
    for key in ("LEDGER", "T#acme#LEDGER", "LEDGER#HOURS", "T#acme#LEDGER#HOURS", "META", "T#acme#META",
                "RATE#acme", "RATE#-"):
        assert allowed(query, "dynamodb:UpdateItem", TABLE, leading(key)), key
    # the tenant part holds no '#': a document whose id ends so is no ledger, settings or status key
    for key in ("T#acme#DOC#x#LEDGER", "T#acme#DOC#x#META", "T#acme#NODE#n#LEDGER#HOURS", "T#acme#DOC#a#STATUS#b",
                "T#acme#DOC#a#STATUSBY"):
        for action in ("PutItem", "UpdateItem"):
            assert not allowed(query, f"dynamodb:{action}", TABLE, leading(key)), (action, key)
    assert allowed(query, "dynamodb:PutItem", TABLE, leading("T#acme#STATUS#notes/a#1")) is (role == "QueryRole")
    for key in ("STATUS#d1", "T#acme#STATUS#d1", "STATUSBY", "T#acme#STATUSBY"):  # POST /documents: received
        assert allowed(query, "dynamodb:PutItem", TABLE, leading(key)) is (role == "QueryRole"), key
    for action in ("GetItem", "BatchGetItem", "Query"):
        assert allowed(query, f"dynamodb:{action}", TABLE)
    assert allowed(query, "dynamodb:Query", f"{TABLE}/index/BySource")


def test_the_evaluator_would_see_the_old_grants():
    """The domain policy as it was (every role, every method, domain/*): the evaluator allows
    the bulk write and the deletion, so the tests above can fail."""
    old = [{"Effect": "Allow", "Action": ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut",
                                          "es:ESHttpDelete"], "Resource": f"{DOMAIN}/*"}]
    assert allowed(old, *es("POST", "eragraph-nodes/_bulk")) and allowed(old, *es("DELETE", "eragraph-nodes"))
    old_table = [{"Effect": "Allow", "Action": ["dynamodb:Scan", "dynamodb:PutItem"], "Resource": [TABLE]}]
    assert allowed(old_table, "dynamodb:PutItem", TABLE, leading("DOC#a"))
    deny = old + [{"Effect": "Deny", "Action": "es:*", "Resource": f"{DOMAIN}/eragraph-nodes*"}]
    assert not allowed(deny, *es("POST", "eragraph-nodes/_search"))


def test_writers_write_and_only_the_reindex_deletes():
    for role in ("IngestRole", "SummarizeRole", "ReindexRole"):
        for policy in (role_statements(TEMPLATE, role, IAM), domain_statements_for(TEMPLATE, role, IAM)):
            assert allowed(policy, *es("POST", "eragraph-nodes/_bulk")), role
            assert allowed(policy, *es("PUT", "eragraph-entities")), role
            assert not allowed(policy, *es("POST", "_bulk")), role  # explicit index: off
            assert not allowed(policy, *es("POST", "another/_bulk")), role
            assert allowed(policy, *es("DELETE", "eragraph-nodes")) is (role == "ReindexRole")
    settings = TEMPLATE["Resources"]["SearchDomain"]["Properties"]["AdvancedOptions"]
    assert settings["rest.action.multi.allow_explicit_index"] == "false"


def test_each_domain_statement_names_one_role():
    policy = resolve(TEMPLATE["Resources"]["SearchDomain"]["Properties"]["AccessPolicies"], TEMPLATE, IAM)
    principals = [s["Principal"]["AWS"] for s in policy["Statement"]]
    assert all(isinstance(p, str) for p in principals)
    assert set(principals) == {ARNS[f"{r}.Arn"] for r in ROLES}


def test_logs_go_to_the_roles_own_log_group_only():
    groups = {"IngestRole": "ingest", "SummarizeRole": "summarize", "QueryRole": "query", "ReindexRole": "reindex",
              "StreamRole": "stream"}
    for role, own in groups.items():
        managed = TEMPLATE["Resources"][role]["Properties"]["ManagedPolicyArns"]
        assert not any("AWSLambdaBasicExecutionRole" in str(m) for m in managed), role
        statements = role_statements(TEMPLATE, role, IAM)
        for name in groups.values():
            stream = f"arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/eragraph-dev-{name}:log-stream:s1"
            assert allowed(statements, "logs:PutLogEvents", stream) is (name == own), (role, name)
        assert not allowed(statements, "logs:CreateLogGroup", "arn:aws:logs:us-east-1:123456789012:log-group:x")


@pytest.mark.parametrize("role", READERS)
def test_tag_reads_are_scoped_to_the_tenant_principal_path(role):
    path = TEMPLATE["Parameters"]["TenantPrincipalPath"]["Default"]
    query = role_statements(TEMPLATE, role, IAM)
    assert allowed(query, "iam:ListRoleTags", f"arn:aws:iam::123456789012:role{path}reader")
    assert allowed(query, "iam:ListUserTags", f"arn:aws:iam::123456789012:user{path}team/alice")
    assert not allowed(query, "iam:ListRoleTags", "arn:aws:iam::123456789012:role/admin")
    assert not allowed(query, "iam:ListUserTags", "arn:aws:iam::123456789012:user/alice")
    # JWT mode: the query function reads no tags; the stream function's URL is IAM-only, so it does
    assert allowed(role_statements(TEMPLATE, role, JWT), "iam:ListRoleTags",
                   f"arn:aws:iam::123456789012:role{path}reader") is (role == "StreamRole")


def test_a_tenant_deletion_may_remove_object_versions_under_tenants_only():
    reindex = role_statements(TEMPLATE, "ReindexRole", IAM)
    bucket = ARNS["DocumentsBucket.Arn"]
    assert allowed(reindex, "s3:DeleteObjectVersion", f"{bucket}/tenants/acme/a.txt")
    assert not allowed(reindex, "s3:DeleteObjectVersion", f"{bucket}/docs/a.txt")
    assert allowed(reindex, "s3:ListBucketVersions", bucket, {"s3:prefix": "tenants/acme/"})
    assert not allowed(reindex, "s3:ListBucketVersions", bucket, {"s3:prefix": "docs/"})


MODEL = "arn:aws:bedrock:us-east-1::foundation-model/"
RERANK = {**IAM, "UseBedrockReranker": True}


@pytest.mark.parametrize("role", READERS)
def test_rerank_is_granted_only_with_the_bedrock_reranker_and_on_its_model_only(role):
    model = TEMPLATE["Parameters"]["RerankModelId"]["Default"]
    off, on = role_statements(TEMPLATE, role, IAM), role_statements(TEMPLATE, role, RERANK)
    assert not allowed(off, "bedrock:Rerank", "*") and not allowed(off, "bedrock:InvokeModel", MODEL + model)
    assert allowed(on, "bedrock:Rerank", "*") and allowed(on, "bedrock:InvokeModel", MODEL + model)
    assert not allowed(on, "bedrock:InvokeModel", MODEL + "cohere.rerank-v3-5:0")  # the chosen model only
    assert not allowed(on, "bedrock:InvokeModel", MODEL + "anthropic.claude-3-opus-20240229-v1:0")


def test_the_stream_role_streams_the_answer_model_and_only_the_allowed_others():
    text = TEMPLATE["Parameters"]["TextModelId"]["Default"]
    stream = role_statements(TEMPLATE, "StreamRole", IAM)
    assert allowed(stream, "bedrock:InvokeModelWithResponseStream", MODEL + text)
    assert not allowed(stream, "bedrock:InvokeModelWithResponseStream", MODEL + "amazon.nova-pro-v1:0")
    assert not allowed(stream, "bedrock:InvokeModel", MODEL + text)  # it answers by ConverseStream only
    for action in ("dynamodb:Scan", "dynamodb:DeleteItem", "s3:GetObject", "s3:PutObject", "sqs:SendMessage"):
        assert not allowed(stream, action, "*"), action


def test_the_query_role_reads_the_app_clients_of_the_jwt_issuers_pool_only():
    """claim_guard reads the issuer's app clients; no other pool's (DescribeUserPoolClient shows secrets)."""
    pool = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/"
    issuer = {"JwtIssuer": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Abc123"}
    jwt, iam = role_statements(TEMPLATE, "QueryRole", JWT, issuer), role_statements(TEMPLATE, "QueryRole", IAM, issuer)
    for action in ("cognito-idp:ListUserPoolClients", "cognito-idp:DescribeUserPoolClient"):
        assert allowed(jwt, action, pool + "us-east-1_Abc123")
        assert not allowed(jwt, action, pool + "us-east-1_Other9")
        assert not allowed(iam, action, pool + "us-east-1_Abc123")
    assert not allowed(jwt, "cognito-idp:UpdateUserPoolClient", pool + "us-east-1_Abc123")
