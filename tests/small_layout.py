"""pytest plugin (``-p small_layout``): every test runs on the smaller DynamoDB partition layout
(4 ref partitions at layer 0, 2 segment buckets; aws_helpers.few_partitions, for tests outside
tests/aws). The mutation target ``dynamodb`` runs its contract tests with it: a store read whole
pays one moto Query per partition (256 at layer 0), which is most of those tests' time, while
the conditional writes they check are the same at any partition count."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _small_dynamodb_layout(monkeypatch):
    from eragraph.adapters.aws import nodes_dynamodb

    monkeypatch.setattr(nodes_dynamodb, "SHARD_BITS", 2)
    monkeypatch.setattr(nodes_dynamodb, "SEGMENT_BUCKETS", 2)
