"""The query latency page: warm latency per mode on a full store, and the collapsed-mode
target (`eragraph bench query`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, corpus_name, run_line

PAGE = PREFIX = "query"
TITLE = "Query latency"
INTRO: list[str] = []
COLLAPSED_P95_MS = 30.0


def dataset(name: str, data: dict) -> str:
    return corpus_name(name, data)


def older(name: str, data: dict) -> str | None:
    """A run with other router weights than the shipped ones (``router_weights``) is a comparison:
    never the current run of its dataset."""
    if data.get("router_weights"):
        return f"run with router weights `{data['router_weights']}`, not the shipped ones: a comparison"
    return None


def section(name: str, d: dict, plots: Path) -> list[str]:
    out = [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
           f"Store with {fmt(d['nodes'])} nodes (layers {d['layers']}), embedder `{d['embedder']}`, "
           f"{d['questions']} questions per mode, k={d['k']}. {d.get('measure', '')}."
           + (f" Router weights: `{d['router_weights']}` (not the shipped ones)." if d.get("router_weights") else ""), ""]
    if d.get("rounds"):  # --interleave: the modes took turns question by question, round after round
        fastest = any("fastest_cpu_ms_p95" in r for r in d["modes"].values())  # each question's fastest round
        return out + table(["mode", "rounds", "p50 ms (median of rounds)", "p95 ms (median of rounds)",
                            "p95 ms per round", "CPU p50 ms", "CPU p95 ms",
                            *(["fastest round: p50 / p95 ms", "fastest round: CPU p50 / p95 ms"] if fastest else [])],
                           [[m, len(r["rounds"]), r["latency_ms_p50_median"], r["latency_ms_p95_median"],
                             ", ".join(f"{x['latency_ms_p95']:.1f}" for x in r["rounds"]),
                             r.get("cpu_ms_p50_median", "–"), r.get("cpu_ms_p95_median", "–"),
                             *([f"{r.get('fastest_latency_ms_p50', '–')} / {r.get('fastest_latency_ms_p95', '–')}",
                                f"{r.get('fastest_cpu_ms_p50', '–')} / {r.get('fastest_cpu_ms_p95', '–')}"]
                               if fastest else [])]
                            for m, r in d["modes"].items()]) + [""]
    out += table(["mode", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms", "max ms"],
                 [[m, r["n"], r["latency_ms_p50"], r["latency_ms_p95"], r["latency_ms_p99"], r["latency_ms_mean"],
                   r["latency_ms_max"]] for m, r in d["modes"].items()]) + [""]
    return out


def targets(name: str, d: dict) -> list[list[str]]:
    row = d["modes"].get("collapsed")
    if row is None or "latency_ms_p95" not in row:  # a run of other modes (or interleaved) says nothing of it
        return []
    v = row["latency_ms_p95"]
    ok = None if v is None else v <= COLLAPSED_P95_MS
    return [["query: collapsed p95 ≤ 30 ms (full MultiHop-RAG store, warm)",
             f"`{name}` ({fmt(d['nodes'])} nodes, {d.get('embedder')})", fmt(v), verdict(ok),
             (f"{COLLAPSED_P95_MS - v:.1f} ms to spare" if ok else f"{v - COLLAPSED_P95_MS:.1f} ms over")
             if v is not None else ""]]
