"""Records with no use after a while expire (on moto): the graph table declares DynamoDB's TTL on
``expires_at`` (template.yaml), and the hourly ledger buckets, ingestion jobs and clientToken
records carry it (the ledger's totals and every other meta key do not)."""

from __future__ import annotations

import time

import boto3
from contract.aws_factories import REGION, _dynamo_graph, _mock, load_template

from eragraph.adapters.aws.meta_dynamodb import DAY, EXPIRING_META, LEDGER_HOURS_TTL


def test_the_graph_table_expires_items_on_expires_at():
    spec = load_template()["Resources"]["GraphTable"]["Properties"]["TimeToLiveSpecification"]
    assert spec == {"AttributeName": "expires_at", "Enabled": True}


def _items(table: str) -> dict[str, dict]:
    scanned = boto3.client("dynamodb", region_name=REGION).scan(TableName=table)["Items"]
    return {i["SK"]["S"]: i for i in scanned}


def test_hourly_ledger_rows_jobs_and_tokens_carry_their_expiry(tmp_path):
    with _mock():
        graph = _dynamo_graph(tmp_path)
        now = time.time()
        graph.add_ledger("embed|m", 1, 10, 0, 0.1, at=now)
        graph.put_meta("kb-job:DS:JOB", {"status": "IN_PROGRESS"})
        graph.put_meta("kb-token:CreateDataSource:t-1", "DS")
        graph.put_meta("kb-source:DS", {"name": "notes"})
        items = _items(f"graph-{tmp_path.name}")
        # each on one shard of its kind's (meta_dynamodb.add_ledger): <kind>\0<shard>
        hourly = next(i for sk, i in items.items() if "#embed|m\0" in sk and not sk.startswith("KIND#"))
        assert int(hourly["expires_at"]["N"]) == int(now // 3600 * 3600) + LEDGER_HOURS_TTL
        totals = next(i for sk, i in items.items() if sk.startswith("KIND#embed|m\0"))
        assert "expires_at" not in totals  # the totals stay
        for key, life in (("kb-job:DS:JOB", EXPIRING_META["kb-job:"]), ("kb-token:CreateDataSource:t-1", DAY)):
            assert abs(int(items[f"KEY#{key}"]["expires_at"]["N"]) - (now + life)) < 60, key
        assert "expires_at" not in items["KEY#kb-source:DS"]  # a data source lives as long as the tenant
        assert graph.get_meta("kb-job:DS:JOB") == {"status": "IN_PROGRESS"}


def test_a_record_past_its_expiry_is_not_read_before_the_ttl_deletes_it(tmp_path, monkeypatch):
    """DynamoDB's TTL deletes an item within days of its expires_at: until then a read or a
    listing sees it gone already, as the local store does (domain.expiry)."""
    from eragraph.adapters.aws import meta_dynamodb

    with _mock():
        graph = _dynamo_graph(tmp_path)
        graph.put_meta("kb-token:CreateDataSource:t-1", "DS")
        graph.put_meta("kb-job:DS:JOB", {"status": "COMPLETE"})
        later = time.time() + DAY + 60
        monkeypatch.setattr(meta_dynamodb, "time", type("Clock", (), {"time": staticmethod(lambda: later)}))
        assert graph.get_meta("kb-token:CreateDataSource:t-1") is None and graph.meta_keys("kb-token:") == []
        assert graph.get_meta("kb-job:DS:JOB") == {"status": "COMPLETE"} and graph.meta_keys("kb-job:") == ["kb-job:DS:JOB"]
