"""The IAM judge (tests/iam_judge.py) sees what IAM would refuse: POST /documents as the code
before the fix wrote it (the status counters ADDed in the query function's transaction) is
refused naming the function, the item, its key and the missing grant; what each operation asks
(transaction items, HeadObject, ListObjectsV2, a Query on an index) is judged; Deny wins; a call
made from an executor thread is judged as its function's; the CLI's --profile aws runs as the
operator. And the fix: the API's uncounted ``received`` is counted by the ingest, once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import boto3
import iam_judge
import pytest
from aws_helpers import BUCKET, load_handler
from aws_requests import Names, requests_of
from test_tenants_api import A_TEXT, call, http_event, jwt, s3_event, tenant_env  # noqa: F401

from eragraph.bootstrap.aws import LAMBDA_ENGINE
from eragraph.domain.status_counts import counter_key

ENV = {"ERAGRAPH_TABLE": "eragraph-test-graph", "ERAGRAPH_BUCKET": BUCKET}
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/eragraph-dev-graph"


def judge(function: str, service: str, operation: str, params: dict) -> list[str]:
    return iam_judge.judge_call(function, service, operation, params, "us-east-1", ENV)


def update(pk: str) -> dict:
    return {"Update": {"TableName": "eragraph-test-graph", "Key": {"PK": {"S": pk}, "SK": {"S": "x"}},
                       "UpdateExpression": "ADD n_received :one"}}


def test_main_s_post_documents_is_refused_by_the_query_role(tenant_env, lambda_context, monkeypatch):  # noqa: F811
    """The code path of main before the fix: the received status counted in the query
    function's transaction. The judge refuses the counters' ADDs (and only them)."""
    from eragraph.services import doc_status, uploads

    counted = doc_status.record_received
    monkeypatch.setattr(uploads.doc_status, "record_received",
                        lambda engine, doc_id, source, now=None, count=True: counted(engine, doc_id, source, now))
    query = load_handler("query")
    with iam_judge.captured() as refused:
        status, body, _ = call(query.handler, http_event("POST", "/documents", {"documents": [
            {"source": "notes/comets.md", "text": A_TEXT}]}, jwt("a")), lambda_context)
    assert status == 202, body
    assert refused, "the judge saw no refusal: it is blind to the counter write"
    assert all(r.startswith("IAM would refuse the query function's dynamodb TransactWriteItems item ") for r in refused)
    keys = [r.split("'dynamodb:LeadingKeys': ['", 1)[1].split("'", 1)[0] for r in refused]
    assert "T#a#COUNT" in keys and all(k == "T#a#COUNT" or k.startswith("T#a#STATUSDIR#") for k in keys), keys
    assert all("(Update): dynamodb:UpdateItem on " + TABLE in r and "no statement allows" in r for r in refused)


def test_the_fixed_post_documents_is_allowed_and_the_ingest_counts_it_once(tenant_env, lambda_context):  # noqa: F811
    query, ingest = load_handler("query"), load_handler("ingest")
    key = "tenants/a/notes/comets.md"
    for round_ in (1, 2):  # a new document, then the same bytes uploaded again (counted meanwhile)
        with iam_judge.captured() as refused:
            status, body, _ = call(query.handler, http_event("POST", "/documents", {"documents": [
                {"source": "notes/comets.md", "text": A_TEXT}]}, jwt("a")), lambda_context)
        assert status == 202 and refused == [], refused
        graph = LAMBDA_ENGINE.writer("a").graph
        doc_id = body["documents"][0]["doc_id"]
        assert graph.get_doc_status(doc_id).state == "received"
        # not counted by the query function: the counts still hold what the ingest last counted
        # (a tenant's first document: no counters yet, None says to read the records)
        assert graph.status_counts("") == (None if round_ == 1 else counted), graph.status_counts("")
        out = ingest.handler(s3_event(key, sequencer=f"0A1B2C3D4E5F67890{round_}"), lambda_context)  # a newer version
        assert out["ingested"] == (1 if round_ == 1 else 0), out  # the same bytes: settled, not ingested
        held = counter_key(graph.get_doc_status(doc_id))  # indexed (summaries pending) or done: once
        assert graph.status_counts("") == {held: 1}, (held, graph.status_counts(""))
        assert graph.status_counts("s3://") == graph.status_counts("")
        counted = {held: 1}


def test_each_transaction_item_and_batch_key_is_judged_and_deny_wins():
    items = [{"Put": {"TableName": "eragraph-test-graph", "Item": {"PK": {"S": "T#acme#STATUS#d1"}, "SK": {"S": "STATUS"}}}},
             update("T#acme#LEDGER"), update("T#acme#DOC#x#LEDGER")]
    refused = judge("query", "dynamodb", "TransactWriteItems", {"TransactItems": items})
    assert len(refused) == 1 and "item 2 (Update)" in refused[0] and "denied by statement GraphTableKeysExact" in refused[0]
    assert judge("ingest", "dynamodb", "TransactWriteItems", {"TransactItems": items}) == []
    batch = {"RequestItems": {"eragraph-test-graph": [{"PutRequest": {"Item": {"PK": {"S": "NODE#n"}}}}]}}
    [why] = judge("query", "dynamodb", "BatchWriteItem", batch)
    assert "dynamodb:BatchWriteItem" in why and "'NODE#n'" in why
    # a table that is not the function's own is refused whatever the action
    assert judge("ingest", "dynamodb", "GetItem", {"TableName": "other", "Key": {"PK": {"S": "x"}}})


def test_what_each_operation_asks():
    names = Names(arns={("bucket", BUCKET): "arn:aws:s3:::docs", ("table", "t"): TABLE})
    [head] = requests_of("s3", "HeadObject", {"Bucket": BUCKET, "Key": "a/b.txt"}, "us-east-1", names)
    assert (head.action, head.resource) == ("s3:GetObject", "arn:aws:s3:::docs/a/b.txt")
    [listing] = requests_of("s3", "ListObjectsV2", {"Bucket": BUCKET, "Prefix": "tenants/a/"}, "us-east-1", names)
    assert (listing.action, listing.resource, listing.context_dict()) == (
        "s3:ListBucket", "arn:aws:s3:::docs", {"s3:prefix": "tenants/a/"})
    query = {"TableName": "t", "IndexName": "BySource", "KeyConditionExpression": "#p = :v",
             "ExpressionAttributeNames": {"#p": "GSI2PK"}, "ExpressionAttributeValues": {":v": {"S": "SRC#x"}}}
    names.hash_keys["t/index/BySource"] = "GSI2PK"
    [q] = requests_of("dynamodb", "Query", query, "us-east-1", names)
    assert q.resource == TABLE + "/index/BySource" and q.context_dict() == {"dynamodb:LeadingKeys": ["SRC#x"]}
    gets = requests_of("dynamodb", "BatchGetItem", {"RequestItems": {"t": {"Keys": [{"PK": {"S": "A"}}, {"PK": {"S": "B"}}]}}},
                       "us-east-1", names)
    assert [g.context_dict()["dynamodb:LeadingKeys"] for g in gets] == [["A"], ["B"]]


def test_a_condition_the_judge_does_not_know_never_grants_and_always_denies():
    from policy_eval import allowed

    grant = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}
    assert not allowed([grant], "s3:GetObject", "arn:aws:s3:::b/k")
    deny = {**grant, "Effect": "Deny"}
    assert not allowed([{**grant, "Condition": {}}, deny], "s3:GetObject", "arn:aws:s3:::b/k")


def test_a_call_from_an_executor_thread_is_judged_as_its_function(aws_engine):
    client = boto3.client("s3", region_name="us-east-1")
    with iam_judge.captured() as refused, iam_judge.running_as("stream"):
        with ThreadPoolExecutor(2) as pool:
            pool.submit(client.list_objects_v2, Bucket=BUCKET).result()
    assert len(refused) == 1 and refused[0].startswith("IAM would refuse the stream function's s3 ListObjectsV2")
    with iam_judge.captured() as refused:  # outside any function: a test's own call, not judged
        client.list_objects_v2(Bucket=BUCKET)
    assert refused == []


def test_the_operator_policy_is_what_the_cli_is_judged_against():
    statements, _ = iam_judge._statements(iam_judge.OPERATOR, ())
    assert statements and all(s["Effect"] in ("Allow", "Deny") for s in statements)
    assert judge(iam_judge.OPERATOR, "dynamodb", "DeleteTable", {"TableName": "eragraph-test-graph"})
    assert judge(iam_judge.OPERATOR, "dynamodb", "Query", {
        "TableName": "eragraph-test-graph", "KeyConditionExpression": "PK = :p",
        "ExpressionAttributeValues": {":p": {"S": "T#acme#DOC#a"}}}) == []


def test_the_entity_snapshot_calls_are_the_writers_and_reads_only_for_the_readers():
    """Every call the snapshot code makes (entity_snapshot_s3: HeadObject, GetObject, PutObject,
    DeleteObject), judged against the operator policy and the functions' roles."""
    bucket = "eragraph-dev-snapshots-123456789012-us-east-1"  # the template's BucketName, stage dev
    key = {"Bucket": bucket, "Key": "entity-graph/acme/records.json.gz"}
    calls = [("HeadObject", key), ("GetObject", key), ("PutObject", {**key, "Body": b"x"}), ("DeleteObject", key)]
    for who in (iam_judge.OPERATOR, "reindex"):
        assert [judge(who, "s3", op, params) for op, params in calls] == [[]] * 4, who
    for who in ("query", "stream"):
        refused = [op for op, params in calls if judge(who, "s3", op, params)]
        assert refused == ["PutObject", "DeleteObject"], who
    other = {"Bucket": "eragraph-dev-docs-123456789012-us-east-1", "Key": "entity-graph/acme/records.json.gz"}
    assert judge(iam_judge.OPERATOR, "s3", "PutObject", {**other, "Body": b"x"})  # only the snapshot bucket's


@pytest.mark.parametrize("function", sorted(iam_judge.functions()))
def test_every_function_of_the_template_has_a_role_the_judge_reads(function):
    statements, _ = iam_judge._statements(function, ())
    assert any(s.get("Sid") == "Logs" for s in statements)


def test_the_operator_policy_s_parameters_default_to_the_stack_s():
    from contract.aws_factories import load_template

    stack, operator = load_template()["Parameters"], load_template(iam_judge.OPERATOR_POLICY)["Parameters"]
    for name, spec in operator.items():
        assert spec["Default"] == stack[name]["Default"], name


def test_the_operator_policy_is_cfn_lint_clean():
    import shutil
    import subprocess

    if shutil.which("cfn-lint") is None:
        pytest.skip("cfn-lint not installed")
    out = subprocess.run(["cfn-lint", str(iam_judge.OPERATOR_POLICY)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_uncounted_writes_keep_what_the_counters_hold_until_a_counted_write(aws_engine):
    """The store side of the fix: a write with count=False leaves the counters as they were
    (``counted_as`` remembers what they hold), however many follow; the next counted write, a
    deletion or the migration's count moves them from that record, once."""
    from eragraph.domain.doc_status import DocStatus

    graph = aws_engine[0].graph

    def status(state: str, doc: str = "d1") -> DocStatus:
        return DocStatus(doc_id=doc, source=f"s3://b/notes/{doc}.md", state=state, received_at=1.0, updated_at=2.0,
                         **({"reason": "x"} if state == "failed" else {}))

    graph.mark_statuses_counted()  # a new namespace's (its hyperplanes' first write does it)
    graph.put_doc_status(status("failed"))
    assert graph.status_counts("s3://b/notes/") == {"failed": 1}
    graph.put_doc_status(status("received"), count=False)
    graph.put_doc_status(status("failed"), count=False)
    graph.put_doc_status(status("received"), count=False)
    assert graph.status_counts("s3://b/notes/") == {"failed": 1}
    graph.put_doc_status(status("indexed"))
    assert graph.status_counts("s3://b/notes/") == {"done": 1}
    graph.put_doc_status(status("received"), count=False)
    graph.delete_doc_status("d1")
    assert graph.status_counts("s3://b/notes/") == {}
    graph.put_doc_status(status("received", "d2"), count=False)  # new: nothing held for it
    assert not graph.status_counts("s3://b/notes/")
    assert graph._count_record("d2") == 1 and graph._count_record("d2") == 0  # the migration's step, once
    assert graph.status_counts("s3://b/notes/") == {"received": 1}
