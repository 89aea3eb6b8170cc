"""A message's codes as the in-process queue hands them over (domain.code_list.CodeList): the
same ints as a tuple would hold, in the same order, at 8 bytes a code."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from eragraph.adapters.memory.queue_memory import MemoryQueue, PendingCodes
from eragraph.domain.code_list import CodeList
from eragraph.domain.model import SegmentsAffected


def test_a_code_list_reads_and_compares_as_the_tuple_of_its_ints():
    codes = [3, 5, 2**40 + 1, 2**62, 9]
    listed = CodeList(np.array(codes, dtype=np.int64))
    assert list(listed) == codes and all(type(c) is int for c in listed)
    assert len(listed) == 5 and listed[2] == 2**40 + 1 and listed[-1] == 9
    assert listed[1:3] == (5, 2**40 + 1) and isinstance(listed[1:3], CodeList)
    assert listed == tuple(codes) and tuple(codes) == listed and listed == CodeList(np.array(codes))
    assert listed != tuple(codes[:-1]) and listed != (3, 5, 2**40 + 1, 2**62, 8) and listed != "abc"
    assert listed != codes and CodeList(np.arange(3)) != range(3)  # as a tuple: not a list or a range
    assert hash(listed) == hash(tuple(codes)) and bool(listed) and not CodeList(np.empty(0, dtype=np.int64))
    with pytest.raises(ValueError):
        listed._codes[0] = 1  # read-only: a message is a value


def test_a_message_holding_a_code_list_is_the_message_holding_the_tuple():
    codes = (1, 4, 7)
    mine = SegmentsAffected(layer=0, codes=CodeList(np.array(codes)), op="x")
    theirs = SegmentsAffected(layer=0, codes=codes, op="x")
    assert mine == theirs and hash(mine) == hash(theirs) and mine.scoped
    assert mine.to_dict() == theirs.to_dict() and SegmentsAffected.from_dict(mine.to_dict()) == theirs
    assert mine.merged(SegmentsAffected(layer=0, codes=(2,))).codes == (1, 2, 4, 7)


def test_the_queue_hands_a_coalesced_layer_s_codes_over_at_8_bytes_a_code():
    """A bulk ingest's layer-0 announces, 200k distinct codes coalesced into one message: what
    the received message holds in Python memory (a tuple of Python ints: about 46 bytes a code)."""
    queue = MemoryQueue()
    rng = np.random.default_rng(0)
    sent = set()
    for _ in range(0, 200_000, 256):
        batch = rng.integers(0, 2**40, 256).tolist()
        sent.update(batch)
        queue.send([SegmentsAffected(layer=0, codes=tuple(sorted(batch)), op="o")])
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        [(_, message)] = queue.receive()
        held, peak = (x - base for x in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()
    assert len(message.codes) == len(sent) and list(message.codes) == sorted(sent)
    # at its peak the array and its merged copy (a tuple of Python ints: 53 bytes a code)
    assert peak < 17 * len(sent) + (256 << 10), f"{peak / len(sent):.1f} bytes a code at the peak"
    assert held < 9 * len(sent) + (64 << 10), f"{held / len(sent):.1f} bytes a code held"


@pytest.mark.parametrize("seed", range(5))
def test_pending_codes_are_the_sorted_distinct_codes_sent(seed):
    rng = np.random.default_rng(seed)
    pending, sent = PendingCodes(), []
    pending.merge_every = int(rng.integers(1, 50))
    for _ in range(int(rng.integers(0, 40))):
        batch = rng.integers(0, 60, int(rng.integers(0, 30))).tolist()  # repeats within and across
        sent += batch
        pending.update(batch)
    assert list(pending.sorted()) == sorted(set(sent)) and len(pending) == len(set(sent))


def test_codes_beyond_int64_stay_a_tuple():
    pending = PendingCodes([2**63 + 5, 1])
    assert pending.sorted() == (1, 2**63 + 5) and isinstance(pending.sorted(), tuple)
