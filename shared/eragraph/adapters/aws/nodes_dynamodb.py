"""The NodeStore part of the DynamoDB graph store: nodes, the code-ordered ref index, layer
counters, segments and the regions' conditional writes.

* The ref index: one small item per indexed node under ``REF#<layer>#b<bits>#<shard>`` (the
  code's top ``bits`` bits), sort key ``<code hex>#<node id>``: a code range is a Query on one
  or a few partitions with a Limit, strongly consistent. A layer's partitions grow with it
  (ref_layout: one while it is small, up to 256), so a read costs what it returns. The item
  carries the node's segment (``seg``) and whether it is live (a tombstone keeps its segment
  until the reconcile takes it out). Every ref write is conditioned on its layer's layout
  (on the layer counter), so none lands in a partition a move has left.
* Segments live under ``SEGS#<layer>#<bucket of the segment id>``; they are read by id.
* ``apply_region`` (region_dynamodb, with ``delete_dead_nodes``; the replaced summaries' node
  deletions, their kept texts and the ledger's ADDs ride in it) is one TransactWriteItems: every ref of the region is conditioned on the
  state the reconcile read (the writes carry their own conditions, the others a
  ConditionCheck), with the segment puts/deletes, the summaries' refs one layer up and the
  layer counter. A lost condition is a ``ConflictError`` and nothing is written.
* A region larger than one transaction (100 items: a first build of a layer, a whole-layer
  pass) is written in several, and a consumer can die between them, or a later one can lose
  its conditions (``ConflictError``) after the earlier ones committed. What such a partial
  apply leaves must not mislead the next reconcile. The scoped planner (domain.scoped) takes
  the refs' segments as the stored partition of the old node set; part of a re-cut breaks
  that (some refs already name new segments, others still old ones, some tombstones gone),
  and a scoped re-plan of the same message can then find nothing to do while refs name
  segments whose summaries never entered the layer above, or leave halves it does not read
  half re-cut. So:

  - the transactions go in this order: new segments, the region's refs, the summaries' refs
    one layer up, the old segments' deletions. At every cut a ref names an existing segment
    record, and a summary is live above only once its segment's refs are all written;
  - each transaction carries the counter change of its own summary refs, so the counters are
    exact at every cut; those refs are conditioned on the liveness read (their counter change
    is computed from it), so when a whole-layer pass repairs a layer while an apply is still
    running (its mark looks like an unfinished one), the rest of that apply is a conflict
    instead of counting a summary twice;
  - the first transaction also writes a mark ``META``/``KEY#applying:<layer>:<token>``
    (domain.model.APPLYING, read with ``meta_keys``) and the last one deletes it: the mark
    is there exactly while part of the re-cut may be missing. The reconcile of a marked layer
    (a redelivered message, the retry after the ConflictError, any other message of the layer,
    reindex) re-cuts the whole layer in repair mode, which reads every ref and every segment
    record and rebuilds whatever the cut left (services.resummarize), then removes the marks
    older than its start and announces the layer above as a whole (the partial apply's
    summaries there were never announced).
* Layer sizes are counters (atomic ADD under ``COUNT``), never a count over the items. Every
  ref write that changes a layer's size (``put_nodes``, ``delete_nodes``, ``apply_region``) is
  conditioned on the ref's state as read and carries its ADD in the same TransactWriteItems,
  so the counter moves by what the writes actually did: two writers of one new node count it
  once (the second one's condition fails; it re-reads and finds nothing left to write), and
  no writer dies between its refs and their ADD. ``repair_layer_counts`` (reindex) still
  recounts the refs (a store written before this, or by hand) and rewrites a counter
  conditionally on the value it read, so a concurrent ADD is never overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, TransactWriteError, UpdateError

from ...domain.model import ConflictError, Document, ItemTooLargeError, Node, NodeRef, RefState, Segment
from ...domain.access import index_of, max_code
from ...domain.prefix_counts import merge
from ...domain.segment_stats import SegmentStats
from .dynamodb_table import BATCH_GET, TRANSACT_LIMIT, DynamoTable, _is_condition_failure, _is_lost_race, item_bytes
from .ref_counts import RefCounts
from .ref_layout import Layout, RefLayouts
from .meta_dynamodb import SHADOW, _meta_value, flag_only, meta_partition, shadowed
from .region_dynamodb import RegionWrites


COUNT_REPAIR_ATTEMPTS = 5  # repair_layer_counts: re-reads of a counter that moved meanwhile
REF_WRITE_ATTEMPTS = 8  # put_nodes/delete_nodes: re-reads of refs another writer changed meanwhile
SEGMENT_BUCKETS = 64  # segment partitions per layer
ITEM_LIMIT = 400 * 1024  # DynamoDB's item size limit (attribute names and values)


class DynamoNodeStore(RegionWrites, RefLayouts, RefCounts, DynamoTable):
    # a layer of at most this many refs is one Query (one partition below 4 * PART_ITEMS refs;
    # ~80 bytes a ref, ~320 KB of a 1 MB page): the reconcile reads it whole once rather than
    # count by count (services.resummarize), a few dozen read units instead of a Query a count
    refs_per_read = 4000

    # ----- keys of the ref index -----
    @property
    def code_bits(self) -> int:
        if self._code_bits is None:
            lsh = self.get_lsh()
            if lsh is None:
                raise RuntimeError("the ref index needs the code width: store the hyperplanes first")
            self._code_bits = lsh.n_planes
        return self._code_bits

    def _ref_key(self, layer: int, code: int, node_id: str, layout: Layout | None = None) -> tuple[str, str]:
        layout = self.layout(layer) if layout is None else layout
        return layout.partition(layer, self._shard_of(code, layout.bits)), f"{self._code_hex(code)}#{node_id}"

    def _ref_state(self, item) -> RefState:
        code_hex, node_id = item.SK.split("#", 1)
        return RefState(node_id, self._code_of(code_hex), item.seg or None, bool(item.live))

    def _seg_pk(self, layer: int, segment_id: str) -> str:
        import hashlib

        bucket = int(hashlib.sha256(segment_id.encode()).hexdigest()[:4], 16) % SEGMENT_BUCKETS
        return f"SEGS#{layer}#{bucket}"

    # ----- nodes and the ref index -----
    @staticmethod
    def _node_attrs(n: Node) -> dict[str, Any]:
        return dict(PK=f"NODE#{n.node_id}", SK="NODE", layer=n.layer, text=n.text, tokens=n.tokens, code=n.code,
                    doc_id=n.doc_id or None, source=n.source or None, children=list(n.children),
                    place=list(n.place) or None)

    @staticmethod
    def _fits(attrs: dict[str, Any], what: str) -> None:
        size = item_bytes(attrs)
        if size > ITEM_LIMIT:
            raise ItemTooLargeError(f"{what}: its DynamoDB item {attrs['PK']} would be about {size} bytes, "
                                    f"over the {ITEM_LIMIT}-byte item limit; nothing was written")

    def check_fits(self, doc: Document | None = None, nodes: Sequence[Node] = ()) -> None:
        if doc is not None:
            self._fits(self._document_attrs(doc), f"document {doc.doc_id} ({len(doc.chunk_ids)} chunks)")
        for n in nodes:
            self._fits(self._node_attrs(n), f"node {n.node_id} ({len(n.text)} characters)")

    def _node(self, item) -> Node:
        return Node(node_id=item.PK[len("NODE#"):], layer=int(item.layer), text=item.text or "",
                    tokens=int(item.tokens), code=int(item.code), doc_id=item.doc_id or "",
                    source=item.source or "", children=tuple(item.children or ()),
                    place=tuple(int(v) for v in item.place or ()))

    def _get_refs(self, keys: list[tuple[int, int, str]],
                  layouts: dict[int, Layout] | None = None) -> dict[str, tuple[int, RefState]]:
        """(layer, code, node id) -> the stored refs, by node id (``layouts``: the layers'
        layouts to read with, else their current ones)."""
        out: dict[str, tuple[int, RefState]] = {}
        layouts = layouts or {}
        keyed = {self._ref_key(layer, code, node_id, layouts.get(layer)): layer for layer, code, node_id in keys}
        unique = list(keyed)
        for start in range(0, len(unique), BATCH_GET):
            for item in self.Item.batch_get(unique[start:start + BATCH_GET], consistent_read=True):
                ref = self._ref_state(item)
                out[ref.node_id] = (keyed[(item.PK, item.SK)], ref)
        return out

    def _counter_op(self, tx, layer: int, layout: Layout, delta: int, changes: dict | None = None) -> None:
        """The layer counter's part of a ref transaction: its ADD (with the layout it was
        written with) and the prefix counts' (ref_counts: ``changes``), or a check that the
        layout still holds when no count moves."""
        condition = self.layout_condition(layer, layout)
        counted = self.count_actions(changes or {})
        if delta or counted:
            tx.update(self.Item(PK="COUNT", SK=f"LAYER#{layer}"),
                      actions=[self.Item.version.add(delta)] + counted + self.layout_actions(layout),
                      condition=condition)
        else:
            tx.condition_check(self.Item, "COUNT", f"LAYER#{layer}", condition=condition)

    def _transact_refs(self, ops: list, layouts: dict[int, Layout] | None = None) -> None:
        """Ref writes, each conditioned on the state read, with the layer counters' changes they
        make, in TransactWriteItems of up to TRANSACT_LIMIT items: a counter moves only with
        the writes it counts, and only while its layer has the layout the writes were keyed
        with. ``ops``: (kind, item, actions or None, condition, layer, delta[, prefix count
        changes: RefCounts.ref_tally]), kind one of "save", "update", "delete", "check" (a
        ConditionCheck on the item's key). A lost
        condition (or a concurrent transaction on one of the items) raises ConflictError (the
        transactions before it committed)."""
        from pynamodb.transactions import TransactWrite

        if not ops:
            return
        layouts = layouts or {layer: self.write_layout(layer) for layer in sorted({op[4] for op in ops})}
        size = TRANSACT_LIMIT - len({op[4] for op in ops})
        connection = self._connection()
        for start in range(0, len(ops), size):
            chunk = ops[start:start + size]
            deltas: dict[int, int] = {}
            changes: dict[int, dict] = {}
            try:
                with TransactWrite(connection=connection) as tx:
                    for kind, item, actions, condition, layer, delta, *tallied in chunk:
                        if kind == "save":
                            tx.save(item, condition=condition)
                        elif kind == "update":
                            tx.update(item, actions=actions, condition=condition)
                        elif kind == "check":
                            tx.condition_check(self.Item, item.PK, item.SK, condition=condition)
                        else:
                            tx.delete(item, condition=condition)
                        deltas[layer] = deltas.get(layer, 0) + delta
                        merge(changes.setdefault(layer, {}), tallied[0] if tallied else {})
                    for layer, delta in deltas.items():
                        self._counter_op(tx, layer, layouts[layer], delta, changes.get(layer))
            except TransactWriteError as exc:
                if _is_lost_race(exc):
                    self.forget_layouts()
                    raise ConflictError("a ref changed concurrently") from None
                raise

    def put_nodes(self, nodes: Sequence[Node], index: bool = True) -> None:
        """Write the node items (BatchWriteItem), then their refs: only those absent or not
        live are written, each conditioned on the state read and counted in the same
        transaction (so concurrent writers of one node count it once). A lost condition
        re-reads the refs and writes what is still missing."""
        unique = {n.node_id: n for n in nodes}  # one batch may not name a key twice
        self.check_fits(nodes=list(unique.values()))  # before anything is written
        # a node written again with another layer or code (a summary re-made): its old ref goes
        before = self.get_nodes(unique) if index else {}
        moved = [b for b in before.values() if (b.layer, b.code) != (unique[b.node_id].layer, unique[b.node_id].code)]
        with self.Item.batch_write() as batch:
            for n in unique.values():
                batch.save(self.Item(**self._node_attrs(n)))
        if not index:
            return
        for _attempt in range(REF_WRITE_ATTEMPTS):
            layers = {n.layer for n in unique.values()} | {b.layer for b in moved}
            layouts = {layer: self.write_layout(layer) for layer in sorted(layers)}
            counted = self.prefix_counted()
            held = self._get_refs([(n.layer, n.code, n.node_id) for n in unique.values()], layouts)
            stale = self._get_refs([(b.layer, b.code, b.node_id) for b in moved], layouts)
            ops: list = []
            carried: dict[str, str | None] = {}
            for node_id, (layer, ref) in stale.items():
                pk, sk = self._ref_key(layer, ref.code, node_id, layouts[layer])
                ops.append(("delete", self.Item(PK=pk, SK=sk), None, self._ref_condition(ref), layer,
                            -1 if ref.live else 0, self.ref_tally(counted, ref.code, ref, None)))
                if ref.seg is not None and layer == unique[node_id].layer:
                    carried[node_id] = ref.seg  # the new ref keeps the segment until the reconcile
            for n in unique.values():
                pk, sk = self._ref_key(n.layer, n.code, n.node_id, layouts[n.layer])
                old = held.get(n.node_id)
                if old is None:
                    seg = carried.get(n.node_id)
                    ops.append(("save", self.Item(PK=pk, SK=sk, seg=seg, live=1), None,
                                self.Item.PK.does_not_exist(), n.layer, 1,
                                self.ref_tally(counted, n.code, None, (seg is not None, True))))
                elif not old[1].live:
                    # a kept count must know whether a segment names it: the write pins that too
                    condition = self.Item.live == 0
                    if counted:
                        condition = condition & self._seg_held(old[1])
                    ops.append(("update", self.Item(PK=pk, SK=sk), [self.Item.live.set(1)], condition,
                                n.layer, 1, self.ref_tally(counted, n.code, old[1], (old[1].old, True))))
            try:
                self._transact_refs(ops, layouts)
                return
            except ConflictError:
                continue  # another writer changed one of these refs, or the layout: read them again
        raise ConflictError(f"put_nodes: {REF_WRITE_ATTEMPTS} conditional ref writes lost in a row")

    def keep_nodes(self, nodes: Sequence[Node]) -> None:
        """One conditional PutItem a node (absent only): few, on a write that did not happen.
        Each is marked kept (``live`` 0 on the node item) until an apply makes it live (which
        removes the mark): write_meta's ``present`` takes a kept node for one not live."""
        unique = {n.node_id: n for n in nodes}
        self.check_fits(nodes=list(unique.values()))
        for n in unique.values():
            try:
                self.Item(**self._node_attrs(n), live=0).save(condition=self.Item.PK.does_not_exist())
            except PutError as exc:
                if not _is_condition_failure(exc):
                    raise  # a node stored meanwhile stays: its writer's

    def get_nodes(self, node_ids: Iterable[str]) -> dict[str, Node]:
        ids = list(dict.fromkeys(node_ids))
        out = {node.node_id: node for node in map(self._node, self._batch_get([(f"NODE#{i}", "NODE") for i in ids]))}
        return {i: out[i] for i in ids if i in out}

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        """Delete the node items, then take their refs out (deleted, or kept as a tombstone while
        a segment names them), each conditioned on the state read and uncounted in the same
        transaction; a lost condition re-reads the refs."""
        ids = list(dict.fromkeys(node_ids))
        nodes = self.get_nodes(ids)
        keys = [(n.layer, n.code, n.node_id) for n in nodes.values()]
        with self.Item.batch_write() as batch:
            for i in ids:
                batch.delete(self.Item(PK=f"NODE#{i}", SK="NODE"))
        for _attempt in range(REF_WRITE_ATTEMPTS):
            layouts = {layer: self.write_layout(layer) for layer in sorted({k[0] for k in keys})}
            counted = self.prefix_counted() if keys else False
            ops: list = []
            for node_id, (layer, ref) in self._get_refs(keys, layouts).items():
                pk, sk = self._ref_key(layer, ref.code, node_id, layouts[layer])
                if ref.seg is None:
                    ops.append(("delete", self.Item(PK=pk, SK=sk), None, self._ref_condition(ref), layer,
                                -1 if ref.live else 0, self.ref_tally(counted, ref.code, ref, None)))
                elif ref.live:
                    ops.append(("update", self.Item(PK=pk, SK=sk), [self.Item.live.set(0)],
                                self._ref_condition(ref), layer, -1, self.ref_tally(counted, ref.code, ref, (True, False))))
            try:
                self._transact_refs(ops, layouts)
                return
            except ConflictError:
                continue
        raise ConflictError(f"delete_nodes: {REF_WRITE_ATTEMPTS} conditional ref writes lost in a row")

    def prefix_refs(self, layer: int, lo: int, hi: int, limit: int | None = None) -> list[RefState]:
        layout = self.layout(layer)
        out: list[RefState] = []
        condition = self.Item.SK.between(f"{self._code_hex(lo)}#", f"{self._code_hex(hi)}#\uffff")
        if index_of(lo, self.code_bits) != index_of(hi, self.code_bits):
            # a range over several access partitions (a whole layer, the next partition's first
            # ref): every shard holds part of each, so each is read up to the limit and merged
            for shard in range(self._shard_count(layout)):
                items = self.Item.query(layout.partition(layer, shard), condition, consistent_read=True, limit=limit)
                out += [self._ref_state(i) for i in items]
            out.sort(key=lambda r: (r.code, r.node_id))
            return out if limit is None else out[:limit]
        for shard in range(self._shard_of(lo, layout.bits), self._shard_of(hi, layout.bits) + 1):
            want = None if limit is None else limit - len(out)
            if want is not None and want <= 0:
                break
            items = self.Item.query(layout.partition(layer, shard), condition, consistent_read=True, limit=want)
            out += [self._ref_state(i) for i in items]
        return out

    def refs_page(self, layer: int, after: tuple[int, str] | None, limit: int) -> list[RefState]:
        """From the cursor's partition on, one Query per partition until ``limit`` live refs
        (tombstones are skipped as they are read)."""
        limit = max(int(limit), 0)
        layout = self.layout(layer)
        out: list[RefState] = []
        first = 0 if after is None else self._shard_of(int(after[0]), layout.bits)
        for shard in range(first, self._shard_count(layout)):
            if len(out) >= limit:
                break
            pk = layout.partition(layer, shard)
            condition = None if after is None or shard != first else self.Item.SK > self._ref_key(layer, *after, layout)[1]
            for item in self.Item.query(pk, condition, consistent_read=True, page_size=min(limit * 2, 500)):
                ref = self._ref_state(item)
                if ref.live:
                    out.append(ref)
                    if len(out) >= limit:
                        break
        return out

    def layer_refs(self, layer: int) -> list[NodeRef]:
        refs = self.prefix_refs(layer, 0, max_code())
        return sorted((NodeRef(r.node_id, r.code) for r in refs if r.live), key=lambda r: r.node_id)

    def _counters(self) -> dict[int, int]:
        """Every layer counter as stored (zero and negative ones too); their layouts are
        remembered on the way."""
        items = self.Item.query("COUNT", self.Item.SK.startswith("LAYER#"), consistent_read=True)
        out = {}
        for i in items:
            layer = int(i.SK[len("LAYER#"):])
            self._remember(layer, i)
            out[layer] = int(i.version or 0)
        self._last_counts = out
        return out

    def layer_sizes(self) -> dict[int, int]:
        return {layer: n for layer, n in sorted(self._counters().items()) if n > 0}

    def sizes_and_metas(self, keys: Sequence[str], prefixes: Sequence[str]) -> tuple[dict[int, int], dict[str, Any]]:
        """One Query of the ``COUNT`` partition (the layer counters, their layouts remembered
        on the way, and the copies of the markers, marks and stamps: meta_dynamodb.shadow_item)
        answers the layer sizes and the keys and prefixes of the kinds copied there; the
        others are read from their own partitions (a shard's outbox: one Query, its entries'
        values with it, made only when the COUNT partition holds a flag of one of its entries:
        meta_dynamodb.flag_only; an idle shard's reconcile reads its state in one request)."""
        copied = {k for k in keys if shadowed(k) and not flag_only(k)}
        copied_prefixes = [p for p in prefixes if shadowed(p) and not flag_only(p)]
        flagged = [p for p in prefixes if flag_only(p)]  # read from their partition when flagged
        seen: set[str] = set()
        counts: dict[int, int] = {}
        raws: dict[int, dict] = {}
        out: dict[str, Any] = {}
        for i, raw in self._raw_query("COUNT"):
            if i.SK.startswith("LAYER#"):
                layer = int(i.SK[len("LAYER#"):])
                self._remember(layer, i)
                counts[layer] = int(i.version or 0)
                raws[layer] = raw
            elif i.SK.startswith(SHADOW):
                key = i.SK[len(SHADOW):]
                if key in copied or any(key.startswith(p) for p in copied_prefixes):
                    value = _meta_value(i)
                    if value is not None:
                        out[key] = value
                else:
                    seen.update(p for p in flagged if key.startswith(p))
        self._last_counts = counts
        self.hold_counts(raws)  # the layers' prefix counts (ref_counts), for this reconcile's walk
        out.update(self.metas_under([p for p in prefixes if not shadowed(p)] + [p for p in flagged if p in seen]))
        rest = [k for k in keys if k not in copied]
        if rest:
            out.update(self.get_metas(rest))
        return {layer: n for layer, n in sorted(counts.items()) if n > 0}, out

    def repair_layer_counts(self) -> dict[int, int]:
        """Recount each layer's live refs and rewrite its counter where they differ. The layers
        looked at: every one with a counter, and upwards from there while a layer has refs
        (layers are filled bottom-up, so a layer with refs above an empty one, whose counter
        is gone too, is not looked for). Each counter is read, then its layer counted, then
        rewritten on the condition that it still holds the value read (and its layout): a
        writer that ADDed meanwhile makes the condition fail, and the counter is read and the
        layer counted again (up to COUNT_REPAIR_ATTEMPTS times; a layer that keeps moving is
        left to the next run). Reading the counter before counting means a writer that wrote
        its ref but not yet its ADD when the counter is rewritten leaves it one over; the next
        run sees it. A counter of a layer spread over several partitions is kept at zero, not
        deleted: it holds the layer's layout."""
        Item = self.Item
        top = max_code()
        layers = set(self._counters())
        layer = 0
        while layer <= max(layers, default=-1) or self.prefix_refs(layer, 0, top, limit=1):
            layers.add(layer)
            layer += 1
        fixed: dict[int, int] = {}
        for layer in sorted(layers):
            for _attempt in range(COUNT_REPAIR_ATTEMPTS):
                raw = self.raw_counter(layer)
                item = None if raw is None else Item.from_raw_data(raw)
                layout = self._remember(layer, item)
                observed = None if item is None or item.version is None else int(item.version)
                refs = self.prefix_refs(layer, 0, top)
                live = sum(1 for r in refs if r.live)
                # the prefix counts (ref_counts), rewritten where they differ, on the counts read
                recount, pinned = self.recount_actions(raw, refs)
                # without live refs the counter goes, unless it holds a layout its absence
                # would not say (more than one partition, or a store not stamped yet), or the
                # counts of tombstones
                goes = not live and (layout.legacy or (layout.bits == 0 and self.store_current())) and not (
                    refs and self.prefix_counted())
                if (item is None) if goes else (observed == live and not recount):
                    break
                condition = Item.version.does_not_exist() if observed is None else Item.version == observed
                condition = condition & self.layout_condition(layer, layout)
                if pinned is not None and not goes:
                    condition = condition & pinned
                target = Item(PK="COUNT", SK=f"LAYER#{layer}")
                try:
                    if not goes:
                        target.update(actions=[Item.version.set(live)] + recount + self.layout_actions(layout),
                                      condition=condition)
                    else:
                        target.delete(condition=condition)
                except (UpdateError, DeleteError) as exc:
                    if not _is_condition_failure(exc):
                        raise
                    continue
                if live != (observed or 0):
                    fixed[layer] = live - (observed or 0)
                break
        return fixed

    # ----- segments -----
    def _segment(self, layer: int, item) -> Segment:
        return Segment(segment_id=item.SK[len("SEG#"):], layer=layer, members=tuple(item.members or ()),
                       summary_id=item.summary_id or "")

    def get_segments(self, layer: int) -> list[Segment]:
        out = []
        for bucket in range(SEGMENT_BUCKETS):
            items = self.Item.query(f"SEGS#{layer}#{bucket}", self.Item.SK.startswith("SEG#"), consistent_read=True)
            out += [self._segment(layer, i) for i in items]
        return sorted(out, key=lambda seg: seg.segment_id)

    def get_segments_by_id(self, layer: int, segment_ids: Iterable[str]) -> dict[str, Segment]:
        ids = list(dict.fromkeys(segment_ids))
        found: dict[str, Segment] = {}
        for start in range(0, len(ids), BATCH_GET):
            keys = [(self._seg_pk(layer, i), f"SEG#{i}") for i in ids[start:start + BATCH_GET]]
            for item in self.Item.batch_get(keys, consistent_read=True):
                seg = self._segment(layer, item)
                found[seg.segment_id] = seg
        return {i: found[i] for i in ids if i in found}

    def read_region(self, layer: int, segment_ids: Iterable[str], node_ids: Iterable[str],
                    keys: Iterable[str]) -> tuple[dict[str, Segment], dict[str, Node], dict[str, Any]]:
        """The segment records, nodes and meta items in one BatchGetItem (per 100 keys)."""
        segs, ids, metas = list(dict.fromkeys(segment_ids)), list(dict.fromkeys(node_ids)), list(dict.fromkeys(keys))
        wanted = ([(self._seg_pk(layer, i), f"SEG#{i}") for i in segs] + [(f"NODE#{i}", "NODE") for i in ids]
                  + [(meta_partition(k), f"KEY#{k}") for k in metas])
        found_segs: dict[str, Segment] = {}
        found_nodes: dict[str, Node] = {}
        found_metas: dict[str, Any] = {}
        for item in self._batch_get(wanted):
            if item.SK.startswith("SEG#"):
                seg = self._segment(layer, item)
                found_segs[seg.segment_id] = seg
            elif item.PK.startswith("NODE#"):
                found = self._node(item)
                found_nodes[found.node_id] = found
            else:
                value = _meta_value(item)
                if value is not None:
                    found_metas[item.SK[len("KEY#"):]] = value
        return ({i: found_segs[i] for i in segs if i in found_segs}, {i: found_nodes[i] for i in ids if i in found_nodes},
                found_metas)

    def _ref_condition(self, ref: RefState):
        seg = self.Item.seg.does_not_exist() if ref.seg is None else self.Item.seg == ref.seg
        return self.Item.PK.exists() & (self.Item.live == (1 if ref.live else 0)) & seg

    def counter_snapshot(self) -> tuple[dict[int, int], dict[int, SegmentStats], int | None]:
        """Layer sizes, segment stats and the document count from one Query of the ``COUNT``
        partition (layer, segment and document counters live there, and the dirty markers'
        copies, left in ``marked_keys``): GET /stats' reads. A
        legacy layer (not migrated yet) is counted from its segment records."""
        sizes: dict[int, dict[int, int]] = {}
        layers: dict[int, int] = {}
        documents = None
        marked: list[str] = []  # the dirty markers' copies (meta_dynamodb.shadow_item)
        for i in self.Item.query("COUNT", consistent_read=True):
            if i.SK.startswith("LAYER#"):
                layer = int(i.SK[len("LAYER#"):])
                self._remember(layer, i)
                layers[layer] = int(i.version or 0)
            elif i.SK.startswith("SEGSIZE#") and int(i.version or 0) > 0:
                _, layer, size = i.SK.split("#")
                sizes.setdefault(int(layer), {})[int(size)] = int(i.version)
            elif i.SK == "DOCS" and i.version is not None:
                documents = max(0, int(i.version))
            elif i.SK.startswith(f"{SHADOW}dirty:"):
                marked.append(i.SK[len(SHADOW):])
        stats: dict[int, SegmentStats] = {}
        for layer in sorted(set(layers) | set(sizes)):
            if self.layout(layer).legacy:
                found = SegmentStats.of(len(s.members) for s in self.get_segments(layer))
            else:
                counts = sizes.get(layer, {})
                found = SegmentStats(sum(counts.values()), min(counts, default=None), max(counts, default=None))
            if found.count:
                stats[layer] = found
        live = {layer: n for layer, n in sorted(layers.items()) if n > 0}
        self.counted_layers = sorted(set(layers) | set(sizes))  # with the emptied ones
        self.marked_keys = sorted(marked)  # the dirty markers as of this read (GET /stats)
        if documents is None and not live:
            documents = 0  # a namespace without chunks (see document_count)
        return live, stats, documents

    def segment_stats(self) -> dict[int, SegmentStats]:
        """Per layer, its segments' count and sizes from the counters (one Query)."""
        return self.counter_snapshot()[1]

    def _count_legacy_segments(self, layer: int) -> None:
        """Write ``layer``'s segment counters from its records (while the layer is claimed by a
        move, so no segment write of it commits meanwhile)."""
        counts: dict[int, int] = {}
        for seg in self.get_segments(layer):
            counts[len(seg.members)] = counts.get(len(seg.members), 0) + 1
        stale = [i for i in self.Item.query("COUNT", self.Item.SK.startswith(f"SEGSIZE#{layer}#"), consistent_read=True)]
        with self.Item.batch_write() as batch:
            for i in stale:
                if int(i.SK.rsplit("#", 1)[1]) not in counts:
                    batch.delete(i)
            for size, n in counts.items():
                batch.save(self.Item(PK="COUNT", SK=f"SEGSIZE#{layer}#{size}", version=n))
