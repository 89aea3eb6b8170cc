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
