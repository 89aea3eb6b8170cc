"""The DynamoDB graph store's conditional writes, checked on the requests themselves.

moto returns only one cancellation reason (a failed condition), so the other reasons DynamoDB
gives a cancelled transaction (throttling, a conflicting transaction, a validation error, an
item too large) are made with botocore's Stubber on the store's own client: only a failed
condition is a ConflictError (the caller re-reads and retries); anything else propagates.
The conditions a write carries are read from the request botocore is asked to send (an event
hook on the same client), so a dropped condition fails deterministically instead of only when
two writers happen to interleave (test_concurrent_counters.py)."""

from __future__ import annotations

import pytest
from botocore.stub import Stubber

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.domain.model import ConflictError, Document, Node, NodeRef, RefState, RegionChange, Segment

TABLE = "graph-conditions"


@pytest.fixture
def store():
    fake_credentials()
    import boto3
    from moto import mock_aws

    from eragraph.adapters.aws.dynamodb import DynamoGraphStore

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


# --- _is_condition_failure: which cancellations are conflicts ---------------------------------

@pytest.mark.parametrize("reasons", [["ConditionalCheckFailed"], ["None", "ConditionalCheckFailed"],
                                     ["ConditionalCheckFailed", "TransactionConflict"]])
def test_a_failed_condition_is_a_conflict(store, reasons):
    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", **cancelled(reasons))
        with pytest.raises(ConflictError):
            store._transact_refs(one_ref_op(store))


@pytest.mark.parametrize("reasons", [["ThrottlingError"], ["TransactionConflict"], ["ValidationError"],
                                     ["None", "ItemCollectionSizeLimitExceeded"],
                                     ["ProvisionedThroughputExceeded"]])
def test_other_cancellation_reasons_propagate(store, reasons):
    from pynamodb.exceptions import TransactWriteError

    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", **cancelled(reasons))
        with pytest.raises(TransactWriteError) as raised:
            store._transact_refs(one_ref_op(store))
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
            store._transact_refs(one_ref_op(store))


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "InternalServerError",
                                  "ValidationException", "TransactionInProgressException"])
def test_transaction_errors_that_are_no_cancellation_propagate(store, code):
    from pynamodb.exceptions import TransactWriteError

    with Stubber(client(store)) as stub:
        stub.add_client_error("transact_write_items", service_error_code=code, http_status_code=400)
        with pytest.raises(TransactWriteError) as raised:
            store._transact_refs(one_ref_op(store))
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
    from eragraph.adapters.aws.dynamodb import DynamoGraphStore

    other = DynamoGraphStore(TABLE, region=REGION, code_bits=8)
    read = store._get_refs
    raced = []

    def get_refs(keys):
        out = read(keys)
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
    assert sum(c is not None for c in conditions) >= 4
    assert store.layer_sizes() == {0: 3, 1: 1}
