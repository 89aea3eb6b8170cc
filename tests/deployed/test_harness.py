"""The harness's own moto server (no sam build needed): one request at a time, and a cancelled
TransactWriteItems still leaves nothing behind with the suite's item-level rollback
(tests/moto_speedups.py)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from deployed import FAKE_CREDENTIALS, REGION, SerialMotoServer


@contextmanager
def served_table():
    """A SerialMotoServer holding an empty table ``t`` (PK, SK), and a client on it."""
    import boto3

    server = SerialMotoServer()
    endpoint = server.start()
    try:
        client = boto3.session.Session(region_name=REGION, **{k.lower(): v for k, v in FAKE_CREDENTIALS.items()}
                                       ).client("dynamodb", endpoint_url=endpoint)
        client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                                  {"AttributeName": "SK", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                                       {"AttributeName": "SK", "KeyType": "RANGE"}])
        yield client, server
    finally:
        server.stop()


@pytest.fixture
def ddb():
    with served_table() as served:
        yield served


def item(pk, v):
    return {"PK": {"S": pk}, "SK": {"S": "x"}, "v": {"N": str(v)}}


def test_cancelled_transaction_rolls_back_every_item(ddb):
    client, server = ddb
    client.put_item(TableName="t", Item=item("a", 1))
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=[
            {"Put": {"TableName": "t", "Item": item("a", 2)}},      # an update of an existing item
            {"Put": {"TableName": "t", "Item": item("b", 1)}},      # a new item
            {"Delete": {"TableName": "t", "Key": {"PK": {"S": "c"}, "SK": {"S": "x"}}}},
            {"ConditionCheck": {"TableName": "t", "Key": {"PK": {"S": "d"}, "SK": {"S": "x"}},
                                "ConditionExpression": "attribute_exists(PK)"}},
        ])
    rows = client.scan(TableName="t")["Items"]
    assert rows == [item("a", 1)]
    client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": item("b", 5)}},
                                               {"Update": {"TableName": "t", "Key": {"PK": {"S": "a"}, "SK": {"S": "x"}},
                                                           "UpdateExpression": "SET v = :two",
                                                           "ExpressionAttributeValues": {":two": {"N": "2"}}}}])
    assert sorted(r["PK"]["S"] + r["v"]["N"] for r in client.scan(TableName="t")["Items"]) == ["a2", "b5"]
    assert server.requests >= 5


def test_query_reads_its_partition_only(ddb):
    client, _ = ddb
    for pk in ("a", "b"):
        for sk in ("1", "2", "3"):
            client.put_item(TableName="t", Item={"PK": {"S": pk}, "SK": {"S": sk}})
    got = client.query(TableName="t", KeyConditionExpression="PK = :p AND SK BETWEEN :lo AND :hi",
                       ExpressionAttributeValues={":p": {"S": "b"}, ":lo": {"S": "2"}, ":hi": {"S": "3"}},
                       ScanIndexForward=False, Limit=1)
    assert [(i["PK"]["S"], i["SK"]["S"]) for i in got["Items"]] == [("b", "3")]
    rest = client.query(TableName="t", KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "b"}},
                        ExclusiveStartKey=got["LastEvaluatedKey"], ScanIndexForward=False)
    assert [i["SK"]["S"] for i in rest["Items"]] == ["2", "1"]
    assert client.query(TableName="t", KeyConditionExpression="PK = :p",
                        ExpressionAttributeValues={":p": {"S": "zz"}})["Items"] == []
    assert len(client.scan(TableName="t")["Items"]) == 6


def moto_patches():
    from moto.dynamodb import models
    from moto.dynamodb.models import table as table_module

    return (models.copy, models.DynamoDBBackend.transact_write_items, table_module.Table.query,
            table_module.Table.all_items)


def test_the_server_serves_with_the_suites_speedups_and_leaves_them_as_they_were():
    """The server runs in the test process and serves with the suite's moto speed-ups
    (tests/moto_speedups.py: item-level rollback, one-partition queries); starting it, serving a
    transaction and stopping it leave moto's DynamoDB patched exactly as before, so that the
    in-process moto tests after it on the same worker cost what they cost alone (restoring the
    wrong patches once made a 1,500-node contract test take minutes instead of seconds)."""
    before = moto_patches()
    _, transact, query, _ = before
    assert getattr(transact, "item_rollback", False) and getattr(query, "one_partition", False)
    with served_table() as (client, _):
        client.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": item("a", 1)}},
                                                   {"Put": {"TableName": "t", "Item": item("b", 2)}}])
        assert moto_patches() == before
    assert moto_patches() == before
