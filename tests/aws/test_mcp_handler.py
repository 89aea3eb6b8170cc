"""The MCP endpoint of the query function (POST /mcp, stateless streamable HTTP with JSON
responses) driven by the MCP SDK's own client: its HTTP requests become API Gateway HTTP API
(payload v2) events, built from the real sample event with the caller's authorizer context, and
go to the Lambda handler (moto + the OpenSearch fake). The tenant is the caller's identity's, as
on every route: a caller of tenant a never sees b's documents through any tool, and a caller
without a valid tenant gets the API's 403."""

from __future__ import annotations

import base64
import json

import anyio
import pytest

pytest.importorskip("mcp")

from aws_helpers import load_handler  # noqa: E402
from mcp_support import LambdaTransport, lambda_client  # noqa: E402
from test_tenants_api import A_SOURCE, A_WORDS, B_SOURCE, B_WORDS, call, http_event, jwt  # noqa: E402
from test_tenants_api import tenant_env, two_tenants  # noqa: E402,F401  (fixtures)


def transport(handler, context, authorizer) -> LambdaTransport:
    return LambdaTransport(lambda ev: handler(ev, context), authorizer)


def client(t: LambdaTransport, **options):
    return lambda_client(t, **options)


def text(result) -> str:
    return "".join(c.text for c in result.content)


def results_of(result) -> str:
    return json.dumps(json.loads(text(result))["results"])  # not the echo of the question


def test_initialize_list_and_retrieve_through_the_handler(two_tenants, lambda_context):
    query = load_handler("query")
    seen = transport(query.handler, lambda_context, jwt("a"))

    async def converse():
        async with client(seen, mode="legacy") as mcp:  # initialize, tools/list, tools/call
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            assert set(tools) == {"retrieve", "get_document", "stats"}
            assert "bm25" in tools["retrieve"].input_schema["properties"]["mode"]["enum"]
            result = await mcp.call_tool("retrieve", {"query": "Which telescope observed the comet?", "k": 3})
            assert not result.is_error, text(result)
            assert any(w in results_of(result) for w in A_WORDS)
            result = await mcp.call_tool("retrieve", {"query": "comet", "mode": "warp"})
            assert result.is_error and "unknown mode 'warp'" in text(result)

    anyio.run(converse)
    methods = [json.loads(base64.b64decode(e["body"])).get("method") for e in seen.events]
    assert methods[:2] == ["initialize", "notifications/initialized"] and "tools/list" in methods
    assert "tools/call" in methods
    assert {e["rawPath"] for e in seen.events} == {"/mcp"}
    assert set(seen.statuses) <= {200, 202}


def test_a_tenants_caller_sees_only_its_tenant_through_every_tool(two_tenants, lambda_context):
    query = load_handler("query")
    a_id, b_id = two_tenants["a_doc"].doc_id, two_tenants["b_doc"].doc_id

    async def as_a():
        async with client(transport(query.handler, lambda_context, jwt("a"))) as mcp:
            for question in ("Which lighthouse guided the freighter Marrowind?", "Which telescope observed the comet?"):
                for mode in ("collapsed", "bm25", "hybrid", "dense"):
                    result = await mcp.call_tool("retrieve", {"query": question, "mode": mode, "k": 5})
                    assert not result.is_error, (mode, text(result))
                    shown = results_of(result)
                    assert not any(w in shown for w in B_WORDS + (B_SOURCE,)), (question, mode)
            other = {"equals": {"key": "tenant", "value": "b"}}
            result = await mcp.call_tool("retrieve", {"query": "lighthouse freighter", "filter": other})
            assert not result.is_error and json.loads(text(result))["results"] == []
            result = await mcp.call_tool("get_document", {"doc_id": b_id})
            assert result.is_error and not any(w in text(result) for w in B_WORDS + (B_SOURCE, "Harbor"))
            own = await mcp.call_tool("get_document", {"doc_id": a_id})
            stats = await mcp.call_tool("stats", {})
            return own.structured_content, stats.structured_content

    own, stats = anyio.run(as_a)
    # the same JSON as the API's routes for the same caller
    status, body, _ = call(query.handler, http_event("GET", f"/documents/{a_id}", authorizer=jwt("a")), lambda_context)
    assert status == 200 and own == body and own["source"] == A_SOURCE
    status, body, _ = call(query.handler, http_event("GET", "/stats", authorizer=jwt("a")), lambda_context)
    assert status == 200 and stats == body and stats["documents"] == 1

    async def as_b():
        async with client(transport(query.handler, lambda_context, jwt("b"))) as mcp:
            result = await mcp.call_tool("retrieve", {"query": "Which telescope observed the comet?"})
            assert not any(w in results_of(result) for w in A_WORDS + (A_SOURCE,))
            assert (await mcp.call_tool("get_document", {"doc_id": b_id})).structured_content["source"] == B_SOURCE
            assert (await mcp.call_tool("get_document", {"doc_id": a_id})).is_error

    anyio.run(as_b)


def test_a_caller_without_a_valid_tenant_is_refused_before_mcp(two_tenants, lambda_context):
    query = load_handler("query")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "t", "version": "1"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "retrieve", "arguments": {"query": "lighthouse freighter"}}}
    for claim in ("B", "../b", "b!"):
        for message in (initialize, listing):
            ev = http_event("POST", "/mcp", message, jwt(claim))
            ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /mcp"
            ev["headers"]["accept"] = "application/json, text/event-stream"
            status, body, raw = call(query.handler, ev, lambda_context)
            assert status == 403, (claim, body)
            assert not any(w in raw for w in A_WORDS + B_WORDS)
    # a valid caller's raw request answers JSON-RPC, as the client expects
    ev = http_event("POST", "/mcp", initialize, jwt("a"))
    ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /mcp"
    ev["headers"]["accept"] = "application/json, text/event-stream"
    status, body, _ = call(query.handler, ev, lambda_context)
    assert status == 200 and body["id"] == 1 and body["result"]["serverInfo"]["name"] == "eragraph"


def test_malformed_mcp_requests_are_4xx_in_words(two_tenants, lambda_context):
    query = load_handler("query")
    cases = [(b"{not json", "application/json", 400, "Parse error"),
             (b"", "application/json", 400, "Parse error"),
             (b"[1, 2]", "application/json", 400, "Validation error"),
             (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', "text/plain", 415, "application/json")]
    for body, content_type, status, words in cases:
        ev = http_event("POST", "/mcp", None, jwt("a"))
        ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /mcp"
        ev["headers"].update({"content-type": content_type, "accept": "application/json, text/event-stream"})
        if body:
            ev["body"] = body.decode()
        out = query.handler(ev, lambda_context)  # the SDK answers a bad content-type in plain text
        got, raw = out["statusCode"], out.get("body") or ""
        assert got == status and words in raw, (body, got, raw)
    # a JSON-RPC error for an unknown method, a tool error for a bad call: both 200, as MCP has them
    ev = http_event("POST", "/mcp", {"jsonrpc": "2.0", "id": 7, "method": "resources/nothing"}, jwt("a"))
    ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /mcp"
    ev["headers"]["accept"] = "application/json, text/event-stream"
    got, body, _ = call(query.handler, ev, lambda_context)
    assert got == 200 and body["id"] == 7 and body["error"]["code"] == -32601


def test_a_lone_surrogate_in_tool_arguments_is_a_tool_error_not_a_protocol_error(two_tenants, lambda_context):
    """docs/mcp.md: a bad call is a tool error in words; JSON's "\\ud800" is valid JSON but no
    Unicode text (the SDK's parser refuses it as a parse error of the whole body)."""
    query = load_handler("query")

    def post(raw: str):
        ev = http_event("POST", "/mcp", None, jwt("a"))
        ev["routeKey"] = ev["requestContext"]["routeKey"] = "POST /mcp"
        ev["headers"].update({"content-type": "application/json", "accept": "application/json, text/event-stream"})
        ev["body"] = raw
        out = query.handler(ev, lambda_context)
        return out["statusCode"], json.loads(out["body"])

    for args, where in [('{"query": "a\\ud800b"}', "arguments.query"),
                        ('{"query": "ok", "filter": {"equals": {"key": "y", "value": "\\udc00"}}}',
                         "arguments.filter.equals.value"),
                        ('{"query": "ok", "filter": {"\\ud83d": 1}}', "arguments.filter (a key)")]:
        status, body = post('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", '
                            f'"params": {{"name": "retrieve", "arguments": {args}}}}}')
        assert status == 200 and body["id"] == 5 and "error" not in body, body
        assert body["result"]["isError"] is True
        words = body["result"]["content"][0]["text"]
        assert words.startswith(f"{where} is not valid Unicode") and "lone surrogate" in words
    # a surrogate pair is text: the call runs
    status, body = post('{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "retrieve", '
                        '"arguments": {"query": "harbour \\ud83d\\ude00"}}}')
    assert status == 200 and body["result"].get("isError") is not True, body
    # outside the arguments it stays the protocol's parse error, in words
    status, body = post('{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}')
    assert status == 400 and body["error"]["message"].startswith("Parse error")
