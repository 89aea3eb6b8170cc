"""The HTTP client of a running `eragraph serve` (``eragraph query --server URL``)."""

from __future__ import annotations

import json


def query_server(url: str, body: dict, timeout: float = 120.0) -> tuple[int, dict]:
    """POST ``body`` to a running `eragraph serve` at ``url``; returns (status, JSON body)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url.rstrip("/") + "/query", data=json.dumps(body).encode("utf-8"),
                                     headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except json.JSONDecodeError:
            return exc.code, {"message": exc.reason}
