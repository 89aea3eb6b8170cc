"""Announce changed nodes to the reconcile of their layer: one SegmentsAffected message per
code-prefix shard (the FIFO message group), and a dirty marker per shard until it is done.

Shards let unrelated parts of a layer be reconciled in parallel (SQS FIFO delivers one group's
messages in order, different groups concurrently) and keep one shard's failure from blocking
the others; regions that straddle shards are guarded by GraphStore.apply_region's conditions.
A marker ``dirty:<layer>:<shard>`` is written before the message is sent and removed by the
reconcile that finishes after it, so a message lost with a dying process is found again by
``resummarize.requeue_dirty`` (reindex)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..domain.model import MetaWrite, SegmentsAffected
from .engine import Engine

GROUP_BITS = 4  # 16 shards per layer


def shard_of(code: int, n_bits: int) -> int:
    """The shard of a code by its top LSH bits (a placed code's access partition, above its
    ``n_bits``, is not looked at: every partition spreads over the same shards)."""
    return (code & ((1 << n_bits) - 1)) >> max(n_bits - GROUP_BITS, 0)


def dirty_key(layer: int, group: int | None) -> str:
    return f"dirty:{layer}" if group is None else f"dirty:{layer}:{group}"


def dirty_marks(engine: Engine, layer: int, codes: Iterable[int], now: float | None = None) -> list[tuple[str, float]]:
    """The markers (key, stamp) of the shards of ``codes``, for a write that stores them with
    what it changes (a region's apply: RegionChange.marks)."""
    stamp = time.time() if now is None else now
    groups = {shard_of(c, engine.settings.n_planes) for c in codes}
    return [(dirty_key(layer, group), stamp) for group in sorted(groups)]


def mark_dirty(engine: Engine, layer: int, codes: Iterable[int], now: float | None = None) -> None:
    for key, stamp in dirty_marks(engine, layer, codes, now):
        engine.graph.put_meta(key, stamp)


def clear_dirty(engine: Engine, layer: int, group: int | None, started: float) -> None:
    """Remove the shard's marker unless it was set again after this reconcile started (a
    message sent since then is still to come)."""
    keys = [dirty_key(layer, group)] if group is not None else engine.graph.meta_keys(f"dirty:{layer}:")
    keys += [dirty_key(layer, None)] if group is None else []
    for key in keys:
        engine.graph.delete_meta_if_older(key, started)


def messages_for(layer: int, n_bits: int, added: Sequence[tuple[str, int]] = (),
                 removed: Sequence[tuple[str, int]] = (), reason: str = "") -> list[SegmentsAffected]:
    """One message per shard touched by the (node id, code) changes; none means the whole layer."""
    op = uuid.uuid4().hex
    if not added and not removed:
        return [SegmentsAffected(layer=layer, reason=reason, op=op)]
    groups: dict[int, tuple[list[str], list[str], set[int]]] = {}
    for ids_index, changes in ((0, added), (1, removed)):
        for node_id, code in changes:
            entry = groups.setdefault(shard_of(code, n_bits), ([], [], set()))
            entry[ids_index].append(node_id)
            entry[2].add(int(code))
    return [SegmentsAffected(layer=layer, added=tuple(a), removed=tuple(r), reason=reason,
                             codes=tuple(sorted(codes)), group=group, op=op)
            for group, (a, r, codes) in sorted(groups.items())]


def announce(engine: Engine, layer: int, added: Sequence[tuple[str, int]] = (),
             removed: Sequence[tuple[str, int]] = (), reason: str = "", now: float | None = None,
             marked: bool = False, after: MetaWrite | None = None) -> None:
    """Mark the touched shards dirty and send their messages (no changes: the whole layer),
    each stamped with the time it is sent (``SegmentsAffected.at``). ``marked``: the markers
    were stored already, with the change itself (a region's apply: RegionChange.marks), so
    only the messages are sent. ``after``: the sender's end, carried by the first message
    (services.resummarize.reconcile)."""
    stamp = time.time() if now is None else now
    messages = [replace(m, at=stamp, after=after if n == 0 else None)
                for n, m in enumerate(messages_for(layer, engine.settings.n_planes, added, removed, reason))]
    if not marked:
        for message in messages:
            engine.graph.put_meta(dirty_key(layer, message.group), stamp)
    engine.queue.send(messages)
