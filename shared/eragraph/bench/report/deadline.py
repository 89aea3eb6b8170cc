"""The deadline page: a layer of new summaries through the summarize handler under its timeout,
and the target that none is paid for twice (`eragraph bench deadline`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, run_line

PAGE = PREFIX = "deadline"
SKIP_SMOKE = True  # a smoke run checks the benchmark runs; its figures are not reported
TITLE = "Deadline: a layer of new summaries through the summarize handler"
INTRO = ["`eragraph bench deadline`: the AWS profile's storage under moto; a layer of new summaries is made "
         "by `functions/summarize/app.py`'s handler, fed the SQS queue as Lambda's event source mapping "
         "feeds it (BatchSize records an invocation, the SQS event JSON), each invocation with a context "
         "whose remaining time starts at the function's Timeout (both from template.yaml). Each summarize "
         "call is charged a simulated model latency against that time, on top of the real time; an "
         "invocation stops starting calls with less than the handler's margin left and re-queues the rest. "
         "Paid twice = the ledger's summarize calls minus the summaries stored."]


def dataset(name: str, data: dict) -> str:
    return ""


def targets(name: str, data: dict) -> list[list[str]]:
    return deadline_target_rows(name, data)


def section(name: str, d: dict, plots: Path) -> list[str]:
    out: list[str] = []
    fn = d["function"]
    used = sorted(d["seconds_used_by_invocation"])
    out += [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
            *table(["measure", "value"], [
                ["chunks in layer 0 (hashing embedder)", fmt(d["chunks"])],
                ["layers after", ", ".join(f"{k}: {fmt(v)}" for k, v in d["layers"].items())],
                ["function timeout / batch size", f"{fn['timeout_seconds']:g} s / {fn['batch_size']}"],
                ["simulated latency per summarize call", f"{d['call_seconds_simulated']:g} s"],
                ["messages after the ingest", d["messages_sent_after_ingest"]],
                ["invocations", d["invocations"]],
                ["continuations delivered", d["continuations_delivered"]],
                ["most summaries made in one invocation", d["summaries_per_working_invocation_max"]],
                ["seconds used per invocation: median / max", f"{used[len(used) // 2]:.1f} / {used[-1]:.1f}"],
                ["records failed", d["records_failed"]],
                ["ledger summarize calls", fmt(d["ledger_summarize_calls"])],
                ["summaries stored above layer 0", fmt(d["summaries_stored"])],
                ["paid twice", d["paid_twice"]],
                ["graph invariants", "hold" if d["invariants"]["ok"] else
                 f"{d['invariants']['violation_count']} violations"],
                ["real seconds under moto: ingest / delivery",
                 f"{d['build_seconds_under_moto']:.0f} / {d['deliver_seconds_under_moto']:.0f}"],
            ]), ""]
    return out


def deadline_target_rows(name: str, d: dict) -> list[list[str]]:
    """The AWS deadline run: thousands of new summaries through the summarize handler under its
    timeout complete, each invocation within it, and none is paid for twice."""
    if d.get("smoke"):
        return []
    run = (f"`{name}` ({fmt(d['summaries_layer1'])} new layer-1 summaries, {d['invocations']} invocations of "
           f"{d['function']['timeout_seconds']:g} s)")
    done = d["invariants"]["ok"] and d["records_failed"] == 0 and d["paid_twice"] == 0
    within = d["seconds_used_max"] < d["function"]["timeout_seconds"]
    return [["AWS deadline run completes, no summary paid twice", run,
             f"ledger {fmt(d['ledger_summarize_calls'])} calls = {fmt(d['summaries_stored'])} summaries stored; "
             f"longest invocation {d['seconds_used_max']:.0f} s", verdict(done and within),
             "" if done and within else "see the run on the [deadline page](deadline.md)"]]
