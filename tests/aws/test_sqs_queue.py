"""SqsQueue on moto: FIFO groups per layer, content dedup ids, batches of ten, attributes."""

from __future__ import annotations

import json

from aws_helpers import REGION, fake_credentials

from eragraph.adapters.aws.queue_sqs import SqsQueue, dedup_id, message_entry
from eragraph.domain.model import SegmentsAffected


def make_queue():
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    return SqsQueue(url, client=sqs), sqs


def test_entries_group_by_layer_and_dedup_by_content():
    a = SegmentsAffected(layer=2, added=("x",), reason="ingest")
    e = message_entry(0, a, fifo=True)
    assert e["MessageGroupId"] == "layer-2"
    assert e["MessageDeduplicationId"] == dedup_id(SegmentsAffected(layer=2, added=("x",), reason="ingest"))
    assert e["MessageDeduplicationId"] != dedup_id(SegmentsAffected(layer=2, added=("y",), reason="ingest"))
    assert e["MessageAttributes"]["layer"] == {"DataType": "Number", "StringValue": "2"}
    assert SegmentsAffected.from_dict(json.loads(e["MessageBody"])) == a
    assert "MessageGroupId" not in message_entry(0, a, fifo=False)


def test_groups_name_the_shard_and_dedup_ids_name_the_operation():
    from eragraph.services.announce import messages_for

    ingest = messages_for(0, 8, added=[("c1", 0b00010000), ("c2", 0b11110000)], reason="ingest")
    assert [message_entry(0, m, fifo=True)["MessageGroupId"] for m in ingest] == ["layer-0-1", "layer-0-15"]
    assert [m.codes for m in ingest] == [(0b00010000,), (0b11110000,)]
    # the same change announced again later (deleted, then ingested again) is another operation
    again = messages_for(0, 8, added=[("c1", 0b00010000), ("c2", 0b11110000)], reason="ingest")
    assert [m.to_dict()["added"] for m in again] == [m.to_dict()["added"] for m in ingest]
    assert {dedup_id(m) for m in again}.isdisjoint(dedup_id(m) for m in ingest)
    # a sender's retry of one message keeps its id; messages of one operation differ by group
    assert dedup_id(ingest[0]) == dedup_id(ingest[0]) != dedup_id(ingest[1])
    whole = messages_for(3, 8, reason="requeue")
    assert len(whole) == 1 and not whole[0].scoped
    assert message_entry(0, whole[0], fifo=True)["MessageGroupId"] == "layer-3"


def test_send_receive_ack_in_batches_and_duplicates_collapse():
    fake_credentials()
    from moto import mock_aws

    with mock_aws():
        queue, _ = make_queue()
        msgs = [SegmentsAffected(layer=i % 3, added=(f"n{i}",)) for i in range(23)]
        queue.send(msgs)
        queue.send(msgs[:5])  # a retried send: same dedup ids, dropped by SQS
        got = []
        while True:
            batch = queue.receive(10)
            if not batch:
                break
            got += batch
            queue.ack([r for r, _ in batch])
        assert sorted(m.added for _, m in got) == sorted(m.added for m in msgs)
        for layer in range(3):  # FIFO within a group
            assert [m for _, m in got if m.layer == layer] == [m for m in msgs if m.layer == layer]
        assert queue.pending() == 0
