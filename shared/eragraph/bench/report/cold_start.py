"""The Lambda cold start page: each function's init in the environment `sam build` made for it
(scripts/cold_start.py, cold-start.json), the query function's init target, and `eragraph
serve`'s app (its ``serve`` key: scripts/cold_start.py --serve)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import run_info, run_line

PAGE = PREFIX = "cold-start"
TITLE = "Lambda cold start"
INTRO: list[str] = []


def dataset(name: str, data: dict) -> str:
    return ""


def section(name: str, d: dict, plots: Path) -> list[str]:
    """Each Lambda function's init in its deployed environment (scripts/cold_start.py)."""
    target = d.get("target", {})
    out = [f"### {name}", "",
           f"Command: `{d.get('command', 'python3 scripts/cold_start.py --runs ' + str(d.get('runs')))}` after "
           "`bash scripts/build_lambda.sh`. Each function runs in the environment `sam build` made for it: "
           f"Python {run_info(d)['python']} with only its folder, its layers and the Lambda runtime's boto3 on "
           "`sys.path`, against moto and the OpenSearch fake on loopback. Init = the handler's import "
           "(which runs the provider preflight) + the engine build (the first `LAMBDA_ENGINE.get()`: "
           "clients, the store's recorded settings); a model a request needs (spaCy for NER or the "
           "router) loads at its first use, not here. Median of "
           f"{d.get('runs')} fresh processes.", "", run_line(d), ""]
    rows = []
    for name, r in d.get("functions", {}).items():
        if "error" in r:
            rows.append([name, " + ".join(r.get("layers", [])), r.get("unzipped_mb"), "error", "", "", r["error"]])
            continue
        rows.append([name, " + ".join(r.get("layers", [])), r.get("unzipped_mb"), r["import_s"]["median"],
                     r["engine_s"]["median"], r["init_s"]["median"],
                     f"{r['init_s']['min']}–{r['init_s']['max']}"])
    out += table(["function", "layers", "unzipped MB", "import s", "engine s", "init s", "init range s"], rows)
    if target:
        out += ["", f"Target: query init ≤ {target.get('query_init_s')} s on this machine (Lambda cuts the init "
                f"phase at 10 s): **{'met' if target.get('met') else 'missed'}**."]
    return out + [""] + serve_section(d.get("serve"))


def serve_section(serve: dict | None) -> list[str]:
    """`eragraph serve`'s app, per source tree (scripts/cold_start.py --serve)."""
    if not serve:
        return []
    out = ["#### `eragraph serve`'s app", "", f"Command: `{serve.get('command', '')}`. {serve['what']}.", "",
           run_line(serve), ""]
    rows = [[label, r["import_s"]["median"], r["modules_at_import"], r["all_modules_at_import"],
             r["first_request_s"]["median"], r["modules_after_first_request"], r["all_modules_after_first_request"],
             round(r["import_s"]["median"] + r["first_request_s"]["median"], 3)]
            for label, r in serve["results"].items()]
    out += table(["tree", "import s", "eragraph modules", "all modules", "first request s",
                  "eragraph modules after it", "all modules after it", "import + first request s"], rows)
    return out + ["", "Trees: " + "; ".join(f"{k}: {v}" for k, v in serve.get("trees", {}).items()) + ".", ""]


def targets(name: str, d: dict) -> list[list[str]]:
    """The query function's init (median) within the target the run records."""
    target, query = d.get("target") or {}, (d.get("functions") or {}).get("query") or {}
    if not target or "init_s" not in query:
        return []
    limit, v = target["query_init_s"], query["init_s"]["median"]
    ok = v <= limit
    return [[f"Lambda cold start: query init ≤ {fmt(limit)} s", f"`{name}` (median of {d.get('runs')} processes)",
             f"{fmt(v)} s", verdict(ok), f"{limit - v:.2f} s to spare" if ok else f"{v - limit:.2f} s over"]]
