"""The in-process queues stay bounded while a bulk ingest announces batch after batch before
one drain: codes (what a reconcile reads) are all kept, the ids that record the change are
capped per layer across its pending messages."""

from __future__ import annotations

import pytest

from eragraph.adapters.local.queue_local import LocalQueue
from eragraph.adapters.memory.queue_memory import MemoryQueue
from eragraph.domain.model import SegmentsAffected


@pytest.mark.parametrize("make", [MemoryQueue, LocalQueue])
def test_coalesced_ids_are_capped_and_codes_kept(make):
    queue = make()
    cap = queue.ids_max
    batches = 3 * cap // 256 + 1
    for b in range(batches):
        ids = tuple(f"chunk-{b}-{i}" for i in range(256))
        queue.send([SegmentsAffected(layer=0, added=ids, removed=ids[:3], reason="ingest", codes=(b % 64,), group=1)])
    [(_, msg)] = queue.receive(10)
    assert len(msg.added) == cap
    assert msg.added[:256] == tuple(f"chunk-0-{i}" for i in range(256))  # the first ones, in order
    assert len(msg.removed) == min(cap, 3 * batches)
    assert msg.codes == tuple(range(min(batches, 64)))  # every code, so the reconcile still sees every change
    assert msg.scoped


@pytest.mark.parametrize("make", [MemoryQueue, LocalQueue])
def test_one_oversized_message_is_capped_too(make):
    queue = make()
    ids = tuple(f"c{i}" for i in range(queue.ids_max + 10))
    queue.send([SegmentsAffected(layer=2, added=ids, codes=(5,), group=0)])
    [(_, msg)] = queue.receive(1)
    assert msg.added == ids[:queue.ids_max] and msg.codes == (5,)


@pytest.mark.parametrize("make", [MemoryQueue, LocalQueue])
def test_the_ids_cap_is_the_layer_s_across_its_shards(make):
    """A bulk ingest's layer-0 messages are pending in 16 shards; together they keep at most
    ``ids_max`` ids of each kind (a cap per message held 16 times as many), every shard keeps
    all its codes, and a received message hands its share of the cap back."""
    queue = make()
    cap = queue.ids_max
    per = cap // 4  # four shards fill the cap; the other twelve come after
    for group in range(16):
        ids = tuple(f"chunk-{group}-{i}" for i in range(per))
        queue.send([SegmentsAffected(layer=0, added=ids, removed=ids[:2], codes=(group << 8,), group=group)])
    queue.send([SegmentsAffected(layer=1, added=("summary-a",), codes=(7,), group=3)])  # another layer's own cap
    got = [msg for _, msg in queue.receive(20)]
    layer0 = [msg for msg in got if msg.layer == 0]
    assert sorted(msg.codes[0] >> 8 for msg in layer0) == list(range(16))  # every shard's change reaches a reconcile
    assert sum(len(msg.added) for msg in layer0) == cap
    assert [len(msg.added) for msg in layer0[:4]] == [per] * 4 and not any(msg.added for msg in layer0[4:])
    assert sum(len(msg.removed) for msg in layer0) == 32  # under the cap: all kept
    assert [msg.added for msg in got if msg.layer == 1] == [("summary-a",)]
    # received: the layer's share is free again
    queue.send([SegmentsAffected(layer=0, added=tuple(f"late-{i}" for i in range(cap + 5)), codes=(1,), group=0)])
    [(_, late)] = queue.receive(1)
    assert len(late.added) == cap


def test_pending_codes_are_kept_distinct_and_sorted_in_an_array():
    """A pending message's codes cost 8 bytes each (an int64 array merged every so often), not a
    set's Python ints: every code still reaches the reconcile, once and in order; a code beyond
    int64 keeps them in a set, with the same answer."""
    from eragraph.adapters.memory.queue_memory import PendingCodes

    codes = PendingCodes([5, 3])
    sent = [((i * 7919) % 20011) for i in range(3 * PendingCodes.merge_every)]
    for at in range(0, len(sent), 256):
        codes.update(sent[at:at + 256])
    assert codes._array is not None and codes._array.dtype.itemsize == 8
    assert codes.sorted() == tuple(sorted(set(sent) | {3, 5})) and len(codes) == len(set(sent) | {3, 5})
    wide = PendingCodes([1, 2])
    wide.update([(3 << 62) | 1, 2])
    wide._merge()
    assert wide.sorted() == (1, 2, (3 << 62) | 1)
