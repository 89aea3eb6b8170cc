"""The console proxy's pieces that need no cloud (eragraph.entrypoints.console): the API URL and
its region, the headers that go out and come back, the NDJSON of a streamed answer made from a
whole one, and the upstream connection (stage path, Host, a kept-alive connection the API closed)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eragraph.entrypoints.console.proxy import forwarded_headers, returned_headers, stream_lines
from eragraph.entrypoints.console.upstream import Bearer, Unreachable, Upstream, check_url, region_of


def test_the_region_is_read_from_an_execute_api_host_only():
    assert region_of("https://abc123.execute-api.eu-west-3.amazonaws.com") == "eu-west-3"
    assert region_of("https://abc123.execute-api.cn-north-1.amazonaws.com.cn/prod") == "cn-north-1"
    assert region_of("https://api.example.com") is None
    assert region_of("https://execute-api.us-east-1.amazonaws.com.evil.example") is None


@pytest.mark.parametrize("url,words", [("ftp://x.example.com", "not an http(s) URL"), ("https://", "not an http(s)"),
                                       ("http://api.example.com", "use https"),
                                       ("https://x.example.com/?stage=1", "no query")])
def test_a_bad_api_url_is_refused_in_words(url, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        check_url(url)


def test_loopback_may_be_plain_http_and_a_trailing_slash_goes():
    assert check_url("http://127.0.0.1:9000/") == "http://127.0.0.1:9000"
    assert check_url(" https://abc.execute-api.us-east-1.amazonaws.com/prod/ ") == \
        "https://abc.execute-api.us-east-1.amazonaws.com/prod"


def test_only_content_negotiation_goes_out_and_hop_by_hop_and_cookies_do_not_come_back():
    browser = {"content-type": "application/json", "accept": "*/*", "authorization": "Bearer local",
               "x-eragraph-tenant": "b", "cookie": "a=b", "origin": "http://127.0.0.1:8766", "host": "127.0.0.1:8766",
               "x-amz-security-token": "t", "x-amzn-request-context": "{}"}
    assert forwarded_headers(browser) == {"content-type": "application/json", "accept": "*/*"}
    back = returned_headers([("Content-Type", "application/json"), ("Retry-After", "3"), ("Set-Cookie", "s=1"),
                             ("Connection", "keep-alive"), ("Content-Length", "12"), ("Vary", "a"), ("Vary", "b")])
    assert back == {"content-type": "application/json", "retry-after": "3", "vary": "a, b"}


def test_a_whole_answer_becomes_results_one_piece_and_done():
    response = {"query": "q", "mode": "dense", "results": [{"id": "n1", "text": "t"}], "answer": "It is Starglass.",
                "cited_ids": ["n1"], "usage": {"calls": 1}, "note": "", "stages": {"embed_ms": 1.0}, "seconds": 0.5}
    lines = [json.loads(line) for line in stream_lines(response).decode().splitlines()]
    assert [line["type"] for line in lines] == ["results", "piece", "done"]
    assert lines[0]["results"] == response["results"] and not {"answer", "cited_ids", "usage"} & set(lines[0])
    assert lines[1]["text"] == "It is Starglass."
    assert lines[2] == {"type": "done", "answer": "It is Starglass.", "cited_ids": ["n1"], "usage": {"calls": 1},
                        "stages": {"embed_ms": 1.0}, "note": "", "seconds": 0.5}
    bare = [json.loads(line) for line in stream_lines({"results": [], "answer": None, "note": "no generator"})
            .decode().splitlines()]
    assert [line["type"] for line in bare] == ["results", "done"]
    assert bare[1]["answer"] is None and bare[1]["note"] == "no generator"


class Recorder:
    """An HTTP server that records (path, host, authorization) and closes every connection after
    ``close_after`` answers on it (an API dropping a kept-alive connection)."""

    def __init__(self, close_after: int = 100) -> None:
        self.seen: list[tuple[str, str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            answered = 0

            def do_GET(self) -> None:
                recorder.seen.append((self.path, self.headers["host"], self.headers.get("authorization", "")))
                payload = b'{"ok": true}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                Handler.answered += 1
                if Handler.answered % close_after == 0:
                    self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_stage_path_prefixes_each_request_and_the_host_sent_is_the_one_signed():
    recorder = Recorder()
    signed_urls = []

    class Spy(Bearer):
        def sign(self, method, url, headers, body):
            signed_urls.append((url, headers["host"]))
            return super().sign(method, url, headers, body)

    try:
        upstream = Upstream(recorder.url + "/prod", Spy(lambda: "tok"))
        reply = upstream.send("GET", "/documents?prefix=a%2Fb&limit=2", {}, b"")
        assert reply.status == 200 and json.loads(reply.body) == {"ok": True}
        host = recorder.url.split("//")[1]
        assert recorder.seen == [("/prod/documents?prefix=a%2Fb&limit=2", host, "Bearer tok")]
        assert signed_urls == [(f"{recorder.url}/prod/documents?prefix=a%2Fb&limit=2", host)]
        upstream.close()
    finally:
        recorder.stop()


def test_a_kept_alive_connection_the_api_closed_is_opened_again():
    recorder = Recorder(close_after=1)
    try:
        upstream = Upstream(recorder.url, Bearer(lambda: "tok"))
        for _ in range(3):
            assert upstream.send("GET", "/health", {}, b"").status == 200
        assert len(recorder.seen) == 3
        upstream.close()
    finally:
        recorder.stop()
    with pytest.raises(Unreachable, match="could not be reached"):
        Upstream(recorder.url, Bearer(lambda: "tok"), timeout=5).send("GET", "/health", {}, b"")
