"""What one reconcile costs on DynamoDB (services.resummarize over moto, the handlers' engine):
the small state in one Query (GraphStore.sizes_and_metas: the COUNT partition; the shard's
outbox partition only when a flag there says it holds an entry), the region's refs in one, its
records in one BatchGetItem (GraphStore.read_region), the region's one transaction (with the
new summary's node, the outbox entry and its flag, the markers above, the replaced summaries'
deletes, the kept texts and the ledger's ADDs; tried on the likely state of the summaries' refs
above, unread, which holds here). The reconcile's end (its change record, its finished outbox
entry, the marker's conditional clear and a ConditionCheck on each new summary's node, made
after their vectors) rides with its announce and goes in the next layer's region transaction;
the top layer's reconcile, with nothing to apply, writes it with its own in one
TransactWriteItems: 4 requests a reconciled layer, 3 for the layer with nothing to apply,
whatever the store holds. On the handlers' engine the model calls are metered (cost.MeteredEmbedder):
the summaries' summarize and embedding calls are counted in the region's transaction too."""

from __future__ import annotations

from support import synthetic_docs


def test_each_reconcile_of_a_single_document_insert_costs_the_same_few_requests(aws_engine):
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine, _, _ = aws_engine
    seen: list[str] = []
    client = engine.graph.Item._get_connection().connection.client
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))
    for n, seed in ((20, 1), (60, 2)):
        ingest(engine, synthetic_docs(n, seed=seed, prefix=f"s{seed}-"))
        drain(engine)
        ingest(engine, synthetic_docs(1, seed=seed + 10, prefix=f"one{seed}-"))
        starts: list[int] = []
        seen.clear()
        drain(engine, on_message=lambda message: starts.append(len(seen)))
        per = [seen[a:b] for a, b in zip(starts, starts[1:] + [len(seen)])]
        applied = [r for r in per if "BatchGetItem" in r]
        assert len(per) >= 2 and applied, (n, per)  # layer 0's reconcile applied a region, one above did not
        assert per[-1] not in applied, (n, per)
        for requests in per:
            assert requests[:2] == ["Query", "Query"], requests  # its state (no outbox entry flagged), its refs
            was_applied = requests in applied
            if requests[-2:] == ["TransactWriteItems", "Query"]:  # the change records' trim (changes.SLACK)
                requests = requests[:-1]
            if was_applied:  # the summary made and the end below go with the region's transaction
                assert requests == ["Query", "Query", "BatchGetItem", "TransactWriteItems"], (n, " ".join(requests))
            else:  # its end and the one carried from below, with the shard's marker's conditional clear
                assert requests == ["Query", "Query", "TransactWriteItems"], (n, requests)


def rule_partition_holds(engine) -> None:
    """Every layer's stored segments (per access partition) are the rule's partition of its
    live nodes (domain.partition), as a whole-layer reconcile would cut them."""
    from eragraph.domain.access import index_of, max_code
    from eragraph.domain.model import NodeRef
    from eragraph.domain.partition import partition, should_summarize

    s = engine.settings
    for layer, size in engine.graph.layer_sizes().items():
        refs = [r for r in engine.graph.prefix_refs(layer, 0, max_code()) if r.live]
        by_index: dict[int, list] = {}
        for r in refs:
            by_index.setdefault(index_of(r.code, s.n_planes), []).append(NodeRef(r.node_id, r.code))
        want = set()
        for nodes in by_index.values():
            if should_summarize(len(nodes), layer, s.s_max, s.max_layers):
                want |= set(partition(sorted(nodes, key=lambda n: (n.code, n.node_id)), s.n_planes, s.s_min, s.s_max))
        held = {tuple(sorted(seg.members)) for seg in engine.graph.get_segments(layer)}
        assert held == want, (layer, size, len(held ^ want))


def test_a_large_layers_walk_has_its_counts_made_side_by_side(aws_engine, monkeypatch):
    """A layer counted count by count (as one over refs_per_read refs is, in a store without
    prefix counts: one created before them, or an access list's partition): the groups the walk
    will count (domain.scoped.path_groups) are counted at once, side by side, so the layer's
    Queries cost a few round trips, not one each; the plan is the walk's own (the store ends
    in the rule's partition, invariants.check)."""
    from eragraph.adapters.aws.nodes_dynamodb import DynamoNodeStore
    from eragraph.bench.counting import DynamoCounter
    from eragraph.services import invariants
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine, _, _ = aws_engine
    monkeypatch.setattr(DynamoNodeStore, "refs_per_read", 0)
    monkeypatch.setattr(engine.graph, "held_prefix_counts", lambda layer, codes=(): None)
    ingest(engine, synthetic_docs(160, seed=4, prefix="big-"))
    drain(engine)
    counter = DynamoCounter()
    counter.attach(engine.graph.Item._get_connection().connection.client)
    many: list[int] = []
    count_many = engine.graph.count_refs_many
    monkeypatch.setattr(engine.graph, "count_refs_many",
                        lambda layer, ranges, cap=None: many.append(len(ranges)) or count_many(layer, ranges, cap))
    for i in range(2):
        ingest(engine, synthetic_docs(1, seed=40 + i, prefix=f"one{i}-"))
        counter.reset()
        drain(engine)
        snap = counter.snapshot()
        assert many and max(many) >= 4, many  # layer 0's walk: its root and path counted ahead
        # those Queries side by side: one round trip for all of them
        assert snap["round_trips"] <= snap["requests"] - sum(n - 1 for n in many), (snap, many)
        many.clear()
    report = invariants.check(engine)
    assert report.ok, report.violations[:5]


def test_a_large_layers_walk_reads_its_top_from_the_prefix_counts(aws_engine, monkeypatch):
    """In a store created with prefix counts (adapters.aws.ref_counts), a layer too large to read
    whole is walked without a count Query: the groups at most PREFIX_BITS deep are answered from
    the counts the reconcile read with the layer sizes, and below that each changed code's
    group is read whole (one Query, side by side with the others'). The counts stay the
    refs' own (invariants.check) and the plan the rule's (the stored segments are the rule's
    partition of each layer, not only within bounds)."""
    from eragraph.domain.prefix_counts import PREFIX_BITS
    from eragraph.services import invariants, resummarize
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine, _, _ = aws_engine
    ingest(engine, synthetic_docs(120, seed=5, prefix="top-"))
    drain(engine)
    assert engine.graph.prefix_counted()  # a store created by this code
    monkeypatch.setattr(resummarize, "WHOLE_GROUP_REFS", 0)  # no layer read whole: walked
    n_bits = engine.settings.n_planes
    counts: list[tuple[int, int | None]] = []  # (depth, cap) of each count the store made

    def depth(lo: int, hi: int) -> int:
        return n_bits - (hi - lo + 1).bit_length() + 1

    count_refs, count_many = engine.graph.count_refs, engine.graph.count_refs_many
    monkeypatch.setattr(engine.graph, "count_refs", lambda layer, lo, hi, cap=None: counts.append(
        (depth(lo, hi), cap)) or count_refs(layer, lo, hi, cap))
    monkeypatch.setattr(engine.graph, "count_refs_many", lambda layer, ranges, cap=None: counts.extend(
        (depth(lo, hi), cap) for lo, hi in ranges) or count_many(layer, ranges, cap))
    walked: list[int] = []
    plan = resummarize._plan
    monkeypatch.setattr(resummarize, "_plan", lambda *a, **k: walked.append(a[1]) or plan(*a, **k))
    for i in range(3):
        ingest(engine, synthetic_docs(1, seed=50 + i, prefix=f"one{i}-"))
        drain(engine)
        assert 0 in walked, walked
        # every group at most PREFIX_BITS deep came from the held counts: what the store read is
        # the changed codes' groups at that depth, whole, and at most a count a walk below it
        # (a skipped bit merging the code's group with its sibling's, whose halves are counted)
        assert [c for c in counts if c[1] is None] and all(d == PREFIX_BITS for d, cap in counts if cap is None), counts
        capped = [d for d, cap in counts if cap is not None]
        assert all(d > PREFIX_BITS for d in capped) and len(capped) <= len(walked), (counts, walked)
        counts.clear()
        walked.clear()
    ingest(engine, synthetic_docs(3, seed=60, prefix="more-"))
    from eragraph.services.remove import remove

    remove(engine, [doc.source for doc in synthetic_docs(120, seed=5, prefix="top-")[3:5]])
    drain(engine)
    report = invariants.check(engine)
    assert report.ok, report.violations[:5]
    rule_partition_holds(engine)
