"""Knowledge base ids (domain.knowledge_base): the shape the Bedrock service model requires,
one per tenant (the default one included), the same on every call, and found back from a list
of tenants."""

from __future__ import annotations

import re

import botocore.session

from eragraph.domain.knowledge_base import is_knowledge_base_id, knowledge_base_id, tenant_of

TENANTS = ["", "acme", "acme-corp", "globex", "x" * 64]


def modelled_pattern() -> str:
    model = botocore.session.get_session().get_service_model("bedrock-agent-runtime")
    return model.shape_for("KnowledgeBaseId").metadata["pattern"]


def test_every_tenant_id_matches_the_service_model_pattern():
    pattern = modelled_pattern()
    for tenant in TENANTS:
        assert re.fullmatch(pattern, knowledge_base_id(tenant)), tenant


def test_ids_are_stable_and_distinct_per_tenant():
    ids = [knowledge_base_id(t) for t in TENANTS]
    assert ids == [knowledge_base_id(t) for t in TENANTS]
    assert len(set(ids)) == len(TENANTS)


def test_the_tenant_is_found_back_from_its_id_and_an_unknown_id_finds_none():
    for tenant in TENANTS:
        assert tenant_of(knowledge_base_id(tenant), TENANTS) == tenant
    assert tenant_of(knowledge_base_id("initech"), TENANTS) is None


def test_shape_check():
    assert is_knowledge_base_id("ABCDE12345") and is_knowledge_base_id("abcde12345")
    assert not any(is_knowledge_base_id(x) for x in ["ABCDE1234", "ABCDE123456", "ABCDE-1234", ""])


def test_a_salted_id_cannot_be_computed_from_the_tenant_name_alone():
    salted = {t: knowledge_base_id(t, "deployment-secret") for t in TENANTS}
    pattern = modelled_pattern()
    assert all(re.fullmatch(pattern, kb) for kb in salted.values()) and len(set(salted.values())) == len(TENANTS)
    assert all(salted[t] != knowledge_base_id(t) for t in TENANTS)  # not the unsalted hash of the name
    assert all(salted[t] != knowledge_base_id(t, "another-deployment") for t in TENANTS)
    assert salted == {t: knowledge_base_id(t, "deployment-secret") for t in TENANTS}  # stable
    assert tenant_of(salted["globex"], TENANTS, "deployment-secret") == "globex"
    assert tenant_of(knowledge_base_id("globex"), TENANTS, "deployment-secret") is None


def test_every_caller_of_the_id_uses_the_deployment_s_salt():
    """Through `eragraph serve` with ERAGRAPH_KB_ID_SALT: GET /stats and MCP's stats name the salted
    id, the KB runtime and bedrock-agent routes answer it, and the unsalted id (what anyone can
    compute from a tenant name) is the same 404 as an id of no tenant."""
    import http.client
    import json
    import threading

    import boto3
    import pytest
    from botocore.config import Config
    from support import make_engine

    pytest.importorskip("uvicorn")
    from eragraph.entrypoints.http.server import make_server
    from eragraph.services import ingest

    engine = make_engine(kb_id_salt="deployment-secret")
    ingest.ingest(engine, [ingest.SourceDoc(source="notes/a.txt", text="The harbour master keeps the ferry log.")])
    server = make_server(engine, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", "/stats")
        stats = json.loads(conn.getresponse().read())
        conn.close()
        salted = knowledge_base_id("", "deployment-secret")
        assert stats["knowledge_base_id"] == salted != knowledge_base_id("")
        options = dict(region_name="us-east-1", endpoint_url=server.url, aws_access_key_id="x",
                       aws_secret_access_key="x", config=Config(retries={"max_attempts": 1}))
        runtime, agent = boto3.client("bedrock-agent-runtime", **options), boto3.client("bedrock-agent", **options)
        found = runtime.retrieve(knowledgeBaseId=salted, retrievalQuery={"text": "ferry"})
        assert found["retrievalResults"]
        assert agent.list_data_sources(knowledgeBaseId=salted)["dataSourceSummaries"] == []
        for guessed in (knowledge_base_id(""), knowledge_base_id("globex", "deployment-secret"), "ZZZZZZZZZZ"):
            with pytest.raises(runtime.exceptions.ResourceNotFoundException):
                runtime.retrieve(knowledgeBaseId=guessed, retrievalQuery={"text": "ferry"})
            with pytest.raises(agent.exceptions.ResourceNotFoundException):
                agent.list_data_sources(knowledgeBaseId=guessed)
    finally:
        server.shutdown()
        server.server_close()


def test_a_local_store_salts_its_ids_with_a_secret_of_its_own(tmp_path):
    """A local store keeps a random salt in its root (made once, shared by its tenants), so its
    knowledge-base ids reveal no tenant name; every reader computes the same ids from it, and
    ERAGRAPH_KB_ID_SALT (the setting) overrides it."""
    from dataclasses import replace

    from eragraph.bootstrap import build_engine
    from eragraph.bootstrap.store_access import kb_id_salt
    from eragraph.config import settings_from_env
    from eragraph.domain.knowledge_base import knowledge_base_id
    from eragraph.services.stats import stats

    settings = settings_from_env(embedder="hash")
    first = build_engine("local", tmp_path / "a", settings, tenant="acme")
    salt = first.settings.kb_id_salt
    assert len(salt) == 32 and (tmp_path / "a" / "kb-id-salt").is_file()
    assert stats(first)["knowledge_base_id"] == knowledge_base_id("acme", salt) != knowledge_base_id("acme")
    again = build_engine("local", tmp_path / "a", settings)  # the default tenant of the same store: same salt
    assert again.settings.kb_id_salt == salt == kb_id_salt(tmp_path / "a", settings)
    other = build_engine("local", tmp_path / "b", settings)  # another store: another salt
    assert other.settings.kb_id_salt != salt
    chosen = build_engine("local", tmp_path / "a", replace(settings, kb_id_salt="deployment-secret"))
    assert chosen.settings.kb_id_salt == "deployment-secret"
