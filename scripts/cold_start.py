#!/usr/bin/env python3
"""Cold start of each function in its deployed environment (what ``sam build`` made, under the
Lambda runtime's Python 3.12 with only its code, its layers and the runtime's boto3 on
sys.path; see tests/deployed/lambda_driver.py): the import of the handler module and the engine
build (the first ``LAMBDA_ENGINE.get()``), each the median of N fresh processes, against moto and
the OpenSearch fake on loopback. Writes bench-results/cold-start.json.

    python3 scripts/cold_start.py [--runs 5] [--out bench-results/cold-start.json]

    python3 scripts/cold_start.py --serve STORE [--tree NAME=DIR ...] [--runs 7]

``--serve STORE``: the cold start of `eragraph serve`'s app instead, in this interpreter: the
import of eragraph.entrypoints.http.server (seconds, and the modules then loaded: eragraph's and
all), then the first POST /query through the app (over STORE, a local store built with the hash
embedder), each the median of fresh processes, for this tree and for each ``--tree`` (another
source tree's shared folder); written into the output's ``serve`` key, the rest kept.

Needs a build (scripts/build_lambda.sh) and Python 3.12 (found as the deployed tests find it,
or $ERAGRAPH_PYTHON312). The environment is the template's (Bedrock embedder, spaCy NER and
parser by default), with the loopback endpoints; nothing is embedded or called at start."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "deployed"), str(ROOT / "shared")]

import deployed as dp  # noqa: E402
from eragraph.bench.common import run_record  # noqa: E402

FUNCTIONS = ("ingest", "summarize", "query", "reindex")
TARGET_QUERY_INIT_S = 3.0
SETTINGS = {"ERAGRAPH_NER": "spacy", "ERAGRAPH_PARSER": "spacy", "POWERTOOLS_METRICS_NAMESPACE": "EragraphColdStart"}


def folder_mb(paths) -> float:
    total = 0
    for p in paths:
        for f in Path(p).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts:
                total += f.stat().st_size
    return round(total / 2**20, 1)


def stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def measure(functions, python: str, runtime: Path, runs: int) -> dict:
    cloud = dp.LoopbackCloud(prefix="eragraph-coldstart").start()
    results = {}
    try:
        with tempfile.TemporaryDirectory() as logs:
            for name in FUNCTIONS:
                fn = dp.function_for(functions, name)
                env = cloud.environment(fn, SETTINGS)
                imports, engines = [], []
                for _ in range(runs):
                    proc = dp.LambdaProcess(fn, env, python, runtime, Path(logs), build_engine=True)
                    ready = proc.start(timeout=300)
                    proc.close()
                    if not ready.get("ready"):
                        err = ready.get("error") or {}
                        results[name] = {"error": f"{err.get('type')}: {err.get('message')}"}
                        break
                    imports.append(ready["init_s"])
                    engines.append(ready["engine_s"])
                else:
                    totals = [a + b for a, b in zip(imports, engines)]
                    results[name] = {"import_s": stats(imports), "engine_s": stats(engines), "init_s": stats(totals),
                                     "modules_loaded": ready["modules"]}
                results[name].update({"logical_id": fn.logical_id, "layers": [lid for lid, _ in fn.layers],
                                      "unzipped_mb": folder_mb([fn.code_dir, *fn.layer_paths])})
                print(name, json.dumps(results[name]), flush=True)
    finally:
        cloud.stop()
    return results


SERVE_PROBE = r"""
import asyncio, json, sys, time
t0 = time.perf_counter()
import eragraph.entrypoints.http.server as server
t1 = time.perf_counter()
ours = lambda: sorted(k for k in sys.modules if k == "eragraph" or k.startswith("eragraph."))
at_import = (ours(), len(sys.modules))
from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
engine = build_engine("local", sys.argv[1], settings_from_env())
server.warm(engine)
app = server.ApiApp(engine)
body = json.dumps({"query": "what happened", "mode": "collapsed", "k": 5}).encode()
scope = {"type": "http", "method": "POST", "path": "/query", "raw_path": b"/query", "query_string": b"",
         "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
         "client": ("127.0.0.1", 1), "http_version": "1.1", "scheme": "http", "root_path": ""}
sent = []
async def receive():
    return {"type": "http.request", "body": body, "more_body": False}
async def send(message):
    sent.append(message)
t2 = time.perf_counter()
asyncio.run(app(scope, receive, send))
t3 = time.perf_counter()
app.close()
print(json.dumps({"import_s": t1 - t0, "modules_at_import": len(at_import[0]), "all_modules_at_import": at_import[1],
                  "first_request_s": t3 - t2, "modules_after_first_request": len(ours()),
                  "all_modules_after_first_request": len(sys.modules), "status": sent[0]["status"],
                  "eragraph_modules_at_import": at_import[0]}))
"""


def serve_cold_start(store: str, trees: dict[str, str], runs: int) -> dict:
    """`eragraph serve`'s app, per tree: the import of the server, the first POST /query (see the
    module's docstring); medians of ``runs`` fresh processes, the module lists of the last."""
    out = {}
    for label, tree in trees.items():
        env = {**os.environ, "PYTHONPATH": tree, "ERAGRAPH_EMBEDDER": "hash"}
        rows = []
        for _ in range(runs):
            done = subprocess.run([sys.executable, "-c", SERVE_PROBE, store], env=env, capture_output=True,
                                  text=True, timeout=300)
            if done.returncode != 0:
                raise SystemExit(f"{label}: {done.stderr[-2000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        last = rows[-1]
        out[label] = {"import_s": stats([r["import_s"] for r in rows]),
                      "first_request_s": stats([r["first_request_s"] for r in rows]),
                      **{k: last[k] for k in ("modules_at_import", "all_modules_at_import",
                                              "modules_after_first_request", "all_modules_after_first_request",
                                              "status", "eragraph_modules_at_import")}}
        print(label, json.dumps({k: v for k, v in out[label].items() if k != "eragraph_modules_at_import"}),
              flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--serve", metavar="STORE", help="measure eragraph serve's app over STORE instead")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                    help="--serve: another source tree's shared folder to measure too")
    ap.add_argument("--out", default=str(ROOT / "bench-results" / "cold-start.json"))
    ap.add_argument("--no-precompiled", dest="precompiled", action="store_false",
                    help="skip the second measurement, on a copy of the build compiled to .pyc ahead")
    args = ap.parse_args()
    if args.serve:
        trees = {"this tree": str(ROOT / "shared"), **dict(t.split("=", 1) for t in args.tree)}
        out = Path(args.out)
        report = json.loads(out.read_text()) if out.is_file() else {}
        report["serve"] = {"what": "eragraph serve's app: import of eragraph.entrypoints.http.server, then the "
                                   "first POST /query through ApiApp (collapsed, hash embedder, engine warmed); "
                                   "median of fresh processes of this interpreter",
                           "run": run_record(ROOT), "runs": args.runs,
                           "trees": {k: ("shared" if k == "this tree" else k) for k in trees},
                           "results": serve_cold_start(args.serve, trees, args.runs)}
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {out}")
        return 0

    python = dp.find_python312()
    if python is None:
        print("no Python 3.12 found (set ERAGRAPH_PYTHON312)", file=sys.stderr)
        return 2
    if not (dp.build_dir() / "template.yaml").is_file():
        print(f"no sam build in {dp.build_dir()}: run scripts/build_lambda.sh first", file=sys.stderr)
        return 2
    functions = dp.load_build()
    stale = dp.stale_files(functions)
    if stale:
        print(f"the build is older than the sources ({stale[:3]}): run scripts/build_lambda.sh", file=sys.stderr)
        return 2
    runtime = dp.ensure_runtime(python)
    pyc_files = sum(1 for _ in dp.build_dir().rglob("*.pyc"))
    results = measure(functions, python, runtime, args.runs)
    compiled = {}
    if args.precompiled:
        # the same build with every module compiled ahead (what a layer that ships its .pyc
        # files starts with: Lambda's /opt and /var/task are read-only, so nothing compiled at a
        # cold start is kept for the next one)
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "build"
            shutil.copytree(dp.build_dir(), copy, symlinks=True)
            subprocess.run([python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                            str(copy)], check=False, stdout=subprocess.DEVNULL)
            os.environ["ERAGRAPH_SAM_BUILD_DIR"] = str(copy)
            compiled = measure(dp.load_build(copy), python, runtime, args.runs)

    query = results.get("query", {})
    run = run_record(ROOT)  # the functions' Python is the Lambda runtime's, not this driver's
    run["machine"]["python"] = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                                              capture_output=True, text=True).stdout.strip()
    report = {
        "what": "cold start per function in its deployed environment: import of the handler module, then the "
                "engine build (first LAMBDA_ENGINE.get()); median of fresh processes",
        "run": run, "runs": args.runs,
        "lambda_runtime_packages": [ln for ln in dp.RUNTIME_REQUIREMENTS.read_text().splitlines()
                                    if ln and not ln.startswith("#")],
        "settings": SETTINGS, "functions": results,
        "pyc_files_in_build": pyc_files,
        "functions_precompiled": compiled,
        "precompiled_note": "the same build after python3.12 -m compileall (unchecked-hash .pyc): what the "
                            "functions start with when their code and layers ship bytecode",
        "target": {"query_init_s": TARGET_QUERY_INIT_S,
                   "met": "init_s" in query and query["init_s"]["median"] <= TARGET_QUERY_INIT_S},
        "lambda_unzipped_limit_mb": 250,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")
    return 0 if all("error" not in r for r in [*results.values(), *compiled.values()]) else 1


if __name__ == "__main__":
    sys.exit(main())
