"""The levers page: a graph-retrieval lever against ``tri_graph`` as shipped, question by question,
on the tuning half and the held-out half of each dataset's dev questions (`eragraph bench
levers`), and the setting each lever keeps: chosen on the tuning halves pooled, kept on a
dataset only where it wins that dataset's held-out half."""

from __future__ import annotations

from pathlib import Path

from .markdown import table
from .runs import command, run_line

PAGE = PREFIX = "levers"
TITLE = "Graph levers: paired, tuned on one half, read on the other"
INTRO = ["`eragraph bench levers`: `tri_graph` with one lever changed, against `base` (the walk without "
         "it), on the same store, questions and question embeddings. Halves: `domain.halves` (sha256 of "
         "the question id); half 0 tunes, half 1 is held out. Recall@5 counts leaf documents only."]
TUNING, HELD_OUT = 0, 1


def dataset(name: str, data: dict) -> str:
    """The dataset, and the study when the run names one: one current run of each."""
    base = str(data.get("dataset") or name.removeprefix(PREFIX + "-"))
    return f"{base} ({data['study']})" if data.get("study") else base


def targets(name: str, data: dict) -> list[list[str]]:
    return []


def diffs(data: dict, variant: str, half: int | None, key: str = "recall@5") -> list[float]:
    """Per question: variant - base, on one half (None: all)."""
    v = data["variants"][variant]["per_question"][key]
    b = data["variants"]["base"]["per_question"][key]
    h = data["halves"]
    return [x - y for x, y, hh in zip(v, b, h) if half is None or hh == half]


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _pts(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.2f}"


def _half_mean(data: dict, variant: str, half: int) -> float | None:
    v = data["variants"][variant]["per_question"]["recall@5"]
    return _mean([x for x, h in zip(v, data["halves"]) if h == half])


def section(name: str, d: dict, plots: Path) -> list[str]:
    rows = []
    for variant, row in d["variants"].items():
        cells = [f"`{variant}`", row["recall@5"], _half_mean(d, variant, TUNING), _half_mean(d, variant, HELD_OUT)]
        if variant == "base":
            cells += ["", "", ""]
        else:
            all_ = diffs(d, variant, None)
            cells += [_pts(_mean(diffs(d, variant, TUNING))), _pts(_mean(diffs(d, variant, HELD_OUT))),
                      f"{sum(x > 1e-9 for x in all_)} / {sum(x < -1e-9 for x in all_)}"]
        cells.append(row.get("latency_ms_p95"))
        rows.append(cells)
    n0 = sum(h == TUNING for h in d["halves"])
    store = [f"*Store*: {d['load_note']}", ""] if d.get("load_note") else []
    return [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "", *store,
            f"{d['questions']} questions ({n0} tuning, {d['questions'] - n0} held out); "
            f"{d.get('synonym_edges', '–')} synonymy edges over {d.get('entities', '–')} entities.", "",
            *table(["variant", "R@5", "R@5 tuning half", "R@5 held-out half", "Δ tuning (pts)",
                    "Δ held-out (pts)", "better / worse", "p95 ms"], rows), ""]


def notes(current: list[tuple[str, dict]], superseded: list[tuple[str, dict]]) -> list[str]:
    """Per lever: its setting chosen on the tuning halves of every dataset pooled (question by
    question), then read on each dataset's held-out half."""
    runs = [d for _, d in current if "base" in d.get("variants", {})]
    if not runs:
        return []
    kinds: dict[str, list[str]] = {}  # kind -> its variants run on every dataset that ran the kind
    for d in runs:
        for variant, row in d["variants"].items():
            if row.get("kind", "base") not in ("base", "ann") and variant not in kinds.setdefault(row["kind"], []):
                kinds[row["kind"]].append(variant)
    with_kind = {kind: [d for d in runs if any(v in d["variants"] for v in vs)] for kind, vs in kinds.items()}
    kinds = {kind: [v for v in vs if all(v in d["variants"] for d in with_kind[kind])] for kind, vs in kinds.items()}
    out = ["## Which setting each lever keeps", "",
           "The setting of each lever with the highest mean paired gain on the tuning halves, every dataset's "
           "questions pooled; then its gain on each dataset's held-out half, read once. A lever is kept on a "
           "dataset only where that gain is above zero. A dataset is named with the study of its run when the "
           "run names one (two studies of a dataset may run on different stores: see their sections).", ""]
    rows = []
    for kind, variants in kinds.items():
        if not variants:
            continue
        pooled = {v: _mean([x for d in with_kind[kind] for x in diffs(d, v, TUNING)]) or 0.0 for v in variants}
        best = max(variants, key=lambda v: (pooled[v], -variants.index(v)))
        for d in with_kind[kind]:
            held_diffs = diffs(d, best, HELD_OUT)
            held = _mean(held_diffs)
            rows.append([kind, f"`{best}`", _pts(pooled[best]), dataset("", d), _pts(held),
                         "kept" if held is not None and held > 0 else "not kept", _interval(held_diffs),
                         _r5(_half_mean(d, "base", HELD_OUT), _half_mean(d, best, HELD_OUT))])
    return out + table(["lever", "chosen on tuning", "Δ tuning, pooled (pts)", "dataset", "Δ held-out (pts)",
                        "verdict", "Δ held-out, 95 % interval (pts)", "held-out R@5: base → chosen"], rows) + [
        "", "The interval: a 95 % percentile bootstrap of the held-out half's mean paired difference "
        "(10,000 resamples, seed 0).", ""]


def _interval(xs: list[float]) -> str:
    if not xs:
        return "–"
    from ..common import paired_bootstrap

    _, low, high = paired_bootstrap([xs])
    return f"{low * 100:+.2f} to {high * 100:+.2f}"


def _r5(base: float | None, chosen: float | None) -> str:
    return "–" if base is None or chosen is None else f"{base:.4f} → {chosen:.4f}"
