"""The load page: concurrent clients against `eragraph serve` and the query handler under moto,
and the load targets (`eragraph bench load`)."""

from __future__ import annotations

import json
from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, run_line

PAGE = PREFIX = "load"
SKIP_SMOKE = True  # a smoke run checks the benchmark runs; its figures are not reported
TITLE = "Load: concurrent clients"
INTRO = ["`eragraph bench load`: client threads in a closed loop (each sends its next request when the last "
         "is answered, one keep-alive connection each) against `eragraph serve` in its own process on "
         "127.0.0.1, phase after phase: `collapsed` alone; the same clients beside `tri_graph` clients; the "
         "clients spread over the mixed modes; `collapsed` while a writer process runs `eragraph ingest` of "
         "new documents into the same store, one after another. The client threads share the machine's "
         "cores with the server. Then the query function's handler over moto (one client per simulated "
         "container; vectors in memory). Latencies in ms; q/s = answered requests per second of the phase."]


def dataset(name: str, data: dict) -> str:
    """A two-server comparison (``--target against``, or the ``starlette`` runs before `eragraph serve` was Starlette's) is its own: "vs <the other
    server>", never the current run of the load phases."""
    against = data.get("against")
    if not against:
        return ""
    return "vs " + next((label for label in against["trees"] if label != "this tree"), "against")


def against_section(a: dict) -> list[str]:
    """The rounds of two servers served alternately over one store, and their medians."""
    cpu = any("server_cpu_ms_per_request" in r for r in a["rounds"])
    rows = [[r["round"], r["tree"], fmt(r["requests"]), r["errors"],
             *(fmt(r.get(k), 1) for k in ("per_second", "p50_ms", "p95_ms", "p99_ms")),
             *([fmt(r.get("server_cpu_ms_per_request"), 2)] if cpu else [])] for r in a["rounds"]]
    out = [f"{a['clients']} `collapsed` clients, {a['seconds_per_round']} s a round, the two servers alternately:", ""]
    out += table(["round", "server", "requests", "errors", "q/s", "p50", "p95", "p99",
                  *(["server CPU ms/request"] if cpu else [])], rows) + [""]
    med = a["medians"]
    out += ["Medians: " + "; ".join(
        f"{label} {fmt(m.get('per_second'), 1)} q/s, p50 {fmt(m.get('p50_ms'), 1)} ms, p99 {fmt(m.get('p99_ms'), 1)} ms"
        + (f", {fmt(m.get('server_cpu_ms_per_request'), 2)} ms of server CPU a request"
           if m.get("server_cpu_ms_per_request") is not None else "") for label, m in med.items()) + ".", ""]
    return out


def section(name: str, d: dict, plots: Path) -> list[str]:
    out: list[str] = []
    s = d.get("settings", {})
    out += [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), ""]
    if d.get("against"):
        return out + [f"Embedder {s.get('embedder')}.", ""] + against_section(d["against"])
    out += [f"{s.get('clients')} fast-mode clients, {s.get('graph_clients')} tri_graph clients, "
            f"{s.get('seconds_per_phase')} s per phase, embedder {s.get('embedder')}.", ""]
    for target in ("serve", "lambda"):
        t = d.get(target)
        if not t:
            continue
        rows = []
        for phase in t["phases"]:
            for mode, r in phase["modes"].items():
                rss = phase.get("server_rss_mb") or {}
                rows.append([phase["phase"], mode, r["requests"], r["errors"],
                             *(fmt(r.get(k), 1) for k in ("per_second", "p50_ms", "p95_ms", "p99_ms")),
                             f"{rss['min']:.0f}–{rss['max']:.0f}" if rss else "–"])
        if target == "serve":
            st = t["store"]
            out += [f"`eragraph serve`, {fmt(st.get('chunks_added'))} chunks:", ""]
        else:
            dep = t["deployment"]
            containers = t.get("containers") or {}
            out += [f"Query handler under moto, {fmt(dep['chunks'])} chunks ({dep['vectors']}; modes not "
                    f"offered there: {', '.join(t.get('modes_not_offered') or []) or 'none'}; containers: "
                    f"{json.dumps(containers)}; moto answers one request at a time):", ""]
        out += table(["phase", "mode", "requests", "errors", "q/s", "p50", "p95", "p99",
                      "server RSS MB" if target == "serve" else "process RSS MB"], rows) + [""]
        for phase in t["phases"]:
            if phase.get("writer"):
                out += [f"Writer beside `{phase['phase']}`: {json.dumps(phase['writer'])}.", ""]
        if target == "serve":
            c = t["checks"]
            met = c["targets_met"]
            out += ["Targets (issue 32): "
                    f"errors {c['errors']} ({'met' if met['zero_errors'] else 'missed'}); "
                    f"collapsed {fmt(c.get('collapsed_per_second'), 1)} q/s (target ≥ 100: "
                    f"{'met' if met['collapsed_100_per_second'] else 'missed'}); "
                    f"collapsed p99 alone {fmt(c.get('collapsed_p99_ms_alone'), 1)} ms (≤ 100: "
                    f"{'met' if met['collapsed_p99_alone_100ms'] else 'missed'}); "
                    f"with a writer {fmt(c.get('collapsed_p99_ms_with_writer'), 1)} ms (≤ 250: "
                    f"{'met' if met['collapsed_p99_writer_250ms'] else 'missed'}); "
                    f"collapsed p95 beside tri_graph / alone {fmt(c.get('collapsed_p95_ratio_beside_tri_graph'), 2)} "
                    f"(≤ 2: {'met' if met['collapsed_p95_within_2x_beside_tri_graph'] else 'missed'}). "
                    f"Server RSS {t['memory_mb'].get('start')} MB at start, "
                    f"{t['memory_mb'].get('max')} MB at most, {t['memory_mb'].get('end')} MB at the end.", ""]
        elif t.get("memory_mb"):
            m = t["memory_mb"]
            out += [f"Process RSS (moto and the handler) {m.get('start')} MB at the first phase, {m.get('max')} MB "
                    f"at most, {m.get('end')} MB at the end.", ""]
    return out


LOAD_TARGETS = (("zero_errors", "load: no request fails", "errors", "{:g} errors"),
                ("collapsed_100_per_second", "load: collapsed ≥ 100 q/s", "collapsed_per_second", "{:.1f} q/s"),
                ("collapsed_p99_alone_100ms", "load: collapsed p99 alone ≤ 100 ms", "collapsed_p99_ms_alone",
                 "{:.1f} ms"),
                ("collapsed_p99_writer_250ms", "load: collapsed p99 beside a writer ≤ 250 ms",
                 "collapsed_p99_ms_with_writer", "{:.1f} ms"),
                ("collapsed_p95_within_2x_beside_tri_graph", "load: collapsed p95 beside tri_graph ≤ 2× alone",
                 "collapsed_p95_ratio_beside_tri_graph", "{:.2f}×"))


def targets(name: str, d: dict) -> list[list[str]]:
    """Issue 32's targets for `eragraph serve`, as the run checked them (``serve.checks``)."""
    checks = (d.get("serve") or {}).get("checks")
    if not checks:
        return []
    run = f"`{name}` ({d.get('settings', {}).get('clients')} clients, `eragraph serve`)"
    rows = []
    for key, label, measure, form in LOAD_TARGETS:
        v = checks.get(measure)
        rows.append([label, run, "–" if v is None else form.format(v), verdict(checks["targets_met"].get(key)), ""])
    return rows
