"""Making a region's new summaries (EraRAG Alg. 3 line 9, services.resummarize's summarize step):
each segment's summary made by the summarizer, or revised from the summary of the segment it
replaces (services.revisions), embedded and placed by its members' codes.

A summary is stored outside the layer above's index (``put_nodes(index=False)``) before or with
the write that makes it part of that layer, so a redelivered message finds it by its
content-derived id and never pays for it again: a region making many (a bulk build's) stores
each as it is made; one making at most FOLDED_SUMMARIES (an insert's: one a layer) leaves them
to its apply (``RegionChange.nodes``), and they are kept on their own if this stops early or
that write is refused or fails. Those few are paid for again only by a process killed between
the model call and the write, or by a reconcile of the same region running at the same time
(it cannot find a summary the other has not written yet)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..domain.access import index_of, placed
from ..domain.lsh import hash_vectors, majority_code
from ..domain.model import EragraphError, Node, Segment
from . import cost
from .engine import Engine
from .reports import ChangeReport
from .revisions import Read, _nodes, member_source, plan_revisions

LOG = logging.getLogger("eragraph.summarizing")
DEADLINE_MARGIN = 20.0  # seconds kept in hand: a summarize call is not started with less left
FOLDED_SUMMARIES = 4  # a region making at most this many summaries writes them with its apply

Deadline = Callable[[], float]  # seconds left


class DeadlineReached(EragraphError):
    """A reconcile stopped before its deadline; what it made is stored, redeliver the message.
    As reconcile raises it, ``unwritten`` is what the message carried that no write of it took
    (services.resummarize.continuation)."""


def summarize_segments(engine: Engine, segments: list[Segment], report: ChangeReport,
                       removed: tuple[Segment, ...] = (), deadline: Deadline | None = None,
                       have: Read | None = None, retired: tuple[set[str], dict] | None = None,
                       store: bool = True) -> tuple[list[Node], Any, list[Node]]:
    """Summaries of ``segments`` (nodes of the layer above, their vectors, and those made here
    and not stored). Each one is stored as soon as it is made, outside the layer's index, and
    one stored by an earlier attempt is reused, so no summary is paid for twice; with ``store``
    False they are left to the caller's write (RegionChange.nodes), and stored here only if
    this stops early (a deadline, an error). A segment that replaces one of ``removed`` is
    revised from that one's summary when plan_revisions finds it cheaper. ``retired``: the kept
    texts read already (plan_revisions). Raises DeadlineReached when ``deadline`` leaves too
    little time for another call."""
    if not segments:
        return [], [], []
    unstored: list[Node] = []
    try:
        return _summarize(engine, segments, report, removed, deadline, have, retired, store, unstored)
    except BaseException:
        store_unwritten(engine, unstored)
        raise


def store_unwritten(engine: Engine, nodes: list[Node]) -> None:
    """Keep summaries made for a write that did not happen (GraphStore.keep_nodes: outside the
    layer's index, and only where no node of that id is stored, so a concurrent reconcile's
    summary of the same segment, perhaps live already, stays as it is): a later attempt finds
    them by their ids. Called while an error is on its way: a failure here is logged, not
    raised over it (those summaries are then paid for again)."""
    if not nodes:
        return
    try:
        engine.graph.keep_nodes(nodes)
    except Exception:  # noqa: BLE001 -- the caller's error is the one to raise
        LOG.warning("could not keep %d summaries made for a write that did not happen", len(nodes),
                    exc_info=True)


def _summarize(engine: Engine, segments: list[Segment], report: ChangeReport, removed: tuple[Segment, ...],
               deadline: Deadline | None, have: Read | None, retired: tuple[set[str], dict] | None,
               store: bool, unstored: list[Node]) -> tuple[list[Node], Any, list[Node]]:
    lsh = engine.known_lsh()
    layer_above = segments[0].layer + 1
    made = _nodes(engine, (seg.summary_id for seg in segments), have)
    todo = [seg for seg in segments if seg.summary_id not in made]
    children = _nodes(engine, {m for seg in todo for m in seg.members}, have)
    plans = plan_revisions(engine, todo, removed, children, have, retired)
    fresh: dict[str, np.ndarray] = {}
    for seg in todo:
        if deadline is not None and deadline() < DEADLINE_MARGIN:
            raise DeadlineReached(f"layer {seg.layer}: stopped with {len(segments) - len(made)} "
                                  f"summaries to make")
        members = [children[m] for m in seg.members if m in children]
        plan = plans.get(seg.segment_id)
        if plan is not None:
            report.summaries_revised[layer_above] = report.summaries_revised.get(layer_above, 0) + 1
        if plan is not None and not plan.added and not plan.removed:
            # the children changed ids but say the same sentences: the summary stands, no call
            report.summaries_carried[layer_above] = report.summaries_carried.get(layer_above, 0) + 1
            text = plan.previous
        else:
            started = time.perf_counter()
            if plan is not None:
                result = engine.summarizer.revise(plan.previous, plan.added, plan.removed,
                                                  engine.settings.summary_tokens, plan.previous_share)
            else:
                result = engine.summarizer.summarize([c.text for c in members], engine.settings.summary_tokens,
                                                     [member_source(c, engine.settings.chunk_tokens) for c in members])
            seconds = time.perf_counter() - started
            cost.record(engine.graph, "summarize", engine.summarizer.identity, result.tokens_in,
                        result.tokens_out, seconds)
            report.cost.summarize_calls += 1
            report.cost.tokens_in += result.tokens_in
            report.cost.tokens_out += result.tokens_out
            report.cost.summarize_seconds += seconds
            text = result.text
        vector = engine.embedder.embed([text])
        own = hash_vectors(lsh, vector)[0]
        node = Node(node_id=seg.summary_id, layer=layer_above, text=text,
                    tokens=engine.tokenizer.count(text),
                    code=placed(majority_code([c.code for c in members], own, lsh.n_planes),
                                index_of(members[0].code, lsh.n_planes) if members else 0, lsh.n_planes),
                    children=seg.members)
        if store:
            engine.graph.put_nodes([node], index=False)
        else:
            unstored.append(node)
        made[node.node_id] = node
        fresh[node.node_id] = vector[0]
    nodes = [made[seg.summary_id] for seg in segments]
    reused = [n for n in nodes if n.node_id not in fresh]  # made by an earlier attempt
    if reused:
        fresh.update(zip((n.node_id for n in reused), engine.embedder.embed([n.text for n in reused])))
    return nodes, np.stack([fresh[n.node_id] for n in nodes]), list(unstored)
