"""A stand-in OpenAI-compatible server on 127.0.0.1 that answers ``stream: true`` with
server-sent events, one chunk at a time, and can hold its later chunks back until a test says so
(tests/unit/test_openai_stream.py, tests/deployed/test_deployed_stream.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def delta(text: str) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}}]}


class SSEServer:
    """Streams ``events`` (dicts, or raw str lines) as SSE; before the event at ``hold_before``
    it waits until ``release`` is set (at most ``hold_seconds``). ``sent`` counts events handed
    to the socket."""

    def __init__(self, events: list, hold_before: int | None = None, status: int = 200,
                 hold_seconds: float = 5.0) -> None:
        self.events, self.hold_before, self.status, self.hold_seconds = events, hold_before, status, hold_seconds
        self.release, self.sent, self.requests = threading.Event(), 0, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append({"headers": dict(self.headers), "body": json.loads(self.rfile.read(length))})
                self.send_response(outer.status)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, event in enumerate(outer.events):
                    if i == outer.hold_before:
                        outer.release.wait(outer.hold_seconds)
                    line = event if isinstance(event, str) else "data: " + json.dumps(event)
                    outer.sent += 1  # counted before it is written: a reader may have it before the write returns
                    self.wfile.write((line + "\n\n").encode())
                    self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
