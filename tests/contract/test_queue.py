"""MessageQueue contract: every backend in factories.QUEUE_FACTORIES, SqsQueue (FIFO, with a
dead-letter queue) under moto included. Every queue keeps each layer's messages in order,
hides a received message until it is acked, and redelivers it if it is not; the in-process
queues (memory, local) also merge a layer's pending messages and keep one order across layers,
which FIFO SQS does not (it orders within a message group and deduplicates by operation)."""

from __future__ import annotations

import time

import pytest

from eragraph.domain.model import SegmentsAffected

IN_PROCESS_QUEUES = ("memory", "local")


def in_process_only(backend) -> None:
    if backend.name not in IN_PROCESS_QUEUES:
        pytest.skip(f"{backend.name}: FIFO SQS orders within a message group and merges nothing")


def drain_all(queue):
    """Receive and ack until nothing comes (a FIFO SQS group waits behind its unacked message)."""
    out = []
    while True:
        batch = queue.receive(10)
        if not batch:
            return out
        out.extend(batch)
        queue.ack([r for r, _ in batch])


def test_empty_queue(queue):
    assert queue.pending() == 0
    assert queue.receive(10) == []


def test_each_layer_keeps_its_order(queue):
    """Every queue: a layer's changes arrive in the order sent, each once (the in-process queues
    may merge them into fewer messages, SQS delivers each; either way none is lost or reordered)."""
    msgs = [SegmentsAffected(layer=layer, added=(f"n{layer}-{i}",), reason="ingest", op=f"op{layer}-{i}")
            for i in range(3) for layer in (3, 0, 2, 1)]
    queue.send(msgs[:5])
    queue.send(msgs[5:])
    got = drain_all(queue)
    assert len({r for r, _ in got}) == len(got)  # distinct receipts
    for layer in (0, 1, 2, 3):
        delivered = [a for _, m in got if m.layer == layer for a in m.added]
        assert delivered == [f"n{layer}-{i}" for i in range(3)], (layer, got)
    assert queue.pending() == 0


def test_fifo_order_across_layers(queue, queue_backend):
    in_process_only(queue_backend)
    msgs = [SegmentsAffected(layer=layer, added=(f"n{layer}",), reason="ingest") for layer in (3, 0, 2, 1)]
    queue.send(msgs[:2])
    queue.send(msgs[2:])
    assert queue.pending() == 4
    got = drain_all(queue)
    assert [m for _, m in got] == msgs
    assert len({r for r, _ in got}) == 4  # distinct receipts
    assert queue.pending() == 0


def test_receive_respects_max_messages(queue, queue_backend):
    queue.send([SegmentsAffected(layer=i) for i in range(5)])
    first = queue.receive(2)
    assert 1 <= len(first) <= 2
    if queue_backend.name in IN_PROCESS_QUEUES:
        assert [m.layer for _, m in first] == [0, 1]
        assert queue.pending() == 3
    rest = drain_all(queue)
    assert sorted(m.layer for _, m in first + rest) == [0, 1, 2, 3, 4]


def test_pending_messages_of_a_layer_coalesce(queue, queue_backend):
    in_process_only(queue_backend)
    queue.send([SegmentsAffected(layer=0, added=("a", "b"), reason="ingest")])
    queue.send([SegmentsAffected(layer=1, added=("s",), reason="reconcile:0")])
    queue.send([SegmentsAffected(layer=0, added=("b", "c"), removed=("x",), reason="ingest"),
                SegmentsAffected(layer=0, removed=("x", "y"), reason="remove")])
    assert queue.pending() == 2
    (_, first), (_, second) = queue.receive(10)
    assert first == SegmentsAffected(layer=0, added=("a", "b", "c"), removed=("x", "y"), reason="ingest+remove")
    assert second.layer == 1 and second.added == ("s",)


def test_in_flight_message_does_not_absorb_new_ones(queue):
    queue.send([SegmentsAffected(layer=0, added=("a",))])
    [(receipt, msg)] = queue.receive(1)
    queue.send([SegmentsAffected(layer=0, added=("b",))])
    assert queue.pending() == 1
    queue.ack([receipt])
    [(_, again)] = queue.receive(1)
    assert again.added == ("b",)


def test_ack_removes_and_tolerates_unknown_receipts(queue):
    queue.send([SegmentsAffected(layer=0), SegmentsAffected(layer=1)])
    batch = queue.receive(10)
    queue.ack([r for r, _ in batch])
    queue.ack([r for r, _ in batch])  # acking twice is harmless
    queue.ack(["no-such-receipt"])
    assert queue.pending() == 0
    assert queue.receive(10) == []


def test_local_queue_takes_concurrent_senders():
    import threading

    from eragraph.adapters.local.queue_local import LocalQueue

    queue = LocalQueue()

    def send(worker: int) -> None:
        for n in range(300):
            queue.send([SegmentsAffected(layer=worker * 1000 + n, reason=f"w{worker}")])

    threads = [threading.Thread(target=send, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [m for _, m in drain_all(queue)]
    assert len(got) == 1800
    for w in range(6):  # each sender's messages stay in its order
        assert [m.layer for m in got if m.reason == f"w{w}"] == [w * 1000 + n for n in range(300)]


# --- a consumer that dies: visibility and redrive (SQS; the in-process queues have neither) ----

def test_an_unacked_message_comes_back_after_its_visibility_timeout(queue, queue_backend):
    if not hasattr(queue, "dead_letters"):
        pytest.skip(f"{queue_backend.name}: no visibility timeout (an in-process consumer that dies takes its queue along)")
    from contract.aws_factories import SQS_VISIBILITY_SECONDS

    msg = SegmentsAffected(layer=0, added=("a",), op="op-a")
    queue.send([msg])
    [(first, got)] = queue.receive(10)
    assert got == msg
    queue.send([SegmentsAffected(layer=0, added=("b",), op="op-b")])
    assert queue.receive(10) == []  # the group waits behind its in-flight message
    time.sleep(SQS_VISIBILITY_SECONDS + 0.3)
    [(again, got)] = queue.receive(1)
    assert got == msg and again != first  # redelivered, under a new receipt
    queue.ack([again])
    [(last, got)] = queue.receive(10)
    assert got.added == ("b",)
    queue.ack([last])
    assert queue.pending() == 0


def test_a_message_received_too_often_goes_to_the_dead_letter_queue(queue, queue_backend):
    if not hasattr(queue, "dead_letters"):
        pytest.skip(f"{queue_backend.name}: no dead-letter queue")
    from contract.aws_factories import SQS_MAX_RECEIVES

    poison = SegmentsAffected(layer=0, added=("poison",), op="op-poison")
    fine = SegmentsAffected(layer=1, added=("fine",), op="op-fine")
    queue.send([poison, fine])
    for attempt in range(SQS_MAX_RECEIVES):  # each consumer fails on it: returned at once
        batch = queue.receive(10)
        assert [m for _, m in batch if m != fine] == [poison], attempt
        queue.ack([r for r, m in batch if m == fine])
        queue.client.change_message_visibility(QueueUrl=queue.url, VisibilityTimeout=0,
                                               ReceiptHandle=next(r for r, m in batch if m == poison))
    assert queue.receive(10) == [] and queue.pending() == 0  # moved on the next receive
    dead = queue.client.receive_message(QueueUrl=queue.dead_letters, MaxNumberOfMessages=10)["Messages"]
    assert [SegmentsAffected.from_dict(__import__("json").loads(m["Body"])) for m in dead] == [poison]
