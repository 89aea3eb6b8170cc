"""MessageQueue in a list: FIFO with coalescing by dedup key."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from ...domain.code_list import CodeList
from ...domain.model import SegmentsAffected


class PendingCodes:
    """The distinct codes of a pending message, 8 bytes each: a sorted int64 array, into which
    the codes sent since are merged every ``merge_every`` of them (a set of Python ints costs
    about 90 bytes a code: 60 MB for the million distinct codes a large ingest's layer-0
    messages carry before one drain). Codes beyond int64 (a placed code of a late access
    partition at 62 planes) turn it into a set."""

    merge_every = 1024  # a layer's 16 shards hold at most 16 times this many codes as Python ints

    def __init__(self, codes: Iterable[int] = ()) -> None:
        self._array: np.ndarray | None = np.empty(0, dtype=np.int64)
        self._new: list[int] = []
        self._set: set[int] | None = None
        self.update(codes)

    def update(self, codes: Iterable[int]) -> None:
        if self._set is not None:
            self._set.update(codes)
            return
        self._new.extend(codes)
        if len(self._new) >= self.merge_every:
            self._merge()

    def _merge(self) -> None:
        if self._set is not None or not self._new:
            return
        try:
            new = np.unique(np.asarray(self._new, dtype=np.int64))
        except OverflowError:
            self._set = set(self._array.tolist()) | set(self._new)
            self._array, self._new = None, []
            return
        self._new = []
        if not len(self._array):
            self._array = new
            return
        # merged into the sorted array: its one new copy at once (np.union1d would sort a
        # concatenation: about three copies of the whole at its peak)
        at = np.searchsorted(self._array, new)
        inside = at < len(self._array)
        inside[inside] = self._array[at[inside]] == new[inside]
        self._array = np.insert(self._array, at[~inside], new[~inside])

    def __len__(self) -> int:
        self._merge()
        return len(self._set) if self._set is not None else len(self._array)

    def sorted(self) -> Sequence[int]:
        """The codes in order: a ``CodeList`` over the array (8 bytes a code, not a Python int
        each), or a tuple when they outgrew int64."""
        self._merge()
        return tuple(sorted(self._set)) if self._set is not None else CodeList(self._array)


class MemoryQueue:
    """FIFO queue; a message whose dedup key (layer and shard) is already pending is coalesced
    into it, as a burst into one part of a layer needs one reconcile. Coalescing keeps the
    union of codes and of ids, so a bulk ingest announcing batch after batch costs each message
    its own size, not the size of everything pending before it. The codes (at most 2^n_planes a
    layer; 8 bytes each, ``PendingCodes``, handed over as a ``CodeList``) are what a reconcile
    reads; the ids only record what changed (no reconcile reads them), and a layer's pending
    messages together keep the first ``ids_max`` of each kind, so what is pending stays
    bounded however many documents one drain follows (a million-document ingest would
    otherwise hold every chunk id until its drain). The bound is the layer's, not each
    message's: a layer's messages are coalesced by shard (16 of them), and a bound on each
    held 16 times as many: 65,536 chunk ids, 7 MB of small strings, through a large ingest."""

    ids_max = 4096

    def __init__(self) -> None:
        self._pending: OrderedDict[str, list] = OrderedDict()  # key -> [first message, codes, added, removed, reasons, scoped, sent at, carried]
        self._inflight: dict[str, SegmentsAffected] = {}
        self._receipts = itertools.count(1)
        self._held: dict[tuple[int, int], int] = {}  # (layer, 0 added / 1 removed) -> ids pending
        self.sent = 0

    def _keep(self, layer: int, kind: int, ids: dict, more: Sequence[str]) -> None:
        """Add to a pending message's ``ids`` what is left of its layer's ``ids_max``."""
        room = self.ids_max - self._held.get((layer, kind), 0)
        if room <= 0 or not more:
            return
        before = len(ids)
        ids.update(dict.fromkeys(more[:room]))
        self._held[(layer, kind)] = self._held.get((layer, kind), 0) + len(ids) - before

    def send(self, messages: Sequence[SegmentsAffected]) -> None:
        for msg in messages:
            self.sent += 1
            key = msg.dedup_key()
            entry = self._pending.get(key)
            if entry is None:
                entry = self._pending[key] = [msg, PendingCodes(msg.codes), {}, {}, [msg.reason], msg.scoped,
                                              msg.at, msg.after]
                self._keep(msg.layer, 0, entry[2], msg.added)
                self._keep(msg.layer, 1, entry[3], msg.removed)
                continue
            entry[1].update(msg.codes)
            self._keep(msg.layer, 0, entry[2], msg.added)
            self._keep(msg.layer, 1, entry[3], msg.removed)
            if msg.reason not in entry[4]:
                entry[4].append(msg.reason)
            entry[5] = entry[5] and msg.scoped  # a whole-layer message absorbs scoped ones
            entry[6] = max(entry[6], msg.at) if entry[6] and msg.at else 0.0  # the latest, or unknown
            if msg.after is not None:  # every sender's end is written by the one reconcile (no id cap:
                # a sender carries at most resummarize.CARRY_ITEMS, one per message delivered before)
                entry[7] = msg.after if entry[7] is None else entry[7].merged(msg.after)

    def receive(self, max_messages: int = 10) -> list[tuple[str, SegmentsAffected]]:
        out = []
        while self._pending and len(out) < max_messages:
            _, (first, codes, added, removed, reasons, scoped, at, after) = self._pending.popitem(last=False)
            for kind, ids in ((0, added), (1, removed)):
                if ids:
                    self._held[(first.layer, kind)] -= len(ids)
            msg = SegmentsAffected(layer=first.layer, added=tuple(added), removed=tuple(removed),
                                   reason="+".join(reasons), codes=codes.sorted() if scoped else (),
                                   group=first.group, op=first.op, at=at, after=after)
            receipt = f"r{next(self._receipts)}"
            self._inflight[receipt] = msg
            out.append((receipt, msg))
        return out

    def ack(self, receipts: Sequence[str]) -> None:
        for r in receipts:
            self._inflight.pop(r, None)

    def pending(self) -> int:
        return len(self._pending)
