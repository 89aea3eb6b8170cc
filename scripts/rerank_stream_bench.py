"""Rerank latency per candidate count, and time to the first streamed piece against the whole
answer. Run from the repository root:

    python scripts/rerank_stream_bench.py [--repeats 7]

Rerank: a cross-encoder of the real MiniLM-L6 shape (6 layers, 384 wide), built from the shipped
all-MiniLM-L6-v2 weights with a fresh, untrained one-logit classification head, scoring
passages of about 120 words through providers.cross_encoder.CrossEncoderReranker. Its latency is real;
its quality is not claimed (the head is untrained).

Streaming: OpenAICompatGenerator.stream against a stand-in OpenAI-compatible server on
127.0.0.1 that sends PIECES server-sent-event chunks, DELAY seconds apart (a model writing at
about 1 / DELAY pieces per second): time to the first piece against time to the Answer."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORDS = ("comet orbit planet telescope galaxy river delta city bridge harbour treaty vote law court "
         "engine turbine fuel cell battery protein enzyme gene cell membrane").split()


def passages(n: int, words: int = 120) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words)) for i in range(n)]


def build_cross_encoder(folder: str) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from eragraph.providers.minilm import default_model_path

    src = str(default_model_path())
    AutoModelForSequenceClassification.from_pretrained(src, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(src).save_pretrained(folder)


def bench_rerank(repeats: int, counts=(10, 20, 50, 100)) -> dict[int, float]:
    from eragraph.providers.cross_encoder import CrossEncoderReranker

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        build_cross_encoder(folder)
        rr = CrossEncoderReranker(folder)
        rr.score("warm up", passages(4))
        for n in counts:
            texts, times = passages(n), []
            for _ in range(repeats):
                started = time.perf_counter()
                rr.score("which comet orbits the planet?", texts)
                times.append(time.perf_counter() - started)
            out[n] = statistics.median(times) * 1000
    return out


def serve_sse(pieces: int, delay: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(pieces):
                time.sleep(delay)
                chunk = {"choices": [{"index": 0, "delta": {"content": f"word{i} "}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def bench_stream(repeats: int, pieces: int = 40, delay: float = 0.025) -> tuple[float, float]:
    from eragraph.ports import Answer
    from eragraph.providers.openai_compat import OpenAICompatGenerator

    httpd = serve_sse(pieces, delay)
    gen = OpenAICompatGenerator(f"http://127.0.0.1:{httpd.server_address[1]}/v1", "stand-in")
    firsts, wholes = [], []
    try:
        for _ in range(repeats):
            started, first = time.perf_counter(), None
            for item in gen.stream("q?", [("chk-1", "evidence")]):
                if first is None and not isinstance(item, Answer):
                    first = time.perf_counter() - started
            wholes.append(time.perf_counter() - started)
            firsts.append(first)
    finally:
        httpd.shutdown()
        httpd.server_close()
    return statistics.median(firsts) * 1000, statistics.median(wholes) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", help="write the results as JSON here (with the command, commit and machine)")
    args = parser.parse_args()
    rerank = bench_rerank(args.repeats)
    print("| candidates | rerank median (ms) | per candidate (ms) |\n|---|---|---|")
    for n, ms in rerank.items():
        print(f"| {n} | {ms:.1f} | {ms / n:.2f} |")
    first, whole = bench_stream(args.repeats)
    print(f"\nstream (40 pieces, 25 ms apart): first piece {first:.1f} ms, whole answer {whole:.1f} ms (medians)")
    if args.out:
        import json
        import sys

        from eragraph.bench.common import run_record

        result = {"benchmark": "rerank-stream", "command": "python scripts/rerank_stream_bench.py " + " ".join(sys.argv[1:]),
                  "run": run_record(), "repeats": args.repeats,
                  "rerank_median_ms": {str(n): round(ms, 1) for n, ms in rerank.items()},
                  "stream_first_piece_ms": round(first, 1), "stream_whole_answer_ms": round(whole, 1)}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
