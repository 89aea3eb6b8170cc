"""The lean moto the scale benchmark uses answers as moto does: the same transactions,
committed or cancelled, leave the same table, and the same queries return the same pages."""
from __future__ import annotations

import contextlib

import pytest

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

from eragraph.bench.moto_lean import lean_moto  # noqa: E402

TABLE = "t"


def _put(pk: str, sk: str, **attrs) -> dict:
    item = {"pk": {"S": pk}, "sk": {"S": sk}, **{k: {"S": v} for k, v in attrs.items()}}
    return {"Put": {"TableName": TABLE, "Item": item}}


def _add(pk: str, sk: str, n: int) -> dict:
    return {"Update": {"TableName": TABLE, "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
                       "UpdateExpression": "ADD n :n", "ExpressionAttributeValues": {":n": {"N": str(n)}}}}


def _absent(put: dict) -> dict:
    return {"Put": {**put["Put"], "ConditionExpression": "attribute_not_exists(pk)"}}


def _delete(pk: str, sk: str) -> dict:
    return {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}}}


TRANSACTIONS = [
    [_put("a", "1", v="x"), _put("a", "2", v="y"), _add("c", "n", 2)],
    [_add("c", "n", 3), _put("b", "1", v="z")],
    # cancelled: its last item fails its condition, so the first three must be undone
    [_put("a", "1", v="changed"), _add("c", "n", 100), _delete("a", "2"), _absent(_put("b", "1", v="w"))],
    [_delete("a", "2"), _put("d", "1", v="new"), _add("c", "n", 1)],
    # cancelled: a fresh item put then a failed condition on the same table
    [_put("e", "1", v="gone"), _absent(_put("d", "1", v="again"))],
]


QUERIES = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "q"}}},
    {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
     "ExpressionAttributeValues": {":p": {"S": "q"}, ":s": {"S": "1"}}},
    {"KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b", "ScanIndexForward": False,
     "ExpressionAttributeValues": {":p": {"S": "q"}, ":a": {"S": "05"}, ":b": {"S": "17"}}},
    {"KeyConditionExpression": "pk = :p", "Limit": 4, "ExpressionAttributeValues": {":p": {"S": "q"}}},
    {"KeyConditionExpression": "pk = :p", "FilterExpression": "v = :v",
     "ExpressionAttributeValues": {":p": {"S": "q"}, ":v": {"S": "odd"}}},
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "nobody"}}},
]


def _pages(client, query: dict) -> list[list[dict]]:
    pages, start = [], None
    while True:
        page = client.query(TableName=TABLE, **query, **({"ExclusiveStartKey": start} if start else {}))
        pages.append(page["Items"])
        start = page.get("LastEvaluatedKey")
        if not start:
            return pages


def _run(lean: bool) -> tuple[list[dict], list]:
    outcomes: list = []
    with moto.mock_aws(), (lean_moto() if lean else contextlib.nullcontext()):
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}])
        for items in TRANSACTIONS:
            try:
                client.transact_write_items(TransactItems=items)
                outcomes.append("ok")
            except client.exceptions.TransactionCanceledException as exc:
                reasons = [r.get("Code", "None") for r in exc.response["CancellationReasons"]]
                outcomes.append("cancelled:" + ",".join(reasons))
        for i in range(20):  # a partition among others, for the queries
            client.put_item(TableName=TABLE, Item={"pk": {"S": "q"}, "sk": {"S": f"{i:02d}"},
                                                  "v": {"S": "odd" if i % 2 else "even"}})
            client.put_item(TableName=TABLE, Item={"pk": {"S": f"other{i}"}, "sk": {"S": "00"}})
        outcomes += [_pages(client, q) for q in QUERIES]
        rows = client.scan(TableName=TABLE)["Items"]
    return sorted(rows, key=lambda r: (r["pk"]["S"], r["sk"]["S"])), outcomes


def test_lean_moto_answers_as_moto_does():
    stock_rows, stock_outcomes = _run(lean=False)
    lean_rows, lean_outcomes = _run(lean=True)
    assert lean_outcomes == stock_outcomes
    assert lean_rows == stock_rows
    # the cancelled transactions really were undone (so the comparison above means something)
    assert stock_outcomes[2].startswith("cancelled") and stock_outcomes[4].startswith("cancelled")
    by_key = {(r["pk"]["S"], r["sk"]["S"]): r for r in lean_rows}
    assert by_key[("a", "1")]["v"]["S"] == "x"
    assert by_key[("c", "n")]["n"]["N"] == "6"
    assert ("a", "2") not in by_key and ("e", "1") not in by_key
    assert by_key[("d", "1")]["v"]["S"] == "new"
    # the queries saw the one partition, in order, paged
    pages = lean_outcomes[len(TRANSACTIONS):]
    assert [r["sk"]["S"] for page in pages[0] for r in page] == [f"{i:02d}" for i in range(20)]
    assert len(pages[3]) == 5 and all(len(p) <= 4 for p in pages[3])
    assert [r["sk"]["S"] for r in pages[2][0]][0] == "17"
    assert pages[5] == [[]]


def test_the_stock_methods_are_back_after_the_block():
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    stock = DynamoDBBackend.transact_write_items, Table.query
    with lean_moto():
        assert (DynamoDBBackend.transact_write_items, Table.query) != stock
    assert (DynamoDBBackend.transact_write_items, Table.query) == stock


def test_queries_from_several_threads_each_read_their_own_partition():
    """The adapters query several partitions at once from a thread pool: each query gets its
    partition's items, however the threads interleave."""
    from concurrent.futures import ThreadPoolExecutor

    with moto.mock_aws(), lean_moto():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}])
        for p in range(8):
            for i in range(p + 1):
                client.put_item(TableName=TABLE, Item={"pk": {"S": f"p{p}"}, "sk": {"S": f"{i:02d}"}})

        def read(p: int) -> tuple[int, set[str], int]:
            rows = client.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                                ExpressionAttributeValues={":p": {"S": f"p{p}"}})["Items"]
            return p, {r["pk"]["S"] for r in rows}, len(rows)

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(read, [p % 8 for p in range(400)]))
    assert all(pks == {f"p{p}"} and n == p + 1 for p, pks, n in answers)
