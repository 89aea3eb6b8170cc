"""Tenants leak nothing to each other on the AWS profile's adapters: one DynamoDB table (moto,
every key of a tenant under ``T#<tenant>#``), one OpenSearch node index and one entity index
(the recording fake; documents tagged ``tenant``, every request scoped by the adapter), one SQS
FIFO queue (messages carrying the tenant, grouped under ``<tenant>:``). The random cases of
tenant_cases.py (every mode, filters on ``tenant`` included, ERAGRAPH_TENANT_CASES cases,
default ``CASES``, 33 more through the MCP retrieve tool of POST /mcp and 18 through Bedrock KB
Retrieve with boto3's client, then 18 chat completions through the openai SDK and the
bedrock-agent write routes: tenant_doors.py) run over three tenants'
engines from bootstrap.tenancy; the first
``STOCK_CASES`` on stock moto, the rest, like the build, with moto's two table-size costs taken
out (bench/moto_lean.py: the same answers, tested there), which keeps the file within its time.
moto serves one request at a time (``atomic_requests``): the lean query sets and removes an
attribute of the table per request, and the DynamoDB adapter lists metadata partitions from a
thread pool.
The raw table, index and queue contents are checked too: every item, document and message of
a tenant is under its prefix, tag or group. Deleting a tenant removes its items, vectors, entity
vectors and objects, counted raw before and after, and nothing of the other tenants'."""

from __future__ import annotations

import importlib.util
import json

import pytest
from aws_helpers import BUCKET, aws_environment
from tenant_cases import (KB_SEARCH_TYPES, TENANTS, QuotingGenerator, build_tenants, cases_per_profile, check_delete,
                          corpora, kb_ask, mcp_ask, oracles, run_tenant_cases)
from tenant_doors import check_agent_routes, run_chat_cases

from contract.aws_factories import REGION, create_graph_table, fake_credentials, fake_opensearch_module
from eragraph.bench.moto_lean import lean_moto
from eragraph.bootstrap.aws import DEFAULT_ENTITY_INDEX, DEFAULT_INDEX

# longer than the suite's per-test limit (pyproject.toml): hundreds of random cases over moto
pytestmark = pytest.mark.timeout(900)

# enough to catch every bug planted in the OpenSearch adapters' tenant scope by
# tests/aws/planted_tenant_bugs.py on the seeds run (bench-results/planted-bugs-tenants*.json): the
# BM25 search without its tenant scope was first caught at case 969 on seed 5, the default tenant
# reading every tenant's documents at 798 on seed 29; fewer cases would miss them
CASES = 1000

N_DOCS = 8  # per tenant: a summary layer each
N_DELETE_DOCS = 6
STOCK_CASES = 33  # every (tenant, mode) once on stock moto
MCP_CASES = 33  # every (tenant, mode) once more, through the MCP retrieve tool
KB_CASES = 18  # every (tenant, Retrieve's modes) twice, through Bedrock KB Retrieve
CHAT_CASES = 18  # through the openai SDK's chat completions (streamed every other one)
DELETE_CASES = 33
KS = (1, 2, 3, 5)  # each result costs moto a node read and a document read: smaller k than elsewhere
VICTIM = "t-a"  # a prefix of "t-ab", which must survive it
# aws_helpers' settings but fewer hyperplanes (layer 0's ref index has 2^4 partitions rather
# than 2^8, each one a moto query on every reconcile) and the embedding cache on, as deployed
# (a repeated question costs no ledger write); tenants depend on neither
SETTINGS = {"ERAGRAPH_N_PLANES": "4", "ERAGRAPH_EMBED_CACHE": "true"}


class Recording:
    """An SQS client that records every entry sent, and passes everything on."""

    def __init__(self, client) -> None:
        self.client = client
        self.entries: list[dict] = []

    def send_message_batch(self, **request):
        self.entries += request["Entries"]
        return self.client.send_message_batch(**request)

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.fixture
def aws_tenancy():
    """(Tenancy, env, fake OpenSearch, boto3 clients) on moto, one engine per tenant."""
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.bootstrap.aws import build_aws_engine
    from eragraph.bootstrap.tenancy import Tenancy

    with mock_aws():
        clients = {name: boto3.client(name, region_name=REGION) for name in ("s3", "sqs", "dynamodb")}
        clients["s3"].create_bucket(Bucket=BUCKET)
        queue_url = clients["sqs"].create_queue(
            QueueName="eragraph-test-summarize.fifo",
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})["QueueUrl"]
        env = {**aws_environment(queue_url), **SETTINGS}
        create_graph_table(clients["dynamodb"], env["ERAGRAPH_TABLE"])
        fake = fake_opensearch_module().FakeOpenSearch()
        ten = Tenancy("aws", build=lambda tenant: build_aws_engine(environ=env, opensearch_client=fake, refresh=True,
                                                                   tenant=tenant))
        yield ten, env, fake, clients


def namespace_of(pk: str) -> str | None:
    """The tenant whose item a raw key is ("" the default; None: the tenant registry)."""
    if pk == "TENANTS":
        return None
    if not pk.startswith("T#"):
        return ""
    tenant, sep, _rest = pk[2:].partition("#")
    assert sep and tenant, pk
    return tenant


def raw_items(clients, env) -> dict:
    """Raw DynamoDB items by tenant (a scan of the table)."""
    out: dict = {}
    for page in clients["dynamodb"].get_paginator("scan").paginate(TableName=env["ERAGRAPH_TABLE"],
                                                                   ProjectionExpression="PK, SK"):
        for item in page["Items"]:
            out.setdefault(namespace_of(item["PK"]["S"]), []).append((item["PK"]["S"], item["SK"]["S"]))
    return out


def scope(tenant: str) -> dict:
    return {"term": {"tenant": tenant}} if tenant else {"bool": {"must_not": [{"exists": {"field": "tenant"}}]}}


def receive_all(clients, url: str) -> list[dict]:
    """Every message SQS hands out now (FIFO: at least the first of each group), then visible
    again at once for the drain."""
    got: list[dict] = []
    for _ in range(100):
        batch = clients["sqs"].receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                               MessageAttributeNames=["All"]).get("Messages", [])
        if not batch:
            break
        got += batch
    for m in got:
        clients["sqs"].change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    return got


def check_message(tenant: str, group: str, body: dict, attributes: dict, where: str) -> None:
    if tenant:
        assert group.startswith(f"{tenant}:"), f"{where}: group {group!r} of tenant {tenant!r}"
        assert body.get("tenant") == tenant, f"{where}: body {body}"
        assert attributes["tenant"]["StringValue"] == tenant, f"{where}: attributes {attributes}"
    else:
        assert ":" not in group and "tenant" not in body and "tenant" not in attributes, f"{where}: {group} {body}"


def test_aws_profile_tenants_leak_nothing(aws_tenancy, atomic_requests):
    ten, env, fake, clients = aws_tenancy
    url = env["ERAGRAPH_SUMMARIZE_QUEUE_URL"]
    corpus = corpora(N_DOCS, seed=25)
    sent: dict[str, Recording] = {}
    received: dict[str, list[dict]] = {}

    def on_engine(tenant, engine):
        engine.queue.client = sent[tenant] = Recording(engine.queue.client)

    def before_drain(tenant, engine):
        received[tenant] = receive_all(clients, url)

    with lean_moto():
        engines = build_tenants(ten, corpus, on_engine=on_engine, before_drain=before_drain)
        checks = oracles(engines, corpus)
    assert ten.tenants() == ["t-a", "t-ab"]

    # every message a tenant's queue sent (ingest and re-summarization) is in its groups
    dedup: dict[str, str] = {}
    for tenant in TENANTS:
        assert sent[tenant].entries and received[tenant], tenant
        for e in sent[tenant].entries:
            check_message(tenant, e["MessageGroupId"], json.loads(e["MessageBody"]), e.get("MessageAttributes", {}),
                          f"sent by {tenant!r}")
            assert dedup.setdefault(e["MessageDeduplicationId"], tenant) == tenant, "a deduplication id shared"
        for m in received[tenant]:  # as SQS delivers them
            check_message(tenant, m["Attributes"]["MessageGroupId"], json.loads(m["Body"]),
                          m.get("MessageAttributes", {}), f"received for {tenant!r}")

    # every raw item and document is under its tenant's key prefix or tag
    items = raw_items(clients, env)
    assert set(items) == {None, *TENANTS} and all(items[t] for t in TENANTS)
    assert sorted(sk for _pk, sk in items[None]) == ["T#t-a", "T#t-ab"]  # the registry
    for index in (DEFAULT_INDEX, DEFAULT_ENTITY_INDEX):
        docs = fake.indexes[index]["docs"]
        by_tenant = {t: fake.select(index, scope(t)) for t in TENANTS}
        assert set().union(*by_tenant.values()) == set(docs) and all(by_tenant.values()), index
        for tenant in ("t-a", "t-ab"):
            assert all(i.startswith(f"{tenant}#") for i in by_tenant[tenant]), (index, tenant)
        assert {i for i in docs if i.startswith(("t-a#", "t-ab#"))} == by_tenant["t-a"] | by_tenant["t-ab"]
        for tenant, engine in engines.items():
            adapter = engine.vectors if index == DEFAULT_INDEX else engine.entities.vectors
            assert adapter.count() == len(by_tenant[tenant]), (index, tenant)

    n = cases_per_profile(CASES)
    stock = min(n, STOCK_CASES)
    counts = run_tenant_cases(engines, corpus, stock, seed=5, checks=checks, ks=KS)
    with lean_moto():
        counts = counts.merge(run_tenant_cases(engines, corpus, n - stock, seed=6, checks=checks, ks=KS))
    assert counts.cases == n
    if n >= 4 * STOCK_CASES:
        assert all(counts.by_mode.values()) and all(counts.by_tenant.values()), counts
        assert counts.exact_checked and counts.summaries_checked and counts.tenant_filters, counts

    # the same kind of cases through the MCP retrieve tool (the query function's POST /mcp app),
    # the tenant coming with each request
    if importlib.util.find_spec("mcp") is not None:
        with lean_moto():
            through_mcp = run_tenant_cases(engines, corpus, MCP_CASES, seed=7, checks=checks, ks=KS,
                                           ask=mcp_ask(engines))
        assert through_mcp.cases == MCP_CASES and all(through_mcp.by_tenant.values()), through_mcp

    # and through Bedrock KB Retrieve (boto3's client, the API's routes): another tenant's
    # knowledge base id is ResourceNotFoundException (as an unknown id) in every case
    with lean_moto():
        through_kb = run_tenant_cases(engines, corpus, KB_CASES, seed=8, checks=checks, ks=KS,
                                      modes=list(KB_SEARCH_TYPES), ask=kb_ask(engines))
    assert through_kb.cases == KB_CASES and all(through_kb.by_tenant.values()), through_kb

    # the chat completions (the openai SDK), then the bedrock-agent write routes with the aws
    # profile's pipeline: its hand-over is an object under the tenant's prefix of the bucket
    # (no notification here: what it ingests is the ingest function's, tested elsewhere)
    if importlib.util.find_spec("openai") is not None:
        for engine in engines.values():
            engine.generator = QuotingGenerator()
        with lean_moto():
            assert run_chat_cases(engines, CHAT_CASES, seed=9, checks=checks) > 0
    from eragraph.bootstrap import document_pipeline

    def keys(tenant: str) -> list[str]:
        listed = [o["Key"] for page in clients["s3"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                  for o in page.get("Contents", [])]
        return [k for k in listed if (k.startswith(f"tenants/{tenant}/") if tenant else not k.startswith("tenants/"))]

    pipeline = document_pipeline("aws", None, engines[""].settings, lambda t: engines[t])
    with lean_moto():
        assert check_agent_routes(engines, corpus, pipeline, settle=lambda: None, keys=keys) > 0


def test_aws_profile_deletes_one_tenant_only(aws_tenancy, atomic_requests):
    ten, env, fake, clients = aws_tenancy
    corpus = corpora(N_DELETE_DOCS, seed=26)
    with lean_moto():
        engines = build_tenants(ten, corpus)
    for tenant in TENANTS:  # a file of each tenant in the documents bucket
        key = f"tenants/{tenant}/notes/a.txt" if tenant else "notes/a.txt"
        clients["s3"].put_object(Bucket=BUCKET, Key=key, Body=b"a file")

    def objects(tenant: str) -> int:
        keys = [o["Key"] for page in clients["s3"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                for o in page.get("Contents", [])]
        return sum(1 for k in keys if (k.startswith(f"tenants/{tenant}/") if tenant else not k.startswith("tenants/")))

    def counts(tenant: str) -> dict:
        return {"items": len(raw_items(clients, env).get(tenant, [])),
                "vectors": len(fake.select(DEFAULT_INDEX, scope(tenant))),
                "entity_vectors": len(fake.select(DEFAULT_ENTITY_INDEX, scope(tenant))),
                "objects": objects(tenant)}

    with lean_moto():
        report = check_delete(ten, engines, corpus, VICTIM, counts, DELETE_CASES, seed=7, ks=KS)
    before = report["counted_before"][VICTIM]
    assert report["before"] == {k: before[k] for k in ("items", "vectors", "entity_vectors")}, report
    assert report["objects_deleted"] == before["objects"] == 1, report
    assert counts(VICTIM) == {"items": 0, "vectors": 0, "entity_vectors": 0, "objects": 0}
    assert ten.tenants() == ["t-ab"]
    assert sorted(sk for _pk, sk in raw_items(clients, env)[None]) == ["T#t-ab"]  # the registry
