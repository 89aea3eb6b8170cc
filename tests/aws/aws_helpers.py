"""Helpers of the AWS tests: an engine on the AWS adapters (moto S3/SQS/DynamoDB with the
table from template.yaml, the recording OpenSearch fake), the Lambda handlers loaded from
functions/*/app.py, and a Lambda context."""

from __future__ import annotations

import json
import threading

import iam_judge
import pytest
from lambda_support import EVENTS, ROOT, LambdaContext, event, load_handler  # noqa: F401  (re-exported)

from contract.aws_factories import REGION, create_graph_table, fake_credentials, fake_opensearch_module, load_template

BUCKET = "eragraph-test-docs"

TEST_SETTINGS = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none",
                 "ERAGRAPH_EMBED_CACHE": "false", "ERAGRAPH_S_MIN": "3", "ERAGRAPH_S_MAX": "5",
                 "ERAGRAPH_N_PLANES": "12", "ERAGRAPH_CHUNK_TOKENS": "40", "ERAGRAPH_CHUNK_OVERLAP": "8",
                 "ERAGRAPH_SUMMARY_TOKENS": "30", "POWERTOOLS_METRICS_NAMESPACE": "EragraphTest",
                 "POWERTOOLS_SERVICE_NAME": "eragraph-test"}


@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext()


def aws_environment(queue_url: str, table: str = "eragraph-test-graph", endpoint: str | None = None) -> dict:
    env = {"AWS_REGION": REGION, "ERAGRAPH_TABLE": table, "ERAGRAPH_BUCKET": BUCKET,
           "ERAGRAPH_SUMMARIZE_QUEUE_URL": queue_url, "ERAGRAPH_OPENSEARCH_ENDPOINT": "https://search.invalid",
           "ERAGRAPH_OPENSEARCH_INDEX": "eragraph-nodes", **TEST_SETTINGS,
           # these suites query the default tenant as an untagged caller: the explicit opt-in
           # (the deployed default refuses such a caller: TenantRequired=true)
           "ERAGRAPH_TENANT_REQUIRED": "false"}
    if endpoint:
        env["ERAGRAPH_AWS_ENDPOINT_URL"] = endpoint
    return env


def identity_from(env: dict, monkeypatch) -> None:
    """The query handler module is imported once per process (load_handler): when an earlier
    suite imported it under another environment, its caller identity rules (TenantRequired, the
    claim, the tag) are set to this environment's for the test."""
    import sys

    from eragraph.bootstrap.identity import TenantIdentity

    module = sys.modules.get("eragraph_fn_query_app")
    if module is None:
        return
    fresh = TenantIdentity.from_env(env)
    # the IAM client and the tag cache too: a client made for another test's endpoint is gone
    for attr in ("claim", "tag", "required", "endpoint", "trust_request_context", "_iam", "_tags"):
        monkeypatch.setattr(module.IDENTITY, attr, getattr(fresh, attr))


@pytest.fixture
def small_graph_store():
    """A DynamoGraphStore on a fresh moto table, with 8-bit codes (its tests name codes by hand),
    created as the engine creates one: its hyperplanes first (which say the store keeps its
    prefix counts, adapters.aws.ref_counts)."""
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore
    from eragraph.domain.model import LshConfig

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), "graph-small")
        store = DynamoGraphStore("graph-small", region=REGION, code_bits=8)
        store.put_lsh(LshConfig("test", 2, 8, 0, tuple((1.0, 0.0) for _ in range(8))))
        yield store


def dynamodb_calls(store) -> list[str]:
    """The names of the DynamoDB operations ``store``'s client sends from now on, in order."""
    calls: list[str] = []
    client = store.Item._get_connection().connection.client
    client.meta.events.register("provide-client-params.dynamodb", lambda params, model, **_: calls.append(model.name))
    return calls


@pytest.fixture
def aws_engine(monkeypatch):
    """The engine the handlers get, on moto + the OpenSearch fake; yields (engine, env, fake)."""
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    with mock_aws():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        # the caller tests/events/api_*.json name (assumed-role/reader), untagged, under the
        # TenantPrincipalPath whose principals' tags the query role may read (tests/iam_judge.py)
        boto3.client("iam", region_name=REGION).create_role(Path="/eragraph/", RoleName="reader",
                                                            AssumeRolePolicyDocument="{}")
        queue_url = boto3.client("sqs", region_name=REGION).create_queue(
            QueueName="eragraph-test-summarize.fifo",
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"})["QueueUrl"]
        env = aws_environment(queue_url)
        create_graph_table(boto3.client("dynamodb", region_name=REGION), env["ERAGRAPH_TABLE"])
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        identity_from(env, monkeypatch)
        fake = fake_opensearch_module().FakeOpenSearch()
        engine = build_aws_engine(environ=env, opensearch_client=fake, refresh=True)
        LAMBDA_ENGINE.set(engine)
        LAMBDA_ENGINE.set_builder(lambda tenant: build_aws_engine(environ=env, opensearch_client=fake, refresh=True,
                                                                  tenant=tenant))
        try:
            with iam_judge.deployed(env):  # the judge reads the functions' settings where they do
                yield engine, env, fake
        finally:
            LAMBDA_ENGINE.set(None)


@pytest.fixture
def atomic_requests(monkeypatch):
    """moto serves requests from several threads without a lock, and its TransactWriteItems
    deep-copies the tables meanwhile (RuntimeError: dictionary changed size during iteration);
    DynamoDB applies each request atomically. Serve one request at a time, as the service
    would appear to."""
    from moto.core.botocore_stubber import BotocoreStubber

    lock = threading.RLock()
    call = BotocoreStubber.__call__

    def serialized(self, *args, **kwargs):
        with lock:
            return call(self, *args, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", serialized)


# ---------------------------------------------------------------- the reindex queue
@pytest.fixture
def few_partitions(monkeypatch):
    """Ref partitions that grow every few refs (the tests' layers move between layouts as they
    grow) and fewer segment buckets, before any write. The store pays one Query per segment
    bucket of a layer read whole (64), which costs about 30 ms each in moto and is what made the
    reindex tests take minutes; what a page or a continuation reads is the same at any
    partition count."""
    from eragraph.adapters.aws import nodes_dynamodb, ref_layout

    monkeypatch.setattr(ref_layout, "PART_ITEMS", 4)
    monkeypatch.setattr(nodes_dynamodb, "SEGMENT_BUCKETS", 2)


@pytest.fixture
def audit_queue(few_partitions, aws_engine, monkeypatch):
    """The template's ReindexQueue in moto; its URL where the reindex function reads it."""
    import boto3

    props = load_template()["Resources"]["ReindexQueue"]["Properties"]
    keep = ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
    attributes = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in props.items() if k in keep}
    attributes["VisibilityTimeout"] = "30"
    url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="eragraph-test-reindex.fifo",
                                                               Attributes=attributes)["QueueUrl"]
    monkeypatch.setenv("ERAGRAPH_REINDEX_QUEUE_URL", url)
    return url


def receive(url: str) -> list[dict]:
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])


def as_records(messages: list[dict]) -> dict:
    """The SQS event source's event for ``messages`` (as moto returned them)."""
    return {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                         "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                         "eventSource": "aws:sqs", "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:eragraph-test-reindex.fifo",
                         "awsRegion": REGION} for m in messages]}


def deliver(url: str, reindex, context, caplog, limit: int = 200) -> list[dict]:
    """Run the queue's messages through the handler one at a time (BatchSize 1), deleting each
    handled one (the event source does), until the queue is empty; the reports logged."""
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    reports = []
    for _ in range(limit):
        got = receive(url)
        if not got:
            return reports
        for message in got:
            caplog.clear()
            out = reindex.handler(as_records([message]), context)
            assert out == {"batchItemFailures": []}, out
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            reports += [r.report for r in caplog.records if r.getMessage().startswith("tenant audit")]
    raise AssertionError("the reindex queue never emptied")


def published(out: str) -> dict:
    values = {}
    for line in out.splitlines():
        if line.startswith("{") and "_aws" in line:
            blob = json.loads(line)
            for spec in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                value = blob[spec["Name"]]
                values[spec["Name"]] = value[0] if isinstance(value, list) else value
    return values


# ---------------------------------------------------------------- the template in production settings
PRODUCTION = {"OpenSearchMultiAz": '"true"', "OpenSearchFineGrainedAccess": '"true"',
              "OpenSearchInstanceCount": '"2"', "OpenSearchSubnetIds": "subnet-0a1b2c3d,subnet-4e5f6a7b",
              "OpenSearchSecurityGroupIds": "sg-0a1b2c3d", "ApiAuthMode": "JWT",
              "JwtIssuer": "https://issuer.example.com", "JwtAudience": "client",
              "AlarmEmail": "ops@example.com", "QueryReservedConcurrency": "0",
              "VpcId": "vpc-0a1b2c3d", "VpcRouteTableIds": "rtb-0a1b2c3d,rtb-4e5f6a7b"}


def production_template(directory):
    """A copy of template.yaml in ``directory`` whose parameter defaults are PRODUCTION (the
    linters take no parameter overrides: the defaults are what they check)."""
    text = (ROOT / "template.yaml").read_text()
    lines = text.splitlines()
    current = None
    for i, line in enumerate(lines):
        if line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
            current = line.strip()[:-1]
        if current in PRODUCTION and line.startswith("    Default:"):
            lines[i] = f"    Default: {PRODUCTION[current]}"
    copy = directory / "template.yaml"
    copy.write_text("\n".join(lines) + "\n")
    params = load_template(copy)["Parameters"]
    assert all(str(params[k]["Default"]) == PRODUCTION[k].strip('"') for k in PRODUCTION), "defaults not replaced"
    return copy
