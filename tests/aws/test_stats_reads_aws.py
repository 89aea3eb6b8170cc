"""GET /stats reads counters, not the store (services.stats over DynamoDB, moto): a warm call
costs the same two requests for a store of 20 documents and of 60, and whatever the number of
layers: one Query of the counters (layer, segment and document counters, and the dirty markers'
copies kept beside them, meta_dynamodb.shadow_item) and one of the ledger's totals; never a read
of nodes, refs or segments. Its figures are the ones a count over the store gives, its dirty
layers the ones a listing of the markers gives (markers written by put_meta, by a region's apply
and by write_meta, cleared by the reconcile's conditional deletes)."""

from __future__ import annotations

from support import synthetic_docs

from eragraph.domain.segment_stats import SegmentStats


def dynamodb_requests(engine) -> list[str]:
    seen: list[str] = []
    client = engine.graph.Item._get_connection().connection.client
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: seen.append(model.name))
    return seen


def test_a_warm_stats_reads_the_counters_whatever_the_store_holds(aws_engine):
    from eragraph.adapters.aws.meta_dynamodb import meta_partitions
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain
    from eragraph.services.stats import stats

    engine, _, _ = aws_engine
    seen = dynamodb_requests(engine)
    per_size = []
    for n, seed in ((20, 1), (40, 2)):
        ingest(engine, synthetic_docs(n, seed=seed, prefix=f"s{seed}-"))
        drain(engine)
        stats(engine)  # warm: the hyperplanes are kept once read
        seen.clear()
        out = stats(engine)
        per_size.append(list(seen))
        g = engine.graph
        assert out["documents"] == len(g.list_documents())
        for row in out["layers"]:
            lens = [len(s.members) for s in g.get_segments(row["layer"])]
            assert row["nodes"] == len(g.layer_refs(row["layer"]))
            assert (row["segments"], row["smallest_segment"], row["largest_segment"]) == (
                SegmentStats.of(lens).count, SegmentStats.of(lens).smallest, SegmentStats.of(lens).largest)
        assert out["dirty_layers"] == [int(k.split(":")[1]) for k in g.meta_keys("dirty:")]
    assert len(out["layers"]) >= 2
    small, large = per_size
    assert sorted(small) == sorted(large)  # flat: the same requests at 20 and at 60 documents
    assert sorted(small) == ["Query", "Query"], small
    assert len(meta_partitions("dirty:")) > 3  # what listing the markers would have queried


def test_stats_names_the_dirty_layers_a_listing_finds(aws_engine):
    from eragraph.services.announce import dirty_key
    from eragraph.services.ingest import ingest
    from eragraph.services.stats import stats

    engine, _, _ = aws_engine
    ingest(engine, synthetic_docs(12, seed=3, prefix="d-"))  # not drained: layer 0's shards are dirty
    g = engine.graph
    g.put_meta(dirty_key(1, None), 1.0)  # a whole-layer marker, and one on a layer above any node
    top = max(g.layer_sizes()) + 1
    g.put_meta(dirty_key(top, 5), 1.0)
    listed = [int(k.split(":")[1]) for k in g.meta_keys("dirty:")]
    assert 0 in listed and 1 in listed and top in listed
    assert stats(engine)["dirty_layers"] == listed
    for key in g.meta_keys("dirty:"):
        g.delete_meta(key)
    assert stats(engine)["dirty_layers"] == []
    # markers on many layers (more than one BatchGetItem's 100 keys could probe): the same
    # two Queries list them; a conditional clear takes a marker's copy with it, a newer one stays
    seen = dynamodb_requests(engine)
    g.write_meta([(dirty_key(layer, group), 2.0) for layer in range(9) for group in (None, 3, 15)], [])
    g.put_meta(dirty_key(4, 7), 9.0)
    g.delete_meta_if_older(dirty_key(4, 7), 5.0)  # newer than 5.0: stays
    g.delete_meta_if_older(dirty_key(2, 3), 5.0)
    seen.clear()
    listed = [int(k.split(":")[1]) for k in g.meta_keys("dirty:")]
    assert len(listed) == 27 and stats(engine)["dirty_layers"] == listed
    seen.clear()
    stats(engine)
    assert sorted(seen) == ["Query", "Query"], seen
