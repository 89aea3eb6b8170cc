"""The suite's moto speed-ups (tests/moto_speedups.py) answer as moto's own code does: the same
random run of puts, updates, deletes and transactions (a third of them cancelled by a condition,
some after an in-place update of an item they name), the same queries (key conditions, pages,
both directions, an index), batch reads, updates returning the item, the table's description and
a few S3 and SQS calls give the same answers through the patched moto and through moto's own
TransactWriteItems, Query and response serializer."""

from __future__ import annotations

import random

import moto_speedups
import pytest

TABLE = "t"


def table_client():
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    client.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("PK", "SK", "G")],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "ByG", "KeySchema": [{"AttributeName": "G", "KeyType": "HASH"},
                                                                   {"AttributeName": "SK", "KeyType": "RANGE"}],
                                 "Projection": {"ProjectionType": "ALL"}}])
    return client


def key(rng):
    return {"PK": {"S": f"p{rng.randrange(4)}"}, "SK": {"S": f"s{rng.randrange(12):02d}"}}


def op(rng):
    k = key(rng)
    kind = rng.choice(("Put", "Update", "Delete", "Check"))
    if kind == "Put":
        return {"Put": {"TableName": TABLE, "Item": {**k, "G": {"S": f"g{rng.randrange(2)}"},
                                                     "v": {"N": str(rng.randrange(100))}}}}
    if kind == "Update":
        return {"Update": {"TableName": TABLE, "Key": k, "UpdateExpression": "ADD v :one",
                           "ExpressionAttributeValues": {":one": {"N": "1"}}}}
    if kind == "Delete":
        return {"Delete": {"TableName": TABLE, "Key": k}}
    return {"ConditionCheck": {"TableName": TABLE, "Key": k, "ConditionExpression": "attribute_exists(PK)"}}


def run(seed: int) -> list:
    """What a random run reads back: every query's pages, and the whole table at the end."""
    from moto import mock_aws

    rng = random.Random(seed)
    seen = []
    with mock_aws():
        client = table_client()
        for _ in range(120):
            step = rng.random()
            if step < 0.5:
                items, keys = [], set()
                for _ in range(rng.randrange(1, 6)):
                    o = op(rng)
                    body = next(iter(o.values()))
                    named = body.get("Key") or body["Item"]
                    k = (named["PK"]["S"], named["SK"]["S"])  # one op an item, as AWS requires
                    if k not in keys:
                        keys.add(k)
                        items.append(o)
                try:
                    client.transact_write_items(TransactItems=items)
                    seen.append("ok")
                except client.exceptions.TransactionCanceledException as e:
                    seen.append([r.get("Code") for r in e.response.get("CancellationReasons", [])])
            elif step < 0.7:
                client.put_item(TableName=TABLE, Item={**key(rng), "v": {"N": "7"}})
            elif step < 0.9:
                kwargs = {"KeyConditionExpression": "PK = :p AND SK BETWEEN :lo AND :hi",
                          "ExpressionAttributeValues": {":p": {"S": f"p{rng.randrange(5)}"}, ":lo": {"S": "s02"},
                                                        ":hi": {"S": "s09"}},
                          "ScanIndexForward": rng.random() < 0.5, "Limit": rng.randrange(1, 4)}
                if rng.random() < 0.3:
                    kwargs.update(IndexName="ByG", KeyConditionExpression="G = :p",
                                  ExpressionAttributeValues={":p": {"S": f"g{rng.randrange(2)}"}})
                page = client.query(TableName=TABLE, **kwargs)
                pages = [page["Items"]]
                while "LastEvaluatedKey" in page and len(pages) < 20:
                    page = client.query(TableName=TABLE, ExclusiveStartKey=page["LastEvaluatedKey"], **kwargs)
                    pages.append(page["Items"])
                seen.append(pages)
            elif step < 0.95:
                seen.append(client.get_item(TableName=TABLE, Key=key(rng)).get("Item"))
            else:
                keys = {(k["PK"]["S"], k["SK"]["S"]): k for k in (key(rng) for _ in range(3))}
                got = client.batch_get_item(RequestItems={TABLE: {"Keys": list(keys.values())}})
                seen.append(sorted(got["Responses"][TABLE], key=lambda i: (i["PK"]["S"], i["SK"]["S"])))
                seen.append(client.update_item(TableName=TABLE, Key=key(rng), UpdateExpression="SET w = :w",
                                               ExpressionAttributeValues={":w": {"L": [{"N": "1"}, {"M": {"a": {"B": b"x"}}}]}},
                                               ReturnValues="ALL_NEW")["Attributes"])
        seen.append(sorted(client.scan(TableName=TABLE)["Items"], key=lambda i: (i["PK"]["S"], i["SK"]["S"])))
        table = client.describe_table(TableName=TABLE)["Table"]
        seen.append({k: table[k] for k in ("KeySchema", "AttributeDefinitions", "ItemCount", "TableStatus")})
        seen.append([{k: v for k, v in i.items() if k in ("IndexName", "KeySchema", "Projection")}
                     for i in table["GlobalSecondaryIndexes"]])
        seen += other_services(rng)
    return seen


def other_services(rng) -> list:
    """S3 and SQS answers (the serializer is every service's): objects with metadata listed and
    read back, messages with attributes sent and received."""
    import boto3

    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    sqs = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    s3.create_bucket(Bucket="speedups")
    for i in range(3):
        s3.put_object(Bucket="speedups", Key=f"k/{i}", Body=b"x" * rng.randrange(1, 50), Metadata={"m": str(i)})
    listed = s3.list_objects_v2(Bucket="speedups", Prefix="k/")
    head = s3.head_object(Bucket="speedups", Key="k/1")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello", MessageAttributes={
        "a": {"DataType": "String", "StringValue": "v"}, "n": {"DataType": "Number", "StringValue": "3"}})
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["ApproximateReceiveCount"])
    return [[(o["Key"], o["Size"]) for o in listed["Contents"]], listed["KeyCount"], head["Metadata"],
            head["ContentLength"], [(m["Body"], m["MD5OfBody"], m["MessageAttributes"], m["Attributes"])
                                    for m in got["Messages"]]]


@pytest.mark.parametrize("seed", range(4))
def test_the_speedups_answer_as_motos_own_code(seed):
    assert moto_speedups.install()  # the moto this suite pins: every patch applies
    patched = run(seed)
    with moto_speedups.unpatched():
        own = run(seed)
    assert any(isinstance(s, list) and s and isinstance(s[0], str | None) and "ConditionalCheckFailed" in s
               for s in patched)  # cancelled transactions were among them
    assert patched == own
