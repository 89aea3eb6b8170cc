"""The router's own time (features + score) per question, without retrieval: the shipped
weights over every dev question of the four datasets, each question's embedding made once
beforehand (as `auto` has it from the query). Prints p50/p95/max per dataset in ms.

    python scripts/router_latency.py --data ../shared/data --repeats 5 [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from eragraph.bench.common import read_jsonl, run_record
from eragraph.providers.minilm import MiniLMEmbedder
from eragraph.services.routing import load_router, score_question


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--datasets", default="musique,hotpotqa,popqa,multihop_rag")
    p.add_argument("--limit", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args()
    model = load_router()
    embedder = MiniLMEmbedder()
    out = {"command": "python scripts/router_latency.py " + " ".join(sys.argv[1:]),
           "inputs": model.inputs, "datasets": {}}
    for name in args.datasets.split(","):
        texts = [r["question"] for r in read_jsonl(Path(args.data) / name / "questions.jsonl")][: args.limit]
        vecs = embedder.embed(texts)
        score_question(texts[0], model, object(), vecs[0])  # warm-up
        ms = []
        for _ in range(args.repeats):
            for t, v in zip(texts, vecs):
                t0 = time.perf_counter()
                score_question(t, model, object(), v)
                ms.append((time.perf_counter() - t0) * 1000.0)
        out["datasets"][name] = {"questions": len(texts), "calls": len(ms),
                                 "p50_ms": round(float(np.percentile(ms, 50)), 4),
                                 "p95_ms": round(float(np.percentile(ms, 95)), 4),
                                 "max_ms": round(float(max(ms)), 3)}
        print(name, out["datasets"][name], flush=True)
    out["run"] = run_record()
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
