"""AWS backends of the port contract tests, under moto (``mock_aws``), plus the template
helpers the AWS tests share.

The DynamoDB table is created from the ``GraphTable`` definition in ``template.yaml`` (key
schema, attribute definitions, GSIs), so the template and the code cannot drift apart. The
OpenSearch index runs against the recording fake client in ``tests/aws/fake_opensearch.py``.
The SQS queue (the one production uses) is a FIFO queue with a dead-letter queue, redriven
after ``SQS_MAX_RECEIVES`` receives; FIFO SQS neither merges pending messages at send time nor
orders across message groups, so the queue contract asserts those two of the in-process queues
only (``IN_PROCESS_QUEUES`` in tests/contract/test_queue.py); message-level details are in
``tests/aws/test_sqs_queue.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from eragraph.bench.moto import table_definition  # the benchmark creates its table the same way

from .factories import (
    BLOB_STORE_FACTORIES,
    CONTRACT_DIM,
    ENTITY_STORE_FACTORIES,
    GRAPH_STORE_FACTORIES,
    QUEUE_FACTORIES,
    VECTOR_INDEX_FACTORIES,
    AdapterFactory,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
REGION = "us-east-1"


class CfnLoader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !Sub, !GetAtt...) as
    ``{"Fn::X": value}`` / ``{"Ref": value}`` mappings."""


def _cfn_tag(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _cfn_tag)


def load_template(path: Path = TEMPLATE) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=CfnLoader)


def bucket_notifications(template: dict, queue_arn: str, parameters: dict | None = None) -> dict:
    """The documents bucket's S3 notification configuration as the template writes it
    (NotificationMode=direct), in the S3 API's shape (put_bucket_notification_configuration):
    the template's events and prefix/suffix rules, parameters at their defaults unless given,
    the ingest queue's ARN for its GetAtt. Empty rules are left out, as S3 does."""
    params = {name: p.get("Default") for name, p in template["Parameters"].items()}
    params.update(parameters or {})
    out = []
    for config in template["Resources"]["DocumentsBucket"]["Properties"]["NotificationConfiguration"][
            "QueueConfigurations"]["Fn::If"][2]:
        assert config["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}, config["Queue"]
        rules = []
        for rule in config.get("Filter", {}).get("S3Key", {}).get("Rules", []):
            value = rule["Value"]
            value = params[value["Ref"]] if isinstance(value, dict) else value
            if value:
                rules.append({"Name": rule["Name"], "Value": value})
        entry = {"QueueArn": queue_arn, "Events": [config["Event"]]}
        if rules:
            entry["Filter"] = {"Key": {"FilterRules": rules}}
        out.append(entry)
    return {"QueueConfigurations": out}


def create_graph_table(client: Any, name: str) -> None:
    """Create the graph table ``name`` exactly as the template declares it (idempotent)."""
    if name in client.list_tables()["TableNames"]:
        return
    client.create_table(TableName=name, **table_definition(TEMPLATE))
    client.get_waiter("table_exists").wait(TableName=name)


def fake_credentials() -> None:
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", REGION)):
        os.environ.setdefault(key, value)


def _mock():
    fake_credentials()
    from moto import mock_aws

    return mock_aws()


def _dynamo_graph(workdir: Path) -> Any:
    import boto3

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    name = f"graph-{workdir.name}"
    create_graph_table(boto3.client("dynamodb", region_name=REGION), name)
    return DynamoGraphStore(name, region=REGION, code_bits=62)


def _dynamo_entities(workdir: Path) -> Any:
    import boto3

    from eragraph.adapters.aws.entity_dynamodb import DynamoEntityStore

    name = f"graph-{workdir.name}"
    create_graph_table(boto3.client("dynamodb", region_name=REGION), name)
    return DynamoEntityStore(name, region=REGION, workers=2)


def _s3_blobs(workdir: Path) -> Any:
    import boto3

    from eragraph.adapters.aws.blob_s3 import S3BlobStore

    client = boto3.client("s3", region_name=REGION)
    bucket = f"docs-{workdir.name}".lower().replace("_", "-")[:63]
    if bucket not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
        client.create_bucket(Bucket=bucket)
    return S3BlobStore(bucket, client=client)


SQS_MAX_RECEIVES = 3
SQS_VISIBILITY_SECONDS = 1  # short, so the contract can watch a message come back


def _sqs_queue(workdir: Path) -> Any:
    import json

    import boto3

    from eragraph.adapters.aws.queue_sqs import SqsQueue

    client = boto3.client("sqs", region_name=REGION)
    name = f"q-{workdir.name}"[:60]
    dlq = client.create_queue(QueueName=f"{name}-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = client.create_queue(QueueName=f"{name}.fifo", Attributes={
        "FifoQueue": "true", "VisibilityTimeout": str(SQS_VISIBILITY_SECONDS),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": SQS_MAX_RECEIVES})})["QueueUrl"]
    queue = SqsQueue(url, client=client)
    queue.dead_letters = dlq  # for the contract's redrive test
    return queue


def fake_opensearch_module():
    """tests/aws/fake_opensearch.py, importable from any test folder."""
    name = "eragraph_tests_fake_opensearch"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "aws" / "fake_opensearch.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_FAKE_CLUSTERS: dict[str, Any] = {}


def _opensearch_vectors(workdir: Path) -> Any:
    from eragraph.adapters.aws.vector_opensearch import OpenSearchVectorIndex

    cluster = _FAKE_CLUSTERS.setdefault(str(workdir), fake_opensearch_module().FakeOpenSearch())
    return OpenSearchVectorIndex(cluster, "eragraph-nodes", CONTRACT_DIM, refresh=True)


def register() -> None:
    try:
        import moto  # noqa: F401
    except ImportError:  # the aws extra is not installed: the memory/local backends still run
        return
    GRAPH_STORE_FACTORIES["dynamodb"] = AdapterFactory(_dynamo_graph, persistent=True, context=_mock)
    BLOB_STORE_FACTORIES["s3"] = AdapterFactory(_s3_blobs, persistent=True, context=_mock)
    VECTOR_INDEX_FACTORIES["opensearch"] = AdapterFactory(_opensearch_vectors, persistent=True)
    QUEUE_FACTORIES["sqs"] = AdapterFactory(_sqs_queue, persistent=True, context=_mock)
    ENTITY_STORE_FACTORIES["dynamodb"] = AdapterFactory(_dynamo_entities, persistent=True, context=_mock)


register()
