"""Who is asking, through the query function's handler (moto + the OpenSearch fake, every AWS
call judged against the query role by tests/iam_judge.py): with ERAGRAPH_PRINCIPALS=identity an
IAM caller's principals are its role's ``eragraph-principals`` tag, read with iam:ListRoleTags
under TenantPrincipalPath (the grant the tenant tag has), and POST /query, the Bedrock KB Retrieve
and the MCP retrieve tool answer inside them; a role without the tag is refused (403), never
served the whole tenant. The events are the real sample's (tests/events/api_query_valid.json)."""

from __future__ import annotations

import json

import pytest

from aws_helpers import load_handler
from test_tenants_api import call, http_event

SECRET_TEXT = ("The board approved the merger with Quillorn Holdings on Tuesday. The merger price is "
               "Marrowind crowns per share. ") * 3
OPEN_TEXT = ("The merger newsletter tells staff that the canteen moves to the Starglass building. "
             "The merger of the two canteens happens in spring. ") * 3
SECRET_WORDS = ("Quillorn", "Marrowind", "Board minutes")
QUESTION = "What did the board decide about the merger?"


def iam_caller(role: str) -> dict:
    return {"iam": {"accessKey": "ASIAEXAMPLE", "accountId": "123456789012", "callerId": "AROAEXAMPLE:me",
                    "principalOrgId": None, "userId": "AROAEXAMPLE:me",
                    "userArn": f"arn:aws:sts::123456789012:assumed-role/{role}/me"}}


@pytest.fixture
def handler(aws_engine, monkeypatch):
    import boto3

    from eragraph.domain.knowledge_base import knowledge_base_id
    from eragraph.services import ingest, resummarize

    engine, env, _ = aws_engine
    report = ingest.ingest(engine, [
        ingest.SourceDoc(source="s3://b/docs/minutes.txt", text=SECRET_TEXT, title="Board minutes",
                         metadata={"access": ["group:board"]}),
        ingest.SourceDoc(source="s3://b/docs/news.txt", text=OPEN_TEXT, title="Newsletter")])
    assert report.documents_added == 2 and not report.errors
    resummarize.drain(engine)
    iam = boto3.client("iam", region_name="us-east-1")
    for role, principals in (("finance-reader", "group:finance user:fin-1"), ("board-reader", "group:board")):
        iam.create_role(Path="/eragraph/", RoleName=role, AssumeRolePolicyDocument="{}",
                        Tags=[{"Key": "eragraph-principals", "Value": principals}])
    query = load_handler("query")
    monkeypatch.setattr(query.PRINCIPALS, "enabled", True)  # ERAGRAPH_PRINCIPALS=identity (imported once)
    return query, knowledge_base_id("", engine.settings.kb_id_salt)


def test_an_iam_callers_principals_tag_decides_what_every_door_answers(handler, lambda_context):
    query, kb = handler
    doors = {
        "query": ("POST", "/query", {"query": QUESTION, "k": 10, "mode": "dense"}),
        "kb_retrieve": ("POST", f"/knowledgebases/{kb}/retrieve", {
            "retrievalQuery": {"text": QUESTION},
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 10,
                                                                     "overrideSearchType": "SEMANTIC"}}}),
        "mcp_retrieve": ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "retrieve", "arguments": {"query": QUESTION, "k": 10, "mode": "dense"}}}),
    }
    for name, (method, path, body) in doors.items():
        def ask(role):
            ev = http_event(method, path, body, iam_caller(role))
            if path.startswith("/knowledgebases/"):
                ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /knowledgebases/{knowledgeBaseId}/retrieve"
            if path == "/mcp":
                ev["headers"] = {**ev["headers"], "accept": "application/json, text/event-stream"}
            status, _, raw = call(query.handler, ev, lambda_context)
            return status, raw
        status, raw = ask("finance-reader")
        assert status == 200 and "canteen" in raw, (name, raw[:300])
        assert not any(w in raw for w in SECRET_WORDS), (name, raw[:300])
        status, raw = ask("board-reader")
        assert status == 200 and "Quillorn" in raw, (name, raw[:300])
        status, raw = ask("reader")  # the sample's role: under the path, without the tag
        assert status == 403 and "eragraph-principals" in json.loads(raw).get("message", raw), (name, raw[:300])
        assert "canteen" not in raw and not any(w in raw for w in SECRET_WORDS)
