"""`eragraph bench load`: concurrent clients against `eragraph serve`, and against the query
Lambda handler under moto, with and without a writer ingesting beside them.

``serve`` target: a store of ``--chunks`` synthetic chunks (bench/scale's corpus, one chunk per
document) is built by `eragraph ingest` in a child process, then `eragraph serve` runs in its own
process on 127.0.0.1 (port 0). ``--clients`` client threads (closed loop: each sends its next
request when the last is answered, one keep-alive connection each) run these phases of
``--seconds`` each:

- ``collapsed``: every client asks ``collapsed`` (the unloaded figure);
- ``collapsed+tri_graph``: the same clients, plus ``--graph-clients`` clients asking
  ``tri_graph`` beside them (does the fast mode queue behind the slow one?);
- ``mixed``: the clients spread over ``--modes``;
- ``collapsed+writer`` (unless ``--no-writer``): ``collapsed`` while a writer process ingests
  batches of new documents into the same store, one `eragraph ingest` after another.

``lambda`` target: the query function (functions/query/app.py, its handler as deployed) over
the AWS profile's storage under moto (bench/moto.moto_engine: the DynamoDB table of
template.yaml; vectors in memory, moto having no OpenSearch), ``--lambda-chunks`` chunks. A Lambda
container serves one request at a time, so the handler is driven by one client per container
(``--lambda-clients``, default 1; the mixed phase: one container per mode, sharing the warm engine
as if it were each one's); the writer phase ingests through the same moto deployment
from a thread (moto's requests serialized, as DynamoDB applies each atomically).

Per phase and mode: requests, errors (non-200 or a connection failure, with the first few
messages), throughput (answered per second), latency p50/p95/p99 (ms), and the resident memory of
the server process (``lambda``: of the process the handler runs in, moto included) sampled every
half second. ``--smoke``: a tiny store and phases of a second or two.

``against`` target (``--against DIR``): the same store served by this tree's `eragraph serve` and
by the one of another source tree (``DIR``: the ``shared`` folder of another commit, e.g.
``git archive <rev> shared | tar -x -C DIR``), alternately, ``--rounds`` times each, the
``collapsed`` clients for ``--seconds`` a round (the first server of a round alternates): one run, the two servers measured under the same
load of the machine; the medians of throughput and p99 per tree, and of the server's CPU time
per answered request (user and system, from /proc: what the server itself spent, the figure
least moved by other work on a shared machine)."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import add_common_options, finish, percentile

DEFAULT_MODES = "collapsed,dense,bm25,tri_graph"
SMOKE = {"chunks": 60, "seconds": 1.5, "clients": 4, "graph_clients": 1, "lambda_chunks": 20}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("load", help="concurrent clients against serve and the query handler",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", choices=("serve", "lambda", "both", "against"), default="both")
    p.add_argument("--against", metavar="DIR", help="target against: another source tree's shared folder, served "
                                                    "alternately with this one's")
    p.add_argument("--label", default="against", help="target against: the other tree's name in the results "
                                                      "(e.g. main; its own page section: a run per label is current)")
    p.add_argument("--rounds", type=int, default=3, help="target against: rounds per tree (default 3)")
    p.add_argument("--chunks", type=int, default=10_000, help="chunks in the served store (default 10000)")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients of the fast modes (default 8)")
    p.add_argument("--graph-clients", type=int, default=2, help="tri_graph clients beside them (default 2)")
    p.add_argument("--seconds", type=float, default=20.0, help="length of each phase (default 20)")
    p.add_argument("--modes", default=DEFAULT_MODES, help=f"modes of the mixed phase (default {DEFAULT_MODES})")
    p.add_argument("--no-writer", action="store_true", help="skip the phase with a writer beside the readers")
    p.add_argument("--writer-docs", type=int, default=50, help="documents per writer ingest (default 50)")
    p.add_argument("--lambda-chunks", type=int, default=500, help="chunks in the moto deployment (default 500)")
    p.add_argument("--lambda-clients", type=int, default=1, help="containers driving the handler (default 1)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--store", help="working directory (default: a temporary one, removed after)")
    p.add_argument("--template", help="template.yaml for the moto table (default: the repository's)")
    p.add_argument("--smoke", action="store_true", help=f"a tiny store and short phases: {SMOKE}")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


# ----------------------------------------------------------------------------- measuring


class Recorder:
    """Latencies and errors per mode, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms: dict[str, list[float]] = {}
        self.errors: dict[str, list[str]] = {}

    def add(self, mode: str, ms: float, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.ms.setdefault(mode, []).append(ms)
            else:
                self.errors.setdefault(mode, []).append(error)

    def report(self, seconds: float) -> dict:
        out = {}
        for mode in sorted(set(self.ms) | set(self.errors)):
            ms, errors = self.ms.get(mode, []), self.errors.get(mode, [])
            row: dict[str, Any] = {"requests": len(ms) + len(errors), "errors": len(errors),
                                   "per_second": round(len(ms) / seconds, 1)}
            if ms:
                row.update({f"p{q}_ms": round(percentile(ms, q), 1) for q in (50, 95, 99)})
                row["max_ms"] = round(max(ms), 1)
            if errors:
                row["first_errors"] = sorted(set(errors))[:3]
            out[mode] = row
        return out


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system) process ``pid`` has used, from /proc (None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class MemorySampler(threading.Thread):
    """The resident memory of process ``pid`` every ``every`` seconds: [(seconds since start, MB)]."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.started_at = time.perf_counter()

    def run(self) -> None:
        while not self.stop.is_set():
            mb = rss_mb(self.pid)
            if mb is not None:
                self.samples.append((round(time.perf_counter() - self.started_at, 1), mb))
            self.stop.wait(self.every)


def run_phase(name: str, clients: list[tuple[str, Callable[[str, str], None]]], questions: list[str],
              seconds: float, recorder: Recorder) -> dict:
    """Each client (mode, ask) asks questions in a closed loop for ``seconds``."""
    deadline = time.perf_counter() + seconds

    def loop(n: int, mode: str, ask: Callable[[str, str], None]) -> None:
        i = n
        while time.perf_counter() < deadline:
            question = questions[i % len(questions)]
            i += len(clients)
            started = time.perf_counter()
            try:
                ask(mode, question)
                error = None
            except Exception as exc:  # noqa: BLE001 (every failure is counted, none stops the run)
                error = f"{type(exc).__name__}: {exc}"[:200]
            recorder.add(mode, (time.perf_counter() - started) * 1000.0, error)

    threads = [threading.Thread(target=loop, args=(n, mode, ask), daemon=True) for n, (mode, ask) in enumerate(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 300)
    elapsed = time.perf_counter() - started
    return {"phase": name, "seconds": round(elapsed, 2), "clients": dict(_count(m for m, _ in clients)),
            "modes": recorder.report(elapsed)}


def _count(items) -> dict:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


# ----------------------------------------------------------------------------- serve


def http_client(url: str) -> Callable[[str, str], None]:
    """A client with one keep-alive connection: ask(mode, question) raises unless answered 200."""
    host, port = url.removeprefix("http://").split(":")
    local = threading.local()

    def ask(mode: str, question: str) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        body = json.dumps({"query": question, "mode": mode, "k": 5})
        try:
            conn.request("POST", "/query", body=body, headers={"content-type": "application/json"})
            response = conn.getresponse()
            data = response.read()
        except Exception:
            conn.close()
            local.conn = None
            raise
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {data[:120]!r}")
    return ask


def start_server(store: Path, env: dict[str, str], command: tuple[str, ...] = ("eragraph", "serve")
                 ) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", *command, "--store", str(store), "--port", "0",
                             "--quiet"], env=env, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    found = re.search(r"on (http://127\.0\.0\.1:\d+) ", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"eragraph serve did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, found.group(1)


class Writer(threading.Thread):
    """`eragraph ingest` of ``batch`` new documents, one process after another, until stopped."""

    def __init__(self, store: Path, work: Path, batch: int, seed: int, env: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.store, self.work, self.batch, self.seed, self.env = store, work, batch, seed, env
        self.stop = threading.Event()
        self.runs: list[float] = []
        self.failures: list[str] = []
        self.documents = 0

    def run(self) -> None:
        from .scale import synthetic_rows

        n = 0
        while not self.stop.is_set():
            path = self.work / f"writer-{n}.jsonl"
            with open(path, "w", encoding="utf-8") as fh:
                for row in synthetic_rows(self.batch, self.seed + 1000 + n, prefix=f"w{n}-"):
                    fh.write(json.dumps(row) + "\n")
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "eragraph", "ingest", str(path), "--store",
                                  str(self.store), "--quiet"], env=self.env, capture_output=True, text=True)
            self.runs.append(time.perf_counter() - started)
            if out.returncode != 0:
                self.failures.append(out.stderr[-200:])
            else:
                self.documents += self.batch
            n += 1

    def report(self) -> dict:
        return {"ingests": len(self.runs), "documents_added": self.documents, "failures": self.failures[:3],
                "median_ingest_seconds": round(sorted(self.runs)[len(self.runs) // 2], 2) if self.runs else None}


def serve_target(args: Any, work: Path, settings: Any, env: dict[str, str]) -> dict:
    from .scale import build_store, questions, write_corpus

    corpus = write_corpus(work / "corpus.jsonl", args.chunks, args.seed)
    store = work / "store"
    build = build_store(store, corpus, 256, settings)
    qs = questions(200, args.seed)
    proc, url = start_server(store, env)
    sampler = MemorySampler(proc.pid)
    sampler.start()
    phases = []
    try:
        ask = http_client(url)
        for mode in ("collapsed", "tri_graph"):  # warm: the first graph query exports the matrices
            ask(mode, qs[0])
        fast = [("collapsed", ask)] * args.clients
        graph = [("tri_graph", ask)] * args.graph_clients
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        plan: list[tuple[str, list]] = [
            ("collapsed", fast),
            ("collapsed+tri_graph", fast + graph),
            ("mixed", [(modes[n % len(modes)], ask) for n in range(args.clients)]),
        ]
        for name, clients in plan:
            phases.append(timed_phase(name, clients, qs, args.seconds, sampler))
        if not args.no_writer:
            writer = Writer(store, work, args.writer_docs, args.seed, env)
            writer.start()
            phase = timed_phase("collapsed+writer", fast, qs, args.seconds, sampler)
            writer.stop.set()
            writer.join(timeout=600)
            phase["writer"] = writer.report()
            phases.append(phase)
    finally:
        sampler.stop.set()
        proc.terminate()
        proc.wait(timeout=60)
    return {"store": {"chunks_requested": args.chunks, **{k: build[k] for k in ("documents_added", "chunks_added",
                                                                                 "process_seconds")}},
            "server": "eragraph serve (uvicorn; fast/slow mode pools)", "phases": phases,
            "checks": checks(phases), "memory_mb": summarize_memory(sampler.samples)}


def against_target(args: Any, work: Path, settings: Any, env: dict[str, str]) -> dict:
    """This tree's server and ``args.against``'s, alternately over one store (see the module)."""
    import os
    import statistics

    from .scale import build_store, questions, write_corpus

    here = str(Path(__file__).resolve().parents[2])
    serve = ("eragraph", "serve")
    if not args.against or not (Path(args.against) / "eragraph").is_dir():
        raise SystemExit("--target against needs --against DIR, a source tree's shared folder (DIR/eragraph)")
    else:
        trees = {"this tree": (here, serve), args.label: (str(Path(args.against).resolve()), serve)}
    corpus = write_corpus(work / "corpus.jsonl", args.chunks, args.seed)
    store = work / "store"
    build_store(store, corpus, 256, settings)
    qs = questions(200, args.seed)
    rounds = []
    for n in range(args.rounds):  # which server goes first alternates, round by round
        for label, (path, command) in list(trees.items())[::-1 if n % 2 else 1]:
            proc, url = start_server(store, {**env, "PYTHONPATH": path + os.pathsep + env.get("PYTHONPATH", "")},
                                     command)
            try:
                ask = http_client(url)
                ask("collapsed", qs[0])  # warm
                cpu = cpu_seconds(proc.pid)
                phase = run_phase(label, [("collapsed", ask)] * args.clients, qs, args.seconds, Recorder())
                used = cpu_seconds(proc.pid)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            row = {"tree": label, "round": n + 1, **phase["modes"]["collapsed"]}
            if cpu is not None and used is not None and row["requests"]:  # the server's CPU, whatever else runs
                row["server_cpu_ms_per_request"] = round((used - cpu) * 1000 / row["requests"], 3)
            rounds.append(row)
    medians = {label: {key: statistics.median(r[key] for r in rounds if r["tree"] == label and key in r)
                       for key in ("per_second", "p50_ms", "p99_ms", "server_cpu_ms_per_request")
                       if any(key in r for r in rounds)} for label in trees}
    return {"trees": {label: {"path": path, "command": " ".join(command)} for label, (path, command) in trees.items()},
            "clients": args.clients, "seconds_per_round": args.seconds, "rounds": rounds,
            "medians": medians}


def timed_phase(name: str, clients: list, qs: list[str], seconds: float, sampler: MemorySampler) -> dict:
    start = len(sampler.samples)
    phase = run_phase(name, clients, qs, seconds, Recorder())
    window = [mb for _, mb in sampler.samples[start:]]
    phase["server_rss_mb"] = {"min": min(window), "max": max(window)} if window else None
    return phase


def summarize_memory(samples: list[tuple[float, float]]) -> dict:
    if not samples:
        return {}
    step = max(1, len(samples) // 40)
    return {"start": samples[0][1], "end": samples[-1][1], "max": max(mb for _, mb in samples),
            "over_time": samples[::step]}


def checks(phases: list[dict]) -> dict:
    """The issue's targets, each with the figure it is judged on."""
    by = {p["phase"]: p["modes"] for p in phases}
    out: dict[str, Any] = {"errors": sum(r["errors"] for p in phases for r in p["modes"].values())}
    alone = by.get("collapsed", {}).get("collapsed")
    if alone and "p99_ms" in alone:
        out["collapsed_per_second"] = alone["per_second"]
        out["collapsed_p99_ms_alone"] = alone["p99_ms"]
    beside = by.get("collapsed+tri_graph", {}).get("collapsed")
    if alone and beside and "p95_ms" in beside and alone.get("p95_ms"):
        out["collapsed_p95_ratio_beside_tri_graph"] = round(beside["p95_ms"] / alone["p95_ms"], 2)
    written = by.get("collapsed+writer", {}).get("collapsed")
    if written and "p99_ms" in written:
        out["collapsed_p99_ms_with_writer"] = written["p99_ms"]
    out["targets_met"] = {
        "zero_errors": out["errors"] == 0,
        "collapsed_100_per_second": out.get("collapsed_per_second", 0) >= 100,
        "collapsed_p99_alone_100ms": out.get("collapsed_p99_ms_alone", 1e9) <= 100,
        "collapsed_p99_writer_250ms": out.get("collapsed_p99_ms_with_writer", 1e9) <= 250 if written else None,
        "collapsed_p95_within_2x_beside_tri_graph": out.get("collapsed_p95_ratio_beside_tri_graph", 1e9) <= 2,
    }
    return out


# ----------------------------------------------------------------------------- lambda


def find_repo(args: Any) -> Path:
    from .moto import find_template

    return find_template(args).parent


def lambda_target(args: Any, settings: Any) -> dict:
    """The query function's handler over moto (one engine, as a warm container holds it)."""
    import importlib.util

    from moto.core.botocore_stubber import BotocoreStubber

    from ..bootstrap.aws import LAMBDA_ENGINE, function_environment
    from ..entrypoints.http.lambda_event import LocalContext, http_event
    from ..services.ingest import SourceDoc, ingest
    from ..services.resummarize import drain
    from .moto import moto_engine
    from .scale import questions, synthetic_rows

    repo = find_repo(args)
    lock = threading.RLock()  # moto serves one request at a time (DynamoDB applies each atomically)
    stock = BotocoreStubber.__call__

    def serialized(self, *a, **kw):
        with lock:
            return stock(self, *a, **kw)

    BotocoreStubber.__call__ = serialized
    extra = {"POWERTOOLS_METRICS_NAMESPACE": "EragraphBench", "POWERTOOLS_SERVICE_NAME": "eragraph-bench",
             "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING",
             # the benchmark's callers carry no identity: they are the default tenant, by choice
             "ERAGRAPH_TENANT_REQUIRED": "false"}
    try:
        with function_environment(settings, extra), moto_engine("load", args, settings) as (engine, _url, _sqs):
            rows = list(synthetic_rows(args.lambda_chunks, args.seed))
            started = time.perf_counter()
            ingest(engine, [SourceDoc(source=f"synthetic/{r['id']}", doc_id=r["id"], text=r["text"]) for r in rows])
            drain(engine)
            build_seconds = time.perf_counter() - started
            LAMBDA_ENGINE.set(engine)
            from ..services.modes import available_modes

            offered = available_modes(engine)  # bm25 needs OpenSearch's lexical side, absent here
            modes = [m.strip() for m in args.modes.split(",") if m.strip() in offered]
            result_skipped = [m.strip() for m in args.modes.split(",") if m.strip() and m.strip() not in offered]
            handlers = []
            # a module per container (its own resolver, one request at a time): the mixed phase has
            # a container per mode
            for n in range(max(1, args.lambda_clients, len(modes))):
                spec = importlib.util.spec_from_file_location(f"eragraph_bench_query_{n}",
                                                              repo / "functions" / "query" / "app.py")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                handlers.append(module.handler)
            qs = questions(100, args.seed)

            def container(handler):
                def ask(mode: str, question: str) -> None:
                    event = http_event("POST", "/query", {"content-type": "application/json"},
                                       json.dumps({"query": question, "mode": mode, "k": 5}).encode(), "127.0.0.1")
                    out = handler(event, LocalContext(function_name="eragraph-bench-query"))
                    if out.get("statusCode") != 200:
                        raise RuntimeError(f"status {out.get('statusCode')}: {str(out.get('body'))[:120]}")
                return ask

            asks = [container(h) for h in handlers]
            single = asks[:max(1, args.lambda_clients)]  # the collapsed phases' containers
            sampler = MemorySampler(os.getpid())  # the container is this process
            sampler.start()
            phases = [timed_phase("collapsed", [("collapsed", a) for a in single], qs, args.seconds, sampler),
                      timed_phase("mixed", [(mode, asks[n]) for n, mode in enumerate(modes)], qs, args.seconds,
                                  sampler)]
            if not args.no_writer:
                from dataclasses import replace

                from ..adapters.memory.queue_memory import MemoryQueue
                from ..adapters.memory.vector_memory import MemoryVectorIndex

                # the writer is another container (the ingest and summarize functions): the same
                # table, its own in-memory vectors and queue, no entity graph (whose in-memory
                # vectors the reader's container holds)
                writer_engine = replace(engine, vectors=MemoryVectorIndex(), queue=MemoryQueue(), entities=None,
                                        ingest_hooks=[], remove_hooks=[], graph_snapshot=None)
                stop = threading.Event()
                added = [0]

                def write() -> None:
                    n = 0
                    while not stop.is_set():
                        batch = list(synthetic_rows(5, args.seed + 5000 + n, prefix=f"lw{n}-"))
                        ingest(writer_engine, [SourceDoc(source=f"writer/{r['id']}", doc_id=r["id"],
                                                         text=r["text"]) for r in batch])
                        drain(writer_engine)
                        added[0] += len(batch)
                        n += 1

                writer = threading.Thread(target=write, daemon=True)
                writer.start()
                phase = timed_phase("collapsed+writer", [("collapsed", a) for a in single], qs, args.seconds, sampler)
                stop.set()
                writer.join(timeout=600)
                phase["writer"] = {"documents_added": added[0]}
                phases.append(phase)
            sampler.stop.set()
            LAMBDA_ENGINE.set(None)
    finally:
        BotocoreStubber.__call__ = stock
    return {"deployment": {"chunks": args.lambda_chunks, "build_seconds_under_moto": round(build_seconds, 1),
                           "vectors": "in memory (moto has no OpenSearch)"},
            "containers": {"collapsed": len(single), "mixed": len(modes)}, "phases": phases,
            "modes_not_offered": result_skipped,
            "errors": sum(r["errors"] for p in phases for r in p["modes"].values()),
            "memory_mb": summarize_memory(sampler.samples)}


# ----------------------------------------------------------------------------- run


def run(args: Any) -> dict:
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    from ..config import child_environment
    from .scale import model_settings

    settings = model_settings(args)
    env = child_environment(settings)
    result: dict[str, Any] = {"smoke": bool(args.smoke), "settings": {"clients": args.clients, "graph_clients": args.graph_clients,
                                           "seconds_per_phase": args.seconds, "embedder": env["ERAGRAPH_EMBEDDER"],
                                           "writer": not args.no_writer}}
    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="eragraph-load-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.target in ("serve", "both"):
            result["serve"] = serve_target(args, work, settings, env)
        if args.target in ("lambda", "both"):
            result["lambda"] = lambda_target(args, settings)
        if args.target == "against":
            result["against"] = against_target(args, work, settings, env)
    finally:
        if not args.store:
            shutil.rmtree(work, ignore_errors=True)
    return finish(result, args, "load")

