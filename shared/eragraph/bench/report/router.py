"""The auto router's page: its training report (`eragraph router train`,
router-train.json), leave-one-dataset-out, and the router's out-of-sample target."""

from __future__ import annotations

from pathlib import Path

from .markdown import table, verdict
from .runs import run_line

PAGE = "router"
PREFIX = "router-train"
TITLE = "The auto router: training and leave-one-dataset-out"
INTRO = ["`eragraph router train` fits the `auto` mode's router on three datasets and scores it on the "
         "fourth, once per dataset held out; the retrieval runs score the shipped router in sample."]


def dataset(name: str, data: dict) -> str:
    return ""


def section(name: str, d: dict, plots: Path) -> list[str]:
    """The auto router's training report: leave-one-dataset-out, per scorer."""
    out = [f"### {name}", "", f"Command: `{d.get('command', 'eragraph router train')}`", "", run_line(d), "",
           f"Dense side: `{d['dense_side']}` ({d['dense_side_reason']}). Labels: the disagreement set "
           "(questions where exactly one of the dense side and `tri_graph` gets more supporting passages "
           "into the top 5). Each row trains on the other datasets, chooses the thresholds on them and "
           "routes the held-out one. "
           f"Kept: `{d['chosen']}`; final thresholds tau_L = {d['tau_low']}, tau_H = {d['tau_high']} "
           f"({d['thresholds_from']}).", ""]
    header = ["scorer", "held out", "n", "AUC", "dense", "hybrid", "tri_graph", "fusion", "auto", "routes", "tau_L", "tau_H"]
    rows = []
    for kind, lodo in d["lodo"].items():
        for held, r in lodo["per_dataset"].items():
            rows.append([kind, held, d["datasets"][held]["questions"], r.get("auc_disagreement"),
                         r["recall@5_dense"], r["recall@5_hybrid"], r["recall@5_graph"], r["recall@5_fusion"],
                         r["recall@5_auto"], ", ".join(f"{k} {100 * v:.0f} %" for k, v in r["route_shares"].items()),
                         r["tau_low"], r["tau_high"]])
        rows.append([kind, "**mean**", "", lodo.get("mean_auc"), "", "", "", "", lodo["mean_recall@5_auto"], "", "", ""])
    out += table(header, rows) + [""]
    return out


def targets(name: str, data: dict) -> list[list[str]]:
    return lodo_target_rows(data, name)


def lodo_target_rows(report: dict | None, name: str = "router-train") -> list[list[str]]:
    """The router out of sample (router-train.json, the kept scorer's leave-one-dataset-out
    rows): auto >= the best single mode - 0.01 on every held-out dataset."""
    if not report or report.get("chosen") not in report.get("lodo", {}):
        return []
    rows = []
    for dataset, r in report["lodo"][report["chosen"]]["per_dataset"].items():
        singles = {m: r[f"recall@5_{m}"] for m in ("dense", "bm25", "hybrid", "graph") if f"recall@5_{m}" in r}
        best = max(singles, key=singles.get)
        v, goal = r["recall@5_auto"], singles[best] - 0.01
        ok = v >= goal
        mode = "tri_graph" if best == "graph" else best
        rows.append([f"auto Recall@5 ≥ best single mode − 0.01, leave-one-dataset-out: {dataset}",
                     f"`{name}` ({report['chosen']}, held out {dataset})",
                     f"{v:.3f} vs {mode} {singles[best]:.3f}", verdict(ok), "" if ok else f"{v - goal:+.3f}"])
    return rows
