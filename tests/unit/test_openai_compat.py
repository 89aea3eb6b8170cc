"""OpenAI-compatible providers against a real HTTP server on 127.0.0.1 that checks path,
headers and body and returns canned completions; plus the shared prompt helpers."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eragraph.ports.providers import Generator, Summarizer
from eragraph.providers.hashing import RegexTokenizer
from eragraph.providers.openai_compat import OpenAICompatGenerator, OpenAICompatSummarizer
from eragraph.providers.prompts import (ANSWER_SYSTEM, SUMMARY_SYSTEM, ModelCallError, answer_prompt,
                                        clip_to_tokens, parse_citations, summary_max_output, summary_prompt)


class FakeChatServer:
    """Replies are (status, body dict, headers, delay), served in order; a delay is seconds, or an
    Event the reply waits for."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict, dict, float]] = []
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(self.rfile.read(length))})
                status, body, headers, delay = outer.replies.pop(0)
                if isinstance(delay, threading.Event):
                    delay.wait(60)
                elif delay:
                    time.sleep(delay)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    def reply(self, status: int, body: dict, headers: dict | None = None,
              delay: float | threading.Event = 0.0) -> None:
        self.replies.append((status, body, headers or {}, delay))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = FakeChatServer()
    yield srv
    srv.close()


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def completion(text: str, usage: dict | None = None) -> dict:
    body = {"id": "cmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    if usage is not None:
        body["usage"] = usage
    return body


def test_summarizer_request_shape_auth_and_usage(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    summ = OpenAICompatSummarizer(server.base_url + "/", "qwen-small", api_key="sk-test", tokenizer=RegexTokenizer())
    assert isinstance(summ, Summarizer) and summ.identity == "openai:qwen-small"
    server.reply(200, completion("Bees pollinate flowers and make honey.",
                                 {"prompt_tokens": 81, "completion_tokens": 9, "total_tokens": 90}))
    texts = ["Bees pollinate flowers.", "Bees make honey."]
    result = summ.summarize(texts, 40)
    assert result.text == "Bees pollinate flowers and make honey."
    assert (result.tokens_in, result.tokens_out) == (81, 9)
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    assert req["body"] == {"model": "qwen-small",
                           "messages": [{"role": "system", "content": SUMMARY_SYSTEM},
                                        {"role": "user", "content": summary_prompt(texts, 40)}],
                           "max_tokens": summary_max_output(40), "temperature": 0}


def test_key_from_env_and_no_key_means_no_header(server, monkeypatch):
    """The key comes from OPENAI_API_KEY (config.ProcessSettings) through bootstrap, which hands
    it to the provider; the provider itself reads no environment."""
    from eragraph.bootstrap.providers import make_generator
    from eragraph.config import Settings

    settings = Settings(generator="openai", openai_base_url=server.base_url, openai_model="m")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.reply(200, completion("ok [e1]", {"prompt_tokens": 5, "completion_tokens": 2}))
    make_generator(settings).answer("q?", [("e1", "evidence")])
    assert server.requests[-1]["headers"]["Authorization"] == "Bearer sk-from-env"
    server.reply(200, completion("ok [e1]", {"prompt_tokens": 5, "completion_tokens": 2}))
    OpenAICompatGenerator(server.base_url, "m").answer("q?", [("e1", "evidence")])  # no key given: none sent
    assert "Authorization" not in server.requests[-1]["headers"]

    monkeypatch.delenv("OPENAI_API_KEY")
    server.reply(200, completion("ok", {"prompt_tokens": 5, "completion_tokens": 1}))
    make_generator(settings).answer("q?", [("e1", "evidence")])
    assert "Authorization" not in server.requests[-1]["headers"]


def test_generator_retries_429_then_parses_citations(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sleeps = Sleeps()
    gen = OpenAICompatGenerator(server.base_url, "m", max_tokens=256, max_attempts=3, sleep=sleeps)
    assert isinstance(gen, Generator)
    evidence = [("chk-1a2b", "The Rhine flows through Basel."), ("sum-9f8e", "Basel is a Swiss city.")]
    server.reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.25"})
    server.reply(200, completion("The Rhine flows through Basel [chk-1a2b], a Swiss city [sum-9f8e][chk-bogus].",
                                 {"prompt_tokens": 70, "completion_tokens": 20}))
    ans = gen.answer("Which river flows through Basel?", evidence)
    assert ans.cited_ids == ("chk-1a2b", "sum-9f8e")
    assert (ans.tokens_in, ans.tokens_out, ans.model) == (70, 20, "openai:m")
    assert sleeps == [0.25]  # Retry-After honoured
    assert len(server.requests) == 2
    assert server.requests[0]["body"] == server.requests[1]["body"]
    assert server.requests[1]["body"]["messages"] == [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": answer_prompt("Which river flows through Basel?", evidence)}]
    assert server.requests[1]["body"]["max_tokens"] == 256


def test_usage_falls_back_to_tokenizer_counts(server):
    tok = RegexTokenizer()
    summ = OpenAICompatSummarizer(server.base_url, "m", api_key="k", tokenizer=tok)
    server.reply(200, completion("Short summary."))  # no usage block
    result = summ.summarize(["Some passage text."], 30)
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    assert result.tokens_in == tok.count(SUMMARY_SYSTEM) + tok.count(prompt)
    assert result.tokens_out == tok.count("Short summary.") == 3


def test_gives_up_after_max_attempts_on_5xx(server):
    sleeps = Sleeps()
    gen = OpenAICompatGenerator(server.base_url, "m", api_key="k", max_attempts=3, base_delay=0.5, sleep=sleeps)
    for _ in range(3):
        server.reply(503, {"error": "overloaded"})
    with pytest.raises(ModelCallError, match=r"after 3 attempts.*HTTP 503"):
        gen.answer("q", [("a", "b")])
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0


def test_client_error_is_not_retried(server):
    sleeps = Sleeps()
    gen = OpenAICompatGenerator(server.base_url, "m", api_key="bad", sleep=sleeps)
    server.reply(401, {"error": {"message": "invalid api key"}})
    with pytest.raises(ModelCallError, match="HTTP 401.*invalid api key"):
        gen.answer("q", [("a", "b")])
    assert len(server.requests) == 1 and sleeps == []


def test_timeout_is_retried(server):
    sleeps = Sleeps()
    # the first reply is held until the test ends, so its timeout fires however slow the machine;
    # the limit is generous, so the second (answered at once) meets it however slow the machine
    held = threading.Event()
    gen = OpenAICompatGenerator(server.base_url, "m", api_key="k", timeout=2.0, max_attempts=2, sleep=sleeps)
    server.reply(200, completion("late"), delay=held)
    server.reply(200, completion("on time [a]", {"prompt_tokens": 3, "completion_tokens": 3}))
    try:
        ans = gen.answer("q", [("a", "b")])
    finally:
        held.set()
    assert ans.text == "on time [a]" and ans.cited_ids == ("a",)
    assert len(sleeps) == 1


def test_empty_inputs_make_no_request(server):
    summ = OpenAICompatSummarizer(server.base_url, "m", api_key="k")
    gen = OpenAICompatGenerator(server.base_url, "m", api_key="k")
    assert summ.summarize([" "], 20).text == ""
    assert gen.answer("q", []).cited_ids == ()
    assert server.requests == []


def test_constructor_validates():
    with pytest.raises(ValueError):
        OpenAICompatGenerator("", "m")
    with pytest.raises(ValueError):
        OpenAICompatSummarizer("http://127.0.0.1:9/v1", "")


# ---------------------------------------------------------------- shared prompt helpers

def test_parse_citations_forms():
    ids = ["chk-a1", "sum-b2", "chk-c3"]
    assert parse_citations("x [chk-a1] y [sum-b2; chk-a1] z [chk-c3,sum-b2]", ids) == ("chk-a1", "sum-b2", "chk-c3")
    assert parse_citations("see [2] and [Evidence 3] and [7]", ids) == ("sum-b2", "chk-c3")
    assert parse_citations("no citations, chk-a1 unbracketed", ids) == ()
    assert parse_citations("[chk-zz] [note] [chk-a1.]", ids) == ("chk-a1",)


def test_clip_to_tokens():
    tok = RegexTokenizer()
    text = "One two three. Four five six seven. Eight nine ten eleven twelve."
    assert clip_to_tokens(text, tok, 100) == text
    assert clip_to_tokens(text, tok, 9) == "One two three. Four five six seven."
    assert clip_to_tokens("alpha beta gamma delta epsilon", tok, 3) == "alpha beta gamma"
    assert tok.count(clip_to_tokens(text, tok, 2)) == 2


def test_revise_sends_previous_summary_new_and_gone_passages(server):
    from eragraph.ports.providers import RevisingSummarizer

    summ = OpenAICompatSummarizer(server.base_url, "qwen-small", api_key="k", tokenizer=RegexTokenizer())
    assert isinstance(summ, RevisingSummarizer)
    server.reply(200, completion("Bees make honey and wax.", {"prompt_tokens": 50, "completion_tokens": 6}))
    result = summ.revise("Bees pollinate flowers. Bees make honey.", ["Bees make wax."],
                         ["Bees pollinate flowers."], 40)
    assert (result.text, result.tokens_in, result.tokens_out) == ("Bees make honey and wax.", 50, 6)
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    assert "SUMMARY: Bees pollinate flowers. Bees make honey." in prompt
    assert "[NEW 1] Bees make wax." in prompt and "[GONE 1] Bees pollinate flowers." in prompt
