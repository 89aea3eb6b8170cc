"""Rerank latency per candidate count, and time to the first streamed piece against the whole
answer. Run from the repository root:

    python scripts/rerank_stream_bench.py [--repeats 7] [--routes-only] [--embedder minilm]

Rerank: a cross-encoder of the real MiniLM-L6 shape (6 layers, 384 wide), built from the shipped
all-MiniLM-L6-v2 weights with a fresh, untrained one-logit classification head, scoring
passages of about 120 words through providers.cross_encoder.CrossEncoderReranker. Its latency is real;
its quality is not claimed (the head is untrained).

Streaming: OpenAICompatGenerator.stream against a stand-in OpenAI-compatible server on
127.0.0.1 that sends PIECES server-sent-event chunks, DELAY seconds apart (a model writing at
about 1 / DELAY pieces per second): time to the first piece against time to the Answer.

Routes (``bench_routes``): a warm ``eragraph serve`` over the sample corpus (built here with the
given embedder, MiniLM by default), its generator the same stand-in SSE server. The overhead of
the Bedrock-KB-compatible Retrieve route over ``POST /query``: the same questions, k and mode
(dense = SEMANTIC, hybrid = HYBRID), the two routes interleaved over one HTTP client (urllib),
median and p95 of each; and through boto3's own bedrock-agent-runtime client, the first ``output``
event and the end of ``retrieve_and_generate_stream`` against the whole ``retrieve_and_generate``."""

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
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not request.get("stream"):  # the whole answer, once the model has written it
                time.sleep(pieces * delay)
                text = "".join(f"word{i} " for i in range(pieces))
                body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 100, "completion_tokens": pieces}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
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
    from eragraph.ports.records import Answer
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


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(seconds: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(seconds) * 1000, 2),
            "p95_ms": round(_percentile(seconds, 0.95) * 1000, 2), "n": len(seconds)}


def _post(url: str, body: dict) -> tuple[float, dict]:
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        data = json.loads(response.read())
    return time.perf_counter() - started, data


def bench_routes(repeats: int, embedder: str = "minilm", k: int = 5, modes=("dense", "hybrid"), pieces: int = 40,
                 delay: float = 0.025, questions: int | None = None) -> dict:
    import subprocess
    import sys
    from pathlib import Path

    import boto3
    from botocore.config import Config

    samples = Path(__file__).resolve().parents[1] / "shared" / "eragraph" / "samples"
    asked = json.loads((samples / "questions.json").read_text())[:questions]
    httpd = serve_sse(pieces, delay)
    env = {"ERAGRAPH_EMBEDDER": embedder, "ERAGRAPH_GENERATOR": "openai", "ERAGRAPH_OPENAI_MODEL": "stand-in",
           "ERAGRAPH_OPENAI_BASE_URL": f"http://127.0.0.1:{httpd.server_address[1]}/v1"}
    out: dict = {"embedder": embedder, "k": k, "questions": len(asked), "repeats": repeats,
                 "stand_in": {"pieces": pieces, "delay_s": delay}}
    with tempfile.TemporaryDirectory() as folder:
        import os

        done = subprocess.run([sys.executable, "-m", "eragraph", "ingest", str(samples / "corpus.jsonl"),
                               "--store", folder, "--quiet", "--json"], env={**os.environ, **env},
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(done.stderr)
        from eragraph.bench.load import start_server

        proc, url = start_server(Path(folder), {**os.environ, **env})
        try:
            import urllib.request

            with urllib.request.urlopen(url + "/stats", timeout=60) as response:
                kb_id = json.loads(response.read())["knowledge_base_id"]
            search = {"dense": "SEMANTIC", "hybrid": "HYBRID"}
            for mode in modes:
                times: dict[str, list[float]] = {"query": [], "retrieve": []}
                for q in asked:  # warm: the embedder, the caches, the connection path
                    _post(url + "/query", {"query": q, "k": k, "mode": mode})
                for _ in range(repeats):
                    for q in asked:
                        seconds, body = _post(url + "/query", {"query": q, "k": k, "mode": mode})
                        times["query"].append(seconds)
                        ids = [r["id"] for r in body["results"]]
                        seconds, body = _post(f"{url}/knowledgebases/{kb_id}/retrieve", {
                            "retrievalQuery": {"text": q}, "retrievalConfiguration": {"vectorSearchConfiguration": {
                                "numberOfResults": k, "overrideSearchType": search[mode]}}})
                        times["retrieve"].append(seconds)
                        got = [r["metadata"]["x-eragraph-node-id"] for r in body["retrievalResults"]]
                        if got != ids:  # the same question, k and mode: the same results
                            raise AssertionError(f"{mode} {q!r}: /query {ids}, Retrieve {got}")
                summary = {route: _summary(ts) for route, ts in times.items()}
                summary["ratio_median"] = round(summary["retrieve"]["median_ms"] / summary["query"]["median_ms"], 3)
                out[f"overhead_{mode}"] = summary
            client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=url,
                                  aws_access_key_id="x", aws_secret_access_key="x",
                                  config=Config(retries={"max_attempts": 1}, read_timeout=120))
            request = {"input": {"text": ""}, "retrieveAndGenerateConfiguration": {
                "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                    "knowledgeBaseId": kb_id, "modelArn": "stand-in",
                    "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": k,
                                                                             "overrideSearchType": "HYBRID"}}}}}
            firsts, lasts, wholes = [], [], []
            for i in range(repeats):
                q = asked[i % len(asked)]
                request["input"]["text"] = q
                started = time.perf_counter()
                client.retrieve_and_generate(**request)
                wholes.append(time.perf_counter() - started)
                started, first = time.perf_counter(), None
                for event in client.retrieve_and_generate_stream(**request)["stream"]:
                    if first is None and "output" in event:
                        first = time.perf_counter() - started
                lasts.append(time.perf_counter() - started)
                firsts.append(first)
            out["stream"] = {"first_output_event": _summary(firsts), "last_event": _summary(lasts),
                             "whole_retrieve_and_generate": _summary(wholes)}
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            httpd.shutdown()
            httpd.server_close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", help="write the results as JSON here (with the command, commit and machine)")
    parser.add_argument("--routes-only", action="store_true", help="only the routes' overhead and streaming on serve")
    parser.add_argument("--embedder", default="minilm", help="the embedder of the routes' store (default minilm)")
    parser.add_argument("--questions", type=int, default=None, help="the first N sample questions (default all)")
    args = parser.parse_args()
    routes = bench_routes(args.repeats, args.embedder, questions=args.questions)
    for mode in ("dense", "hybrid"):
        o = routes[f"overhead_{mode}"]
        print(f"{mode}: /query median {o['query']['median_ms']} ms p95 {o['query']['p95_ms']} ms; Retrieve median "
              f"{o['retrieve']['median_ms']} ms p95 {o['retrieve']['p95_ms']} ms; ratio {o['ratio_median']}")
    st = routes["stream"]
    print(f"serve stream: first output event {st['first_output_event']['median_ms']} ms, last "
          f"{st['last_event']['median_ms']} ms; whole RetrieveAndGenerate "
          f"{st['whole_retrieve_and_generate']['median_ms']} ms")
    if args.routes_only:
        rerank, first, whole = {}, None, None
    else:
        rerank = bench_rerank(args.repeats)
        print("| candidates | rerank median (ms) | per candidate (ms) |\n|---|---|---|")
        for n, ms in rerank.items():
            print(f"| {n} | {ms:.1f} | {ms / n:.2f} |")
        first, whole = bench_stream(args.repeats)
        print(f"\nstream (40 pieces, 25 ms apart): first piece {first:.1f} ms, whole answer {whole:.1f} ms (medians)")
    if args.out:
        import sys

        from eragraph.bench.common import run_record

        result = {"benchmark": "rerank-stream", "command": "python scripts/rerank_stream_bench.py " + " ".join(sys.argv[1:]),
                  "run": run_record(), "repeats": args.repeats,
                  "routes": routes}
        if rerank:
            result["rerank_median_ms"] = {str(n): round(ms, 1) for n, ms in rerank.items()}
        if first is not None:
            result.update(stream_first_piece_ms=round(first, 1), stream_whole_answer_ms=round(whole, 1))
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
