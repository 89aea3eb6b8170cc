"""`eragraph bench deadline`: a layer of thousands of new summaries made through the summarize
Lambda handler, each invocation under the function's own timeout, and the ledger's proof that
no summary was paid for twice.

The AWS profile's storage under moto (bench/moto.moto_engine: the DynamoDB table of
template.yaml, an SQS FIFO queue; vectors in memory, as moto has no OpenSearch). Synthetic
one-chunk documents (``bench scale``'s corpus; the hashing embedder unless ``--embedder``) are
ingested until layer 0's partition holds ``--summaries`` segments, with nothing summarized yet.
The layer's messages then go to the SQS queue, and the queue is delivered the way Lambda's event
source mapping does: up to the function's BatchSize records per invocation, as the SQS event
JSON, to ``functions/summarize/app.py``'s handler, with a context whose remaining time starts
at the function's Timeout (both read from template.yaml). Successful records are deleted, the
reported failures stay (none is expected). The deadline is injected: a summarize call is
charged ``--call-seconds`` of simulated model latency against the invocation's time, on top of
the real time the invocation takes, so an invocation stops before its deadline after about
(Timeout - the handler's margin) / call-seconds summaries and re-queues the rest of its work.

Measured: invocations, continuations, summaries made per invocation, the most time an
invocation used (simulated + real) against its timeout, and the ledger's summarize calls
against the summaries in the store (equal: none paid twice); then the graph invariants."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import sys
import time
import uuid
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from .common import add_common_options, finish, progress
from ..bootstrap.aws import function_environment
from .moto import find_template, load_template, moto_engine
from .scale import model_settings, synthetic_rows

CHUNKS_PER_SUMMARY = 8.3  # layer 0 -> 1 at the default S_min 6 / S_max 12 (bench scale: 10,000 -> 1,202)
SMOKE_SUMMARIES = 24
SMOKE_TIMEOUT = 30.0  # with 1 s a call and the 20 s margin: 10 calls an invocation


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("deadline", help="thousands of new summaries through the summarize handler "
                                               "under its timeout; the ledger shows none paid twice",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--summaries", type=int, default=5000, help="new layer-1 summaries to make (default 5000)")
    p.add_argument("--call-seconds", type=float, default=1.0,
                   help="simulated latency charged per summarize call against the deadline (default 1.0)")
    p.add_argument("--timeout", type=float,
                   help="the invocation's timeout in seconds (default: SummarizeFunction's Timeout in template.yaml)")
    p.add_argument("--smoke", action="store_true",
                   help=f"{SMOKE_SUMMARIES} summaries under a {SMOKE_TIMEOUT:.0f} s timeout; fast")
    p.add_argument("--batch-docs", type=int, default=256, help="documents per ingest batch")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--template", help="template.yaml (default: the repository's)")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def function_settings(template: Path, logical_id: str = "SummarizeFunction") -> dict:
    """The function's Timeout and its SQS event source's BatchSize, as deployed."""
    doc = load_template(template)
    props = doc["Resources"][logical_id]["Properties"]
    timeout = props.get("Timeout") or (doc.get("Globals") or {}).get("Function", {}).get("Timeout")
    batch = [e["Properties"].get("BatchSize", 10) for e in (props.get("Events") or {}).values()
             if e.get("Type") == "SQS"]
    return {"timeout": float(timeout), "batch_size": int(batch[0]) if batch else 10}


def load_summarize_handler(template: Path) -> Any:
    path = template.parent / "functions" / "summarize" / "app.py"
    name = "eragraph_bench_summarize_app"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class SimulatedLatency:
    """The engine's summarizer, charging ``seconds`` per call to a clock the invocation's
    context reads (no sleep: the deadline sees the latency, the run does not wait for it)."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self._inner = inner
        self.seconds = seconds
        self.calls = 0

    @property
    def charged(self) -> float:
        return self.calls * self.seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def summarize(self, *a, **kw):
        self.calls += 1
        return self._inner.summarize(*a, **kw)

    def revise(self, *a, **kw):
        self.calls += 1
        return self._inner.revise(*a, **kw)


class Invocation:
    """A Lambda context for one invocation: remaining time = timeout - real time since it
    began - simulated latency charged during it."""

    function_name = "eragraph-bench-summarize"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:eragraph-bench-summarize"

    def __init__(self, timeout: float, latency: SimulatedLatency) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self.timeout = timeout
        self._latency = latency
        self._charged_at_start = latency.charged
        self._started = time.perf_counter()

    def used(self) -> float:
        return (time.perf_counter() - self._started) + (self._latency.charged - self._charged_at_start)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.timeout - self.used()) * 1000))


def sqs_records(messages: list[dict], region: str = "us-east-1") -> dict:
    """SQS messages (receive_message with all attributes) as the event Lambda delivers."""
    return {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                         "attributes": m.get("Attributes", {}), "messageAttributes": {},
                         "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
                         "eventSourceARN": f"arn:aws:sqs:{region}:123456789012:eragraph-bench.fifo",
                         "awsRegion": region} for m in messages]}


def build_layer(engine: Any, summaries: int, args: Any) -> int:
    """Ingest synthetic documents (nothing drained) until layer 0 partitions into at least
    ``summaries`` segments; returns the chunks ingested."""
    from ..services.ingest import SourceDoc, ingest
    from ..services.resummarize import target_segments

    total = 0
    want = math.ceil(summaries * CHUNKS_PER_SUMMARY)
    for round_ in range(8):
        rows = list(synthetic_rows(want, args.seed + round_, prefix=f"r{round_}-"))
        ingest(engine, (SourceDoc(source=f"synthetic/{r['id']}", doc_id=r["id"], text=r["text"]) for r in rows),
               batch_docs=args.batch_docs)
        total += len(rows)
        have = len(target_segments(engine, 0))
        if have >= summaries:
            return total
        want = max(64, math.ceil((summaries - have) * CHUNKS_PER_SUMMARY * 1.05))
    raise RuntimeError(f"layer 0 partitions into {have} segments after {total} chunks, short of {summaries}")


def deliver(engine: Any, handler: Any, sqs: Any, url: str, fn: dict, latency: SimulatedLatency,
            bar: Any) -> dict:
    """Deliver the SQS queue to the handler until it is empty, as the event source mapping does."""
    invocations: list[dict] = []
    failures = 0
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, fn["batch_size"]),
                                  AttributeNames=["All"]).get("Messages", [])
        if not got:
            break
        context = Invocation(fn["timeout"], latency)
        calls_before = latency.calls
        with redirect_stdout(io.StringIO()):  # the handler's EMF metric lines
            out = handler.handler(sqs_records(got), context)
        failed = {f["itemIdentifier"] for f in out.get("batchItemFailures", [])}
        failures += len(failed)
        done = [m for m in got if m["MessageId"] not in failed]
        for m in done:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        if failed:  # as Lambda would after the visibility timeout: make them visible again
            for m in got:
                if m["MessageId"] in failed:
                    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"],
                                                  VisibilityTimeout=0)
        made = latency.calls - calls_before
        continued = sum(1 for m in got if json.loads(m["Body"]).get("reason", "").endswith("+continue"))
        invocations.append({"records": len(got), "continuations_received": continued, "failed": len(failed),
                            "summarize_calls": made, "seconds_used": round(context.used(), 3)})
        bar.update(made)
        if len(invocations) > 10_000:
            raise RuntimeError("the summarize queue never drained")
    return {"invocations": invocations, "failed_records": failures}


def run(args: Any) -> dict:
    from ..adapters.aws.queue_sqs import SqsQueue
    from ..services import cost, invariants

    summaries = SMOKE_SUMMARIES if args.smoke else args.summaries
    template = find_template(args)
    fn = function_settings(template)
    if args.timeout or args.smoke:
        fn["timeout"] = float(args.timeout or SMOKE_TIMEOUT)
    settings = model_settings(args)
    function_env = {"POWERTOOLS_METRICS_NAMESPACE": "EragraphBench", "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "WARNING"}
    with moto_engine("deadline", args, settings) as (engine, url, sqs), function_environment(settings, function_env):
        started = time.perf_counter()
        chunks = build_layer(engine, summaries, args)
        build_seconds = time.perf_counter() - started
        pending = []
        while engine.queue.pending():  # the ingest's messages, coalesced as the local bus keeps them
            batch = engine.queue.receive(10)
            pending += [m for _, m in batch]
            engine.queue.ack([r for r, _ in batch])
        engine.queue = SqsQueue(url, client=sqs)
        engine.queue.send(pending)
        latency = SimulatedLatency(engine.summarizer, args.call_seconds)
        engine.summarizer = latency
        handler = load_summarize_handler(template)  # in the environment function_environment set
        from ..bootstrap.aws import LAMBDA_ENGINE

        LAMBDA_ENGINE.set(engine)
        try:
            started = time.perf_counter()
            with progress(summaries, "summaries", not args.no_progress) as bar:
                delivered = deliver(engine, handler, sqs, url, fn, latency, bar)
            deliver_seconds = time.perf_counter() - started
        finally:
            LAMBDA_ENGINE.set(None)
        sizes = engine.graph.layer_sizes()
        ledger = cost.ledger_rows(engine.graph.ledger())
        paid = sum(c.calls for c in ledger if c.kind == "summarize")
        stored = sum(n for layer, n in sizes.items() if layer >= 1)
        check = invariants.check(engine).to_dict()
    inv = delivered["invocations"]
    used = [i["seconds_used"] for i in inv]
    made = [i["summarize_calls"] for i in inv if i["summarize_calls"]]
    result = {
        "embedder": settings.embedder, "smoke": bool(args.smoke), "seed": args.seed,
        "function": {"timeout_seconds": fn["timeout"], "batch_size": fn["batch_size"]},
        "call_seconds_simulated": args.call_seconds,
        "chunks": chunks, "layers": {str(k): v for k, v in sorted(sizes.items())},
        "summaries_layer1": sizes.get(1, 0),
        "build_seconds_under_moto": round(build_seconds, 3),
        "deliver_seconds_under_moto": round(deliver_seconds, 3),
        "messages_sent_after_ingest": len(pending),
        "invocations": len(inv),
        "continuations_delivered": sum(i["continuations_received"] for i in inv),
        "records_failed": delivered["failed_records"],
        "summaries_per_working_invocation_max": max(made, default=0),
        "seconds_used_max": max(used, default=0.0),
        "seconds_used_by_invocation": used,
        "ledger_summarize_calls": paid,
        "summaries_stored": stored,
        "paid_twice": paid - stored,
        "invariants": check,
        "measures": {
            "seconds_used": "per invocation: real seconds plus the simulated latency charged for its summarize calls; "
                            "the handler stops starting calls with less than its margin left",
            "paid_twice": "ledger summarize calls minus summaries stored above layer 0 (0: no summary paid twice; "
                          "this build replaces no summary, so every paid call is one stored summary)",
        },
    }
    return finish(result, args, "deadline")
