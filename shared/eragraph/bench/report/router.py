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


SHIPPED_WEIGHTS = "shared/eragraph/weights/router.json"


def older(name: str, data: dict) -> str | None:
    """A training run that wrote its weights elsewhere than the shipped file is a comparison (a
    router not shipped): never the current run, whatever its date."""
    words = str(data.get("command", "")).split()
    if "--weights" in words[:-1] and words[words.index("--weights") + 1] != SHIPPED_WEIGHTS:
        return (f"a router not shipped: its weights went to `{words[words.index('--weights') + 1]}`, not "
                f"`{SHIPPED_WEIGHTS}` (a comparison; bench-results/levers-full-store.md says why)")
    return None


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
    return out + heads_section(d)


SINGLES = ("dense", "bm25", "hybrid", "graph")


def best_single(r: dict) -> tuple[str, float]:
    """(the best single mode's name, its Recall@5) among the row's recall@5_<mode> fields."""
    singles = {m: r[f"recall@5_{m}"] for m in SINGLES if f"recall@5_{m}" in r}
    best = max(singles, key=singles.get)
    return ("tri_graph" if best == "graph" else best), singles[best]


def head_rows(d: dict) -> dict[str, list[tuple[str, dict, dict]]]:
    """Per evaluation (LODO, held-out halves): (dataset, the text+vector head's row, the
    text-only head's row), each head's kept scorer."""
    text = d["text_head"]
    lodo = [(n, r, text["lodo"][text["chosen"]]["per_dataset"][n])
            for n, r in d["lodo"][d["chosen"]]["per_dataset"].items()]
    halves = [(n, r, text["halves"]["both"][n]) for n, r in d["halves"]["both"].items()]
    return {"leave-one-dataset-out": lodo, "held-out halves (each half routed by the router trained on the other)": halves}


def heads_section(d: dict) -> list[str]:
    """The AWS router beside the local one: auto with the text+vector head (the local embedder's
    vectors) and with the text-only head (any other embedder's, Titan on AWS), out of sample."""
    if "text_head" not in d or "halves" not in d:
        return []
    out = ["#### The text-only head (AWS) beside the text+vector head", "",
           f"Both heads trained with `{d.get('embedder') or 'an unrecorded embedder'}`. A query embedded by "
           "another embedder (Amazon Titan on the AWS stack) is routed by the text-only head; an operator "
           "closes this gap for Titan by running `eragraph router train` on stores built with "
           "`ERAGRAPH_EMBEDDER=bedrock` (the heads then record Titan's identity). Halves split every "
           f"dataset by {d.get('halves_by', 'a hash of the question id')}.", ""]
    header = ["dataset", "n", "auto (text+vector)", "auto (text-only)", "best single mode",
              "text+vector − best", "text-only − best", "text-only − text+vector"]
    for title, rows in head_rows(d).items():
        body = []
        for name, tv, tx in rows:
            mode, best = best_single(tv)
            a, b = tv["recall@5_auto"], tx["recall@5_auto"]
            body.append([name, tv.get("questions", d["datasets"][name]["questions"]), a, b, f"{mode} {best:.3f}",
                         f"{a - best:+.3f}", f"{b - best:+.3f}", f"{b - a:+.3f}"])
        out += [f"{title[0].upper()}{title[1:]}:", ""] + table(header, body) + [""]
    return out


def targets(name: str, data: dict) -> list[list[str]]:
    return lodo_target_rows(data, name) + text_head_target_rows(data, name)


def text_head_target_rows(report: dict | None, name: str = "router-train") -> list[list[str]]:
    """The router AWS runs (the text-only head) within 1 point of the local one (text+vector),
    on every dev set, leave-one-dataset-out and on held-out halves."""
    if not report or "text_head" not in report or "halves" not in report:
        return []
    rows = []
    for title, per in head_rows(report).items():
        short = "LODO" if title.startswith("leave") else "held-out halves"
        for dataset, tv, tx in per:
            a, b = tv["recall@5_auto"], tx["recall@5_auto"]
            ok = b >= a - 0.01
            rows.append([f"text-only router (AWS) ≥ text+vector router − 0.01, {short}: {dataset}",
                         f"`{name}` (held out {dataset})", f"{b:.3f} vs {a:.3f}", verdict(ok),
                         "" if ok else f"{b - (a - 0.01):+.3f}"])
    return rows


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
