"""Helpers of the tests that run `eragraph` (and `eragraph serve`) as real processes on the
hash embedder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERAGRAPH_")}
    env.update({"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_S_MIN": "2", "ERAGRAPH_S_MAX": "3",
                "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), os.environ.get("PYTHONPATH", "")])})
    env.update(extra)
    return env


def eragraph(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eragraph", *argv], env=environment(),
                          capture_output=True, text=True, timeout=300)


@contextmanager
def serving(store: Path, *extra: str, env: dict[str, str] | None = None):
    """`eragraph serve --port 0` in its own process (``env``: more variables for it); yields its
    URL, stops it after."""
    proc = subprocess.Popen([sys.executable, "-m", "eragraph", "serve", "--store", str(store), "--port", "0",
                             "--quiet", *extra], env=environment(**(env or {})), stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+) ", line)
        assert found, line + proc.stderr.read() if proc.poll() is not None else line
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def post(url: str, body: dict, timeout: float = 60) -> tuple[int, dict]:
    request = urllib.request.Request(url + "/query", data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")



def get(url: str, path: str, timeout: float = 60) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url + path, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def send(url: str, method: str, path: str, body: object = None, timeout: float = 60) -> tuple[int, dict]:
    """Any route: ``body`` as JSON (None: no body); the status and the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"content-type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
