"""MessageQueue contract: every backend in factories.QUEUE_FACTORIES."""

from __future__ import annotations

from eragraph.domain.model import SegmentsAffected


def drain_all(queue):
    out = []
    while True:
        batch = queue.receive(10)
        if not batch:
            return out
        out.extend(batch)


def test_empty_queue(queue):
    assert queue.pending() == 0
    assert queue.receive(10) == []


def test_fifo_order_across_layers(queue):
    msgs = [SegmentsAffected(layer=layer, added=(f"n{layer}",), reason="ingest") for layer in (3, 0, 2, 1)]
    queue.send(msgs[:2])
    queue.send(msgs[2:])
    assert queue.pending() == 4
    got = drain_all(queue)
    assert [m for _, m in got] == msgs
    assert len({r for r, _ in got}) == 4  # distinct receipts
    assert queue.pending() == 0


def test_receive_respects_max_messages(queue):
    queue.send([SegmentsAffected(layer=i) for i in range(5)])
    first = queue.receive(2)
    assert [m.layer for _, m in first] == [0, 1]
    assert queue.pending() == 3
    assert [m.layer for _, m in queue.receive(10)] == [2, 3, 4]


def test_pending_messages_of_a_layer_coalesce(queue):
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
