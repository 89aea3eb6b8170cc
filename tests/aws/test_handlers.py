"""The Lambda handlers called directly with real event JSON (tests/events) on the AWS adapters."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from aws_helpers import BUCKET, LambdaContext, deliver, event, load_handler, receive


TEXT = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
        "The telescope is called Starglass and the comet is named Vellichor. ") * 3


def drain(engine, summarize, ctx):
    """Deliver the summarize queue through the summarize handler until it is empty."""
    import boto3

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = engine.queue.url
    for _ in range(50):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", [])
        if not got:
            return
        records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                    "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
                    "awsRegion": "us-east-1"} for m in got]
        out = summarize.handler({"Records": records}, ctx)
        assert out["batchItemFailures"] == []
        engine.queue.ack([m["ReceiptHandle"] for m in got])
    raise AssertionError("summarize queue never drained")


def put_doc(engine, key="docs/Field Notes (draft).txt", text=TEXT):
    engine.blobs.put(key, text.encode())


def test_s3_put_event_ingests_url_decoded_key(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put_doc(engine)
    out = ingest.handler(event("s3_put.json"), lambda_context)
    assert out == {"ingested": 1, "removed": 0, "rejected": 0, "stale": 0, "vanished": 0, "unusable": 0}
    [doc] = engine.graph.find_documents(f"s3://{BUCKET}/docs/Field Notes (draft).txt")
    assert doc.chunk_ids and engine.vectors.count() == len(doc.chunk_ids)


def test_redelivered_s3_event_adds_no_chunks(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    nodes, vectors = engine.graph.layer_sizes()[0], engine.vectors.count()
    out = ingest.handler(event("s3_put.json"), lambda_context)
    assert out["ingested"] == 0
    assert engine.graph.layer_sizes()[0] == nodes and engine.vectors.count() == vectors


def test_s3_delete_event_removes_document(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    out = ingest.handler(event("s3_delete.json"), lambda_context)
    assert out["removed"] == 1
    assert engine.graph.list_documents() == [] and engine.vectors.count() == 0


def test_test_event_is_ignored_and_sqs_batch_is_processed(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    assert ingest.handler(event("s3_test_event.json"), lambda_context) == {
        "ingested": 0, "removed": 0, "rejected": 0, "stale": 0, "vanished": 0, "unusable": 0}
    put_doc(engine)
    out = ingest.handler(event("sqs_ingest_batch.json"), lambda_context)
    assert out == {"batchItemFailures": []}
    assert len(engine.graph.list_documents()) == 1


def test_bad_file_is_logged_not_retried(aws_engine, lambda_context, caplog):
    engine, _, _ = aws_engine
    ingest = load_handler("ingest")
    put_doc(engine, text="\x00\x01binary")
    out = ingest.handler(event("sqs_ingest_batch.json"), lambda_context)
    assert out == {"batchItemFailures": []}  # not a crash loop: the record is done
    assert engine.graph.list_documents() == []
    assert any("binary file" in str(getattr(r, "error", "")) for r in caplog.records)


def test_summarize_reports_poison_records_as_partial_failures(aws_engine, lambda_context):
    engine, _, _ = aws_engine
    summarize = load_handler("summarize")
    out = summarize.handler(event("sqs_summarize_batch.json"), lambda_context)
    failed = sorted(f["itemIdentifier"] for f in out["batchItemFailures"])
    ids = [r["messageId"] for r in event("sqs_summarize_batch.json")["Records"]]
    assert failed == sorted([ids[1], ids[3]])  # the unparsable body and the wrong message type


def test_a_summarize_run_out_of_time_sends_a_continuation_carrying_the_end_it_was_given(aws_engine, lambda_context):
    # a reconcile's end rides with its announce (services.resummarize.reconcile); a run that
    # stops before any write takes it sends it on with the rest of its work, and the
    # continuation's run writes it
    import boto3

    from eragraph.adapters.aws.queue_sqs import message_entry
    from eragraph.domain.model import MetaWrite, SegmentsAffected

    engine, _, _ = aws_engine
    ingest, summarize = load_handler("ingest"), load_handler("summarize")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    drain(engine, summarize, lambda_context)
    end = MetaWrite(puts=(("change:00000000000000000003:cc", {"kind": "resummarize", "layer": 1}),),
                    clear=(("dirty:0:2", 1.0),))
    engine.graph.put_meta("dirty:0:2", 1.0)
    sqs = boto3.client("sqs", region_name="us-east-1")
    entry = message_entry(0, SegmentsAffected(layer=0, codes=(5,), group=0, op="late", after=end), True, engine.queue.tenant)
    sqs.send_message(QueueUrl=engine.queue.url, MessageBody=entry["MessageBody"],
                     MessageGroupId=entry["MessageGroupId"], MessageDeduplicationId=entry["MessageDeduplicationId"])
    got = sqs.receive_message(QueueUrl=engine.queue.url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
                "awsRegion": "us-east-1"} for m in got]
    late = replace(lambda_context, remaining_ms=1_000)  # less than the margin: it stops before it begins
    assert summarize.handler({"Records": records}, late)["batchItemFailures"] == []
    engine.queue.ack([m["ReceiptHandle"] for m in got])
    assert engine.graph.get_meta("change:00000000000000000003:cc") is None
    [body] = [json.loads(m["Body"]) for m in sqs.receive_message(
        QueueUrl=engine.queue.url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]]
    assert body["reason"].endswith("+continue") and SegmentsAffected.from_dict(body).after == end
    drain(engine, summarize, lambda_context)
    assert engine.graph.get_meta("change:00000000000000000003:cc") == {"kind": "resummarize", "layer": 1}
    assert engine.graph.get_meta("dirty:0:2") is None


def _api(query, name, ctx):
    out = query.handler(event(name), ctx)
    return out["statusCode"], json.loads(out["body"]) if out.get("body") else None


def test_api(aws_engine, lambda_context, capsys):
    engine, _, _ = aws_engine
    ingest, summarize, query = load_handler("ingest"), load_handler("summarize"), load_handler("query")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    drain(engine, summarize, lambda_context)
    capsys.readouterr()
    status, body = _api(query, "api_query_valid.json", lambda_context)
    assert status == 200 and body["results"] and "Starglass" in body["results"][0]["text"]
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert emf, "the query handler flushes CloudWatch metrics (EMF)"
    values = {k: v if isinstance(v, list) else [v] for k, v in emf[-1].items() if k.startswith("Quer")}
    assert values["Queries"] == [1.0] and values["QueryResults"] == [len(body["results"])]
    assert values["QueryLatency"][0] >= 0
    # the query's own model calls: embedding the question (hash embedder: its words)
    assert body["usage"]["by_kind"]["embed"]["tokens_in"] == values["QueryTokens"][0] > 0
    for name in ("api_query_invalid.json", "api_query_bad_mode.json", "api_query_malformed.json"):
        status, body = _api(query, name, lambda_context)
        assert 400 <= status < 500, (name, status, body)
        assert body and (body.get("message") or body.get("detail")), (name, body)
    status, body = _api(query, "api_query_bad_mode.json", lambda_context)
    assert status == 400 and "unknown mode" in body["message"]
    status, body = _api(query, "api_document_missing.json", lambda_context)
    assert status == 404
    status, body = _api(query, "api_stats.json", lambda_context)
    assert status == 200 and body["documents"] == 1 and body["layers"][0]["nodes"] >= 1
    kinds = body["ledger"]["by_kind"]
    assert kinds["embed"]["tokens_in"] > 0 and kinds["embed"]["calls"] >= 2  # the chunks, the question
    assert body["ledger"]["total"]["cost_usd"] == 0.0 and body["ledger"]["unpriced"] == []  # local models
    assert _api(query, "api_health.json", lambda_context) == (200, {"status": "ok"})


def test_api_fuzz_corpus_on_the_lambda_function(aws_engine, lambda_context):
    """Every malformed body of the fuzz corpus (tests/api_corpus.py) gets its 4xx and message
    from the query function on the AWS profile; none reaches a 5xx."""
    from api_corpus import CASES, LAMBDA_ONLY, lambda_event

    query = load_handler("query")
    template = event("api_query_valid.json")
    requests = [(name, lambda_event(template, body), status, words) for name, body, status, words in CASES]
    requests += [(name, {**template, **fields}, status, words) for name, fields, status, words in LAMBDA_ONLY]
    for name, request, status, words in requests:
        out = query.handler(request, lambda_context)
        body = json.loads(out["body"])
        assert out["statusCode"] == status and words in body["message"], (name, out["statusCode"], body)


def test_reindex_on_schedule_event(aws_engine, audit_queue, lambda_context, caplog):
    """The schedule queues the default tenant's audit; its SQS record audits and repairs it."""
    engine, _, fake = aws_engine
    ingest, summarize, reindex = load_handler("ingest"), load_handler("summarize"), load_handler("reindex")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    drain(engine, summarize, lambda_context)
    ghost = engine.graph.find_documents(f"s3://{BUCKET}/docs/Field Notes (draft).txt")[0].chunk_ids[0]
    engine.vectors.delete([ghost])
    assert reindex.handler(event("schedule.json"), lambda_context)["tenants_queued"] == 1
    assert ghost not in engine.vectors.ids()  # the fan-out audits nothing itself
    [report] = deliver(audit_queue, reindex, LambdaContext(remaining_ms=900_000), caplog)
    assert report["tenant"] == "" and report["complete"] and report["vectors_missing_reembedded"] == 1
    assert ghost in engine.vectors.ids()
    assert report["invariants"]["ok"], report["invariants"]


def test_reindex_handler_repairs_the_entity_graph_and_publishes_counts(aws_engine, audit_queue, lambda_context, capsys,
                                                                       caplog):
    engine, _, _ = aws_engine
    ingest, summarize, reindex = load_handler("ingest"), load_handler("summarize"), load_handler("reindex")
    put_doc(engine)
    put_doc(engine, key="docs/other.txt", text=TEXT.replace("Starglass", "Moonwell").replace("Vellichor", "Quorra"))
    ingest.handler(event("s3_put.json"), lambda_context)
    other = event("s3_put.json")
    other["Records"][0]["s3"]["object"]["key"] = "docs/other.txt"
    ingest.handler(other, lambda_context)
    drain(engine, summarize, lambda_context)
    store = engine.entities.store
    [doc] = engine.graph.find_documents(f"s3://{BUCKET}/docs/Field Notes (draft).txt")
    [dead] = engine.graph.find_documents(f"s3://{BUCKET}/docs/other.txt")
    stripped = doc.chunk_ids[0]
    store.delete_chunks([stripped])                        # a chunk whose entity records are gone
    engine.graph.delete_nodes(dead.chunk_ids)              # a removal that died before its hook
    engine.vectors.delete(dead.chunk_ids)
    engine.graph.delete_document(dead.doc_id)
    Item = store.Item
    Item(PK="ENT#starglass", SK="ENT").update(actions=[Item.freq.add(4)])  # a drifted count
    Item(PK="COUNT", SK="LAYER#0").update(actions=[Item.version.add(2)])  # a drifted layer counter
    reindex.handler(event("schedule.json"), lambda_context)
    capsys.readouterr()
    [report] = deliver(audit_queue, reindex, LambdaContext(remaining_ms=900_000), caplog)
    metrics = report["metrics"]
    assert metrics["EntityChunksReextracted"] == 1
    assert metrics["EntityChunksOrphanedRemoved"] == len(dead.chunk_ids)
    assert metrics["EntityCountsRepaired"] >= 1
    assert report["layer_counts_repaired"] == [{"layer": 0, "correction": -2}] and metrics["LayerCountsRepaired"] == 1
    assert engine.graph.layer_sizes()[0] == len(engine.graph.layer_refs(0))
    assert stripped in store.chunk_ids() and not set(dead.chunk_ids) & store.chunk_ids()
    from eragraph.adapters.memory.entity_memory import MemoryEntityStore
    from eragraph.ports.entity import ChunkEntities

    live = engine.graph.get_nodes(doc.chunk_ids)  # the recount from scratch of the live chunks
    extracted = engine.entities.extractor.extract([n.text for n in live.values()])
    fresh = MemoryEntityStore()
    fresh.add_chunks([ChunkEntities(i, tuple(s)) for i, s in zip(live, extracted)])
    names = sorted(fresh.export().entities)
    assert store.frequencies(names) == fresh.frequencies(names)
    assert store.entity_count() == fresh.entity_count()
    # the counts are published as CloudWatch metrics (powertools EMF on stdout)
    published = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{") and "_aws" in line:
            blob = json.loads(line)
            for spec in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                published[spec["Name"]] = blob[spec["Name"]]
    assert published["EntityChunksReextracted"] in (1, [1])
    assert "EntityCountsRepaired" in published and "EntityVectorsOrphanedDeleted" in published
    assert published["LayerCountsRepaired"] in (1, [1])


def test_api_new_retrieval_modes(aws_engine, lambda_context):
    """bm25 (the text field of the OpenSearch documents), hybrid, fusion and auto through the
    API with real event JSON; fusion and auto say their route and s(q)."""
    engine, _, fake = aws_engine
    ingest, summarize, query = load_handler("ingest"), load_handler("summarize"), load_handler("query")
    put_doc(engine)
    ingest.handler(event("s3_put.json"), lambda_context)
    drain(engine, summarize, lambda_context)
    for mode in ("bm25", "hybrid", "fusion", "auto"):
        status, body = _api(query, f"api_query_{mode}.json", lambda_context)
        assert status == 200, (mode, body)
        assert body["mode"] == mode and body["results"] and "telescope" in body["results"][0]["text"].lower()
        if mode in ("fusion", "auto"):
            assert 0.0 <= body["router_score"] <= 1.0 and body["router_ms"] >= 0
            assert body["route"] in ("dense", "hybrid", "fusion", "tri_graph")
        else:
            assert body["route"] == mode and body["router_score"] is None
    searches = [b for m, path, b in fake.requests if path.endswith("/_search") and "bool" in (b or {}).get("query", {})]
    assert any(s["query"]["bool"]["must"] == [{"match": {"text": "which telescope observed the comet"}}] for s in searches)


@pytest.mark.parametrize("payload,expected", [
    ({"stuck_after_seconds": 0}, 0.0),  # 0 means 0, not "unset"
    ({"stuck_after_seconds": 600}, 600.0),
    ({"stuck_after_seconds": 2.5}, 2.5),
    ({"stuck_after_seconds": None}, 1234.0),
    ({}, 1234.0),
    (None, 1234.0),
    ("schedule.json", 1234.0),  # the schedule's EventBridge envelope, detail {}
])
def test_reindex_event_parameters(aws_engine, audit_queue, lambda_context, monkeypatch, payload, expected):
    """The schedule's (or a direct) event's stuck_after_seconds reaches every tenant's audit
    message, ERAGRAPH_STUCK_AFTER_SECONDS when absent."""
    reindex = load_handler("reindex")
    monkeypatch.setenv("ERAGRAPH_STUCK_AFTER_SECONDS", "1234")
    monkeypatch.setattr(reindex.reindex, "run", lambda *a, **k: pytest.fail("the fan-out audited"))
    report = reindex.handler(event(payload) if isinstance(payload, str) else payload, lambda_context)
    assert report["tenants_queued"] == 1
    [message] = receive(audit_queue)
    assert json.loads(message["Body"])["stuck_after_seconds"] == expected


def _scheduled(detail):
    body = event("schedule.json")
    body["detail"] = detail
    return body


@pytest.mark.parametrize("payload,words", [
    ({"stuck_after_seconds": "600"}, "stuck_after_seconds must be a number (got the string '600')"),
    ({"stuck_after_seconds": True}, "stuck_after_seconds must be a number (got true)"),
    ({"stuck_after_seconds": -1}, "stuck_after_seconds must be at least 0 (got -1)"),
    ({"stuck_after_seconds": float("inf")}, "stuck_after_seconds must be a finite number (got inf)"),
    ({"stuck_after": 600}, "stuck_after is not a known field (known: stuck_after_seconds, tenant, delete_tenant)"),
    ([600], "the event must be a JSON object (got an array of 1)"),
    ("600", "the event must be a JSON object (got the string '600')"),
    (_scheduled({"stuck_after_seconds": "soon"}), "detail.stuck_after_seconds must be a number (got the string 'soon')"),
    (_scheduled({"force": True}), "detail.force is not a known field"),
    ({**_scheduled({}), "source": None}, "source must be a string (got null)"),
])
def test_reindex_rejects_a_bad_event_before_any_work(lambda_context, monkeypatch, caplog, payload, words):
    reindex = load_handler("reindex")
    monkeypatch.setattr(reindex.reindex, "run", lambda *a, **k: pytest.fail("ran on a bad event"))
    with pytest.raises(reindex.InvalidReindexEvent) as info:
        reindex.handler(payload, lambda_context)
    assert words in str(info.value)
    assert [r.reason for r in caplog.records if getattr(r, "reason", None)] == ["invalid-event"]
