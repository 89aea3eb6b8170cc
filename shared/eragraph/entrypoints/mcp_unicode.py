"""Lone-surrogate escapes (``"\\ud800"``) in an MCP ``tools/call``'s arguments: valid JSON, but no
Unicode string, so the SDK's parser (pydantic) refuses the whole body as a protocol error. The
promise (docs/mcp.md) is that a bad argument is a tool error in words: so before the SDK reads a
request, ``screen`` parses its body as Python does (which keeps lone surrogates), and when only a
tools/call's arguments hold one it hands the SDK the same message with them replaced (U+FFFD) and
names the argument, which the tool call then answers as a tool error (``BAD_ARGUMENT_KEY`` in the
ASGI scope). A lone surrogate anywhere else (the id, the method, the tool's name) stays the
protocol's parse error."""

from __future__ import annotations

import json
import re
from typing import Any

BAD_ARGUMENT_KEY = "eragraph.mcp.bad_unicode"  # ASGI scope: the argument path that held a lone surrogate
_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _first(value: Any, path: str) -> str | None:
    """The path of the first string (key or value) under ``value`` holding a lone surrogate."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if _SURROGATE.search(key):
                return f"{path} (a key)"
            found = _first(item, f"{path}.{key}")
            if found:
                return found
    if isinstance(value, list):
        for n, item in enumerate(value):
            found = _first(item, f"{path}[{n}]")
            if found:
                return found
    return None


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def screen(body: bytes) -> tuple[bytes, str | None]:
    """(the body the SDK reads, the argument that held a lone surrogate or None)."""
    if not _ESCAPE.search(body):
        return body, None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return body, None
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict) or message.get("method") != "tools/call":
        return body, None
    where = _first(params.get("arguments"), "arguments")
    if where is None:
        return body, None
    params["arguments"] = _cleaned(params["arguments"])
    try:
        return json.dumps(message, ensure_ascii=False).encode("utf-8"), where
    except UnicodeEncodeError:  # another lone surrogate outside the arguments: the protocol's error
        return body, None


def message(where: str) -> str:
    return (f"{where} is not valid Unicode: it holds a lone surrogate escape (such as \\ud800); send text "
            "as UTF-8, or as escaped surrogate pairs")


async def buffered(receive, limit: int):
    """The request's whole body read ahead (at most ``limit`` bytes, else None) and a ``receive``
    that replays it: (body or None, receive, put) where ``put(body)`` replaces what is replayed."""
    held: list[dict] = []
    size, complete = 0, False
    while True:
        got = await receive()
        held.append(got)
        if got["type"] != "http.request":
            break
        size += len(got.get("body", b""))
        if size > limit:
            break
        if not got.get("more_body", False):
            complete = True
            break
    body = b"".join(m.get("body", b"") for m in held) if complete else None

    def put(new: bytes) -> None:
        held[:] = [{"type": "http.request", "body": new, "more_body": False}]

    async def replay() -> dict:
        return held.pop(0) if held else await receive()

    return body, replay, put
