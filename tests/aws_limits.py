"""AWS's size and count limits that moto 5.2.5 does not hold, held in the test process so that
a request AWS would refuse is refused here too, with AWS's error code.

What moto already refuses as AWS does (tests/aws/test_aws_limits.py shows each):
- DynamoDB: an item over 400 KB (PutItem, UpdateItem, BatchWriteItem, TransactWriteItems:
  ValidationException; moto's line is 405,000 bytes, AWS's 409,600), more than 100 actions in a
  TransactWriteItems, more than 100 keys in a BatchGetItem, a Query or Scan page over 1 MB
  (moto cuts at 1,000,000 bytes, AWS at 1 MB);
- SQS: more than 10 entries or 1 MiB in a SendMessageBatch; FIFO: a group's next message is not
  delivered while one of it is in flight.

What ``install`` adds:
- DynamoDB: more than 25 requests in a BatchWriteItem (ValidationException); a
  TransactWriteItems whose items add up to more than 4 MB (ValidationException); TransactGetItems
  takes 100 items, as AWS does (moto refused more than 25: a fake stricter than AWS hides
  nothing, but it would refuse a read the adapters may make);
- DynamoDB: each request is atomic, as a real table's single-item conditional writes and
  transactions are (moto's in-process backend is not thread-safe: two threads' conditional
  writes could both read the old item and both succeed, so a test of concurrent writers could
  pass or fail by the machine's load);
- SQS: a message's size is its body's UTF-8 bytes plus its attributes' names, types and values
  (moto counted the body's characters only), at most 256 KiB or the queue's MaximumMessageSize
  if lower (InvalidParameterValue), and a SendMessageBatch's messages together at most 256 KiB
  (AWS.SimpleQueueService.BatchRequestTooLong). AWS raised its ceiling to 1 MiB in 2025, but a
  queue keeps the MaximumMessageSize it was created with (256 KiB before then) and the template
  states none: a stack's queue may hold 256 KiB, so the code must fit it.

tests/conftest.py installs it in the test process, where the moto mocks and servers run."""

from __future__ import annotations

import functools
import threading
from typing import Any

BATCH_WRITE_MAX = 25
TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
TRANSACT_GET_MAX = 100
SQS_MAX_BYTES = 256 * 1024


def dynamodb_value_bytes(value: dict) -> int:
    """An attribute value's size as DynamoDB counts it (wire JSON: {"S": ...}, {"N": ...}, ...)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    return DynamoType(value).size()


def item_bytes(item: dict) -> int:
    return sum(len(name.encode("utf-8")) + dynamodb_value_bytes(v) for name, v in (item or {}).items())


def transaction_bytes(transact_items: list[dict]) -> int:
    """The aggregate size of a TransactWriteItems' items as the request states them: a Put's item,
    an Update's key and the values its expression writes, a Delete's or ConditionCheck's key."""
    total = 0
    for entry in transact_items:
        (kind, action), = entry.items()
        if kind == "Put":
            total += item_bytes(action.get("Item", {}))
        else:
            total += item_bytes(action.get("Key", {}))
            if kind == "Update":
                total += sum(dynamodb_value_bytes(v) for v in (action.get("ExpressionAttributeValues") or {}).values())
    return total


def sqs_message_bytes(body: str, attributes: dict[str, Any] | None) -> int:
    """SQS counts a message as its body plus, for each attribute, its name, data type and value."""
    total = len(body.encode("utf-8"))
    for name, attr in (attributes or {}).items():
        kind = attr.get("DataType", attr.get("data_type", ""))
        value = attr.get("StringValue", attr.get("string_value"))
        blob = attr.get("BinaryValue", attr.get("binary_value"))
        total += len(name.encode("utf-8")) + len(str(kind).encode("utf-8"))
        total += len(str(value).encode("utf-8")) if value is not None else len(blob or b"")
    return total


def _validation(message: str) -> Exception:
    from moto.dynamodb.exceptions import MockValidationException

    return MockValidationException(message)


def _dynamodb() -> None:
    from moto.dynamodb import responses

    handler = responses.DynamoHandler
    if getattr(handler.batch_write_item, "aws_limits", False):
        return
    batch_write, transact_write = handler.batch_write_item, handler.transact_write_items

    @functools.wraps(batch_write)
    def batch_write_item(self):
        requests = sum(len(v) for v in (self.body.get("RequestItems") or {}).values())
        if requests > BATCH_WRITE_MAX:
            raise _validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: "
                              f"Map value must satisfy constraint: [Member must have length less than or equal to "
                              f"{BATCH_WRITE_MAX}, Member must have length greater than or equal to 1]")
        return batch_write(self)

    @functools.wraps(transact_write)
    def transact_write_items(self):
        size = transaction_bytes(self.body.get("TransactItems") or [])
        if size > TRANSACTION_MAX_BYTES:
            raise _validation(f"Transaction request cannot be larger than 4 MB (its items: {size} bytes)")
        return transact_write(self)

    call_action = handler.call_action
    one_at_a_time = threading.RLock()

    @functools.wraps(call_action)
    def atomic_call_action(self):
        with one_at_a_time:
            return call_action(self)

    batch_write_item.aws_limits = True
    handler.batch_write_item, handler.transact_write_items = batch_write_item, transact_write_items
    handler.call_action = atomic_call_action
    responses.TRANSACTION_MAX_ITEMS = TRANSACT_GET_MAX  # read by transact_get_items only


def _sqs() -> None:
    from moto.sqs import models
    from moto.sqs.exceptions import InvalidParameterValue, SQSException

    backend = models.SQSBackend
    if getattr(backend.send_message, "aws_limits", False):
        return
    send, send_batch = backend.send_message, backend.send_message_batch

    @functools.wraps(send)
    def send_message(self, queue_name, message_body, message_attributes=None, *args, **kwargs):
        limit = min(int(self.get_queue(queue_name).maximum_message_size), SQS_MAX_BYTES)
        if sqs_message_bytes(message_body, message_attributes) > limit:
            raise InvalidParameterValue(f"One or more parameters are invalid. Reason: Message must be shorter than "
                                        f"{limit} bytes.")
        return send(self, queue_name, message_body, message_attributes, *args, **kwargs)

    @functools.wraps(send_batch)
    def send_message_batch(self, queue_name, entries):
        total = sum(sqs_message_bytes(e["MessageBody"], e.get("MessageAttributes")) for e in entries.values())
        if total > SQS_MAX_BYTES:
            raise SQSException("BatchRequestTooLong", f"Batch requests cannot be longer than {SQS_MAX_BYTES} bytes. "
                                                      f"You have sent {total} bytes.")
        return send_batch(self, queue_name, entries)

    send_message.aws_limits = True
    backend.send_message, backend.send_message_batch = send_message, send_message_batch


def install() -> None:
    try:
        import moto  # noqa: F401
    except ImportError:
        return
    _dynamodb()
    _sqs()
