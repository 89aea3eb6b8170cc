"""Tenants on the AWS profile, through the Lambda handlers (moto + the OpenSearch fake): the
query API answers from the caller's tenant only (its identity, never the body), an S3 key
``tenants/<id>/...`` is ingested in that tenant's namespace, a summarize message reconciles in
the tenant its body names, and the reindex function deletes one tenant without touching
another."""

from __future__ import annotations

import copy
import json

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

from aws_helpers import BUCKET, event, load_handler

A_TEXT = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
          "The telescope is called Starglass and the comet is named Vellichor. ") * 3
B_TEXT = ("Harbor pilots guided the freighter past the rocky lighthouse at dawn. "
          "The lighthouse is called Quillorn and the freighter is named Marrowind. ") * 3
LONG_TEXT = " ".join(f"On night {n} the observers pointed Starglass at comet Vellichor and logged {n * 7} "
                     f"bright streaks over the {w} ridge before dawn." for n, w in
                     enumerate(["north", "south", "east", "west", "high", "low", "far", "near"]))
A_WORDS = ("Starglass", "Vellichor")
B_WORDS = ("Quillorn", "Marrowind", "lighthouse", "freighter")
A_SOURCE = f"s3://{BUCKET}/tenants/a/comets.txt"
B_SOURCE = f"s3://{BUCKET}/tenants/b/harbor.txt"


# --------------------------------------------------------------------------- helpers

def jwt(tenant: str | None, sub: str = "user-1") -> dict:
    claims = {"sub": sub, "iss": "https://issuer.example.com", "aud": "client-1"}
    if tenant is not None:
        claims["tenant"] = tenant
    return {"jwt": {"claims": claims, "scopes": None}}


def http_event(method: str, path: str, body: dict | None = None, authorizer: dict | None = None) -> dict:
    """An HTTP API (payload v2) event from the real samples, with the given route and authorizer
    context (None: no authorizer at all)."""
    ev = copy.deepcopy(event("api_query_valid.json"))
    route = "POST /query" if path == "/query" else ("GET /documents/{id}" if path.startswith("/documents/")
                                                    else f"{method} {path}")
    ev["routeKey"] = ev["requestContext"]["routeKey"] = route
    ev["rawPath"] = ev["requestContext"]["http"]["path"] = path
    ev["requestContext"]["http"]["method"] = method
    if authorizer is None:
        ev["requestContext"].pop("authorizer", None)
    else:
        ev["requestContext"]["authorizer"] = authorizer
    if body is None:
        ev.pop("body", None)
    else:
        ev["body"] = json.dumps(body)
    return ev


def call(handler, ev, ctx) -> tuple[int, dict | None, str]:
    out = handler(ev, ctx)
    raw = out.get("body") or ""
    return out["statusCode"], (json.loads(raw) if raw else None), raw


def ingest_into(tenant: str, source: str, text: str, title: str):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services import ingest, resummarize

    engine = LAMBDA_ENGINE.get(tenant)
    report = ingest.ingest(engine, [ingest.SourceDoc(source=source, text=text, title=title)])
    assert report.documents_added == 1 and not report.errors
    resummarize.drain(engine)  # one tenant's queue at a time (the queue is shared)
    [doc] = engine.graph.find_documents(source)
    return engine, doc


@pytest.fixture
def tenant_env(aws_engine):
    """The tenants' engines use 6 hyperplanes (the default tenant's 12): a tenant's graph
    settings are its own namespace's, and 6 bits make 64 ref shards a layer rather than 256, so
    the moto reconciles stay fast."""
    engine, env, fake = aws_engine
    env["ERAGRAPH_N_PLANES"] = "6"  # read by the fixture's builder of tenant engines
    return aws_engine


@pytest.fixture
def two_tenants(tenant_env):
    """Tenants a and b, each with one document, summarized."""
    engine, env, fake = tenant_env
    a, a_doc = ingest_into("a", A_SOURCE, A_TEXT, "Comets")
    b, b_doc = ingest_into("b", B_SOURCE, B_TEXT, "Harbor")
    return {"default": engine, "a": a, "b": b, "a_doc": a_doc, "b_doc": b_doc, "fake": fake}


def texts_of(body: dict) -> str:
    return " ".join(r["text"] for r in body["results"])


def leaks(body: dict, words) -> bool:
    """Whether a query response shows any of ``words`` outside the echo of the request itself
    (its ``query`` and ``filter``)."""
    shown = json.dumps({k: v for k, v in body.items() if k not in ("query", "filter")})
    return any(w in shown for w in words)


def s3_event(key: str, removed: bool = False, sequencer: str = "0A1B2C3D4E5F678901") -> dict:
    ev = copy.deepcopy(event("s3_delete.json" if removed else "s3_put.json"))
    ev["Records"][0]["s3"]["object"]["key"] = key
    ev["Records"][0]["s3"]["object"]["sequencer"] = sequencer
    return ev


def sqs_records(messages: list[dict]) -> dict:
    return {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                         "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                         "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
                         "awsRegion": "us-east-1"} for m in messages]}


def receive_all(url: str) -> list[dict]:
    import boto3

    sqs = boto3.client("sqs", region_name="us-east-1")
    return sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])


def ack(url: str, messages: list[dict]) -> None:
    import boto3

    sqs = boto3.client("sqs", region_name="us-east-1")
    for m in messages:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


# --------------------------------------------------------------------------- the query API

def test_query_answers_from_the_callers_tenant_only(two_tenants, lambda_context):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    query = load_handler("query")
    # (i) a question in b's words: a's caller still gets only a's texts
    for question in ("Which telescope observed the comet?", "Which lighthouse guided the freighter Marrowind?"):
        status, body, _ = call(query.handler, http_event("POST", "/query", {"query": question, "k": 5}, jwt("a")),
                               lambda_context)
        assert status == 200, body
        assert body["results"], question
        assert any(w in texts_of(body) for w in A_WORDS)
        assert not leaks(body, B_WORDS + (B_SOURCE,)), question
        assert {r["doc_id"] for r in body["results"]} <= {"", two_tenants["a_doc"].doc_id}
    # and b's caller only b's
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "Which telescope observed the comet?"},
                                                     jwt("b")), lambda_context)
    assert status == 200 and body["results"] and not leaks(body, A_WORDS + (A_SOURCE,))
    # (iii) a filter on tenant selects only inside the caller's tenant, in every retrieval kind
    other = {"equals": {"key": "tenant", "value": "b"}}
    for mode in ("collapsed", "bm25", "hybrid"):
        status, body, _ = call(query.handler, http_event(
            "POST", "/query", {"query": "Which lighthouse guided the freighter?", "mode": mode, "filter": other},
            jwt("a")), lambda_context)
        assert status == 200, (mode, body)
        assert body["results"] == [], mode
        assert not leaks(body, B_WORDS), mode
    own = {"equals": {"key": "tenant", "value": "a"}}
    status, body, _ = call(query.handler, http_event(
        "POST", "/query", {"query": "Which telescope observed the comet?", "filter": own}, jwt("a")), lambda_context)
    assert status == 200 and body["results"] and not leaks(body, B_WORDS)
    # a valid tenant that was never registered: nothing, and it is not registered by asking
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "lighthouse freighter comet"},
                                                     jwt("nobody")), lambda_context)
    assert status == 200 and body["results"] == []
    assert not leaks(body, A_WORDS + B_WORDS)
    assert LAMBDA_ENGINE.tenancy.tenants() == ["a", "b"]


def test_a_request_naming_another_tenant_or_a_bad_claim_is_forbidden(two_tenants, lambda_context):
    query = load_handler("query")
    # (ii) the same caller naming b in the body
    status, body, raw = call(query.handler, http_event(
        "POST", "/query", {"query": "Which lighthouse guided the freighter?", "tenant": "b"}, jwt("a")), lambda_context)
    assert status == 403, body
    assert "another tenant" in body["message"]
    assert "results" not in body and not any(w in raw for w in ("Quillorn", "Marrowind", B_SOURCE))
    # naming its own tenant is allowed
    status, body, _ = call(query.handler, http_event(
        "POST", "/query", {"query": "Which telescope observed the comet?", "tenant": "a"}, jwt("a")), lambda_context)
    assert status == 200 and body["results"]
    # the default tenant's caller cannot name a tenant either
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "comet", "tenant": "b"}, jwt(None)),
                           lambda_context)
    assert status == 403 and "results" not in body
    # a claim that is no valid tenant id: refused, never the default tenant or a near match
    for value in ("B", "../b", "b!", "b/x"):
        status, body, raw = call(query.handler, http_event("POST", "/query", {"query": "comet"}, jwt(value)),
                                 lambda_context)
        assert status == 403, (value, body)
        assert "results" not in body and not any(w in raw for w in A_WORDS + B_WORDS)


def test_another_tenants_document_is_not_found_and_stats_are_the_callers(two_tenants, lambda_context):
    query = load_handler("query")
    b_id, a_id = two_tenants["b_doc"].doc_id, two_tenants["a_doc"].doc_id
    # (iv)
    status, body, raw = call(query.handler, http_event("GET", f"/documents/{b_id}", authorizer=jwt("a")),
                             lambda_context)
    assert status == 404, body
    assert not any(w in raw for w in B_WORDS + (B_SOURCE, "Harbor"))
    status, body, _ = call(query.handler, http_event("GET", f"/documents/{b_id}", authorizer=jwt("b")),
                           lambda_context)
    assert status == 200 and body["doc_id"] == b_id and body["source"] == B_SOURCE
    status, body, _ = call(query.handler, http_event("GET", f"/documents/{a_id}", authorizer=jwt("a")),
                           lambda_context)
    assert status == 200 and body["title"] == "Comets"
    for doc_id in (a_id, b_id):  # the default tenant sees neither
        status, _, _ = call(query.handler, http_event("GET", f"/documents/{doc_id}", authorizer=jwt(None)),
                            lambda_context)
        assert status == 404
    for tenant in ("a", "b"):
        status, body, _ = call(query.handler, http_event("GET", "/stats", authorizer=jwt(tenant)), lambda_context)
        assert status == 200 and body["documents"] == 1, (tenant, body)
    status, body, _ = call(query.handler, http_event("GET", "/stats", authorizer=jwt(None)), lambda_context)
    assert status == 200 and body["documents"] == 0


def test_iam_caller_gets_its_principal_tags_tenant(two_tenants, lambda_context):
    import boto3

    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_role(Path="/eragraph/", RoleName="tenants-api-b-reader", AssumeRolePolicyDocument="{}",
                    Tags=[{"Key": "eragraph-tenant", "Value": "b"}])
    authorizer = {"iam": {"accessKey": "ASIAEXAMPLE", "accountId": "123456789012", "callerId": "AROAEXAMPLE:me",
                          "principalOrgId": None, "userId": "AROAEXAMPLE:me",
                          "userArn": "arn:aws:sts::123456789012:assumed-role/tenants-api-b-reader/me"}}
    query = load_handler("query")
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "Which telescope observed the comet?"},
                                                     authorizer), lambda_context)
    assert status == 200 and body["results"]
    assert not leaks(body, A_WORDS) and any(w in texts_of(body) for w in B_WORDS)
    # the body cannot switch an IAM caller to a either
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "comet", "tenant": "a"}, authorizer),
                           lambda_context)
    assert status == 403


def test_required_tenant_refuses_a_caller_without_one(two_tenants, lambda_context):
    from eragraph.entrypoints.http.api import make_app
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.bootstrap.identity import TenantIdentity

    identity = TenantIdentity(required=True)
    app = make_app(lambda tenant: LAMBDA_ENGINE.get(tenant, register=False), tenant_of=identity.tenant)
    question = {"query": "Which telescope observed the comet?"}
    # (v)
    for authorizer in (None, {}, jwt(None), jwt("")):
        for ev in (http_event("POST", "/query", question, authorizer),
                   http_event("GET", f"/documents/{two_tenants['a_doc'].doc_id}", authorizer=authorizer),
                   http_event("GET", "/stats", authorizer=authorizer)):
            status, body, raw = call(app.resolve, ev, lambda_context)
            assert status == 403, (authorizer, ev["rawPath"], body)
            assert "requires" in body["message"]
            assert not any(w in raw for w in A_WORDS + B_WORDS)
    status, body, _ = call(app.resolve, http_event("GET", "/health", authorizer=None), lambda_context)
    assert status == 200  # health names no tenant's data
    status, body, _ = call(app.resolve, http_event("POST", "/query", question, jwt("a")), lambda_context)
    assert status == 200 and body["results"] and not leaks(body, B_WORDS)


# --------------------------------------------------------------------------- the ingest function

def test_s3_key_under_tenants_is_ingested_in_that_tenant_only(tenant_env, lambda_context):
    import boto3

    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    engine, _, _ = tenant_env
    ingest = load_handler("ingest")
    boto3.client("s3", region_name="us-east-1").put_object(Bucket=BUCKET, Key="tenants/a/doc.txt",
                                                           Body=A_TEXT.encode())
    out = ingest.handler(s3_event("tenants/a/doc.txt"), lambda_context)
    assert out == {"ingested": 1, "removed": 0, "rejected": 0, "stale": 0, "vanished": 0, "unusable": 0}
    source = f"s3://{BUCKET}/tenants/a/doc.txt"
    a = LAMBDA_ENGINE.get("a", register=False)
    [doc] = a.graph.find_documents(source)
    assert doc.chunk_ids and a.vectors.count() == len(doc.chunk_ids)
    assert engine.graph.find_documents(source) == [] and engine.graph.list_documents() == []
    assert engine.vectors.count() == 0
    assert LAMBDA_ENGINE.tenancy.tenants() == ["a"]
    # the delete event of the key removes it from a
    out = ingest.handler(s3_event("tenants/a/doc.txt", removed=True, sequencer="0A1B2C3D4E5F678902"),
                         lambda_context)
    assert out["removed"] == 1
    assert a.graph.list_documents() == [] and a.vectors.count() == 0


def test_a_bad_tenant_directory_is_rejected_not_a_failure(aws_engine, lambda_context):
    import boto3

    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    boto3.client("s3", region_name="us-east-1").put_object(Bucket=BUCKET, Key="tenants/Bad!/x.txt",
                                                           Body=A_TEXT.encode())
    for key in ("tenants/Bad%21/x.txt", "tenants/Bad!/x.txt", "tenants/x.txt"):
        out = ingest.handler(s3_event(key), lambda_context)  # a direct invocation: no raise
        assert out == {"ingested": 0, "removed": 0, "rejected": 1, "stale": 0, "vanished": 0, "unusable": 0}, key
    # the same through SQS: the record is done (no batch-item failure, so no retry loop)
    batch = copy.deepcopy(event("sqs_ingest_batch.json"))
    record = next(r for r in batch["Records"] if "ObjectCreated" in r["body"])
    inner = json.loads(record["body"])
    inner["Records"][0]["s3"]["object"]["key"] = "tenants/Bad%21/x.txt"
    record["body"] = json.dumps(inner)
    batch["Records"] = [record]
    assert ingest.handler(batch, lambda_context) == {"batchItemFailures": []}
    assert engine.graph.list_documents() == [] and engine.vectors.count() == 0
    assert LAMBDA_ENGINE.tenancy.tenants() == []


def test_a_delete_event_of_an_unknown_tenant_registers_nothing(aws_engine, lambda_context):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    ingest = load_handler("ingest")
    out = ingest.handler(s3_event("tenants/ghost/x.txt", removed=True), lambda_context)
    assert out["stale"] == 1 and out["removed"] == 0
    assert LAMBDA_ENGINE.tenancy.tenants() == [] and not LAMBDA_ENGINE.tenancy.exists("ghost")


# --------------------------------------------------------------------------- the summarize function

def test_summarize_reconciles_in_the_tenant_its_message_names(tenant_env, lambda_context):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services import ingest as ingest_service

    engine, _, _ = tenant_env
    summarize = load_handler("summarize")
    a = LAMBDA_ENGINE.get("a")
    ingest_service.ingest(a, [ingest_service.SourceDoc(source=A_SOURCE, text=LONG_TEXT, title="Comets")])
    assert set(a.graph.layer_sizes()) == {0} and a.graph.layer_sizes()[0] > 5  # several segments to summarize
    seen = []
    for _ in range(30):
        got = receive_all(a.queue.url)
        if not got:
            break
        for m in got:
            body = json.loads(m["Body"])
            seen.append(body)
            assert body["tenant"] == "a"
            assert m["Attributes"]["MessageGroupId"].startswith("a:layer-")
        out = summarize.handler(sqs_records(got), lambda_context)
        assert out["batchItemFailures"] == []
        ack(a.queue.url, got)
    else:
        raise AssertionError("the summarize queue never drained")
    assert seen
    assert max(a.graph.layer_sizes()) >= 1  # summaries were made in a
    assert (a.settings.n_planes, engine.settings.n_planes) == (6, 12)  # each namespace keeps its own settings
    assert engine.graph.layer_sizes() == {} and engine.vectors.count() == 0  # none in the default tenant
    # a message of a tenant never registered is dropped (no failure), and registers nothing
    ghost = dict(seen[0], tenant="ghost")
    fake = {"MessageId": "ghost-1", "ReceiptHandle": "rh-ghost", "Body": json.dumps(ghost), "MD5OfBody": "0" * 32,
            "Attributes": {"MessageGroupId": "ghost:layer-0", "SequenceNumber": "1", "MessageDeduplicationId": "g1",
                           "ApproximateReceiveCount": "1", "SentTimestamp": "1763726400000"}}
    sizes = a.graph.layer_sizes()
    assert summarize.handler(sqs_records([fake]), lambda_context) == {"batchItemFailures": []}
    assert "ghost" not in LAMBDA_ENGINE.tenancy.tenants() and not LAMBDA_ENGINE.tenancy.exists("ghost")
    assert a.graph.layer_sizes() == sizes and engine.graph.layer_sizes() == {}
    # a message whose tenant is no valid id is a poison record (a batch-item failure), not a guess
    # (a batch whose every record failed is raised by powertools: the whole batch is retried)
    bad = dict(fake, MessageId="bad-1", Body=json.dumps(dict(seen[0], tenant="Bad!")))
    with pytest.raises(BatchProcessingError, match="not valid"):
        summarize.handler(sqs_records([bad]), lambda_context)
    assert "Bad!" not in json.dumps(LAMBDA_ENGINE.tenancy.tenants())


# --------------------------------------------------------------------------- the reindex function

def namespace_items(tenant: str) -> int:
    """The table's items of ``tenant``'s namespace, counted without building its engine."""
    import boto3

    table = boto3.resource("dynamodb", region_name="us-east-1").Table("eragraph-test-graph")
    count, kwargs = 0, {}
    while True:
        page = table.scan(ProjectionExpression="PK", **kwargs)
        count += sum(1 for i in page["Items"] if str(i["PK"]).startswith(f"T#{tenant}#"))
        if "LastEvaluatedKey" not in page:
            return count
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_reindex_deletes_one_tenant_and_leaves_the_other(two_tenants, lambda_context):
    import boto3

    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services import ingest as ingest_service

    reindex, summarize = load_handler("reindex"), load_handler("summarize")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})  # as deployed
    s3.put_object(Bucket=BUCKET, Key="tenants/a/comets.txt", Body=b"an older version")
    s3.put_object(Bucket=BUCKET, Key="tenants/a/comets.txt", Body=A_TEXT.encode())
    s3.put_object(Bucket=BUCKET, Key="tenants/b/harbor.txt", Body=B_TEXT.encode())
    a, b = two_tenants["a"], two_tenants["b"]
    # work queued for a that is still in flight when a is deleted
    ingest_service.ingest(a, [ingest_service.SourceDoc(source=f"s3://{BUCKET}/tenants/a/more.txt",
                                                       text=A_TEXT.replace("Starglass", "Lumen"))])
    late = receive_all(a.queue.url)
    assert late and all(json.loads(m["Body"])["tenant"] == "a" for m in late)

    def b_state():
        return (b.graph.namespace_size(), b.vectors.count(), b.entities.vectors.count(),
                sorted(d.doc_id for d in b.graph.list_documents()), namespace_items("b"))

    b_before = b_state()
    assert namespace_items("a") > 0
    report = reindex.handler({"delete_tenant": "a"}, lambda_context)
    assert report["tenant"] == "a"
    assert report["before"]["items"] > 0 and report["before"]["vectors"] > 0
    assert set(report["after"]) == set(report["before"]) == {"items", "vectors", "entity_vectors"}
    assert all(v == 0 for v in report["after"].values()), report
    assert report["objects_deleted"] == 1
    assert report["versions_deleted"] == 3  # both versions and the delete marker: nothing left to restore
    assert namespace_items("a") == 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    assert keys == ["tenants/b/harbor.txt"]
    left = s3.list_object_versions(Bucket=BUCKET)
    assert [v["Key"] for v in left.get("Versions", []) + left.get("DeleteMarkers", [])] == ["tenants/b/harbor.txt"]
    assert LAMBDA_ENGINE.tenancy.tenants() == ["b"] and not LAMBDA_ENGINE.tenancy.exists("a")
    assert b_state() == b_before
    # the message queued before the deletion is dropped: it does not bring the namespace back
    assert summarize.handler(sqs_records(late), lambda_context) == {"batchItemFailures": []}
    assert namespace_items("a") == 0 and LAMBDA_ENGINE.tenancy.tenants() == ["b"]
    # a run cut short is finished by the next: a second delete ends with nothing either
    again = reindex.handler({"delete_tenant": "a"}, lambda_context)
    assert all(v == 0 for v in again["after"].values()), again
    assert b_state() == b_before
    # b is whole: its audit finds nothing to repair, and its caller still gets its texts
    audit = reindex.handler({"tenant": "b"}, lambda_context)
    assert audit["invariants"]["ok"] and audit["invariants"]["checked_nodes"] > 0
    assert audit["vectors_missing_reembedded"] == 0 and audit["orphan_chunks_removed"] == 0
    query = load_handler("query")
    status, body, _ = call(query.handler, http_event("POST", "/query", {"query": "Which lighthouse?"}, jwt("b")),
                           lambda_context)
    assert status == 200 and body["results"] and any(w in texts_of(body) for w in B_WORDS)
