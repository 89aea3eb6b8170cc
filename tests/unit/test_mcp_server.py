"""eragraph.entrypoints.mcp through the MCP SDK's client, in process: the answer tool exists only with
a generator and answers from the retrieved evidence; a server without a bound tenant answers a
request that carries none with a tool error; a failure inside a tool is a tool error, and the
server goes on answering."""

from __future__ import annotations

import json

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from eragraph.entrypoints.mcp import build_server  # noqa: E402
from eragraph.ports.records import Answer  # noqa: E402
from eragraph.services.ingest import ingest  # noqa: E402
from support import make_engine, synthetic_docs  # noqa: E402


class CitingGenerator:
    """Answers with the first evidence text and cites every evidence id it was given."""

    identity = "test:citing"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list]] = []

    def answer(self, question, evidence):
        self.calls.append((question, list(evidence)))
        return Answer(text=f"From {evidence[0][0]}: {evidence[0][1][:40]}", cited_ids=tuple(i for i, _ in evidence),
                      tokens_in=11, tokens_out=7, model="test:citing")


@pytest.fixture
def engine():
    engine = make_engine()
    ingest(engine, synthetic_docs(8, seed=3))
    return engine


def text(result) -> str:
    return "".join(c.text for c in result.content)


def test_answer_is_listed_and_answers_only_with_a_generator(engine):
    async def without():
        async with Client(build_server(lambda _t: engine, tenant="")) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["retrieve", "get_document", "stats"]
            result = await client.call_tool("answer", {"query": "bond yield"})
            assert result.is_error and "no generator is configured" in text(result)

    anyio.run(without)
    generator = engine.generator = CitingGenerator()

    async def with_generator():
        async with Client(build_server(lambda _t: engine, tenant="")) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert list(tools) == ["retrieve", "answer", "get_document", "stats"]
            assert tools["answer"].input_schema == tools["retrieve"].input_schema
            result = await client.call_tool("answer", {"query": "bond yield", "k": 3, "mode": "dense"})
            assert not result.is_error, text(result)
            body = json.loads(text(result))
            ids = [r["id"] for r in body["results"]]
            assert len(ids) == 3 and body["cited_ids"] == ids and body["answer"].startswith(f"From {ids[0]}:")
            assert generator.calls == [("bond yield", [(r["id"], r["text"]) for r in body["results"]])]
            assert body["usage"]["total"]["tokens_out"] >= 7  # the generation is priced, as POST /query's
            retrieved = json.loads(text(await client.call_tool("retrieve", {"query": "bond yield", "k": 3,
                                                                            "mode": "dense"})))
            assert retrieved["answer"] is None and [r["id"] for r in retrieved["results"]] == ids
            assert len(generator.calls) == 1

    anyio.run(with_generator)


def test_a_request_without_a_tenant_gets_nothing(engine):
    asked = []

    def get_engine(tenant):
        asked.append(tenant)
        return engine

    async def converse():
        async with Client(build_server(get_engine)) as client:  # HTTP-style: the tenant comes with the request
            result = await client.call_tool("retrieve", {"query": "bond"})
            assert result.is_error and "carries no tenant" in text(result)

    anyio.run(converse)
    assert asked == []


def test_a_failure_inside_a_tool_is_a_tool_error(engine):
    class Broken:
        def __getattr__(self, name):
            raise OSError("disk on fire at /secret/path")

    calls = []

    def get_engine(tenant):
        calls.append(tenant)
        if len(calls) == 1:
            broken = make_engine()
            broken.graph = Broken()
            return broken
        return engine

    async def converse():
        async with Client(build_server(get_engine, tenant="")) as client:
            result = await client.call_tool("stats", {})
            assert result.is_error and "the tool stats failed on the server (OSError)" in text(result)
            assert "/secret/path" not in text(result)
            result = await client.call_tool("stats", {})
            assert not result.is_error and result.structured_content["documents"] == 8

    anyio.run(converse)


def test_retrieve_reranks_when_asked_and_says_why_not_without_a_reranker(engine):
    class Reversed:
        identity = model = "test:reversed"

        def score(self, query, texts):
            return [float(i) for i in range(len(texts))]

    async def converse():
        async with Client(build_server(lambda _t: engine, tenant="")) as client:
            result = await client.call_tool("retrieve", {"query": "bond yield", "rerank": True})
            assert result.is_error and "no reranker is configured" in text(result)
            engine.reranker = Reversed()
            plain = json.loads(text(await client.call_tool("retrieve", {"query": "bond yield", "k": 8,
                                                                        "mode": "dense"})))
            body = json.loads(text(await client.call_tool("retrieve", {"query": "bond yield", "k": 2, "mode": "dense",
                                                                       "rerank": True})))
            n = body["rerank"]["candidates"]
            assert body["rerank"]["model"] == "test:reversed" and n > 2
            assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"][:n]][::-1][:2]

    try:
        anyio.run(converse)
    finally:
        engine.reranker = None
