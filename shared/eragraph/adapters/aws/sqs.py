"""SQS queue of SegmentsAffected messages.

Bodies are the messages' JSON (``SegmentsAffected.to_dict``); attributes carry the type and
layer so a subscription filter or a human in the console can read them without parsing.

FIFO ordering (``.fifo`` queue URLs): MessageGroupId = ``layer-<l>``. Reconciling a layer is a
full diff from the *stored* state of that layer (services.resummarize), not an application of
the message's delta, so the only way to lose an update would be two consumers reconciling the
same layer at once and the slower one writing segments computed from a stale read. FIFO
delivers at most one in-flight batch per message group, which serializes the consumers of a
layer; the second guard is the conditional write in ``GraphStore.replace_segments`` (the
layer's version item), which turns any remaining race (e.g. the reindex job reconciling while
a consumer does) into a ConflictError and a recomputation. Different layers proceed in
parallel. A group per (layer, LSH-prefix) would parallelize more but make concurrent writers
of one layer the normal case; one group per layer keeps them the exception.

MessageDeduplicationId: a hash of the body. Identical bodies name the identical change (the
added/removed ids are content-derived), so a retried send, a re-delivered S3 event or two
reconciles announcing the same result collapse into one delivery within SQS's 5-minute
window. A body without ids (a reindex "requeue") also carries the minute it was sent, so a
later requeue is never swallowed by an earlier one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from ...domain.model import SegmentsAffected

SQS_BATCH = 10


def dedup_id(message: SegmentsAffected, now: float | None = None) -> str:
    body = json.dumps(message.to_dict(), sort_keys=True)
    if not message.added and not message.removed:
        body += f"|{int((time.time() if now is None else now) // 60)}"
    return hashlib.sha256(body.encode()).hexdigest()


def message_entry(index: int, message: SegmentsAffected, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Id": str(index),
        "MessageBody": json.dumps(message.to_dict(), separators=(",", ":")),
        "MessageAttributes": {
            "type": {"DataType": "String", "StringValue": "SegmentsAffected"},
            "layer": {"DataType": "Number", "StringValue": str(message.layer)},
        },
    }
    if fifo:
        entry["MessageGroupId"] = f"layer-{message.layer}"
        entry["MessageDeduplicationId"] = dedup_id(message)
    return entry


class SqsQueue:
    def __init__(self, queue_url: str, client: Any = None, wait_seconds: int = 0) -> None:
        if client is None:
            import boto3

            client = boto3.client("sqs")
        self.url = queue_url
        self.client = client
        self.fifo = queue_url.endswith(".fifo")
        self.wait_seconds = wait_seconds

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        for start in range(0, len(messages), SQS_BATCH):
            chunk = messages[start:start + SQS_BATCH]
            entries = [message_entry(i, m, self.fifo) for i, m in enumerate(chunk)]
            for _attempt in range(5):
                result = self.client.send_message_batch(QueueUrl=self.url, Entries=entries)
                failed = {f["Id"] for f in result.get("Failed", ())
                          if not f.get("SenderFault", False)}
                fatal = [f for f in result.get("Failed", ()) if f.get("SenderFault", False)]
                if fatal:
                    raise RuntimeError(f"SQS refused messages: {fatal}")
                if not failed:
                    break
                entries = [e for e in entries if e["Id"] in failed]
                time.sleep(0.2 * (_attempt + 1))
            else:
                raise RuntimeError(f"SQS kept failing {len(entries)} messages")

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        response = self.client.receive_message(
            QueueUrl=self.url, MaxNumberOfMessages=max(1, min(max_messages, SQS_BATCH)),
            WaitTimeSeconds=self.wait_seconds, MessageAttributeNames=["All"])
        out = []
        for m in response.get("Messages", ()):
            out.append((m["ReceiptHandle"], SegmentsAffected.from_dict(json.loads(m["Body"]))))
        return out

    def ack(self, receipts: Sequence[str]) -> None:
        for start in range(0, len(receipts), SQS_BATCH):
            entries = [{"Id": str(i), "ReceiptHandle": r}
                       for i, r in enumerate(receipts[start:start + SQS_BATCH])]
            self.client.delete_message_batch(QueueUrl=self.url, Entries=entries)

    def pending(self) -> int:
        attrs = self.client.get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        return int(attrs.get("ApproximateNumberOfMessages", 0))
