"""The fakes refuse what AWS refuses, with AWS's error code: the limits moto holds itself and the
ones tests/aws_limits.py adds (DynamoDB and SQS here; Lambda and API Gateway in
test_lambda_limits.py). Each test also shows the largest request that still passes, so a limit
held too tightly fails here as well."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

import aws_limits
from contract.aws_factories import REGION, fake_credentials

KB = 1024


@pytest.fixture
def dynamodb():
    fake_credentials()
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                                       {"AttributeName": "SK", "KeyType": "RANGE"}],
                            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                                  {"AttributeName": "SK", "AttributeType": "S"}])
        yield client


@pytest.fixture
def sqs():
    fake_credentials()
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def item(pk: str, sk: str, size: int = 0) -> dict:
    return {"PK": {"S": pk}, "SK": {"S": sk}, **({"v": {"S": "x" * size}} if size else {})}


def refused(call, code: str, match: str = "") -> ClientError:
    with pytest.raises(ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code
    assert match in caught.value.response["Error"]["Message"]
    return caught.value


# ----- DynamoDB: what moto holds -----
def test_an_item_over_400_kb_is_refused_by_every_write(dynamodb):
    dynamodb.put_item(TableName="t", Item=item("a", "1", 400_000))
    big = item("a", "2", 410_000)
    refused(lambda: dynamodb.put_item(TableName="t", Item=big), "ValidationException", "Item size")
    refused(lambda: dynamodb.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": big}}]}),
            "ValidationException", "Item size")
    refused(lambda: dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": big}}]),
            "ValidationException", "Item size")
    refused(lambda: dynamodb.update_item(TableName="t", Key=item("a", "1"), UpdateExpression="SET w = :w",
                                         ExpressionAttributeValues={":w": {"S": "y" * 20_000}}),
            "ValidationException", "Item size")


def test_a_transaction_takes_100_items_and_a_batch_get_100_keys(dynamodb):
    puts = [{"Put": {"TableName": "t", "Item": item("t", str(i))}} for i in range(101)]
    dynamodb.transact_write_items(TransactItems=puts[:100])
    refused(lambda: dynamodb.transact_write_items(TransactItems=puts), "ValidationException",
            "less than or equal to 100")
    keys = [item("t", str(i)) for i in range(101)]
    assert len(dynamodb.batch_get_item(RequestItems={"t": {"Keys": keys[:100]}})["Responses"]["t"]) == 100
    refused(lambda: dynamodb.batch_get_item(RequestItems={"t": {"Keys": keys}}), "ValidationException",
            "less than or equal to 100")


def test_a_query_page_stops_at_1_mb(dynamodb):
    for i in range(8):
        dynamodb.put_item(TableName="t", Item=item("q", str(i), 300_000))
    page = dynamodb.query(TableName="t", KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "q"}})
    assert page["Count"] == 3 and "LastEvaluatedKey" in page  # 3 x 300 KB; a fourth would pass 1 MB
    scan = dynamodb.scan(TableName="t")
    assert scan["Count"] == 3 and "LastEvaluatedKey" in scan


# ----- DynamoDB: what the harness adds -----
def test_a_batch_write_takes_25_requests(dynamodb):
    puts = [{"PutRequest": {"Item": item("b", str(i))}} for i in range(26)]
    dynamodb.batch_write_item(RequestItems={"t": puts[:25]})
    refused(lambda: dynamodb.batch_write_item(RequestItems={"t": puts}), "ValidationException",
            "less than or equal to 25")
    assert dynamodb.query(TableName="t", KeyConditionExpression="PK = :p",
                          ExpressionAttributeValues={":p": {"S": "b"}})["Count"] == 25  # nothing of the 26 written


def test_a_transaction_takes_4_mb(dynamodb):
    puts = [{"Put": {"TableName": "t", "Item": item("m", str(i), 380 * KB)}} for i in range(11)]
    assert aws_limits.transaction_bytes(puts[:10]) < 4 * KB * KB < aws_limits.transaction_bytes(puts)
    dynamodb.transact_write_items(TransactItems=puts[:10])
    refused(lambda: dynamodb.transact_write_items(TransactItems=puts), "ValidationException",
            "cannot be larger than 4 MB")
    updates = [{"Update": {"TableName": "t", "Key": item("u", str(i)), "UpdateExpression": "SET v = :v",
                           "ExpressionAttributeValues": {":v": {"S": "y" * 380 * KB}}}} for i in range(11)]
    refused(lambda: dynamodb.transact_write_items(TransactItems=updates), "ValidationException", "4 MB")
    assert dynamodb.query(TableName="t", KeyConditionExpression="PK = :p",
                          ExpressionAttributeValues={":p": {"S": "u"}})["Count"] == 0  # nothing half-done


def test_a_transactional_get_takes_100_items_as_aws_does(dynamodb):
    gets = [{"Get": {"TableName": "t", "Key": item("g", str(i))}} for i in range(101)]
    assert len(dynamodb.transact_get_items(TransactItems=gets[:100])["Responses"]) == 100
    refused(lambda: dynamodb.transact_get_items(TransactItems=gets), "ValidationException",
            "less than or equal to 100")


# ----- SQS -----
def test_a_message_is_counted_in_bytes_with_its_attributes(sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x" * (256 * KB))
    refused(lambda: sqs.send_message(QueueUrl=url, MessageBody="é" * (128 * KB + 1)),  # 2 bytes each
            "InvalidParameterValue", "Message must be shorter than 262144 bytes")
    attribute = {"kind": {"DataType": "String", "StringValue": "y" * 100}}
    refused(lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * (256 * KB - 100), MessageAttributes=attribute),
            "InvalidParameterValue", "262144")
    sqs.send_message(QueueUrl=url, MessageBody="x" * (256 * KB - 120), MessageAttributes=attribute)
    small = sqs.create_queue(QueueName="small", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    refused(lambda: sqs.send_message(QueueUrl=small, MessageBody="x" * 1025), "InvalidParameterValue", "1024")


def test_a_batch_is_256_kb_at_most(sqs):
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    entries = [{"Id": str(i), "MessageBody": "x" * (64 * KB)} for i in range(5)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries[:4])
    refused(lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries), "AWS.SimpleQueueService.BatchRequestTooLong")
    refused(lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)]),
            "AWS.SimpleQueueService.TooManyEntriesInBatchRequest")


def test_a_fifo_group_delivers_in_order_one_in_flight_at_a_time(sqs):
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true",
                                                          "ContentBasedDeduplication": "true"})["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"a{i}", MessageGroupId="a")
    sqs.send_message(QueueUrl=url, MessageBody="b0", MessageGroupId="b")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in first] == ["a0"]
    # while a0 is in flight no later message of its group is delivered; another group's is
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])] == ["b0"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]] == ["a1", "a2"]
