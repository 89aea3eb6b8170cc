"""The DynamoDB graph store's conditional writes, checked on the requests themselves.

moto returns only one cancellation reason (a failed condition), so the other reasons DynamoDB
gives a cancelled transaction (throttling, a conflicting transaction, a validation error, an
item too large) are made with botocore's Stubber on the store's own client: only a failed
condition is a ConflictError (the caller re-reads and retries); anything else propagates.
The conditions a write carries are read from the request botocore is asked to send (an event
hook on the same client), so a dropped condition fails deterministically instead of only when
two writers happen to interleave (test_concurrent_counters.py)."""

from __future__ import annotations

import re
import time

import pytest
from botocore.stub import Stubber

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.adapters.aws.ref_layout import Layout
from eragraph.domain.model import ConflictError, Document, MetaWrite, Node, NodeRef, RefState, RegionChange, Segment

TABLE = "graph-conditions"


@pytest.fixture
def store():
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    with mock_aws():
        create_graph_table(boto3.client("dynamodb", region_name=REGION), TABLE)
        yield DynamoGraphStore(TABLE, region=REGION, code_bits=8)


def client(store):
    return store._connection().client


def sent(store, operation: str) -> list[dict]:
    """The parameters of every ``operation`` request the store's client sends from now on."""
    seen: list[dict] = []
    client(store).meta.events.register(f"provide-client-params.dynamodb.{operation}",
                                       lambda params, **_: seen.append(params))
    return seen


def node(node_id: str, layer: int = 0, code: int = 5) -> Node:
    return Node(node_id=node_id, layer=layer, text=f"text of {node_id}", tokens=3, code=code, doc_id="d")


def cancelled(reasons: list[str]) -> dict:
    return dict(service_error_code="TransactionCanceledException",
                service_message=f"Transaction cancelled, please refer cancellation reasons for specific "
                                f"reasons [{', '.join(reasons)}]",
                modeled_fields={"CancellationReasons": [{"Code": r, "Message": r} for r in reasons]})


def one_ref_op(store):
    item = store.Item(PK="REF#0#0", SK="05#n1", live=1)
    return [("save", item, None, store.Item.PK.does_not_exist(), 0, 1)]


# --- _is_lost_race: which cancellations are conflicts (a lost condition, a concurrent transaction) ---------------------------------

@pytest.mark.parametrize("reasons", [["ConditionalCheckFailed"], ["None", "ConditionalCheckFailed"],
                                     ["ConditionalCheckFailed", "TransactionConflict"],
                                     ["TransactionConflict"]])
def test_a_failed_condition_is_a_conflict(store, reasons):
    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", **cancelled(reasons))
        with pytest.raises(ConflictError):
            store._transact_refs(one_ref_op(store), {0: Layout(0)})


@pytest.mark.parametrize("reasons", [["ThrottlingError"], ["ValidationError"],
                                     ["None", "ItemCollectionSizeLimitExceeded"],
                                     ["ProvisionedThroughputExceeded"]])
def test_other_cancellation_reasons_propagate(store, reasons):
    from pynamodb.exceptions import TransactWriteError

    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", **cancelled(reasons))
        with pytest.raises(TransactWriteError) as raised:
            store._transact_refs(one_ref_op(store), {0: Layout(0)})
    assert not isinstance(raised.value, ConflictError)
    assert [r.code if r else None for r in raised.value.cancellation_reasons] == [
        None if r == "None" else r for r in reasons]


def test_a_cancellation_without_reasons_is_a_conflict(store):
    # an older DynamoDB answer (or a proxy) that names no reasons: treated as the one reason the
    # adapter asks for, a condition; the caller re-reads and retries
    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", service_error_code="TransactionCanceledException",
                              service_message="Transaction cancelled")
        with pytest.raises(ConflictError):
            store._transact_refs(one_ref_op(store), {0: Layout(0)})


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "InternalServerError",
                                  "ValidationException", "TransactionInProgressException"])
def test_transaction_errors_that_are_no_cancellation_propagate(store, code):
    from pynamodb.exceptions import TransactWriteError

    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", service_error_code=code, http_status_code=400)
        with pytest.raises(TransactWriteError) as raised:
            store._transact_refs(one_ref_op(store), {0: Layout(0)})
    assert not isinstance(raised.value, ConflictError)


def test_a_conditional_document_write_conflicts_only_on_its_condition(store):
    from pynamodb.exceptions import PutError

    doc = Document(doc_id="d1", source="s3://b/d1", content_hash="h1", chunk_ids=())
    with Stubber(client(store)) as stub:
        stub.add_client_error("put_item", service_error_code="ConditionalCheckFailedException")
        with pytest.raises(ConflictError):
            store.put_document(doc, expected=None)
        stub.add_client_error("put_item", service_error_code="ProvisionedThroughputExceededException")
        with pytest.raises(PutError) as raised:
            store.put_document(doc, expected=None)
    assert not isinstance(raised.value, ConflictError)


# --- the conditions in the requests -----------------------------------------------------------

def test_new_refs_are_written_only_if_absent_and_counted_in_the_same_transaction(store):
    requests = sent(store, "TransactWriteItems")
    store.put_nodes([node("n1", code=5), node("n2", code=200)])
    [request] = requests
    puts = [i["Put"] for i in request["TransactItems"] if "Put" in i]
    assert sorted(p["Item"]["SK"]["S"] for p in puts) == ["05#n1", "c8#n2"]
    for put in puts:
        names = put.get("ExpressionAttributeNames", {})
        expression = put["ConditionExpression"]
        for alias, name in names.items():
            expression = expression.replace(alias, name)
        assert expression == "attribute_not_exists (PK)", put
    [count] = [i["Update"] for i in request["TransactItems"] if "Update" in i]
    assert count["Key"] == {"PK": {"S": "COUNT"}, "SK": {"S": "LAYER#0"}}
    assert store.layer_sizes() == {0: 2}


def test_a_ref_made_live_again_is_conditioned_on_being_dead(store):
    # a removed node whose segment still names it keeps its ref as a tombstone (live 0)
    pk, sk = store._ref_key(0, 5, "n1")
    store.Item(PK=pk, SK=sk, seg="seg-a", live=0).save()
    requests = sent(store, "TransactWriteItems")
    store.put_nodes([node("n1")])
    [request] = requests
    [update] = [i["Update"] for i in request["TransactItems"] if "Update" in i and i["Update"]["Key"]["PK"]["S"] != "COUNT"]
    names, values = update.get("ExpressionAttributeNames", {}), update.get("ExpressionAttributeValues", {})
    expression = update["ConditionExpression"]
    for alias, name in names.items():
        expression = expression.replace(alias, name)
    for alias, value in values.items():
        expression = expression.replace(alias, str(value.get("N", value)))
    assert expression == "live = 0", update
    assert store.layer_sizes() == {0: 1}


def test_a_node_written_twice_is_counted_once(store):
    store.put_nodes([node("n1")])
    requests = sent(store, "TransactWriteItems")
    store.put_nodes([node("n1")])
    assert requests == [] and store.layer_sizes() == {0: 1}  # a live ref: no write at all


def test_a_lost_new_ref_condition_rereads_and_does_not_count_twice(store):
    # the condition fails on the server (another writer made the ref between the read and the
    # write): put_nodes re-reads, sees the ref, and writes nothing more
    from eragraph.adapters.aws.graph_dynamodb import DynamoGraphStore

    other = DynamoGraphStore(TABLE, region=REGION, code_bits=8)
    read = store._get_refs
    raced = []

    def get_refs(keys, layouts=None):
        out = read(keys, layouts)
        if keys and not raced:
            raced.append(True)
            other.put_nodes([node("n1")])
        return out

    store._get_refs = get_refs
    store.put_nodes([node("n1")])
    assert raced and store.layer_sizes() == {0: 1}


def test_region_writes_carry_the_state_they_read(store):
    store.put_nodes([node(f"n{i}", code=i) for i in range(3)])
    refs = tuple(RefState(f"n{i}", i, None, True) for i in range(3))
    seg = Segment("seg-a", 0, ("n0", "n1", "n2"), "sum-a")
    store.put_nodes([node("sum-a", layer=1, code=1)], index=False)
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=refs, assign=(("n0", "seg-a"), ("n1", "seg-a"), ("n2", "seg-a")),
                                    drop=(), add=(seg,), remove=(), above_add=(NodeRef("sum-a", 1),), above_remove=()))
    [request] = requests
    conditions = [next(iter(i.values())).get("ConditionExpression") for i in request["TransactItems"]]
    updates = [i["Update"] for i in request["TransactItems"] if "Update" in i]
    ref_updates = [u for u in updates if u["Key"]["PK"]["S"].startswith("REF#0#")]
    assert len(ref_updates) == 3 and all(u.get("ConditionExpression") for u in ref_updates)
    [above] = [u for u in updates if u["Key"]["PK"]["S"].startswith("REF#1#")]
    assert "attribute_not_exists" in above["ConditionExpression"]
    assert sum(c is not None for c in conditions) >= 5
    # the summary's node is checked in the same transaction (a node deleted meanwhile: a
    # conflict), and loses a kept mark (keep_nodes) as it becomes live
    [check] = [u for u in updates if u["Key"]["PK"]["S"] == "NODE#sum-a"]
    assert readable(check) == "attribute_exists (PK)" and check["UpdateExpression"].startswith("REMOVE")
    assert store.layer_sizes() == {0: 3, 1: 1}


def readable(part: dict) -> str:
    """A request part's ConditionExpression with its attribute names and values filled in."""
    expression = part["ConditionExpression"]
    for alias, name in part.get("ExpressionAttributeNames", {}).items():
        expression = expression.replace(alias, name)
    for alias, value in sorted(part.get("ExpressionAttributeValues", {}).items(), key=lambda kv: -len(kv[0])):
        expression = expression.replace(alias, str(next(iter(value.values()))))
    return expression


# --- the version stamp of a conditional document write ----------------------------------------

def test_a_document_stored_before_statuses_matches_an_indexed_stamp_only(store):
    # an item written before the status attribute existed: an indexed document, which a writer
    # expecting "indexed" may replace; one expecting any other status finds a change
    import boto3

    boto3.client("dynamodb", region_name=REGION).put_item(TableName=TABLE, Item={
        "PK": {"S": "DOC#d1"}, "SK": {"S": "DOC"}, "source": {"S": "s3://b/d1"}, "content_hash": {"S": "h1"}})
    old = Document(doc_id="d1", source="s3://b/d1", content_hash="h1", chunk_ids=())
    assert store.get_document("d1") == old and old.status == "indexed"
    with pytest.raises(ConflictError):
        store.put_document(Document(doc_id="d1", source="s3://b/d1", content_hash="h2"),
                           expected=Document(doc_id="d1", source="s3://b/d1", content_hash="h1", status="received"))
    new = Document(doc_id="d1", source="s3://b/d1", content_hash="h2", chunk_ids=("c1",))
    store.put_document(new, expected=old)
    assert store.get_document("d1") == new


def test_a_stamp_with_another_status_is_compared_exactly(store):
    requests = sent(store, "PutItem")
    doc = Document(doc_id="d1", source="s3://b/d1", content_hash="h1", status="received")
    store.put_document(doc, expected=None)
    store.put_document(Document(doc_id="d1", source="s3://b/d1", content_hash="h2"), expected=doc)
    first, second = (readable(r) for r in requests)
    assert first == "attribute_not_exists (PK)"
    assert "status = received" in second and "attribute_not_exists (status)" not in second, second
    assert "content_hash = h1" in second and "attribute_not_exists (doc_version)" in second, second


def test_a_too_large_document_is_refused_before_any_write(store):
    from eragraph.domain.model import ItemTooLargeError

    huge = Document(doc_id="d1", source="s3://b/d1", content_hash="h1",
                    chunk_ids=tuple(f"chunk-{i:06d}" for i in range(40_000)))
    requests = sent(store, "PutItem")
    for expected in (None, "any"):
        with pytest.raises(ItemTooLargeError, match="d1"):
            store.put_document(huge) if expected == "any" else store.put_document(huge, expected=None)
    assert requests == [] and store.get_document("d1") is None


# --- the state a region's ref writes are conditioned on ---------------------------------------

def test_a_region_ref_condition_names_its_existence_liveness_and_segment(store):
    store.put_nodes([node("n0", code=1), node("n1", code=2)])
    store.apply_region(RegionChange(layer=0, expected=(RefState("n1", 2, None, True),), assign=(("n1", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n1",), "sum-a"),)))
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True), RefState("n1", 2, "seg-a", True)),
                                    assign=(("n0", "seg-b"), ("n1", "seg-b")),
                                    add=(Segment("seg-b", 0, ("n0", "n1"), "sum-b"),), remove=("seg-a",)))
    [request] = requests
    by_node = {i["Update"]["Key"]["SK"]["S"].split("#")[1]: readable(i["Update"])
               for i in request["TransactItems"] if "Update" in i and i["Update"]["Key"]["PK"]["S"].startswith("REF#")}
    assert by_node == {"n0": "((attribute_exists (PK) AND live = 1) AND attribute_not_exists (seg))",
                       "n1": "((attribute_exists (PK) AND live = 1) AND seg = seg-a)"}


@pytest.mark.parametrize("change", ["segment", "liveness"])
def test_a_region_read_before_another_writer_changed_a_ref_conflicts(store, change):
    # the ref still exists: only its segment or its liveness tells the region that it changed
    store.put_nodes([node("n0", code=1), node("n1", code=2)])
    read = (RefState("n0", 1, None, True), RefState("n1", 2, None, True))
    if change == "segment":
        store.apply_region(RegionChange(layer=0, expected=read[1:], assign=(("n1", "seg-x"),),
                                        add=(Segment("seg-x", 0, ("n1",), "sum-x"),)))
    else:
        pk, sk = store._ref_key(0, 2, "n1")
        store.Item(PK=pk, SK=sk, live=0).save()
    before = sorted((r.node_id, r.seg, r.live) for r in store.prefix_refs(0, 1, 2))
    with pytest.raises(ConflictError, match="changed concurrently"):
        store.apply_region(RegionChange(layer=0, expected=read, assign=(("n0", "seg-y"), ("n1", "seg-y")),
                                        add=(Segment("seg-y", 0, ("n0", "n1"), "sum-y"),)))
    assert sorted((r.node_id, r.seg, r.live) for r in store.prefix_refs(0, 1, 2)) == before
    assert "seg-y" not in {s.segment_id for s in store.get_segments(0)}


def added(update: dict) -> int:
    """The number a counter Update ADDs (a counter of the current layout also SETs its bits)."""
    [name] = re.findall(r"ADD (#\w+) (:\w+)", update["UpdateExpression"])
    return int(update["ExpressionAttributeValues"][name[1]]["N"])


def counter_updates(request: dict) -> dict[str, int]:
    return {i["Update"]["Key"]["SK"]["S"]: added(i["Update"]) for i in request["TransactItems"]
            if "Update" in i and i["Update"]["Key"]["PK"]["S"] == "COUNT"
            and i["Update"]["Key"]["SK"]["S"].startswith("LAYER#")}


# --- transactions past DynamoDB's 100-item limit ----------------------------------------------

def test_ref_writes_split_into_transactions_each_counting_its_own_refs(store):
    # the two layers interleaved: every transaction carries refs (and a counter) of both
    nodes = [node(f"a{i:03d}", layer=0, code=i % 256) for i in range(130)]
    for k, i in enumerate(range(40)):
        nodes.insert(3 * k, node(f"b{i:03d}", layer=1, code=i % 256))
    requests = sent(store, "TransactWriteItems")
    store.put_nodes(nodes)
    assert len(requests) == 2
    for request in requests:
        items = request["TransactItems"]
        assert len(items) <= 100
        puts = [i["Put"]["Key"]["PK"]["S"] if "Key" in i["Put"] else i["Put"]["Item"]["PK"]["S"]
                for i in items if "Put" in i]
        per_layer = {f"LAYER#{layer}": sum(p.startswith(f"REF#{layer}#") for p in puts) for layer in (0, 1)}
        assert counter_updates(request) == {k: v for k, v in per_layer.items() if v}
    assert sum(len(r["TransactItems"]) for r in requests) == 170 + 4  # 170 refs, both counters twice
    assert store.layer_sizes() == {0: 130, 1: 40}


@pytest.mark.parametrize("members, split", [(94, False), (95, True), (200, True)])
def test_a_region_past_the_transaction_limit_is_applied_under_an_applying_mark(store, members, split):
    # the region's ops: one new segment, a ref update per member, the check of the summary's
    # node and its ref above (in one transaction): members + 3; with both layers' counters (a
    # check and the change) and the segment counter of its size up to 97 fit one transaction, more are split (each keeping room for the mark,
    # its copy and the counters of its own segment sizes) and the first transaction writes an
    # ``applying`` mark (and its copy) the last one deletes
    ids = [f"n{i:03d}" for i in range(members)]
    store.put_nodes([node(i, code=k % 256) for k, i in enumerate(ids)])
    store.put_nodes([node("sum-a", layer=1, code=7)], index=False)
    expected = tuple(RefState(i, k % 256, None, True) for k, i in enumerate(ids))
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=expected, assign=tuple((i, "seg-a") for i in ids),
                                    add=(Segment("seg-a", 0, tuple(ids), "sum-a"),),
                                    above_add=(NodeRef("sum-a", 7),)))
    assert all(len(r["TransactItems"]) <= 100 for r in requests)
    marks = [[(kind, i[kind]["Key"]["SK"]["S"] if "Key" in i[kind] else i[kind]["Item"]["SK"]["S"])
              for i in r["TransactItems"] for kind in i if "applying" in str(i[kind])] for r in requests]
    if not split:
        assert len(requests) == 1 and marks == [[]]
    else:
        # each transaction keeps two items for the mark and its copy in COUNT (MARK#<key>)
        assert len(requests) == 1 + -(-(members + 3 - 95) // 96)
        [(put, key), (put_copy, copy)] = sorted(marks[0], key=lambda m: not m[1].startswith("KEY#"))
        assert put == "Put" and re.fullmatch(r"KEY#applying:0:[0-9a-f]{32}", key)  # this apply's own mark
        assert put_copy == "Put" and copy == f"MARK#{key[len('KEY#'):]}"
        assert sorted(marks[-1]) == [("Delete", key), ("Delete", copy)] and all(m == [] for m in marks[1:-1])
        # the mark holds when the apply began (the repair of an apply cut short reads its age)
        [mark] = [i["Put"]["Item"] for i in requests[0]["TransactItems"] if "Put" in i and i["Put"]["Item"]["SK"]["S"] == key]
        assert abs(float(mark["value"]["S"]) - time.time()) < 300
    assert [sum(counter_updates(r).values()) for r in requests].count(1) == 1  # the summary, once
    assert store.meta_keys("applying") == []
    assert store.layer_sizes() == {0: members, 1: 1}
    assert {r.seg for r in store.prefix_refs(0, 0, 3)} <= {"seg-a"}
    assert store.get_segments_by_id(0, ["seg-a"]) == {"seg-a": Segment("seg-a", 0, tuple(ids), "sum-a")}


def test_a_region_writing_refs_it_did_not_read_is_refused(store):
    store.put_nodes([node("n0", code=1), node("n1", code=2)])
    requests = sent(store, "TransactWriteItems")
    for change in (dict(assign=(("n0", "s"), ("n1", "s"))), dict(drop=("n1",))):
        with pytest.raises(ValueError, match="^apply_region writes only refs it expects$"):
            store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), **change))
    assert requests == []


def apply_with_summary_above(store):
    """n0 cut into seg-a, whose summary sum-a (code 7) is added above: the one transaction sent,
    and its update of sum-a's ref in layer 1."""
    store.put_nodes([node("sum-a", layer=1, code=7)], index=False)
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), assign=(("n0", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n0",), "sum-a"),), above_add=(NodeRef("sum-a", 7),)))
    [request] = requests
    [above] = [i["Update"] for i in request["TransactItems"]
               if "Update" in i and i["Update"]["Key"]["PK"]["S"].startswith("REF#1#")]
    return request, above


def test_a_summary_already_live_above_is_not_counted_again(store):
    # a region re-cut with the same summary: its ref above is live already; the write is
    # conditioned on that and the layer-above counter does not move
    store.put_nodes([node("n0", code=1), node("sum-a", layer=1, code=7)])
    request, above = apply_with_summary_above(store)
    assert readable(above) == "live = 1"
    assert counter_updates(request) == {}
    assert store.layer_sizes() == {0: 1, 1: 1}


# --- put_nodes: moved refs and retries --------------------------------------------------------

def test_a_node_rewritten_with_another_code_moves_its_ref_and_keeps_its_segment(store):
    store.put_nodes([node("n1", code=5)])
    store.apply_region(RegionChange(layer=0, expected=(RefState("n1", 5, None, True),), assign=(("n1", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n1",), "sum-a"),)))
    requests = sent(store, "TransactWriteItems")
    store.put_nodes([node("n1", code=200)])
    [request] = requests
    [delete] = [i["Delete"] for i in request["TransactItems"] if "Delete" in i]
    assert delete["Key"]["SK"]["S"] == "05#n1"
    assert readable(delete) == "((attribute_exists (PK) AND live = 1) AND seg = seg-a)"
    assert counter_updates(request) == {}  # one ref gone, one made, in one layer
    assert store.prefix_refs(0, 5, 5) == []
    assert store.prefix_refs(0, 200, 200) == [RefState("n1", 200, "seg-a", True)]
    assert store.layer_sizes() == {0: 1}


def test_a_node_moved_to_another_layer_leaves_its_segment_behind(store):
    store.put_nodes([node("n1", code=5)])
    store.apply_region(RegionChange(layer=0, expected=(RefState("n1", 5, None, True),), assign=(("n1", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n1",), "sum-a"),)))
    store.put_nodes([node("n1", layer=1, code=5)])
    assert store.prefix_refs(0, 5, 5) == []
    assert store.prefix_refs(1, 5, 5) == [RefState("n1", 5, None, True)]
    assert store.layer_sizes() == {1: 1}  # layer 0 counted down to nothing


def test_put_nodes_gives_up_after_its_attempts(store, monkeypatch):
    from eragraph.adapters.aws import nodes_dynamodb

    calls = []

    def always_lost(ops, layouts=None):
        calls.append(len(ops))
        raise ConflictError("a ref changed concurrently")

    monkeypatch.setattr(store, "_transact_refs", always_lost)
    with pytest.raises(ConflictError, match=f"{nodes_dynamodb.REF_WRITE_ATTEMPTS} conditional ref writes lost in a row"):
        store.put_nodes([node("n1")])
    assert calls == [1] * nodes_dynamodb.REF_WRITE_ATTEMPTS


def test_nodes_written_outside_the_index_get_no_ref(store):
    requests, reads = sent(store, "TransactWriteItems"), sent(store, "BatchGetItem")
    store.put_nodes([node("n1")], index=False)
    assert requests == [] and reads == []  # no ref written, nothing read for one
    assert store.get_nodes(["n1"]) and store.prefix_refs(0, 5, 5) == []


def test_a_summary_back_from_a_tombstone_above_is_counted_once(store):
    # its ref above is a tombstone (live 0, still a member of a layer-1 segment): the write is
    # conditioned on that and counts one more live summary
    store.put_nodes([node("n0", code=1)])
    pk, sk = store._ref_key(1, 7, "sum-a")
    store.Item(PK=pk, SK=sk, seg="seg-up", live=0).save()
    request, above = apply_with_summary_above(store)
    assert readable(above) == "live = 0"
    assert counter_updates(request) == {"LAYER#1": 1}
    assert store.prefix_refs(1, 7, 7) == [RefState("sum-a", 7, "seg-up", True)]
    # stored as live = 1, the value the next region's condition on a live ref compares
    store.apply_region(RegionChange(layer=1, expected=(RefState("sum-a", 7, "seg-up", True),),
                                    assign=(("sum-a", "seg-up2"),), add=(Segment("seg-up2", 1, ("sum-a",), "top"),)))
    assert store.prefix_refs(1, 7, 7) == [RefState("sum-a", 7, "seg-up2", True)]


def test_summaries_gone_from_above_are_skipped_and_the_rest_removed(store):
    # above_remove naming a summary whose ref is already gone: that one is skipped, the next
    # one is still removed and counted
    store.put_nodes([node("n0", code=1), node("s-old", layer=1, code=4)])
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), assign=(("n0", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n0",), "sum-a"),),
                                    above_remove=(NodeRef("s-gone", 3), NodeRef("s-old", 4))))
    assert store.prefix_refs(1, 3, 4) == []
    assert store.layer_sizes() == {0: 1}


def test_a_region_leaving_refs_unassigned_removes_their_segment_and_counts_nothing(store):
    # ``assign`` to None removes the attribute (a NULL value would fail the next
    # attribute_not_exists (seg) condition); a dropped tombstone moves no counter
    store.put_nodes([node("n0", code=1), node("n1", code=2)])
    both = (RefState("n0", 1, None, True), RefState("n1", 2, None, True))
    store.apply_region(RegionChange(layer=0, expected=both, assign=(("n0", "seg-a"), ("n1", "seg-a")),
                                    add=(Segment("seg-a", 0, ("n0", "n1"), "sum-a"),)))
    store.delete_nodes(["n1"])  # a member of a segment: kept as a tombstone
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, "seg-a", True), RefState("n1", 2, "seg-a", False)),
                                    assign=(("n0", None),), drop=("n1",), remove=("seg-a",)))
    [request] = requests
    [update] = [i["Update"] for i in request["TransactItems"] if "Update" in i]
    assert update["UpdateExpression"].startswith("REMOVE"), update
    assert counter_updates(request) == {}
    assert store.prefix_refs(0, 1, 2) == [RefState("n0", 1, None, True)]
    assert store.layer_sizes() == {0: 1}
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), assign=(("n0", "seg-b"),),
                                    add=(Segment("seg-b", 0, ("n0",), "sum-b"),)))
    assert store.prefix_refs(0, 1, 1) == [RefState("n0", 1, "seg-b", True)]


def test_summaries_removed_from_above_are_conditioned_on_the_liveness_read(store):
    # a live summary without a segment above goes (counted); one already a tombstone stays one
    # (a layer-1 segment names it), and its write is conditioned on its being dead
    store.put_nodes([node("n0", code=1), node("s-live", layer=1, code=4)])
    pk, sk = store._ref_key(1, 6, "s-dead")
    store.Item(PK=pk, SK=sk, seg="seg-up", live=0).save()
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), assign=(("n0", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n0",), "sum-a"),),
                                    above_remove=(NodeRef("s-live", 4), NodeRef("s-dead", 6))))
    [request] = requests
    above = {i[kind]["Key"]["SK"]["S"].split("#")[1]: (kind, readable(i[kind])) for i in request["TransactItems"]
             for kind in i if "Key" in i[kind] and i[kind]["Key"]["PK"]["S"].startswith("REF#1#")}
    assert above == {"s-live": ("Delete", "live = 1"), "s-dead": ("Update", "live = 0")}
    assert counter_updates(request) == {"LAYER#1": -1}
    assert store.prefix_refs(1, 4, 6) == [RefState("s-dead", 6, "seg-up", False)]


def tombstone_above(store):
    """s-kept (code 8), live in the layer-1 segment seg-up, removed from above by a layer-0
    region: its node item stays, its ref becomes a tombstone (live = 0) still in seg-up."""
    store.put_nodes([node("n0", code=1), node("s-kept", layer=1, code=8)])
    store.apply_region(RegionChange(layer=1, expected=(RefState("s-kept", 8, None, True),), assign=(("s-kept", "seg-up"),),
                                    add=(Segment("seg-up", 1, ("s-kept",), "top"),)))
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True),), assign=(("n0", "seg-a"),),
                                    add=(Segment("seg-a", 0, ("n0",), "sum-a"),), above_remove=(NodeRef("s-kept", 8),)))


def test_a_live_summary_in_a_segment_above_becomes_a_tombstone_that_can_come_back(store):
    # removed while a layer-1 segment names it: kept with live = 0, the value put_nodes'
    # condition on a dead ref compares when the summary is written again
    tombstone_above(store)
    assert store.prefix_refs(1, 8, 8) == [RefState("s-kept", 8, "seg-up", False)]
    assert store.layer_sizes() == {0: 1}
    store.put_nodes([node("s-kept", layer=1, code=8)])
    assert store.prefix_refs(1, 8, 8) == [RefState("s-kept", 8, "seg-up", True)]
    assert store.layer_sizes() == {0: 1, 1: 1}


def test_a_tombstone_above_rewritten_with_another_code_moves_without_counting_the_dead_ref(store):
    # the summary's node item stays while its ref above is a tombstone; written again with
    # another code, the dead ref is deleted on the state read (live = 0) and counts nothing,
    # the new ref keeps the segment and counts one
    tombstone_above(store)
    requests = sent(store, "TransactWriteItems")
    store.put_nodes([node("s-kept", layer=1, code=9)])
    [request] = requests
    [delete] = [i["Delete"] for i in request["TransactItems"] if "Delete" in i]
    assert delete["Key"]["SK"]["S"] == "08#s-kept"
    assert readable(delete) == "((attribute_exists (PK) AND live = 0) AND seg = seg-up)"
    assert counter_updates(request) == {"LAYER#1": 1}
    assert store.prefix_refs(1, 8, 9) == [RefState("s-kept", 9, "seg-up", True)]
    assert store.layer_sizes() == {0: 1, 1: 1}


def test_a_region_whose_summaries_fill_its_first_transaction_stays_within_the_limit(store):
    # 98 new summaries above a 2-ref region: 199 ops (each summary's ref with the check of its
    # node, kept in one transaction), split; the first transaction holds the segment, both refs
    # and 46 summaries, plus the segment counter of its size, both layers' counters (the
    # region's checked, the one above changed) and the applying mark with its copy in COUNT
    # (the last transaction deletes both)
    store.put_nodes([node("n0", code=1), node("n1", code=2)])
    store.put_nodes([node(f"s{i:03d}", layer=1, code=i) for i in range(98)], index=False)
    requests = sent(store, "TransactWriteItems")
    store.apply_region(RegionChange(layer=0, expected=(RefState("n0", 1, None, True), RefState("n1", 2, None, True)),
                                    assign=(("n0", "seg-a"), ("n1", "seg-a")),
                                    add=(Segment("seg-a", 0, ("n0", "n1"), "s000"),),
                                    above_add=tuple(NodeRef(f"s{i:03d}", i) for i in range(98))))
    assert [len(r["TransactItems"]) for r in requests] == [100, 98, 12]
    assert [counter_updates(r) for r in requests] == [{"LAYER#1": 46}, {"LAYER#1": 48}, {"LAYER#1": 4}]
    assert store.layer_sizes() == {0: 2, 1: 98} and store.meta_keys("applying") == []


# --- a reconcile's end carried by a region's write (RegionChange.finish) ----------------------

def _carrying_change(store, finish: MetaWrite) -> RegionChange:
    store.put_nodes([node("a", code=1), node("b", code=2)])
    expected = tuple(store.prefix_refs(0, 0, 255))
    return RegionChange(layer=0, expected=expected, assign=(("a", "sg"), ("b", "sg")),
                        add=(Segment("sg", 0, ("a", "b"), "s1"),), above_add=(NodeRef("s1", 7),),
                        nodes=(node("s1", layer=1, code=7),), finish=finish)


def _finish() -> MetaWrite:
    return MetaWrite(puts=(("change:1", {"kind": "resummarize"}),), deletes=("outbox:0:3:x",),
                     clear=(("dirty:0:3", 10.0),), present=("p",))


def test_a_carried_end_goes_in_the_regions_one_transaction(store):
    store.write_meta([("outbox:0:3:x", {"made": []}), ("dirty:0:3", 10.0)], [])
    store.put_nodes([node("p", layer=1, code=4)], index=False)
    change = _carrying_change(store, _finish())
    requests = sent(store, "TransactWriteItems")
    applied = store.apply_region(change)
    [request] = requests  # the region and the end: one request
    keys = {(kind, item["Key"]["PK"]["S"] if "Key" in item else item["Item"]["PK"]["S"],
             item["Key"]["SK"]["S"] if "Key" in item else item["Item"]["SK"]["S"])
            for entry in request["TransactItems"] for kind, item in entry.items()}
    assert ("Put", "META", "KEY#change:1") in {(k, "META" if p.startswith("META") else p, s) for k, p, s in keys}
    assert ("ConditionCheck", "NODE#p", "NODE") in keys
    assert any(k == "Delete" and s == "KEY#dirty:0:3" for k, _, s in keys)
    assert any(k == "Delete" and s == "KEY#outbox:0:3:x" for k, _, s in keys)
    assert applied.gone == ()
    assert store.get_meta("change:1") == {"kind": "resummarize"} and store.get_meta("dirty:0:3") is None
    assert store.get_segments(0) == [Segment("sg", 0, ("a", "b"), "s1")]


def test_a_carried_clear_that_fails_refuses_only_itself(store):
    # the marker was set again after the reconcile began: the region's transaction is refused by
    # the carried delete alone (its cancellation reason is on that item), so the region is sent
    # again without the end, and the end goes as write_meta sends it (the marker stays)
    store.write_meta([("outbox:0:3:x", {"made": []}), ("dirty:0:3", 20.0)], [])
    store.put_nodes([node("p", layer=1, code=4)], index=False)
    change = _carrying_change(store, _finish())
    requests = sent(store, "TransactWriteItems")
    applied = store.apply_region(change)
    # region + end (refused), the region alone, the end's own (refused again), then its parts:
    # the marker's conditional delete (with its copy) as one transaction
    assert [len(r["TransactItems"]) for r in requests] == [14, 8, 6, 2]
    assert applied.gone == ()
    assert store.get_meta("dirty:0:3") == 20.0 and store.get_meta("outbox:0:3:x") is None
    assert store.get_meta("change:1") == {"kind": "resummarize"}
    assert store.get_segments(0) == [Segment("sg", 0, ("a", "b"), "s1")] and store.layer_sizes() == {0: 2, 1: 1}
