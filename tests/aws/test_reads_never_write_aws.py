"""A query, stats or a document read of an unknown or a deleted tenant on the AWS profile
(moto DynamoDB, the fake OpenSearch) leaves every table item and every index document as it
was, including through the engine a warm container still holds for a tenant another container
deleted (it used to draw the store's hyperplanes and write them back under the deleted
tenant's keys)."""

from __future__ import annotations

import copy
import json

import pytest
from aws_helpers import BUCKET, aws_environment
from read_only_cases import assert_empty, fill, read_everything

from contract.aws_factories import REGION, create_graph_table, fake_credentials, fake_opensearch_module


@pytest.fixture
def containers():
    """Two Tenancy objects over one moto deployment: two warm containers."""
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
        env = {**aws_environment(queue_url), "ERAGRAPH_N_PLANES": "4"}
        create_graph_table(clients["dynamodb"], env["ERAGRAPH_TABLE"])
        fake = fake_opensearch_module().FakeOpenSearch()

        def build(tenant):
            return build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant=tenant)

        yield Tenancy("aws", build=build), Tenancy("aws", build=build), clients, env, fake


def storage(clients, env, fake) -> tuple:
    items = []
    for page in clients["dynamodb"].get_paginator("scan").paginate(TableName=env["ERAGRAPH_TABLE"]):
        items += page["Items"]
    items.sort(key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
    return json.dumps(items, sort_keys=True, default=str), copy.deepcopy(fake.indexes)


def test_aws_reads_of_unknown_and_deleted_tenants_change_no_item(containers, atomic_requests):
    warm, other, clients, env, fake = containers
    fill(warm.engine(""))
    fill(warm.engine("acme"))
    held = warm.engine("acme")
    other.delete("acme")  # another container deletes the tenant; this one keeps its engine
    before = storage(clients, env, fake)
    for engine in (warm.engine("acme", register=False), held, warm.engine("ghost", register=False),
                   other.engine("acme", register=False)):
        assert_empty(read_everything(engine))
    assert storage(clients, env, fake) == before
    assert warm.tenants() == [] and not warm.exists("acme")
