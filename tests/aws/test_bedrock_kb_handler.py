"""boto3's ``bedrock-agent-runtime`` client, unchanged, against the query Lambda handler: a
``before-send`` hook turns each prepared request into the API Gateway (payload v2) event of the
caller's identity, calls functions/query/app.handler and hands its response back to botocore.
Each tenant retrieves from its own knowledge base only; another tenant's id is refused."""

from __future__ import annotations

import json

import pytest
from kb_support import kb_client
from test_tenants_api import A_WORDS, B_WORDS, http_event, jwt, tenant_env, two_tenants  # noqa: F401 (fixtures)

from aws_helpers import load_handler
from eragraph.domain.knowledge_base import knowledge_base_id


def client_as(tenant: str | None, lambda_context):
    """A bedrock-agent-runtime client whose requests reach the query handler as ``tenant``."""
    handler = load_handler("query").handler
    return kb_client(lambda ev: handler(ev, lambda_context),
                     lambda method, path, body: http_event(method, path, body, authorizer=jwt(tenant)))


def test_each_tenant_retrieves_from_its_own_knowledge_base_only(two_tenants, lambda_context):
    a = client_as("a", lambda_context)
    out = a.retrieve(knowledgeBaseId=knowledge_base_id("a"),
                     retrievalQuery={"text": "Which comet did Starglass follow?"},
                     retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 3,
                                                                           "overrideSearchType": "SEMANTIC"}})
    shown = json.dumps(out["retrievalResults"])
    assert any(w in shown for w in A_WORDS) and not any(w in shown for w in B_WORDS)
    top = out["retrievalResults"][0]
    assert top["location"]["type"] == "S3" and top["location"]["s3Location"]["uri"].startswith("s3://")
    # b's id, asked by a: refused as an id of no tenant is (so a caller cannot learn which tenants
    # exist), and nothing of b's shows
    with pytest.raises(a.exceptions.ResourceNotFoundException) as info:
        a.retrieve(knowledgeBaseId=knowledge_base_id("b"), retrievalQuery={"text": "Quillorn lighthouse"})
    assert not any(w in str(info.value) for w in B_WORDS)
    with pytest.raises(a.exceptions.ResourceNotFoundException):  # the default tenant is another tenant too
        a.retrieve(knowledgeBaseId=knowledge_base_id(""), retrievalQuery={"text": "Quillorn"})
    with pytest.raises(a.exceptions.ResourceNotFoundException):  # an id of no tenant
        a.retrieve(knowledgeBaseId=knowledge_base_id("nobody"), retrievalQuery={"text": "Quillorn"})
    b = client_as("b", lambda_context)
    out = b.retrieve(knowledgeBaseId=knowledge_base_id("b"), retrievalQuery={"text": "Quillorn lighthouse"},
                     retrievalConfiguration={"vectorSearchConfiguration": {"overrideSearchType": "HYBRID"}})
    assert any(w in json.dumps(out["retrievalResults"]) for w in B_WORDS)
