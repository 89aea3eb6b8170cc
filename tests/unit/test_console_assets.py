"""The console's static files: what a path names, served by the ASGI app with its content type;
a path that leaves the static folder is nothing, never another file."""

from __future__ import annotations

import asyncio

import pytest

from eragraph.entrypoints.console.assets import asset, is_console_path, relative


@pytest.mark.parametrize("path, name", [("/", "index.html"), ("/index.html", "index.html"),
                                        ("/console/app.js", "app.js"), ("/console/vendor/x.js", "vendor/x.js")])
def test_a_console_path_names_its_file(path, name):
    assert is_console_path(path)
    assert relative(path) == name


@pytest.mark.parametrize("path", ["/console/", "/console/../assets.py", "/console/a/../../assets.py",
                                  "/console//etc/passwd", "/console/a\\b", "/console/./index.html",
                                  "/console/x\x00.js", "/query", "/consoles/x"])
def test_a_path_that_leaves_the_static_folder_names_nothing(path):
    assert relative(path) is None
    assert asset(path) is None


def test_the_index_is_html():
    found = asset("/")
    assert found is not None and found.content_type.startswith("text/html")
    assert b"<html" in found.body.lower()


def _get(app, path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"host", b"127.0.0.1:8765")], "client": ("127.0.0.1", 5000)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


@pytest.fixture
def app():
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.entrypoints.http.server import ApiApp

    engine = build_engine("memory", None, settings_from_env(embedder="hash"))
    served = ApiApp(engine)
    yield served
    served.close()


def test_the_server_serves_the_console_and_404s_what_it_does_not_hold(app):
    status, headers, body = _get(app, "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"<html" in body.lower()
    status, _, body = _get(app, "/console/no-such-file.js")
    assert status == 404 and b"no console file" in body
    status, _, body = _get(app, "/console/../server.py")
    assert status == 404
    status, headers, body = _get(app, "/", method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0


def test_the_stream_function_serves_no_console():
    from eragraph.entrypoints.http.server import ApiApp

    class Identity:
        def tenant_from_headers(self, headers):
            return ""

    served = ApiApp(None, identity=Identity(), engines=lambda t: None, stream_only=True)
    try:
        status, _, _ = _get(served, "/")
        assert status == 404
    finally:
        served.close()
