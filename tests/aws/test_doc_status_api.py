"""The document status routes through the query handler (HTTP API v2 events, on moto):
GET /documents/{id} carries the status, GET /documents?prefix= counts each state of the
caller's tenant only, and bad query parameters are a 4xx in words."""

from __future__ import annotations

from aws_helpers import BUCKET, load_handler
from test_tenants_api import A_SOURCE, B_SOURCE, call, http_event, jwt, tenant_env, two_tenants  # noqa: F401

from eragraph.services import doc_status


def statuses(handler, ctx, tenant, query: dict[str, str]):
    ev = http_event("GET", "/documents", authorizer=jwt(tenant))
    ev["queryStringParameters"] = query
    ev["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
    return call(handler, ev, ctx)


def test_status_of_a_document_and_counts_per_prefix_per_tenant(two_tenants, lambda_context):
    query = load_handler("query")
    a_doc = two_tenants["a_doc"]
    status, body, _ = call(query.handler, http_event("GET", f"/documents/{a_doc.doc_id}", authorizer=jwt("a")),
                           lambda_context)
    assert status == 200 and body["status"] == "done" and body["received_at"] <= body["updated_at"]
    failed_id = doc_status.record_failed(two_tenants["a"], f"s3://{BUCKET}/tenants/a/photo.png",
                                         "encrypted PDF").doc_id
    status, body, _ = call(query.handler, http_event("GET", f"/documents/{failed_id}", authorizer=jwt("a")),
                           lambda_context)
    assert status == 200 and (body["status"], body["reason"], body["chunks"]) == ("failed", "encrypted PDF", 0)
    status, _, _ = call(query.handler, http_event("GET", f"/documents/{failed_id}", authorizer=jwt("b")),
                        lambda_context)
    assert status == 404  # another tenant's failure is not there

    status, body, _ = statuses(query.handler, lambda_context, "a", {"prefix": f"s3://{BUCKET}/tenants/"})
    assert status == 200, body
    assert (body["total"], body["done"], body["failed"]) == (2, 1, 1)
    assert body["bedrock"]["numberOfDocumentsFailed"] == 1
    assert {d["source"] for d in body["documents"]} == {A_SOURCE, f"s3://{BUCKET}/tenants/a/photo.png"}
    # each stored document's readers (one BatchGetItem for the page, judged against the role);
    # the refused file has no stored document and so no readers
    assert {d["source"]: d.get("readers") for d in body["documents"]} == {
        A_SOURCE: ["*"], f"s3://{BUCKET}/tenants/a/photo.png": None}
    status, body, raw = statuses(query.handler, lambda_context, "b", {"prefix": f"s3://{BUCKET}/tenants/"})
    assert status == 200 and body["total"] == 1 and body["documents"][0]["source"] == B_SOURCE
    assert "photo.png" not in raw and A_SOURCE not in raw
    status, body, _ = statuses(query.handler, lambda_context, None, {})
    assert status == 200 and body["total"] == 0  # the default tenant has none
    status, body, _ = statuses(query.handler, lambda_context, "a", {"limit": "1"})
    assert status == 200 and len(body["documents"]) == 1 and body["truncated"] and body["total"] == 2


def test_bad_status_parameters_are_refused_in_words(two_tenants, lambda_context):
    query = load_handler("query")
    for params in ({"limit": "-1"}, {"limit": "many"}, {"limit": "1001"}, {"prefix": "p" * 1025}):
        status, body, _ = statuses(query.handler, lambda_context, "a", params)
        assert status == 422 and ("limit" in body["message"] or "prefix" in body["message"]), (params, body)


def test_pages_follow_the_cursor_and_a_bad_cursor_is_a_400_in_words(two_tenants, lambda_context):
    query = load_handler("query")
    engine = two_tenants["a"]
    for n in range(5):
        doc_status.record_failed(engine, f"s3://{BUCKET}/tenants/a/bad-{n}.png", "binary file")
    seen, cursor = [], ""
    while True:
        params = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        status, body, _ = statuses(query.handler, lambda_context, "a", params)
        assert status == 200 and len(body["documents"]) <= 2 and body["total"] == 6, body
        seen += [d["source"] for d in body["documents"]]
        if not body["next_cursor"]:
            break
        cursor = body["next_cursor"]
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 6
    status, body, _ = statuses(query.handler, lambda_context, "a", {"cursor": "not-a-cursor!"})
    assert status == 400 and "cursor" in body["message"], body
