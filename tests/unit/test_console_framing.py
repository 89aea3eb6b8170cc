"""No other page may frame the console or run its own script in it: every console response of
`eragraph serve` and of `eragraph console` (its forwarding app) carries X-Frame-Options DENY and a
CSP whose default is the console's own origin with no framing; the console's page loads only
files of its own origin, with no inline script or style the CSP would block."""

from __future__ import annotations

import asyncio
import re

import pytest

from eragraph.entrypoints.console.assets import asset


def _get(app, path: str) -> tuple[int, dict]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"host", b"127.0.0.1:8765")], "client": ("127.0.0.1", 5000)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


class NoUpstream:
    url = "https://example.invalid"

    def close(self) -> None:
        pass


@pytest.fixture(params=["serve", "console"])
def app(request):
    if request.param == "serve":
        from eragraph.bootstrap import build_engine
        from eragraph.config import settings_from_env
        from eragraph.entrypoints.http.server import ApiApp

        served = ApiApp(build_engine("memory", None, settings_from_env(embedder="hash")))
    else:
        from eragraph.entrypoints.console.proxy import ProxyApp

        served = ProxyApp(NoUpstream())
    yield served
    served.close()


@pytest.mark.parametrize("path", ["/", "/console/js/app.js", "/console/console.css", "/console/no-such-file.js"])
def test_every_console_response_forbids_framing_and_foreign_scripts(app, path):
    status, headers = _get(app, path)
    assert status in (200, 404)
    assert headers["x-frame-options"] == "DENY"
    policy = {d.split()[0]: d.split()[1:] for d in headers["content-security-policy"].split("; ")}
    assert policy["default-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
    assert not any("unsafe" in v for values in policy.values() for v in values)


def test_the_console_page_has_nothing_inline_the_policy_would_block():
    page = asset("/").body.decode("utf-8")
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)  # every script is a file of its own origin
    assert "<style" not in page and not re.search(r"\sstyle=", page) and not re.search(r"\son[a-z]+=", page)
    for url in re.findall(r'(?:src|href)="([^"]+)"', page):
        assert url.startswith(("/", "#")) or url == "data:,", url  # the favicon's empty data URL: img-src allows data:
