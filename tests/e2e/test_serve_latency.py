"""A keep-alive request to `eragraph serve` is answered in milliseconds, not after the ~40 ms
that Nagle's algorithm and a delayed ACK add when a response's head and body are written
separately (the server's sockets set TCP_NODELAY)."""

from __future__ import annotations

import http.client
import threading
import time

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("uvicorn")

from eragraph.bootstrap import build_engine  # noqa: E402
from eragraph.config import Settings  # noqa: E402


def test_keep_alive_health_requests_take_milliseconds(tmp_path):
    from eragraph.entrypoints.http.server import make_server

    engine = build_engine("local", tmp_path, Settings(embedder="hash", embed_cache=False))
    server = make_server(engine, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
        times = []
        for _ in range(21):
            started = time.perf_counter()
            conn.request("GET", "/health")
            response = conn.getresponse()
            assert response.status == 200 and response.read()
            times.append(time.perf_counter() - started)
        # a low percentile, not the median: the delayed-ACK stall (40 ms) hits every request, while a
        # loaded machine's preemptions hit some; the third fastest of 21 stays fast unless it stalls
        assert sorted(times)[2] < 0.030, sorted(times)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
