"""A keep-alive request to `eragraph serve` is answered in milliseconds, not after the ~40 ms
that Nagle's algorithm and a delayed ACK add when a response's head and body are written
separately: the server's side of every connection sets TCP_NODELAY. The test asserts that
option on the connection the requests used, not a latency, so a loaded machine cannot fail it
(a stall of 40 ms and a preemption of 40 ms look alike on a clock)."""

from __future__ import annotations

import http.client
import socket
import threading

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
        for _ in range(21):
            conn.request("GET", "/health")
            response = conn.getresponse()
            assert response.status == 200 and response.read()
        # the 21 requests kept one connection: the server holds exactly it, Nagle's algorithm off
        [connection] = server._server.server_state.connections
        served = connection.transport.get_extra_info("socket")
        assert served.getpeername() == conn.sock.getsockname()
        assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
