"""The regions' writes on DynamoDB (DynamoNodeStore's part, nodes_dynamodb describes them):
``apply_region``, one TransactWriteItems or several, and ``delete_dead_nodes``, the deletion
of summaries a re-cut retired.

A summary's id comes from its members, so a re-cut can make a summary id live again that an
earlier one removed, while that earlier one's outbox entry (services.resummarize) still lists
it as gone. Its node is written (or found written) before the apply that makes it live, so the
two must not interleave with the deletion as read-then-write. Each is therefore one
transaction on the items that decide it:

* ``apply_region`` carries a ConditionCheck that the node item of each summary it makes live
  exists (in the transaction of that summary's ref): a node deleted meanwhile is a
  ConflictError and the reconcile plans again (and makes the summary again); a summary whose
  node the change carries (``RegionChange.nodes``) has its node written there instead, unless
  the change takes several transactions (then the nodes are written first, as made);
* ``delete_dead_nodes`` deletes each node item that is not live together with a condition on
  its ref as read (absent, or not live) and on the node's code: a ref made live meanwhile, or a
  node written again under another code, is a lost race, read again.

Of the two, whichever commits first wins, and no segment is left naming a missing summary. A
reconcile's own replaced summaries go the same way inside its apply (``RegionChange.
delete_removed``): each node's delete, conditioned on its code and layer (or its absence), in
the transaction that makes its ref not live, with the text of a tombstone kept beside it
(``keep_texts``) and the summarize calls' ledger ADDs (``ledger``, in the last transaction).

The state of the summaries' refs one layer up decides the apply's conditions and counts. A
change that fits one transaction is tried first on their likely state, unread (a new summary's
ref absent; a replaced one's live, in a segment when the layer above is summarized), with
conditions that also pin the segment's presence, so it commits only where the guess held; when
it is refused, the refs are read and the write is made on what they hold, as before (one
request saved a region when the guess holds, one spent when it does not)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from pynamodb.exceptions import TransactWriteError

from ...domain.model import ConflictError, MetaWrite, RefState, RegionApplied, RegionChange, applying_key
from .dynamodb_table import TRANSACT_LIMIT, _is_lost_race
from .meta_dynamodb import SHADOW, meta_partition, shadowed

REF_COUNTER_SLOTS = 2  # a transaction's items kept for the layer counters it conditions on
DEAD_NODES_PER_TRANSACTION = 45  # delete_dead_nodes: two items a node, one layer counter check
DEAD_NODE_ATTEMPTS = 8  # delete_dead_nodes: re-reads after a lost race


class RegionWrites:
    """Mixed into DynamoNodeStore (its keys, layouts, ref reads and transactions)."""

    def delete_dead_nodes(self, node_ids: Iterable[str]) -> list[str]:
        """Per DEAD_NODES_PER_TRANSACTION nodes: a BatchGetItem of the nodes, one of their refs,
        and one TransactWriteItems deleting the nodes not live (the ref deleted with it when no
        segment names it, else kept as a tombstone and only checked)."""
        ids = list(dict.fromkeys(node_ids))
        live: set[str] = set()
        for start in range(0, len(ids), DEAD_NODES_PER_TRANSACTION):
            live |= self._delete_dead(ids[start:start + DEAD_NODES_PER_TRANSACTION])
        return [i for i in ids if i not in live]

    def _delete_dead(self, ids: list[str]) -> set[str]:
        """Delete the nodes of ``ids`` that are not live; returns the live ones."""
        for _attempt in range(DEAD_NODE_ATTEMPTS):
            nodes = self.get_nodes(ids)
            keys = [(n.layer, n.code, n.node_id) for n in nodes.values()]
            layouts = {layer: self.write_layout(layer) for layer in sorted({k[0] for k in keys})}
            refs = self._get_refs(keys, layouts)
            live = {i for i, (_, ref) in refs.items() if ref.live}
            ops: list = []
            for n in nodes.values():
                if n.node_id in live:
                    continue
                ops.append(("delete", self.Item(PK=f"NODE#{n.node_id}", SK="NODE"), None,
                            (self.Item.code == n.code) & (self.Item.layer == n.layer), n.layer, 0))
                pk, sk = self._ref_key(n.layer, n.code, n.node_id, layouts[n.layer])
                held = refs.get(n.node_id)
                if held is None:
                    ops.append(("check", self.Item(PK=pk, SK=sk), None, self.Item.PK.does_not_exist(), n.layer, 0))
                elif held[1].seg is None:
                    ops.append(("delete", self.Item(PK=pk, SK=sk), None, self._ref_condition(held[1]), n.layer, 0))
                else:  # a tombstone a segment still names: it stays (the reconcile takes it out)
                    ops.append(("check", self.Item(PK=pk, SK=sk), None, self._ref_condition(held[1]), n.layer, 0))
            try:
                self._transact_refs(ops, layouts)
                return live
            except ConflictError:
                continue  # a ref or node changed since read: read them again
        raise ConflictError(f"delete_dead_nodes: {DEAD_NODE_ATTEMPTS} conditional deletes lost in a row")

    def apply_region(self, change: RegionChange) -> RegionApplied:
        """``_apply_region``, carrying ``change.finish`` in the region's transaction when it
        goes in one with it and shares no item with it; else, or when a condition of the
        finish is what refused the transaction (a marker set again since, a node gone), the
        region is written without it and the finish after it, as write_meta writes it."""
        finish = change.finish
        if finish is not None and finish.empty:
            change, finish = replace(change, finish=None), None
        if finish is None:
            return self._apply_region(change)
        if not self._overlaps(change, finish):
            try:
                return self._apply_region(change)
            except _FinishRefused:
                pass
        applied = self._apply_region(replace(change, finish=None))
        gone = self.write_meta(finish.puts, finish.deletes, finish.clear, finish.present)
        return replace(applied, gone=tuple(gone))

    @staticmethod
    def _overlaps(change: RegionChange, finish: MetaWrite) -> bool:
        """Whether the finish names an item the region's write names too (a transaction may
        name an item once)."""
        keys = {k for k, _ in finish.puts} | set(finish.deletes) | {k for k, _ in finish.clear}
        held = {k for k, _ in change.marks} | {k for _, k, _ in change.keep_texts}
        nodes = {r.node_id for r in change.above_add + change.above_remove} | {n.node_id for n in change.nodes}
        return bool(keys & held) or bool(set(finish.present) & nodes)

    def _apply_region(self, change: RegionChange) -> RegionApplied:
        """See nodes_dynamodb (the split into transactions) and this module (the summaries' nodes).

        The summaries' refs one layer up decide their conditions and the counter's change. A
        change that fits one transaction is first tried on their likely state, unread
        (``_likely_above``: a new summary's ref absent, a replaced one's live, in a segment when
        the layer above is summarized), with conditions that also hold the segment, so it
        commits only where the guess was right; a lost condition (a wrong guess, or a writer
        meanwhile) reads them and goes as before: one request saved a region, or one spent."""
        layer = change.layer
        if change.nodes:
            self.check_fits(nodes=list(change.nodes))  # before anything is written
        layouts = {layer: self.write_layout(layer), layer + 1: self.write_layout(layer + 1)}
        likely = self._likely_above(change)
        if likely is not None:
            ops, deleted, tombstoned = self._region_ops(change, layouts, likely, strict=True)
            chunks = _transactions(ops, reserved=self._reserved(change))
            if len(chunks) == 1:
                try:
                    self._commit(change, chunks, layouts)
                    return self._applied(change, ops, deleted, tombstoned)
                except ConflictError:
                    pass  # read the refs above, and try on what they hold
        above = self._get_refs([(layer + 1, r.code, r.node_id) for r in change.above_add + change.above_remove],
                               layouts)
        ops, deleted, tombstoned = self._region_ops(change, layouts, above)
        chunks = _transactions(ops, reserved=self._reserved(change))
        late = None
        if len(chunks) > 1 and change.finish is not None:  # carried only by a region of one transaction
            late, change = change.finish, replace(change, finish=None)
            chunks = _transactions(ops, reserved=self._reserved(change))
        if len(chunks) > 1 and change.nodes:
            # written in several transactions: the summaries' nodes go first, as made, and each
            # transaction checks its own, so a process that dies between two leaves no segment
            # naming a node not written
            self.put_nodes(list(change.nodes), index=False)
            change = replace(change, nodes=())
            ops, deleted, tombstoned = self._region_ops(change, layouts, above)
            chunks = _transactions(ops, reserved=self._reserved(change))
        try:
            self._commit(change, chunks, layouts)
        except ConflictError:
            self.forget_layouts()
            raise
        applied = self._applied(change, ops, deleted, tombstoned)
        if late is None:
            return applied
        return replace(applied, gone=tuple(self.write_meta(late.puts, late.deletes, late.clear, late.present)))

    def _likely_above(self, change: RegionChange) -> dict | None:
        """The refs above as they most likely are (see apply_region), or None: no guess (the
        layer sizes were not read by this reconcile)."""
        counts = getattr(self, "_last_counts", None)
        if not counts or not (change.above_add or change.above_remove):
            return None
        seg = "?" if counts.get(change.layer + 2, 0) > 0 else None  # the layer above is summarized
        return {r.node_id: (change.layer + 1, RefState(r.node_id, r.code, seg, True)) for r in change.above_remove}

    def _reserved(self, change: RegionChange) -> int:
        finish = change.finish
        carried = 0 if finish is None else self.meta_write_width(finish.puts, finish.deletes, finish.clear,
                                                                 finish.present)
        return len(change.marks) + sum(shadowed(key) for key, _ in change.marks) + 2 * len(change.ledger) + carried

    def _region_ops(self, change: RegionChange, layouts: dict, above: dict,
                    strict: bool = False) -> tuple[list, list[str], list[str]]:
        """The region's ops on the refs above as ``above`` holds them (node id -> (layer,
        RefState)); ``strict``: each ref above also conditioned on its segment being there or not,
        as ``above`` says."""
        layer = change.layer
        written = {i for i, _ in change.assign} | set(change.drop)
        if written - {r.node_id for r in change.expected}:
            raise ValueError("apply_region writes only refs it expects")
        assign = dict(change.assign)
        removed_size = {seg.segment_id: len(seg.members) for seg in change.removed}
        # (kind, args..., prefix count changes (ref_counts: (0 this layer | 1 the one above,
        # kind, group) -> delta), change of the layer-above counter, (segment size, its change)
        # or None), in the order they are applied when split: new segments, the region's refs,
        # the summaries' refs above, old segments
        ops: list = []
        # a kept count must know whether a ref above is in a segment: its write pins that too
        counted = self.prefix_counted()
        strict = strict or counted
        for seg in change.add:
            ops.append(("save", self.Item(PK=self._seg_pk(layer, seg.segment_id), SK=f"SEG#{seg.segment_id}",
                                          members=list(seg.members), summary_id=seg.summary_id), None, None, 0,
                        (len(seg.members), 1)))
        for ref in change.expected:
            pk, sk = self._ref_key(layer, ref.code, ref.node_id, layouts[layer])
            cond = self._ref_condition(ref)
            if ref.node_id in assign:
                sid = assign[ref.node_id]
                action = self.Item.seg.set(sid) if sid is not None else self.Item.seg.remove()
                ops.append(("update", self.Item(PK=pk, SK=sk), [action], cond,
                            _at(0, self.ref_tally(counted, ref.code, ref, (sid is not None, ref.live))), 0, None))
            elif ref.node_id in change.drop:
                ops.append(("delete", self.Item(PK=pk, SK=sk), cond, _at(0, self.ref_tally(counted, ref.code, ref, None)), 0, None))
            else:
                ops.append(("check", pk, sk, cond, None, 0, None))
        # the summaries' refs are conditioned on the liveness read here, which their counter
        # change is computed from: a writer that changed one meanwhile (another pass over a
        # split apply) makes this a conflict instead of counting it twice
        folded = {n.node_id: n for n in change.nodes}
        for ref in change.above_add:
            if ref.node_id in folded:  # its node is written here, in its ref's transaction
                ops.append(("save", self.Item(**self._node_attrs(folded[ref.node_id])), None, None, 0, None))
            else:
                # its node is there (stored before the apply, or read as stored): a summary deleted
                # since (delete_dead_nodes, finishing a stale outbox entry) makes this a conflict;
                # a kept one (keep_nodes) loses its mark, being live from this write on
                ops.append(("update", self.Item(PK=f"NODE#{ref.node_id}", SK="NODE"), [self.Item.live.remove()],
                            self.Item.PK.exists(), None, 0, None))
            pk, sk = self._ref_key(layer + 1, ref.code, ref.node_id, layouts[layer + 1])
            old = above.get(ref.node_id)
            cond = self.Item.PK.does_not_exist() if old is None else self.Item.live == (1 if old[1].live else 0)
            if strict and old is not None:
                cond = cond & self._seg_held(old[1])
            delta = 1 if old is None or not old[1].live else 0
            was = None if old is None else old[1]
            changes = _at(1, self.ref_tally(counted, ref.code, was, (was is not None and was.old, True)))
            ops.append(("update", self.Item(PK=pk, SK=sk), [self.Item.live.set(1)], cond, changes, delta, None))
        texts = {i: (key, value) for i, key, value in change.keep_texts}
        deleted: list[str] = []
        tombstoned: list[str] = []
        for ref in change.above_remove:
            old = above.get(ref.node_id)
            pk, sk = self._ref_key(layer + 1, ref.code, ref.node_id, layouts[layer + 1])
            # one "gone" op: the ref's write, and with delete_removed the node's deletion (on
            # its code and layer, or its absence) and a tombstone's kept text, in one transaction
            parts: list = []
            delta = 0
            changes = None
            if old is not None:
                cond = self.Item.live == (1 if old[1].live else 0)
                if strict:
                    cond = cond & self._seg_held(old[1])
                delta = -1 if old[1].live else 0
                changes = _at(1, self.ref_tally(counted, ref.code, old[1], (True, False) if old[1].old else None))
                if old[1].seg is None:
                    parts.append(("delete", self.Item(PK=pk, SK=sk), cond))
                else:
                    parts.append(("update", self.Item(PK=pk, SK=sk), [self.Item.live.set(0)], cond))
                    tombstoned.append(ref.node_id)
                    if ref.node_id in texts:
                        parts.append(("save", self.meta_item(*texts[ref.node_id]), None))
            elif change.delete_removed:
                parts.append(("check", pk, sk, self.Item.PK.does_not_exist()))
            if change.delete_removed:
                Item = self.Item
                parts.append(("delete", Item(PK=f"NODE#{ref.node_id}", SK="NODE"),
                              Item.PK.does_not_exist() | ((Item.code == ref.code) & (Item.layer == layer + 1))))
                deleted.append(ref.node_id)
            if parts:
                ops.append(("gone", parts, changes, delta, None))
        for sid in change.remove:
            size = removed_size.get(sid)
            ops.append(("delete", self.Item(PK=self._seg_pk(layer, sid), SK=f"SEG#{sid}"), None, None, 0,
                        None if size is None else (size, -1)))
        return ops, deleted, tombstoned

    def _seg_held(self, ref: RefState):
        return self.Item.seg.does_not_exist() if ref.seg is None else self.Item.seg.exists()

    def _commit(self, change: RegionChange, chunks: list[list], layouts: dict) -> None:
        """The region's transactions (see nodes_dynamodb); a lost condition is a ConflictError."""
        from pynamodb.transactions import TransactWrite

        layer = change.layer
        marks = [self.meta_item(key, value) for key, value in change.marks]
        marks += [self.shadow_item(key, value) for key, value in change.marks if shadowed(key)]  # their copies
        # the ledger's ADDs (two items a kind) go in the last transaction: a split apply that
        # stops before it has added nothing, and its caller adds the calls itself
        # each transaction carries the counter changes of its own ops and the checks of both
        # layers' layouts; when there are several, the first writes the ``applying`` mark and
        # the last deletes it; the first writes the change's own marks (outbox, dirty markers)
        mark = applying_key(layer, uuid.uuid4().hex)
        marker = self.Item(PK=meta_partition(mark), SK=f"KEY#{mark}") if len(chunks) > 1 else None
        connection = self._connection()
        finish = change.finish if len(chunks) == 1 else None  # apply_region: one transaction or none
        for number, chunk in enumerate(chunks):
            tx = _Positions()
            try:
                with TransactWrite(connection=connection) as written:
                    tx.into = written
                    sizes: dict[int, int] = {}
                    counted: tuple[dict, dict] = ({}, {})  # this layer's prefix counts, the one above's
                    for op in chunk:
                        for part in (op[1] if op[0] == "gone" else [op[:-3]]):
                            self._write_part(tx, part)
                        if op[-1] is not None:
                            sizes[op[-1][0]] = sizes.get(op[-1][0], 0) + op[-1][1]
                        for (at, kind, group), delta in (op[-3] or {}).items():
                            counted[at][(kind, group)] = counted[at].get((kind, group), 0) + delta
                    self._counter_op(tx, layer, layouts[layer], 0, counted[0])
                    self._counter_op(tx, layer + 1, layouts[layer + 1], sum(op[-2] for op in chunk), counted[1])
                    for size, delta in sizes.items():
                        if delta:
                            tx.update(self.Item(PK="COUNT", SK=f"SEGSIZE#{layer}#{size}"),
                                      actions=[self.Item.version.add(delta)])
                    if number == 0:
                        for item in marks:
                            tx.save(item)
                    if marker is not None and number == 0:  # with its copy (meta_dynamodb.shadow_item)
                        now = time.time()
                        tx.save(self.Item(PK=marker.PK, SK=marker.SK, value=json.dumps(now), stamp=now))
                        tx.save(self.shadow_item(mark, now))
                    elif marker is not None and number == len(chunks) - 1:
                        tx.delete(marker)
                        tx.delete(self.Item(PK="COUNT", SK=f"{SHADOW}{mark}"))
                    if number == len(chunks) - 1:
                        for row in change.ledger:
                            self.ledger_updates(tx, *row)
                    if finish is not None:
                        tx.carried = True
                        self.meta_write_parts(tx, finish.puts, finish.deletes, finish.clear, finish.present)
            except TransactWriteError as exc:
                if finish is not None and tx.refused_carried_only(exc):
                    raise _FinishRefused() from None
                if _is_lost_race(exc):
                    raise ConflictError(f"layer {layer}: the region changed concurrently") from None
                raise

    def _applied(self, change: RegionChange, ops: list, deleted: list[str], tombstoned: list[str]) -> RegionApplied:
        layer = change.layer
        counts = getattr(self, "_last_counts", {})
        above_delta = sum(op[-2] for op in ops)
        if layer + 1 in counts or above_delta:
            self.grow_if_due(layer + 1, counts.get(layer + 1, 0) + above_delta)
        return RegionApplied(tuple(deleted), tuple(tombstoned))

    def _write_part(self, tx, part: tuple) -> None:
        """One item of a region's transaction: ("check", pk, sk, condition), ("update", item,
        actions, condition), ("delete", item, condition) or ("save", item, condition)."""
        kind = part[0]
        if kind == "check":
            tx.condition_check(self.Item, part[1], part[2], condition=part[3])
        elif kind == "update":
            tx.update(part[1], actions=part[2], condition=part[3])
        elif kind == "delete":
            tx.delete(part[1], condition=part[2])
        else:
            tx.save(part[1], condition=part[2])


class _FinishRefused(Exception):
    """A region's transaction was refused by the finish it carried alone (apply_region)."""


class _Positions:
    """A TransactWrite's item calls as made, each marked carried (RegionChange.finish) or not,
    so that a cancellation's reasons (one per item, in the request's order: condition checks,
    deletes, puts, updates, each kind in call order) can be laid on them."""

    ORDER = ("check", "delete", "put", "update")

    def __init__(self) -> None:
        self.into: Any = None
        self.carried = False
        self.calls: list[tuple[str, bool]] = []

    def condition_check(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("check", self.carried))
        self.into.condition_check(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("delete", self.carried))
        self.into.delete(*args, **kwargs)

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("put", self.carried))
        self.into.save(*args, **kwargs)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("update", self.carried))
        self.into.update(*args, **kwargs)

    def refused_carried_only(self, exc: Exception) -> bool:
        """True when every item the cancellation names as failed is a carried one."""
        reasons = list(getattr(exc, "cancellation_reasons", None) or [])
        order = sorted(self.calls, key=lambda call: self.ORDER.index(call[0]))  # stable: call order kept
        if len(reasons) != len(order):
            return False
        failed = [carried for (_, carried), reason in zip(order, reasons) if reason is not None]
        return bool(failed) and all(failed)


def _at(offset: int, changes: dict) -> dict | None:
    """A ref write's prefix count changes, keyed with the layer they are of (0: the region's,
    1: the one above)."""
    return {(offset, kind, group): delta for (kind, group), delta in changes.items()} or None


def _width(op: tuple) -> int:
    """The items of one op (a "gone" op writes its parts together)."""
    return len(op[1]) if op[0] == "gone" else 1


def _names_node(op: tuple) -> bool:
    """A summary's node check or write (apply_region puts its ref's op right after it)."""
    if op[0] == "check":
        return isinstance(op[1], str) and op[1].startswith("NODE#")
    return op[0] in ("save", "update") and getattr(op[1], "SK", None) == "NODE"


def _transactions(ops: list, reserved: int = 0) -> list[list]:
    """``ops`` in one transaction when they fit with the two layer counters, a segment counter
    per distinct segment size and ``reserved`` items more (the change's marks), else cut into
    several, each also leaving room for the mark and the reserved items."""
    sizes = {op[-1][0] for op in ops if op[-1] is not None}
    if sum(map(_width, ops)) + REF_COUNTER_SLOTS + len(sizes) + reserved <= TRANSACT_LIMIT:
        return [ops]
    room = TRANSACT_LIMIT - REF_COUNTER_SLOTS - 2 - reserved  # 2: the applying mark and its copy
    chunks: list[list] = [[]]
    items = 0
    sizes = set()
    for op in ops:
        extra = {op[-1][0]} - sizes if op[-1] is not None else set()
        # a summary's node check or write goes in the transaction of its ref (the op after it)
        need = 2 if _names_node(op) else _width(op)
        if items + len(sizes) + len(extra) + need > room:
            chunks.append([])
            items = 0
            sizes = set()
            extra = {op[-1][0]} if op[-1] is not None else set()
        chunks[-1].append(op)
        items += _width(op)
        sizes |= extra
    return chunks
