"""OpenAICompatGenerator.stream against a stand-in OpenAI-compatible server on 127.0.0.1 that
answers ``stream: true`` with server-sent events, one chunk at a time: the test holds the last
chunk back until the client has already yielded the first piece."""

from __future__ import annotations

import pytest

from eragraph.ports.records import Answer
from eragraph.providers.openai_compat import OpenAICompatGenerator
from eragraph.providers.prompts import ModelCallError
from eragraph.services.generation import stream_answer
from sse_support import SSEServer, delta

EVIDENCE = [("chk-aaa111", "Marie Curie won two Nobel prizes."), ("sum-bbb222", "Curie worked in Paris.")]


@pytest.fixture
def serve():
    servers: list[SSEServer] = []

    def make(*args, **kwargs) -> SSEServer:
        servers.append(SSEServer(*args, **kwargs))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def test_first_piece_arrives_before_the_server_sends_the_last(serve):
    events = [delta("Marie Curie "), ": keep-alive comment", delta("won two prizes "), delta("[chk-aaa111]."),
              {"id": "c1", "choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 7}}, "data: [DONE]"]
    srv = serve(events, hold_before=3)
    gen = OpenAICompatGenerator(srv.base_url, "m1", "sk-test", max_tokens=200)
    items = gen.stream("Who won?", EVIDENCE)
    assert next(items) == "Marie Curie "
    assert srv.sent < len(events)  # the last chunks are still held by the server
    srv.release.set()
    rest = list(items)
    assert rest[:2] == ["won two prizes ", "[chk-aaa111]."]
    final = rest[-1]
    assert isinstance(final, Answer) and len(rest) == 3
    assert final.text == "Marie Curie won two prizes [chk-aaa111]." and final.cited_ids == ("chk-aaa111",)
    assert (final.tokens_in, final.tokens_out) == (90, 7)
    body = srv.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 200 and srv.requests[0]["headers"]["Authorization"] == "Bearer sk-test"


def test_without_a_usage_chunk_tokens_are_counted(serve):
    srv = serve([delta("one two three"), "data: [DONE]"])
    out = list(stream_answer(OpenAICompatGenerator(srv.base_url, "m1"), "q?", EVIDENCE))
    assert out[0] == "one two three" and out[-1].tokens_out == 3 and out[-1].tokens_in > 0


def test_error_chunk_is_a_model_call_error_in_words(serve):
    srv = serve([delta("par"), {"error": {"message": "context length exceeded"}}])
    items = OpenAICompatGenerator(srv.base_url, "m1").stream("q?", EVIDENCE)
    assert next(items) == "par"
    with pytest.raises(ModelCallError, match="streamed an error.*context length exceeded"):
        list(items)


def test_http_400_is_not_retried(serve):
    srv = serve([], status=400)
    with pytest.raises(ModelCallError, match="HTTP 400"):
        list(OpenAICompatGenerator(srv.base_url, "m1").stream("q?", EVIDENCE))
    assert len(srv.requests) == 1


def test_cli_query_stream_prints_the_pieces_then_the_evidence(serve, monkeypatch, tmp_path, capsys):
    from eragraph.cli.app import main

    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    (docs / "a.txt").write_text("The Danube flows through Vienna and Budapest to the Black Sea.", encoding="utf-8")
    assert main(["ingest", str(docs), "--store", str(store), "--quiet"]) == 0
    capsys.readouterr()
    srv = serve([delta("The Danube "), delta("reaches the Black Sea."), "data: [DONE]"])
    monkeypatch.setenv("ERAGRAPH_OPENAI_BASE_URL", srv.base_url)
    monkeypatch.setenv("ERAGRAPH_OPENAI_MODEL", "m1")
    code = main(["query", "Where does the Danube go?", "--store", str(store), "--generator", "openai",
                 "--stream", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("answer: The Danube reaches the Black Sea.\n\n1. [")
    assert out.count("The Danube reaches") == 1 and srv.requests[0]["body"]["stream"] is True
    assert main(["query", "x", "--store", str(store), "--stream", "--json"]) == 2  # usage error, in words
    assert "--stream" in capsys.readouterr().err
