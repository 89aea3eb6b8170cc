"""Reconcile the part of a layer that changed (EraRAG Alg. 3 lines 3-14).

A SegmentsAffected(layer=l, codes=...) message means "the nodes of layer l with these LSH
codes changed". domain.scoped plans the regions of the layer whose segments can differ --
reading only the changed codes' paths of the code-ordered ref index and the regions
themselves, never the whole layer -- and each region is re-cut by the partition rule. A
segment whose members are unchanged keeps its id and summary byte for byte; new segments are
summarized into layer l+1 (revised from their predecessor's summary when that reads fewer
tokens, ``delta_summaries``); the region's new segments, its refs' memberships and the
summaries' refs one layer up are written in one conditional write (GraphStore.apply_region),
and layer l+1 is announced with the codes of the summaries that came and went. The
reconcile's end (change record, finished outbox entries, its shard's marker) rides with that
announce to the layer above's first region write when it wrote one region (``reconcile``).

Progress survives: a summary is stored outside layer l+1's index before or with the write that
makes it part of the layer (services.summarizing), so a redelivered message -- after a
conflict, an error or a handler that stopped before its deadline (DeadlineReached) -- finds it
by its content-derived id and never pays for it again; only a process killed between a model
call and the write that was to carry its summary (an insert's region: at most
FOLDED_SUMMARIES of them), or a reconcile of the same region at the same time, pays those few
calls again. Idempotent: a region with nothing
changed writes nothing. A message without codes (a reindex requeue) reconciles the whole layer
and also repairs missing and orphan summaries. A layer with an ``applying:`` mark holds part of a region apply that stopped
between its writes (adapters.aws.nodes_dynamodb: a region larger than one transaction): any
reconcile of it is a whole-layer repair pass, which removes the marks older than its start
and announces the layer above as a whole. A whole-layer pass for many codes, or over a large
layer without segments (a bulk build: a scoped plan would make such a layer one region), does
not hold the layer: it re-cuts it region by region (domain.scoped.stream_regions, about
STREAM_REGION_REFS refs each), each applied before the next is read, under an ``applying:``
mark of its own (model.streaming_key) that makes any later reconcile of the layer walk it again until one walk completes.
A completed whole-layer pass records when it
started (``swept:<layer>``); a shard message whose dirty marker is older than that is a no-op
(``covered``), so a bulk build's sixteen shard messages per layer cost one whole-layer pass,
not sixteen. The text of deleted summaries is kept under ``retired:`` meta keys until the
layer above has taken them out of its segments, because there they are the children that
left.

A plan rests on counts read before its regions are, and a region's write is conditional on its
own refs only. A planned region whose old segment reaches beyond it is refused before anything
is summarized (domain.scoped.OutsideRegion): re-cutting it would leave that segment's other
members in no segment. Two writers make one: another reconcile that re-cut the layer between
this plan's counts and its read (planning again from fresh counts then succeeds), or a stale
plan written before, whose counts an ingest or a removal had changed (those change no old
count, so that plan's own regions passed the check and were written as planned). A region
refused twice therefore meets a stored partition the rule does not give, and the reconcile
re-cuts the layer whole instead (every access partition of it). A stale plan that no later
region meets stays until a reindex (a whole-layer pass) re-cuts it: for example a segment kept
in a layer that shrank to S_max meanwhile.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..domain.access import READERS, code_range, index_of, readers_of
from ..domain.diff import segments_for
from ..domain.ids import summary_id
from ..domain.model import (APPLYING, ConflictError, MetaWrite, Node, NodeRef, RegionChange, Segment,
                            SegmentsAffected, is_streaming, streaming_key)
from ..domain.partition import partition, should_summarize
from ..domain.scoped import (OutsideRegion, Region, check_inside, count_cap, counting_by_reading, cut_region,
                             plan_regions, stream_regions, whole_layer)
from . import changes, cost
from .announce import announce, clear_dirty, dirty_key, dirty_marks
from .engine import Engine
from .placement import access_of
from .layer_reads import (WHOLE_GROUP_REFS, counted_ahead, held_counts, held_reader, partition_codes,
                          present_partitions, reader)
from .reports import ChangeReport
from .revisions import (RETIRED, Read, Revision, _nodes, can_revise, member_source,  # noqa: F401 (re-exported)
                        plan_revisions, retired_key)
from .summarizing import (DEADLINE_MARGIN, FOLDED_SUMMARIES, Deadline, DeadlineReached,  # noqa: F401 (re-exported)
                          store_unwritten, summarize_segments)

MAX_CONFLICT_RETRIES = 5
WHOLE_LAYER_MIN, WHOLE_LAYER_SHARE = 256, 8  # codes beyond max(256, layer size / 8): whole layer
OUTBOX = "outbox:"  # meta key prefix: what follows a region's write (see finish_outbox)
OUTBOX_GRACE = 900.0  # seconds a scoped pass leaves another message's outbox entry to its own end
STREAM_REGION_REFS = 2048  # a streamed whole-layer pass re-cuts groups of about this many refs
CHECKS_WITH_RECORD = 64  # new summaries looked for with the change record (in its transaction); past it, per region
CARRY_ITEMS = 24  # a reconcile's end of at most this many items rides with its announce (reconcile)
CARRY_BYTES = 16_384  # and of at most this many bytes as JSON (an SQS message holds 256 KiB)

def target_segments(engine: Engine, layer: int) -> list[Segment]:
    """The segments layer ``layer`` should have now, from all its nodes (audits only)."""
    s = engine.settings
    groups: dict[int, list[NodeRef]] = {}
    for ref in engine.graph.layer_refs(layer):  # each access partition is cut on its own
        groups.setdefault(index_of(ref.code, s.n_planes), []).append(ref)
    return [seg for refs in groups.values() if should_summarize(len(refs), layer, s.s_max, s.max_layers)
            for seg in segments_for(layer, partition(refs, s.n_planes, s.s_min, s.s_max))]


def retire(engine: Engine, layer: int, nodes: list[Node]) -> None:
    """Keep the text of summaries about to be deleted until the layer above has revised from
    them (their segments there lose them as members)."""
    if not can_revise(engine):
        return
    for node in nodes:
        engine.graph.put_meta(retired_key(layer, node.node_id), node.text)


def _region_change(engine: Engine, layer: int, region: Region, report: ChangeReport,
                   deadline: Deadline | None, repair: bool, index: int = 0,
                   alone: bool = True) -> tuple[RegionChange, list[Node], list, list[Node]]:
    s = engine.settings
    summarized = layer + 1 <= s.max_layers
    new = segments_for(layer, cut_region(region, s.n_planes, s.s_min, s.s_max, summarized))
    old_ids = region.old_segments()
    new_ids = {seg.segment_id for seg in new}
    to_make = [seg for seg in new if seg.segment_id not in old_ids]
    above_remove: list[NodeRef] = []
    if repair:  # a whole-layer pass also remakes lost summaries and removes orphan ones
        # (the region is one access partition's whole range: the summaries above in that range)
        above = {r.node_id: NodeRef(r.node_id, r.code)
                 for r in engine.graph.prefix_refs(layer + 1, *code_range(index, s.n_planes)) if r.live}
        wanted = {seg.summary_id for seg in new}
        to_make += [seg for seg in new if seg.segment_id in old_ids and seg.summary_id not in above]
        above_remove += [ref for node_id, ref in sorted(above.items()) if node_id not in wanted]
        mine = {r.node_id for r in region.refs}
        stored = {seg.segment_id for seg in engine.graph.get_segments(layer)
                  if alone or not mine.isdisjoint(seg.members)}  # another partition's are its pass's
        old_ids |= stored - new_ids  # segment records no node names any more
    removed_ids = sorted(old_ids - new_ids)
    owner = {m: seg.segment_id for seg in new for m in seg.members}
    assign = tuple((r.node_id, owner.get(r.node_id)) for r in region.refs
                   if r.live and r.seg != owner.get(r.node_id))
    drop = tuple(r.node_id for r in region.refs if not r.live)
    # every record the summaries may need, in one read (GraphStore.read_region): the removed
    # segments, the old and new summaries, the new segments' members and the removed ones' (a
    # revision reads the departed children), and the kept texts of the region's tombstones.
    # A removed segment's members and summary are known before its record is read: the
    # region's refs that name it, and the summary id of those members (domain.diff); what
    # its record says otherwise is read after it
    named: dict[str, list[str]] = {}
    for r in region.refs:
        if r.seg in removed_ids:
            named.setdefault(r.seg, []).append(r.node_id)
    guessed = {m for members in named.values() for m in members} | {
        summary_id(layer + 1, members) for members in named.values()}
    wanted = {seg.summary_id for seg in to_make} | {m for seg in to_make for m in seg.members} | guessed
    texts = [retired_key(layer, r.node_id) for r in region.refs if not r.live] if can_revise(engine) else []
    removed, nodes, metas = engine.graph.read_region(layer, removed_ids, wanted, texts)
    if region.planned:  # planned from counts another writer may have changed since (module doc)
        check_inside(layer, region, removed.values())
    more = ({seg.summary_id for seg in removed.values()} | {m for seg in removed.values() for m in seg.members}) - wanted
    if more:
        nodes.update(engine.graph.get_nodes(more))
    have = (wanted | more, nodes)
    retired = (set(texts), metas)
    old_summaries = list(_nodes(engine, (seg.summary_id for seg in removed.values()), have).values())
    above_remove += [NodeRef(n.node_id, n.code) for n in old_summaries]
    # a region making few summaries writes them with its apply (one write fewer); many (a bulk
    # build's) are each stored as made, so a process that dies before the apply pays for none again
    made, vectors, unstored = summarize_segments(engine, to_make, report, tuple(removed.values()), deadline, have,
                                                 retired, store=len(to_make) > FOLDED_SUMMARIES)
    kept = {n.node_id for n in made}  # a summary id can come back (same members): it stays
    above_remove = [r for r in above_remove if r.node_id not in kept]
    old_summaries = [n for n in old_summaries if n.node_id not in kept]
    change = RegionChange(
        layer=layer, expected=region.refs, assign=assign, drop=drop,
        add=tuple(to_make), remove=tuple(removed_ids), removed=tuple(removed.values()),
        above_add=tuple(NodeRef(n.node_id, n.code) for n in made),
        above_remove=tuple(dict.fromkeys(above_remove)), nodes=tuple(unstored))
    return change, made, vectors, old_summaries


def swept_key(layer: int) -> str:
    return f"swept:{layer}"


def covered(engine: Engine, layer: int, group: int, at: float = 0.0, held: dict | None = None) -> bool:
    """True when a whole-layer pass has covered every change announced to this shard: the
    message was sent (``at``, after its change was stored) before the start of the layer's
    last completed whole-layer pass. A message that does not say when it was sent (an older
    version's) is judged by the shard's marker, set before each of its messages is sent; an
    absent marker proves nothing (a scoped pass of another message of the shard clears it
    too), so that message runs. The marker is then cleared. ``held``: the marker and the stamp
    as read already (GraphStore.sizes_and_metas), else read here."""
    if held is None:
        held = engine.graph.get_metas([dirty_key(layer, group), swept_key(layer)])  # read together
    if at:
        swept = held.get(swept_key(layer))
        if swept is None or at >= float(swept):
            return False
        clear_dirty(engine, layer, group, float(swept))
        return True
    stamp, swept = held.get(dirty_key(layer, group)), held.get(swept_key(layer))
    if stamp is None or swept is None or float(stamp) >= float(swept):
        return False
    clear_dirty(engine, layer, group, float(swept))
    return True


@dataclass
class _Ending:
    """What a reconcile's regions leave for its end (``reconcile``)."""

    carried: MetaWrite | None = None  # the message's: written by the first region write, else at the end
    op: str = ""  # the message's op: its outbox entries name it (finish_outbox's ``spare``)
    finished: list[str] = field(default_factory=list)  # outbox entries whose work is done
    clears: list[tuple[str, float]] = field(default_factory=list)  # the shard's marker, if not set again
    checks: list[str] = field(default_factory=list)  # summaries whose vectors were written: looked for
    announces: list[tuple[int, list, list, str]] = field(default_factory=list)  # held, to send
    written: int = 0  # regions written


def reconcile(engine: Engine, target: int | SegmentsAffected, deadline: Deadline | None = None) -> ChangeReport:
    """``_reconcile``, then its end: the change record per layer it re-summarized
    (services.changes), the deletion of its finished outbox entries and its shard's marker,
    and the look for the summaries whose vectors it wrote. When its regions announced the
    layer above, that end rides with the announce (``SegmentsAffected.after``, when at most
    CARRY_ITEMS items) and the layer above's first region write carries it (RegionChange.
    finish): one write fewer a layer. Else it is written here, with what the message carried
    from below if no region write took it. Until the end is written the outbox entries stay: a
    scoped reconcile of another message of the shard leaves them while younger than
    OUTBOX_GRACE; a redelivery of this message, a whole-layer pass, or any pass after the grace
    finishes them (finish_outbox: an extra announce and vector check, never a wrong state)."""
    started = time.perf_counter()
    message = target if isinstance(target, SegmentsAffected) else SegmentsAffected(layer=int(target))
    end = _Ending(carried=message.after, op=message.op)
    try:
        report = _reconcile(engine, message, deadline, end)
    except BaseException as exc:
        if isinstance(exc, DeadlineReached):  # its continuation carries what no write took
            exc.unwritten = end.carried
        _send(engine, end.announces)  # the regions written: their work done before their entries go
        for key in end.finished:
            engine.graph.delete_meta(key)
        _unless_removed_meanwhile(engine, end.checks)
        raise
    write = changes.resummarize_write(engine, report, time.perf_counter() - started, done=end.finished,
                                      clear=end.clears, present=end.checks).merged(end.carried)
    if end.announces and not write.empty and _carriable(write):
        _send(engine, end.announces, after=write)
        return report
    _send(engine, end.announces)
    if write.empty:
        return report
    gone = engine.graph.write_meta(write.puts, write.deletes, clear=write.clear, present=write.present)
    if gone:  # removed by a concurrent reconcile: their vectors go (_unless_removed_meanwhile)
        engine.vectors.delete(gone)
        engine.vectors.flush()
    return report


def _carriable(write: MetaWrite) -> bool:
    return write.items <= CARRY_ITEMS and len(json.dumps(write.to_dict(), default=str)) <= CARRY_BYTES


def _send(engine: Engine, announces: list[tuple[int, list, list, str]], after: MetaWrite | None = None) -> None:
    """The announces held by a reconcile's regions (their markers went with their writes),
    the first message carrying ``after``; each is sent once."""
    while announces:
        layer, added, removed, reason = announces[0]
        announce(engine, layer, added=added, removed=removed, reason=reason, marked=True, after=after)
        announces.pop(0)  # sent: one that failed stays, and so does its entry (reconcile's except)
        after = None


def _reconcile(engine: Engine, message: SegmentsAffected, deadline: Deadline | None, end: _Ending) -> ChangeReport:
    """Bring the part of a layer that ``target`` names (a message; a bare layer number or a
    message without codes: the whole layer) and the summaries above it up to date. Raises
    DeadlineReached, having done nothing, when ``deadline`` leaves less than the margin to
    begin: a batch's later records must not start reading and planning with no time left."""
    layer = message.layer
    if deadline is not None and deadline() < DEADLINE_MARGIN:
        raise DeadlineReached(f"layer {layer}: not begun, {deadline():.1f} s left")
    report = ChangeReport()
    s = engine.settings
    # what the reconcile reads before it plans, read together (GraphStore.sizes_and_metas:
    # one Query on DynamoDB, two when the shard holds outbox entries): the layer sizes, this
    # shard's outbox entries and marker, the layer's swept stamp and applying marks
    shard = message.group if message.scoped else None
    keys = [swept_key(layer)] + ([dirty_key(layer, message.group)] if message.group is not None else [])
    entries = f"{OUTBOX}{layer}:" if shard is None else outbox_key(layer, shard)  # finish_outbox's: a whole-layer pass finishes every shard's
    sizes, held = engine.graph.sizes_and_metas(keys, [entries, f"{APPLYING}{layer}:"])
    # a scoped pass leaves a young entry of another message alone: its reconcile's end is on its
    # way up (it rides with the announce); a redelivery of that message, a whole pass, or any
    # pass once OUTBOX_GRACE has gone by finishes one whose reconcile died
    finish_outbox(engine, layer, shard, entries={k: v for k, v in held.items() if k.startswith(OUTBOX)},
                  spare=(message.op, OUTBOX_GRACE) if shard is not None else None)
    if message.group is not None and covered(engine, layer, message.group, message.at, held):
        return report
    n_bits = s.n_planes
    summarized = layer + 1 <= s.max_layers
    # a large layer without segments (nothing above it: a bulk build's first pass) is cut whole
    fresh = summarized and not sizes.get(layer + 1) and sizes.get(layer, 0) > STREAM_REGION_REFS
    # many changes at once (a bulk build): one pass over the layer costs less than their paths
    scoped = message.scoped and not fresh and len(message.codes) < max(
        WHOLE_LAYER_MIN, sizes.get(layer, 0) // WHOLE_LAYER_SHARE)
    marks: list[str] | None = sorted(k for k in held if k.startswith(APPLYING))
    refusals = 0  # planned regions refused (OutsideRegion)
    for _attempt in range(MAX_CONFLICT_RETRIES):
        started = time.time()
        if marks is None:  # planned again after a conflict: read again
            marks = engine.graph.meta_keys(f"{APPLYING}{layer}:")
        streaming = [key for key in marks if is_streaming(key)]  # a streamed pass stopped part-way
        unfinished = [key for key in marks if not is_streaming(key)]  # a split apply stopped part-way
        whole = not scoped or bool(unfinished) or bool(streaming)
        # a whole pass for many changes (or finishing one that stopped) goes region by region;
        # a repair (a message without codes, or a split apply cut short) holds the layer whole
        stream = whole and summarized and not unfinished and (message.scoped or fresh or bool(streaming))
        # every access partition's range of the layer is planned and cut on its own (its own
        # recursion, its own stopping rule), so no region, hence no segment, spans two
        indexes = present_partitions(engine, layer) if whole else sorted(partition_codes(message.codes, n_bits))
        alone = indexes == [0] and (not whole or len(indexes) == 1)
        if stream:
            mark = streaming_key(layer, uuid.uuid4().hex)
            engine.graph.put_meta(mark, started)
            regions = ((i, region) for i in indexes
                       for region in stream_regions(reader(engine, layer, i), n_bits, s.s_min, s.s_max,
                                                    STREAM_REGION_REFS))
        elif whole:
            regions = ((i, whole_layer(reader(engine, layer, i))) for i in indexes)
        else:
            regions = ((i, region) for i, codes in sorted(partition_codes(message.codes, n_bits).items())
                       for region in _plan(engine, layer, i, codes, sizes, summarized, counted=_attempt == 0))
        try:
            for number, (index, region) in enumerate(regions):
                if stream and number and deadline is not None and deadline() < DEADLINE_MARGIN:
                    raise DeadlineReached(f"layer {layer}: a streamed pass stopped after {number} "
                                          f"regions (the next reconcile of the layer goes on)")
                _apply(engine, layer, region, report, deadline, repair=whole and not stream,
                       group=message.group, index=index, alone=alone, end=end)
        except ConflictError as exc:  # another writer changed a region: plan again from the stored state
            marks = None
            if isinstance(exc, OutsideRegion):
                refusals += 1
                # refused again, planned from fresh counts: a stored partition the rule does not
                # give (a stale plan written before); a whole pass re-cuts it wherever it reaches
                scoped = scoped and refusals < 2
            continue
        if message.group is not None:  # with the change record (reconcile)
            end.clears.append((dirty_key(layer, message.group), started))
        else:
            clear_dirty(engine, layer, message.group, started)
        if whole:
            swept = engine.graph.get_meta(swept_key(layer))
            if swept is None or float(swept) < started:
                engine.graph.put_meta(swept_key(layer), started)
            # this pass re-cut the layer: a streamed pass stopped before it (its own mark too) is done
            _clear_marks(engine, [key for key in engine.graph.meta_keys(f"{APPLYING}{layer}:")
                                  if is_streaming(key)], started)
        if unfinished:
            _clear_marks(engine, unfinished, started)  # repaired by this pass
            # what the cut-short apply changed one layer up may lie anywhere in its region, and
            # its outbox entry is finished only by the next message of its shard: announce it all
            announce(engine, layer + 1, reason=f"unfinished:{layer}")
        return report
    raise ConflictError(f"layer {layer}: gave up after {MAX_CONFLICT_RETRIES} concurrent updates")


def _plan(engine: Engine, layer: int, index: int, codes: list[int], sizes: dict[int, int],
          summarized: bool, counted: bool = False) -> list[Region]:
    """The regions to re-cut in access partition ``index`` for its changed ``codes``
    (``counted``: the store's prefix counts read with ``sizes`` may be used: not on a plan
    made again after a conflict, which read no sizes again)."""
    s = engine.settings
    read = reader(engine, layer, index)
    held = held_counts(engine, layer, index, codes) if counted else None
    # a layer the held counts answer the top of is walked from them and one read of its
    # changed codes' groups; else a small layer on a store that answers it in one read is
    # read whole (a store whose reads are local calls reads no layer whole)
    per_read = getattr(engine.graph, "refs_per_read", 0)
    whole = min(per_read, WHOLE_GROUP_REFS) if held is not None else per_read
    if sizes.get(layer, 0) <= whole:
        # a small layer on a store that answers it in one read (DynamoDB: one Query of one
        # partition) is read once and planned from memory, not count by count
        layer_read = held_reader(read(0, 0, None), s.n_planes, index)
        return plan_regions(codes, layer_read, s.n_planes, s.s_min, s.s_max,
                            summarized=summarized, count=counting_by_reading(layer_read))
    count, read_whole = counted_ahead(engine, layer, index, codes, sizes.get(layer, 0), count_cap(s.s_min, s.s_max),
                                      held)
    return plan_regions(codes, read, s.n_planes, s.s_min, s.s_max, summarized=summarized, count=count,
                        read_whole=read_whole)


def _clear_marks(engine: Engine, keys: list[str], started: float) -> None:
    """Delete the marks written no later than ``started`` (a later one is another pass's)."""
    for key in keys:
        engine.graph.delete_meta_if_older(key, started)


def _apply(engine: Engine, layer: int, region: Region, report: ChangeReport,
           deadline: Deadline | None, repair: bool, group: int | None, index: int,
           alone: bool, end: _Ending) -> None:
    """Re-cut one region. Its outbox entry's key goes to ``end.finished`` once its work is done
    (the caller deletes it with its change record); the first region's announce to
    ``end.announces`` (sent by the caller); the ids of the summaries whose vectors it wrote to ``end.checks``, for the
    caller to look for their nodes with its change record (``_unless_removed_meanwhile``, in
    that write; past CHECKS_WITH_RECORD, here). The first region written carries what the
    message carried (``end.carried``). The summarize calls' ledger entries, and the metered
    embeddings' of its summaries, go with the region's write (cost.deferred,
    RegionChange.ledger); when no write takes them (nothing to write, a conflict, a deadline,
    an error) they are added on their own."""
    with cost.deferred(engine.graph) as pending:
        _apply_region(engine, layer, region, report, deadline, repair, group, index, alone, end, pending)


def _apply_region(engine: Engine, layer: int, region: Region, report: ChangeReport, deadline: Deadline | None,
                  repair: bool, group: int | None, index: int, alone: bool, end: _Ending, pending: list) -> None:
    change, made, vectors, old_summaries = _region_change(engine, layer, region, report, deadline, repair,
                                                          index, alone)
    if change.empty:
        return
    try:
        change, key = _with_bookkeeping(engine, layer, group, change, old_summaries, pending, end.op)
        applied = engine.graph.apply_region(replace(change, finish=end.carried))
    except BaseException:
        store_unwritten(engine, list(change.nodes))  # refused or failed: the summaries made are kept
        raise
    end.carried = None  # written
    end.written += 1
    if applied.gone:  # carried from below: summaries a concurrent reconcile removed since their vectors
        engine.vectors.delete(list(applied.gone))
    changed_above = list(change.above_add) + list(change.above_remove)
    pending.clear()  # added by the write
    if made:
        # a summary's readers are its partition's (domain.access): a caller's view selects on them
        attrs = {READERS: readers_of(access_of(engine, index))}
        engine.vectors.upsert([n.node_id for n in made], vectors,
                              [{"layer": layer + 1, "doc_id": "", "attrs": attrs} for _ in made])
        if len(end.checks) + len(made) > CHECKS_WITH_RECORD:
            _unless_removed_meanwhile(engine, [n.node_id for n in made])
        else:  # after this region's vectors are flushed (below): with the caller's change record
            end.checks += [n.node_id for n in made]
    gone = [r.node_id for r in change.above_remove]
    if applied.deleted:  # their nodes went with the write: their vectors follow
        engine.vectors.delete(list(applied.deleted))
    if can_revise(engine):  # deleted with the change record, with the outbox entry
        end.finished += [retired_key(layer, node_id) for node_id in change.drop]
    if made:
        report.segments_resummarized[layer + 1] = report.segments_resummarized.get(layer + 1, 0) + len(made)
        report.add_summaries(layer + 1, [n.node_id for n in made], index)
    if gone:
        report.summaries_removed[layer + 1] = report.summaries_removed.get(layer + 1, 0) + len(gone)
        report.add_summaries(layer + 1, gone, index, removed=True)
    if changed_above:
        # the markers went with the apply (change.marks): only the messages are sent. The first
        # region's is held for the caller, who may send its end with it; a reconcile of several
        # regions (a whole-layer pass) announces each as it is written, the first with the second
        end.announces.append((layer + 1, [(n.node_id, n.code) for n in made],
                              [(r.node_id, r.code) for r in change.above_remove], f"reconcile:{layer}"))
        if end.written > 1:
            _send(engine, end.announces)
    engine.vectors.flush()  # the summaries' vectors are durable before the entry that redoes them goes
    end.finished.append(key)


def _with_bookkeeping(engine: Engine, layer: int, group: int | None, change: RegionChange,
                      old_summaries: list[Node], pending: list, op: str = "") -> tuple[RegionChange, str]:
    """``change`` with what its write carries besides the region, and its outbox entry's key.
    The outbox entry: what must follow the write, redone by the next reconcile of this part of
    the layer if this one dies after the write and before its end; it and the dirty markers of
    the layer above (kept until announced) are stored with the region's write itself
    (GraphStore.apply_region: one transaction on DynamoDB), so never without it. The replaced
    summaries' nodes go in the same write, and the text of those a segment above still names
    (tombstones there) is kept with it, for that segment's revision; so do the summarize
    calls' ledger rows."""
    key = outbox_key(layer, group, uuid.uuid4().hex)
    entry = {"made": [[r.node_id, r.code] for r in change.above_add],
             "gone": [[r.node_id, r.code] for r in change.above_remove],
             "drop": list(change.drop), "at": round(time.time(), 3), "op": op}
    above = dirty_marks(engine, layer + 1, [r.code for r in list(change.above_add) + list(change.above_remove)])
    keep = tuple((n.node_id, retired_key(layer + 1, n.node_id), n.text) for n in old_summaries) \
        if can_revise(engine) else ()
    return replace(change, marks=((key, entry), *above), delete_removed=True, keep_texts=keep,
                   ledger=cost.summed(pending)), key


def _unless_removed_meanwhile(engine: Engine, summary_ids: list[str]) -> None:
    """Take back the vectors just written of summaries whose node is gone: a concurrent
    reconcile of an overlapping region removed them after this one's write (it deletes the
    node, then the vector), and its vector delete may have come before this upsert. Checked
    after the upsert, so whichever order the two consumers' steps take, no vector outlives
    its node."""
    if not summary_ids:
        return
    stored = engine.graph.get_nodes(summary_ids)
    gone = [i for i in summary_ids if i not in stored]
    if gone:
        engine.vectors.delete(gone)


def _forget_retired(engine: Engine, layer: int, dropped) -> None:
    if can_revise(engine):
        for node_id in dropped:  # the layer above has now revised from them
            engine.graph.delete_meta(retired_key(layer, node_id))


def outbox_key(layer: int, group: int | None, token: str = "") -> str:
    return f"{OUTBOX}{layer}:{'all' if group is None else group}:{token}"


def finish_outbox(engine: Engine, layer: int, group: int | None, older_than: float = 0.0,
                  entries: dict[str, Any] | None = None, spare: tuple[str, float] | None = None) -> int:
    """Complete what a reconcile that died after its write left undone (outbox entries of
    this shard; of the whole layer when ``group`` is None), whether or not its write landed:
    each step is decided from the ref index of layer l+1. A summary live there gets its
    vector; one not live there loses its node and vector; layer l+1 is announced (an extra
    announce costs a reconcile that finds nothing to do). With ``older_than`` (reindex) only
    entries written at least that many seconds ago. ``entries``: the shard's entries (key ->
    entry) as read already, else listed and read here. ``spare`` (op, seconds): an entry
    written by a message of another op less than that long ago is left (its reconcile's end is
    on its way, reconcile). Returns the entries finished."""
    prefix = f"{OUTBOX}{layer}:" if group is None else outbox_key(layer, group)
    finished = 0
    now = time.time()
    listed = (((key, engine.graph.get_meta(key)) for key in engine.graph.meta_keys(prefix)) if entries is None
              else sorted(entries.items()))
    for key, entry in listed:
        age = now - float(entry.get("at", 0.0)) if entry is not None else 0.0
        if entry is None or (older_than > 0 and age < older_than):
            continue
        if spare is not None and entry.get("op") not in (None, spare[0]) and age < spare[1]:
            continue
        finished += 1
        made = [(str(i), int(c)) for i, c in entry.get("made", [])]
        gone = [(str(i), int(c)) for i, c in entry.get("gone", [])]
        live = {r.node_id: r.live for i, c in made + gone
                for r in engine.graph.prefix_refs(layer + 1, c, c) if r.node_id == i}
        present = [i for i, _ in made if live.get(i)]
        nodes = engine.graph.get_nodes(present + [i for i, _ in gone])
        have = engine.vectors.get_vectors(present)
        embed = [nodes[i] for i in present if i not in have and i in nodes]
        if embed:
            engine.vectors.upsert([n.node_id for n in embed], engine.embedder.embed([n.text for n in embed]),
                                  [{"layer": layer + 1, "doc_id": ""} for _ in embed])
            _unless_removed_meanwhile(engine, [n.node_id for n in embed])
        dead = [i for i, _ in gone if not live.get(i)]
        if dead:
            retire(engine, layer + 1, [nodes[i] for i in dead if i in nodes and i in live])
            # checked again in the store as each goes: one made again since the read above
            # (stored for an apply about to make it live, or live already) stays
            dead = engine.graph.delete_dead_nodes(dead)
            if dead:
                engine.vectors.delete(dead)
        _forget_retired(engine, layer, entry.get("drop", []))
        announce(engine, layer + 1, added=made, removed=gone, reason=f"outbox:{layer}")
        engine.vectors.flush()
        engine.graph.delete_meta(key)
    return finished


def continuation(message: SegmentsAffected, stop: DeadlineReached | None = None) -> SegmentsAffected:
    """The same work as a new message (a new operation id, so FIFO deduplication keeps it):
    the summaries already made are found by their ids, so it pays only for the rest. It
    carries what the message carried and no write of the stopped reconcile took (``stop``,
    as reconcile raised it; without it, all the message carried)."""
    after = getattr(stop, "unwritten", message.after) if stop is not None else message.after
    return replace(message, op=uuid.uuid4().hex, after=after,
                   reason=message.reason if message.reason.endswith("+continue") else f"{message.reason}+continue")


def drain(engine: Engine, max_messages: int | None = None,
          on_message: Callable[[SegmentsAffected], None] | None = None) -> ChangeReport:
    """Deliver queued messages to reconcile until the queue is empty (the local bus);
    ``on_message`` sees each message as its reconcile starts (the CLI's stage line)."""
    total = ChangeReport()
    delivered = 0
    # a shared queue (SQS) holds every tenant's messages: its receive hands back this engine's
    # tenant's and sets the others aside (invisible, so no longer pending) for a while
    while engine.queue.pending():
        batch = engine.queue.receive(10)
        for receipt, message in batch:
            if on_message is not None:
                on_message(message)
            total.merge(reconcile(engine, message))
            engine.queue.ack([receipt])
            delivered += 1
        if max_messages is not None and delivered >= max_messages:
            break
    engine.vectors.flush()
    return total


def requeue_dirty(engine: Engine, older_than: float = 0.0, now: float | None = None) -> list[int]:
    """Re-announce, as whole-layer reconciles, layers with a part marked dirty before
    ``now - older_than`` (a consumer died, or its message was lost)."""
    now = time.time() if now is None else now
    layers = set()
    for key in engine.graph.meta_keys("dirty:"):
        stamp = engine.graph.get_meta(key)
        if stamp is not None and now - float(stamp) >= older_than:
            layers.add(int(key.split(":")[1]))
    for layer in sorted(layers):
        announce(engine, layer, reason="requeue")
    return sorted(layers)
