"""pytest plugin (``-p small_layout``): every test runs on the small DynamoDB partition layout
(ref partitions that grow every few refs, so the tests' stores move their layers between
layouts as they grow; 2 segment buckets; aws_helpers.few_partitions, for tests outside
tests/aws). The mutation target ``dynamodb`` runs its contract tests with it: a store whose
segments are read whole pays one moto Query per bucket (64 a layer), while the conditional
writes they check are the same at any partition count."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _small_dynamodb_layout(monkeypatch):
    from eragraph.adapters.aws import nodes_dynamodb, ref_layout

    monkeypatch.setattr(ref_layout, "PART_ITEMS", 4)
    monkeypatch.setattr(nodes_dynamodb, "SEGMENT_BUCKETS", 2)
