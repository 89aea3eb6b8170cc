"""Operations of the AWS profile: index replicas from the environment."""

from __future__ import annotations

import pytest
from aws_helpers import aws_environment

from contract.aws_factories import REGION, create_graph_table, fake_credentials, fake_opensearch_module


@pytest.mark.parametrize("replicas", ["0", "2"])
def test_new_indexes_get_the_configured_replicas(replicas):
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.bootstrap.aws import build_aws_engine

    with mock_aws():
        url = boto3.client("sqs", region_name=REGION).create_queue(
            QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        env = {**aws_environment(url), "ERAGRAPH_OPENSEARCH_REPLICAS": replicas}
        create_graph_table(boto3.client("dynamodb", region_name=REGION), env["ERAGRAPH_TABLE"])
        fake = fake_opensearch_module().FakeOpenSearch()
        engine = build_aws_engine(environ=env, opensearch_client=fake, refresh=True)
        engine.vectors.ensure_index()
        engine.entities.vectors.ensure_index()
        assert {name: idx["replicas"] for name, idx in fake.indexes.items()} == {
            "eragraph-nodes": int(replicas), "eragraph-entities": int(replicas)}
