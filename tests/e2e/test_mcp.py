"""The MCP server through the MCP SDK's own client: `eragraph mcp` over stdio (a real
subprocess of the CLI, hash embedder) and `eragraph serve`'s /mcp over streamable HTTP. The tools
answer what the HTTP API answers on the same store (get_document is GET /documents/{id}'s JSON,
stats GET /stats's), every bad call is a tool error in words, and a server bound to a tenant
shows nothing of another tenant's."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

import anyio
import pytest
from serve_support import eragraph, environment, get, serving

pytest.importorskip("mcp")
pytest.importorskip("aws_lambda_powertools")

from mcp import Client, StdioServerParameters  # noqa: E402

from eragraph.services.modes import MODES  # noqa: E402

COMET = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
         "The telescope is called Starglass and the comet is named Vellichor. ") * 3
HARBOR = ("Harbor pilots guided the freighter past the rocky lighthouse at dawn. "
          "The lighthouse is called Quillorn and the freighter is named Marrowind. ") * 3
FILLER = ["Bread bakers knead dough before dawn and bake loaves in stone ovens. " * 3,
          "Gardeners prune roses in late winter and mulch the beds in spring. " * 3,
          "Cyclists climb the mountain pass and descend to the valley town. " * 3]
B_WORDS = ("Quillorn", "Marrowind", "harbor.txt")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store whose default tenant holds the comet and filler documents, and tenant t-b the
    harbor one (ingested by the CLI)."""
    root = tmp_path_factory.mktemp("mcp")
    for name, text in [("comet.txt", COMET), *[(f"filler{i}.txt", t) for i, t in enumerate(FILLER)]]:
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / name).write_text(text)
    (root / "b").mkdir()
    (root / "b" / "harbor.txt").write_text(HARBOR)
    out = eragraph("ingest", "--store", str(root / "kb"), "--quiet", str(root / "docs"))
    assert out.returncode == 0, out.stderr
    out = eragraph("ingest", "--store", str(root / "kb"), "--tenant", "t-b", "--quiet", str(root / "b"))
    assert out.returncode == 0, out.stderr
    return root / "kb"


def stdio(store, *extra: str) -> Client:
    return Client(StdioServerParameters(command=sys.executable, args=["-m", "eragraph", "mcp", "--store",
                                                                      str(store), *extra], env=environment()))


def run(fn):
    return anyio.run(fn)


def text(result) -> str:
    return "".join(c.text for c in result.content)


async def _tool_checks(client: Client, served_url: str) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"retrieve", "get_document", "stats"}  # no generator: no answer tool
    retrieve = tools["retrieve"]
    modes = retrieve.input_schema["properties"]["mode"]["enum"]
    assert "collapsed" in modes and "bm25" in modes
    for mode in modes:  # the description says what each mode is for
        assert f"{mode}: {MODES[mode].purpose}" in retrieve.description
    result = await client.call_tool("retrieve", {"query": "Which telescope follows the comet?", "k": 3})
    assert not result.is_error, text(result)
    body = json.loads(text(result))
    assert result.structured_content == body
    assert 1 <= len(body["results"]) <= 3 and "Starglass" in body["results"][0]["text"]
    assert not any(w in text(result) for w in B_WORDS)
    doc_id = next(r["doc_id"] for r in body["results"] if r["layer"] == 0)
    # the same JSON as the HTTP API on the same store
    result = await client.call_tool("get_document", {"doc_id": doc_id})
    status, route = get(served_url, f"/documents/{doc_id}")
    assert status == 200 and not result.is_error and result.structured_content == route
    assert route["source"].endswith("comet.txt") and "status" in route
    result = await client.call_tool("stats", {})
    status, route = get(served_url, "/stats")
    assert status == 200 and result.structured_content == route and route["documents"] == 4
    result = await client.call_tool("retrieve", {"query": "lighthouse", "mode": "bm25",
                                                 "filter": {"startsWith": {"key": "source", "value": "/nowhere"}}})
    assert not result.is_error and json.loads(text(result))["results"] == []


BAD_CALLS = [
    ("retrieve", {"query": "comet", "mode": "warp"}, "unknown mode 'warp'; choose one of collapsed"),
    ("retrieve", {"query": "comet", "k": 1000}, "k must be at most 100 (got 1000)"),
    ("retrieve", {"query": "comet", "k": "5"}, "k must be an integer"),
    ("retrieve", {"query": ""}, "query must not be empty"),
    ("retrieve", {"k": 3}, "query is required"),
    ("retrieve", {"query": "comet", "filter": {"near": {"key": "a", "value": 1}}}, "unknown operator 'near'"),
    ("retrieve", {"query": "comet", "top": 3}, "top is not a known field"),
    ("get_document", {"doc_id": "no-such-doc"}, "no document 'no-such-doc'"),
    ("answer", {"query": "comet"}, "no generator is configured"),
    ("delete_everything", {}, "unknown tool 'delete_everything'"),
]


async def _bad_calls(client: Client) -> None:
    for name, args, words in BAD_CALLS:
        result = await client.call_tool(name, args)
        assert result.is_error, (name, args)
        assert words in text(result), (name, args, text(result))
    # and the server still answers
    assert not (await client.call_tool("stats", {})).is_error


def test_stdio_tools_answer_as_the_http_api(store):
    with serving(store) as url:
        async def converse():
            async with stdio(store) as client:
                await _tool_checks(client, url)
                await _bad_calls(client)
        run(converse)


def test_stdio_is_bound_to_its_tenant(store):
    async def converse():
        async with stdio(store, "--tenant", "t-b") as client:
            result = await client.call_tool("retrieve", {"query": "Which telescope follows the comet?", "k": 5})
            assert not result.is_error
            body = json.loads(text(result))
            assert body["results"] and all(r["source"].endswith("harbor.txt") for r in body["results"])
            assert "Starglass" not in text(result)
            stats = await client.call_tool("stats", {})
            assert stats.structured_content["documents"] == 1
            return body["results"][0]["doc_id"]

    b_doc = run(converse)

    async def default_tenant():
        async with stdio(store) as client:
            result = await client.call_tool("retrieve", {"query": "Which lighthouse guided the freighter Marrowind?"})
            shown = json.dumps(json.loads(text(result))["results"])  # the question is echoed in "query"
            assert not result.is_error and shown != "[]" and not any(w in shown for w in B_WORDS)
            result = await client.call_tool("get_document", {"doc_id": b_doc})
            assert result.is_error and not any(w in text(result) for w in B_WORDS)

    run(default_tenant)


def test_streamable_http_on_serve(store):
    with serving(store) as url:
        async def converse():
            async with Client(url + "/mcp") as client:  # the SDK's streamable-HTTP client
                await _tool_checks(client, url)
                await _bad_calls(client)
            async with Client(url + "/mcp", mode="legacy") as client:  # initialize handshake
                result = await client.call_tool("retrieve", {"query": "comet telescope", "k": 2})
                assert not result.is_error and len(json.loads(text(result))["results"]) == 2
        run(converse)
        # bound to loopback, /mcp answers loopback Host and Origin headers only (no DNS rebinding)
        initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
        for headers, ok in (({}, True), ({"Host": "evil.example"}, False), ({"Origin": "http://evil.example"}, False),
                            ({"Origin": url}, True)):
            request = urllib.request.Request(url + "/mcp", data=initialize, method="POST", headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    status, body = response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                status, body = exc.code, None
            assert (status == 200 and body["result"]["serverInfo"]["name"] == "eragraph") == ok, (headers, status)
        for method in ("GET", "DELETE"):  # stateless: no GET stream, no session to delete
            try:
                urllib.request.urlopen(urllib.request.Request(url + "/mcp", method=method), timeout=30)
                raise AssertionError(f"{method} /mcp answered 2xx")
            except urllib.error.HTTPError as exc:
                assert exc.code == 405 and exc.headers["allow"] == "POST", method
    with serving(store, "--tenant", "t-b") as url:  # the served tenant only
        async def tenant_b():
            async with Client(url + "/mcp") as client:
                result = await client.call_tool("retrieve", {"query": "Which telescope follows the comet?"})
                assert not result.is_error and "Starglass" not in text(result)
                assert all(r["source"].endswith("harbor.txt") for r in json.loads(text(result))["results"])
        run(tenant_b)


def test_stdio_with_the_sdks_default_environment_opens_a_store_with_its_own_embedder(store):
    """An MCP client's bare config: no ERAGRAPH_* variable reaches the server (the SDK passes
    only a safe subset of the environment), and the store, built with the hash embedder (not the
    default MiniLM), opens with the providers it recorded. The server runs from the package's
    folder so `python -m eragraph` imports this source."""
    from serve_support import ROOT

    params = StdioServerParameters(command=sys.executable, args=["-m", "eragraph", "mcp", "--store", str(store)],
                                   cwd=str(ROOT / "shared"))
    assert params.env is None

    async def check():
        async with Client(params) as client:
            result = await client.call_tool("retrieve", {"query": "Which telescope follows the comet?", "k": 2})
            assert not result.is_error, text(result)
            assert "Starglass" in json.loads(text(result))["results"][0]["text"]
            stats = (await client.call_tool("stats", {})).structured_content
            assert stats["documents"] == 4

    run(check)
