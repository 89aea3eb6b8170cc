"""Tenants leak nothing to each other, on the memory and local profiles: three tenants' random
corpora (shared topics, words and entities, colliding document ids), random questions (some
baited with another tenant's words), random filters (some on the ``tenant`` attribute, another
tenant's id among them), every mode; every result and every leaf under a returned summary is
the querying tenant's, inside the filter, and the exact modes return the brute-force top-k
over that tenant's own nodes (tenant_cases.py). ERAGRAPH_TENANT_CASES sets the cases per profile
(default 1,000). Deleting a tenant removes all it had and nothing of the others'."""

from __future__ import annotations

from pathlib import Path

import pytest

from eragraph.bootstrap.local import tenant_store
from eragraph.bootstrap.tenancy import Tenancy
from eragraph.services.modes import mode_names
from tenant_cases import (KB_SEARCH_TYPES, TENANTS, QuotingGenerator, answers_nothing, build_tenants,
                          cases_per_profile, check_delete, check_document_routes, corpora, kb_ask, mcp_ask, oracles, run_kb_generate_cases,
                          run_kb_stream_cases, run_tenant_cases, tenant_settings)
from tenant_doors import check_agent_routes, run_chat_cases

# longer than the suite's per-test limit (pyproject.toml): 1,000 random cases per profile
pytestmark = pytest.mark.timeout(900)

N_DOCS = 16  # per tenant: two or three layers each
N_DELETE_DOCS = 8
DELETE_CASES = 110
VICTIM = "t-a"  # a prefix of "t-ab", which must survive it

# filters on ``tenant`` are drawn for every mode (the built-in attribute is the same in each)
TENANT_FILTER_MODES = tuple(mode_names())


def check_counts(counts, n: int) -> None:
    assert counts.cases == n
    if n >= 4 * len(TENANTS) * len(mode_names()):
        assert all(counts.by_mode.values()) and all(counts.by_tenant.values()), counts
        assert counts.exact_checked and counts.summaries_checked and counts.unfiltered, counts
        assert counts.tenant_filters and counts.nothing_allowed < n, counts


def test_memory_profile_tenants_leak_nothing():
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DOCS, seed=21)
    engines = build_tenants(ten, corpus)
    assert ten.tenants() == ["t-a", "t-ab"]
    n = cases_per_profile()
    check_counts(run_tenant_cases(engines, corpus, n, seed=1, tenant_filter_modes=TENANT_FILTER_MODES), n)


def test_local_profile_tenants_leak_nothing(tmp_path):
    ten = Tenancy("local", store=tmp_path, settings=tenant_settings())
    corpus = corpora(N_DOCS, seed=22)
    engines = build_tenants(ten, corpus)
    assert ten.tenants() == ["t-a", "t-ab"]
    assert sorted(p.name for p in (tmp_path / "tenants").iterdir()) == ["t-a", "t-ab"]
    n = cases_per_profile()
    check_counts(run_tenant_cases(engines, corpus, n, seed=2, tenant_filter_modes=TENANT_FILTER_MODES), n)


def test_mcp_tenants_leak_nothing():
    """The same cases through the MCP retrieve tool, the tenant coming with each request."""
    pytest.importorskip("mcp")
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DOCS, seed=23)
    engines = build_tenants(ten, corpus)
    n = max(cases_per_profile() // 4, 4 * len(TENANTS) * len(mode_names()))
    check_counts(run_tenant_cases(engines, corpus, n, seed=3, tenant_filter_modes=TENANT_FILTER_MODES,
                                  ask=mcp_ask(engines)), n)


def test_bedrock_kb_tenants_leak_nothing():
    """The same cases through Bedrock KB Retrieve (boto3's client, the API's routes), the
    tenant from the caller's JWT claim, each case also naming another tenant's knowledge base id
    (ResourceNotFoundException, as an unknown id); then RetrieveAndGenerate, its answer made only of the caller's nodes,
    and RetrieveAndGenerateStream on serve, read event by event."""
    pytest.importorskip("aws_lambda_powertools")
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DOCS, seed=27)
    engines = build_tenants(ten, corpus)
    checks = oracles(engines, corpus)
    modes = list(KB_SEARCH_TYPES)
    n = max(cases_per_profile() // 4, 4 * len(TENANTS) * len(modes))
    counts = run_tenant_cases(engines, corpus, n, seed=8, modes=modes, checks=checks,
                              tenant_filter_modes=TENANT_FILTER_MODES, ask=kb_ask(engines))
    assert counts.cases == n and all(counts.by_mode.values()) and all(counts.by_tenant.values()), counts
    assert counts.exact_checked and counts.tenant_filters and counts.nothing_allowed < n, counts
    for engine in engines.values():
        engine.generator = QuotingGenerator()
    assert run_kb_generate_cases(engines, corpus, 4 * len(TENANTS) * len(modes), seed=9, checks=checks) > 0
    # RetrieveAndGenerateStream, which `eragraph serve` answers (one tenant per server)
    assert run_kb_stream_cases(engines, corpus, 2 * len(TENANTS) * len(modes), seed=10, checks=checks) > 0


def test_document_routes_keep_tenants_apart():
    """POST/DELETE/GET /documents and GET /changes per tenant (tenant_cases.check_document_routes)."""
    pytest.importorskip("aws_lambda_powertools")
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DELETE_DOCS, seed=29)
    assert check_document_routes(build_tenants(ten, corpus), corpus) >= 6 * len(TENANTS)


def test_chat_tenants_leak_nothing():
    """POST /v1/chat/completions (streamed and not) and GET /v1/models through the openai SDK, the
    tenant from the caller's JWT claim: tenant B's question never returns A's passages or
    citations (tenant_doors.run_chat_cases)."""
    pytest.importorskip("aws_lambda_powertools")
    pytest.importorskip("openai")
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DOCS, seed=31)
    engines = build_tenants(ten, corpus)
    checks = oracles(engines, corpus)
    for engine in engines.values():
        engine.generator = QuotingGenerator()
    n = max(cases_per_profile() // 8, 4 * len(TENANTS) * len(mode_names()))
    assert run_chat_cases(engines, n, seed=11, checks=checks) > n


def test_bedrock_agent_routes_keep_tenants_apart():
    """Data sources, ingestion jobs and Ingest/Get/List/Delete KnowledgeBaseDocuments per tenant
    (tenant_doors.check_agent_routes), the memory profile's pipeline ingesting."""
    pytest.importorskip("aws_lambda_powertools")
    from eragraph.bootstrap import document_pipeline

    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DELETE_DOCS, seed=32)
    engines = build_tenants(ten, corpus)
    pipeline = document_pipeline("memory", None, tenant_settings(), lambda t: engines[t])
    try:
        checked = check_agent_routes(engines, corpus, pipeline, settle=lambda: pipeline.wait_idle(120))
    finally:
        pipeline.close()
    assert checked >= 5 * len(TENANTS) + 11 * len(TENANTS) * (len(TENANTS) - 1)


def test_memory_profile_deletes_one_tenant_only():
    ten = Tenancy("memory", settings=tenant_settings())
    corpus = corpora(N_DELETE_DOCS, seed=23)
    engines = build_tenants(ten, corpus)

    def counts(tenant: str) -> dict:
        engine = engines[tenant]
        return {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count()}

    report = check_delete(ten, engines, corpus, VICTIM, counts, DELETE_CASES, seed=3,
                          tenant_filter_modes=TENANT_FILTER_MODES)
    assert report["before"] == report["counted_before"][VICTIM]
    assert ten.tenants() == ["t-ab"]
    answers_nothing(ten.engine(VICTIM), VICTIM, corpus)  # a new, empty namespace


def _files(path: Path, skip: Path | None = None) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and (skip is None or skip not in p.parents))


def test_local_profile_deletes_one_tenant_only(tmp_path):
    ten = Tenancy("local", store=tmp_path, settings=tenant_settings())
    corpus = corpora(N_DELETE_DOCS, seed=24)
    engines = build_tenants(ten, corpus)

    def counts(tenant: str) -> dict:
        engine = engines[tenant]
        files = _files(tenant_store(tmp_path, tenant), skip=tmp_path / "tenants" if not tenant else None)
        return {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count(), "files": files}

    report = check_delete(ten, engines, corpus, VICTIM, counts, DELETE_CASES, seed=4,
                          tenant_filter_modes=TENANT_FILTER_MODES)
    assert report["before"] == report["counted_before"][VICTIM]
    assert not tenant_store(tmp_path, VICTIM).exists()
    assert (tmp_path / "tenants" / "t-ab").is_dir() and ten.tenants() == ["t-ab"]
    answers_nothing(ten.engine(VICTIM), VICTIM, corpus)  # a new, empty namespace
