"""Before / after comparisons of retrieval runs: per pair, paired per question with a bootstrap
interval, and pooled over the pairs of one study."""

from __future__ import annotations

from typing import Any

from ..common import paired_bootstrap
from .markdown import table


def paired(before: dict, after: dict, mode: str, key: str) -> list[float] | None:
    """Per-question after - before of ``key`` in ``mode``, when both runs kept every question's
    recall for the same questions in the same order; None otherwise."""
    ids = after.get("question_ids")
    a = after.get("modes", {}).get(mode, {}).get("per_question", {}).get(key)
    b = before.get("modes", {}).get(mode, {}).get("per_question", {}).get(key)
    if not ids or ids != before.get("question_ids") or a is None or b is None or len(a) != len(b):
        return None
    return [x - y for x, y in zip(a, b)]


def paired_cells(groups: list[list[float]]) -> tuple[list[Any], str]:
    """Table cells [n, better, worse, mean, 95 % interval] of paired differences, bootstrapped
    by group, and the verdict on a drop."""
    diffs = [d for g in groups for d in g]
    mean_, low, high = paired_bootstrap(groups)
    if mean_ >= 0:
        verdict_ = "did not drop"
    elif high < 0:
        verdict_ = "dropped (the whole 95 % interval lies below zero)"
    else:
        verdict_ = "moved down by less than its noise (the 95 % interval includes zero)"
    cells = [len(diffs), sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs), f"{mean_:+.4f}",
             f"{low:+.4f} to {high:+.4f}"]
    return cells, f"{verdict_} ({cells[3]}, {cells[4]})"


PAIRED_NOTE = ("Paired: each question's recall after minus before; *better* / *worse* count the questions "
               "whose recall rose / fell; the interval is a 95 % percentile bootstrap of the mean "
               "difference (10,000 resamples, seed 0; pooled rows resample within each corpus).")


def before_after_section(runs: list[tuple[str, dict]]) -> list[str]:
    """Retrieval runs named NAME-before and NAME-after side by side: Recall@k with summaries
    crediting their leaves (and leaves only) per mode, after - before; with every question's
    recall in both runs, the paired difference and its bootstrap interval, per pair and pooled
    over every pair."""
    by_name = dict(runs)
    out: list[str] = []
    pooled: dict[tuple[str, str], list[list[float]]] = {}
    pairs: list[str] = []
    for name, after in runs:
        if not name.endswith("-after") or name[:-len("after")] + "before" not in by_name:
            continue
        base = name[:-len("-after")]
        before = by_name[base + "-before"]
        ks = after.get("k") or [2, 5]
        out += [f"### {base}: before / after", "",
                f"`{base}-before` vs `{base}-after` (each with its command and run: current runs on the benchmark's "
                "page, superseded ones in the [archive](archive.md)). "
                "Recall with summaries lets a summary credit every leaf document beneath it.", ""]
        rows, drops = [], []
        four = lambda x: None if x is None else f"{x:.4f}"  # noqa: E731
        for mode, row in after["modes"].items():
            old = before["modes"].get(mode, {})
            for key in [f"recall@{k}_with_summaries" for k in ks] + [f"recall@{k}" for k in ks]:
                a, b = row.get(key), old.get(key)
                delta = None if a is None or b is None else a - b
                rows.append([mode, key, four(b), four(a), None if delta is None else f"{delta:+.4f}"])
                if key == f"recall@{ks[-1]}_with_summaries" and delta is not None and delta < 0:
                    drops.append(f"`{mode}` by {-delta:.4f}")
        out += table(["mode", "measure", "before", "after", "after − before"], rows) + [""]
        keys = [f"recall@{ks[-1]}_with_summaries", f"recall@{ks[-1]}"]
        paired_rows, verdicts = [], []
        for mode in after["modes"]:
            for key in keys:
                diffs = paired(before, after, mode, key)
                if diffs is not None:
                    cells, said = paired_cells([diffs])
                    paired_rows.append([mode, key, *cells])
                    pooled.setdefault((study_of(base), mode, key), []).append(diffs)
                    if key == keys[0]:
                        verdicts.append(f"`{mode}` {said}")
        if paired_rows:
            pairs.append(base)
            out += table(["mode", "measure", "questions", "better", "worse", "mean after − before", "95 % interval"],
                         paired_rows) + ["", PAIRED_NOTE, ""]
            out += [f"Recall@{ks[-1]} with summaries: " + "; ".join(verdicts) + ".", ""]
        else:
            out += [f"Recall@{ks[-1]} with summaries " + ("dropped: " + ", ".join(drops) if drops else "did not drop")
                    + ".", ""]
    for study in sorted({study_of(p) for p in pairs}):
        members = [p for p in pairs if study_of(p) == study]
        if len(members) < 2:
            continue
        out += ["### Before / after, pooled" + (f": {study}" if study else ""), "",
                "Every before / after pair of this study with every question's recall ("
                + ", ".join(f"`{p}`" for p in members) + "), pooled question by question.", ""]
        rows, verdicts = [], []
        for (st, mode, key), groups in pooled.items():
            if st != study or len(groups) != len(members):
                continue
            cells, said = paired_cells(groups)
            rows.append([mode, key, *cells])
            if key.endswith("_with_summaries"):
                verdicts.append(f"`{mode}` {said}")
        out += table(["mode", "measure", "questions", "better", "worse", "mean after − before", "95 % interval"],
                     rows) + ["", PAIRED_NOTE, ""]
        if verdicts:
            out += ["Recall with summaries, pooled: " + "; ".join(verdicts) + ".", ""]
    return out


def study_of(pair: str) -> str:
    """The study a before / after pair belongs to: the last word of a name of three words or
    more (``retrieval-musique-minilm-summaries`` -> ``summaries``), else one unnamed study; only
    pairs of one study pool."""
    return pair.rsplit("-", 1)[-1] if pair.count("-") >= 2 else ""
