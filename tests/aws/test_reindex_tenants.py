"""The reindex that scales with tenants, through the reindex handler with real event JSON: the
EventBridge schedule fans out one message per tenant onto the reindex FIFO queue (moto, with the
template's attributes); the queue's SQS records are each one tenant's audit under the Lambda
deadline, continued by a new message when the deadline comes first; a finished audit records its
time in the tenant registry, and the fan-out publishes how many tenants are late."""

from __future__ import annotations

import json
import time

import pytest

from aws_helpers import BUCKET, LambdaContext, deliver, event, load_handler, published, receive
from contract.aws_factories import load_template
from eragraph.services import reindex as reindex_service
from eragraph.services import reindex_schedule

TEXT = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
        "The telescope is called Starglass and the comet is named Vellichor. ") * 6


@pytest.fixture(autouse=True)
def _few_partitions(few_partitions):
    """Every test here runs on the smaller partition layout (aws_helpers.few_partitions)."""


def ingest_docs(engine, n: int = 3) -> None:
    ingest, summarize = load_handler("ingest"), load_handler("summarize")
    from test_handlers import drain

    ctx = LambdaContext()
    for i in range(n):
        key = f"docs/comets-{i}.txt"
        engine.blobs.put(key, TEXT.replace("Starglass", f"Starglass{i}").encode())
        ev = event("s3_put.json")
        ev["Records"][0]["s3"]["object"]["key"] = key
        ingest.handler(ev, ctx)
    drain(engine, summarize, ctx)


def test_the_schedule_fans_out_one_message_per_tenant(aws_engine, audit_queue, lambda_context, capsys):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    for tenant in ("acme", "globex"):
        LAMBDA_ENGINE.get(tenant)  # a write path registers the tenant
    reindex = load_handler("reindex")
    capsys.readouterr()
    report = reindex.handler(event("schedule.json"), lambda_context)
    assert report["tenants_queued"] == 3 and report["run"] == event("schedule.json")["id"]
    messages = receive(audit_queue)
    bodies = {m["Attributes"]["MessageGroupId"]: json.loads(m["Body"]) for m in messages}
    assert set(bodies) == {"default", "tenant-acme", "tenant-globex"}
    assert {b["tenant"] for b in bodies.values()} == {"", "acme", "globex"}
    assert all(b["progress"]["step"] == 0 and b["progress"]["cursor"] is None for b in bodies.values())
    assert all(b["stuck_after_seconds"] == 3600.0 for b in bodies.values())  # ERAGRAPH_STUCK_AFTER_SECONDS default
    metrics = published(capsys.readouterr().out)
    assert metrics["TenantAuditsQueued"] == 3 and metrics["TenantsNotAudited24h"] == 0
    # nothing audited yet: the fan-out did no audit work itself
    assert "invariants" not in report
    # the schedule retried (same EventBridge event id): its messages are deduplicated
    reindex.handler(event("schedule.json"), lambda_context)
    assert receive(audit_queue) == []


def test_each_tenant_is_audited_by_its_message_and_its_time_recorded(aws_engine, audit_queue, caplog):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    engine, _, _ = aws_engine
    ingest_docs(engine, 1)
    LAMBDA_ENGINE.get("acme")
    [doc] = engine.graph.find_documents(f"s3://{BUCKET}/docs/comets-0.txt")
    ghost = doc.chunk_ids[0]
    engine.vectors.delete([ghost])
    reindex = load_handler("reindex")
    before = time.time()
    reindex.handler(event("schedule.json"), LambdaContext())
    reports = deliver(audit_queue, reindex, LambdaContext(remaining_ms=900_000), caplog)
    assert sorted(r["tenant"] for r in reports) == ["", "acme"]
    assert all(r["complete"] and r["invariants"]["ok"] for r in reports), reports
    [default] = [r for r in reports if r["tenant"] == ""]
    assert default["vectors_missing_reembedded"] == 1 and ghost in engine.vectors.ids()
    since = LAMBDA_ENGINE.tenancy.registry().audit_since()
    assert before <= since[""] <= time.time() and before <= since["acme"] <= time.time()


def test_a_deadline_continues_the_audit_with_nothing_audited_twice_or_skipped(aws_engine, audit_queue, caplog,
                                                                              monkeypatch):
    """Every piece has no time left after one step or one page of refs (the remaining time is
    the margin): the audit goes on in continuations, each step runs once, and the vector step
    asks for each live node's vector exactly once across its pages."""
    engine, _, _ = aws_engine
    ingest_docs(engine, 2)
    live = {r.node_id for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)}
    dropped = sorted(live)[::4]
    engine.vectors.delete(dropped)
    monkeypatch.setattr(reindex_service, "REF_PAGE", 4)
    asked: list[str] = []
    upserted: list[str] = []
    get_vectors, upsert = engine.vectors.get_vectors, engine.vectors.upsert
    monkeypatch.setattr(engine.vectors, "get_vectors", lambda ids: asked.extend(ids) or get_vectors(ids))
    monkeypatch.setattr(engine.vectors, "upsert", lambda ids, v, m: upserted.extend(ids) or upsert(ids, v, m))
    reindex = load_handler("reindex")
    reindex.handler(event("schedule.json"), LambdaContext())
    tight = LambdaContext(remaining_ms=int(reindex_schedule.MARGIN_SECONDS * 1000))
    reports = deliver(audit_queue, reindex, tight, caplog)
    assert all(r["tenant"] == "" for r in reports)
    assert [r["complete"] for r in reports] == [False] * (len(reports) - 1) + [True]
    steps = [s for r in reports for s in r["steps_run"]]
    pages = steps.count("vectors")
    assert pages >= len(live) // 4  # the vector step really went page by page
    paged = ("documents", "vectors")  # the paged steps run once a page
    assert [s for i, s in enumerate(steps) if s not in paged or steps[i - 1] != s] == list(reindex_service.STEPS)
    assert sorted(asked) == sorted(live)  # every live node checked, none twice
    assert sorted(upserted) == sorted(dropped)  # only the missing ones re-embedded, once each
    assert engine.vectors.ids() >= live
    final = reports[-1]
    assert final["invariants"]["ok"] and final["totals"]["VectorsReembedded"] == len(dropped)
    assert [r["piece"] for r in reports] == list(range(len(reports)))
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    assert LAMBDA_ENGINE.tenancy.registry().audit_since()[""] >= time.time() - 600


def test_the_fan_out_counts_tenants_not_audited_in_24_hours(aws_engine, audit_queue, lambda_context, capsys):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    for tenant in ("acme", "globex", "initech"):
        LAMBDA_ENGINE.get(tenant)
    registry = LAMBDA_ENGINE.tenancy.registry()
    now = time.time()
    registry.record_audit("acme", now - 25 * 3600)     # late
    registry.record_audit("globex", now - 3600)        # on time
    registry.record_audit("", now - 30 * 3600)         # the default tenant, late
    # initech: registered now, never audited: its clock runs from its registration
    reindex = load_handler("reindex")
    capsys.readouterr()
    report = reindex.handler(event("schedule.json"), lambda_context)
    assert report["late_tenants"] == ["", "acme"]
    metrics = published(capsys.readouterr().out)
    assert metrics["TenantsNotAudited24h"] == 2
    assert 30 * 3600 <= metrics["OldestAuditAgeSeconds"] <= 30 * 3600 + 60
    # the alarm watches this metric, in the namespace and dimension powertools publishes it with
    alarm = load_template()["Resources"]["TenantsNotAuditedAlarm"]["Properties"]
    env = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert alarm["MetricName"] == "TenantsNotAudited24h" and alarm["Namespace"] == env["POWERTOOLS_METRICS_NAMESPACE"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "breaching" and alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_the_default_tenant_clock_starts_at_its_first_fan_out(aws_engine, audit_queue, lambda_context, capsys):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    registry = LAMBDA_ENGINE.tenancy.registry()
    assert registry.audit_since() == {}
    load_handler("reindex").handler(event("schedule.json"), lambda_context)
    first = registry.audit_since()[""]
    registry.watch_audits("", first + 100)  # a later fan-out does not restart the clock
    assert registry.audit_since()[""] == first
    assert registry.tenants() == []  # the audit clocks are not tenants


def test_a_bad_audit_message_fails_its_record_and_does_no_work(aws_engine, audit_queue, lambda_context, monkeypatch):
    reindex = load_handler("reindex")
    monkeypatch.setattr(reindex.reindex_schedule, "audit_piece", lambda *a, **k: pytest.fail("audited a bad message"))
    records = event("sqs_reindex_audit.json")
    out = reindex.handler(records, lambda_context)
    ids = [r["messageId"] for r in records["Records"]]
    # the record's body is no TenantAudit (its step is a string)
    assert out == {"batchItemFailures": [{"itemIdentifier": ids[0]}]}
    from eragraph.adapters.aws.reindex_queue import InvalidAuditMessage, parse_body

    with pytest.raises(InvalidAuditMessage, match="progress.step must be an integer"):
        parse_body(records["Records"][0]["body"])


def test_a_deleted_tenant_s_message_is_dropped(aws_engine, audit_queue, caplog):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    LAMBDA_ENGINE.get("acme")
    reindex = load_handler("reindex")
    reindex.handler(event("schedule.json"), LambdaContext())
    reindex.handler({"delete_tenant": "acme"}, LambdaContext())
    reports = deliver(audit_queue, reindex, LambdaContext(remaining_ms=900_000), caplog)
    assert [r["tenant"] for r in reports] == [""]
    assert LAMBDA_ENGINE.tenancy.tenants() == [] and "acme" not in LAMBDA_ENGINE.tenancy.registry().audit_since()
