"""What the console's browser tests share: the small store they serve (two tenants, metadata, a
file the ingest refused), a stand-in OpenAI-compatible generator that streams an answer citing
the first evidence it was given (and can hold its second half back), and Chromium (Debian's
package: /usr/bin/chromium)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from serve_support import eragraph

CHROMIUM = os.environ.get("ERAGRAPH_CHROMIUM", "/usr/bin/chromium")

HARBOURS = [
    ("gdynia", "Gdynia harbour", "en", 2021, "The harbour master of Gdynia logged the tall ship Dar Pomorza in the spring. "
     "Gdynia harbour has a container terminal and a ferry quay for ships to Karlskrona."),
    ("gdansk", "Gdansk shipyard", "en", 2019, "The Gdansk shipyard built cranes and ships on the Motlawa river. "
     "Gdansk shipyard workers founded Solidarity in the summer of 1980."),
    ("szczecin", "Port Szczecin", "pl", 2020, "Port Szczecin lezy nad Odra. Statki z Szczecin plyna przez Zalew "
     "Szczecinski do Swinoujscie i dalej na Baltyk."),
    ("hel", "Hel peninsula", "pl", 2022, "Hel to mierzeja na Baltyku. Latarnia morska na Helu prowadzi statki "
     "do Gdyni i do Gdanska przez Zatoke Gdanska."),
    ("rostock", "Rostock port", "de", 2018, "Rostock port lies on the Warnow river. Ferries from Rostock sail to "
     "Gedser in Denmark and Trelleborg in Sweden every day."),
    ("klaipeda", "Klaipeda port", "en", 2023, "Klaipeda port is the ice-free harbour of Lithuania on the Curonian "
     "Lagoon. Klaipeda ships amber and timber to Kiel."),
]
SECRET = "Zanzibar cloves secret ledger of the other tenant"


def build_store(root: Path) -> Path:
    """The store the console's tests serve: the default tenant holds the harbour notes (JSONL,
    with ``lang`` and ``year`` metadata) and a binary file the ingest refused; the tenant ``other``
    holds one document whose words appear nowhere else."""
    corpus = root / "in"
    corpus.mkdir(parents=True)
    lines = [json.dumps({"id": key, "title": title, "text": f"{title}\n\n{text} " * 2, "metadata": {"lang": lang, "year": year}})
             for key, title, lang, year, text in HARBOURS]
    (corpus / "harbours.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (corpus / "photo.txt").write_bytes(b"\x00\x01\x02binary\x00" * 40)
    store = root / "store"
    out = eragraph("ingest", "--store", str(store), "--quiet", str(corpus))
    assert out.returncode in (0, 3), out.stderr
    secret = root / "other"
    secret.mkdir()
    (secret / "cloves.txt").write_text((SECRET + ". Zanzibar grows cloves for the spice trade. ") * 4, encoding="utf-8")
    out = eragraph("ingest", "--store", str(store), "--tenant", "other", "--quiet", str(secret))
    assert out.returncode == 0, out.stderr
    return store


class Generator:
    """An OpenAI-compatible chat server whose answer is ``pieces`` ("Gdynia harbour logs tall
    ships ") and then "[<first evidence id>].": asked to stream (SSE), it holds the last piece
    while ``release`` is clear (at most ``hold`` seconds, a bound for a test that failed holding
    it, far above any wait of the tests: no test passes by that clock); else it answers whole.
    ``release`` starts set: only a test that clears it (``holding``) sees the answer held."""

    def __init__(self, hold: float = 180.0, pieces: tuple[str, ...] = ("Gdynia harbour ", "logs tall ships ")) -> None:
        self.release = threading.Event()
        self.release.set()
        self.hold = hold
        self.prompts: list[str] = []
        outer, pieces_ = self, pieces

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                prompt = "\n".join(m.get("content", "") for m in body.get("messages", []))
                outer.prompts.append(prompt)
                cited = re.search(r"Evidence 1 \[([^\]]+)\]", prompt)
                pieces = list(pieces_)
                tail = [f"[{cited.group(1) if cited else 'none'}].", ]
                if not body.get("stream"):
                    whole = json.dumps({"id": "c1", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "".join(pieces + tail)}}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(whole)))
                    self.end_headers()
                    self.wfile.write(whole)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, piece in enumerate(pieces + tail):
                    if i == len(pieces):
                        outer.release.wait(outer.hold)
                    chunk = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @contextlib.contextmanager
    def holding(self):
        """The streamed answers' last piece held until the block ends or ``release.set()``; the
        next test meets a generator that answers whole whatever this one did."""
        self.release.clear()
        try:
            yield self
        finally:
            self.release.set()

    def env(self) -> dict[str, str]:
        return {"ERAGRAPH_GENERATOR": "openai", "ERAGRAPH_OPENAI_BASE_URL": self.base_url,
                "ERAGRAPH_OPENAI_MODEL": "stand-in"}

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def chromium_or_skip() -> str:
    """Chromium's path; its absence fails under CI (ERAGRAPH_REQUIRE_BUILD=1 or CI set: scripts/test.sh
    installs it, scripts/install_chromium.sh) and skips elsewhere, saying why."""
    pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the dev extra)")
    if Path(CHROMIUM).is_file() or shutil.which(CHROMIUM):
        return CHROMIUM
    message = (f"no Chromium at {CHROMIUM}: install Debian's chromium package (scripts/install_chromium.sh) "
               "or name one with ERAGRAPH_CHROMIUM")
    if os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1" or os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
