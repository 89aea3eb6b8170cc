"""The follow-up page: Recall@5 of a follow-up asked alone, with its conversation (the local
rewrite) and as the original question, on pairs built from the QA dev sets
(`eragraph bench followup`), and the target: with the conversation, at least 90 % of the
original's."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, run_line

PAGE = PREFIX = "followup"
TITLE = "Follow-ups"
INTRO = ["A question whose first supporting document's title T appears in it becomes two turns: "
         "\"Tell me about T.\", then the question with T replaced by \"it\" (MultiHop-RAG's questions name "
         "the article's publication, not its headline: there T is its `news_source`). Recall@5 of turn 2 "
         "asked alone, with the conversation (made standalone by the local rewrite: no model) and as the "
         "original question. A run with the `hash` embedder is a smoke run only (no semantic embedding).", ""]
TARGET = 0.9


def dataset(name: str, data: dict) -> str:
    return f"{data.get('data', name)} ({data.get('embedder')})"


def section(name: str, d: dict, plots: Path) -> list[str]:
    smoke = " **Smoke run** (hash embedder)." if d.get("embedder") == "hash" else ""
    out = [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
           f"{d['data']}: {fmt(d['pairs'])} pairs; store of {fmt(d['documents'])} of the corpus's "
           f"{fmt(d['corpus_documents'])} documents ({d['sample']}); embedder `{d['embedder']}`; NER: {d['ner']}; "
           f"rewrites {d['rewrites']}; "
           + (f"build {d['build_seconds']} s." if d.get("build_seconds") is not None else
              "measured on the store an earlier run of the same command built (`--reuse-store`).")
           + smoke, ""]
    if d.get("note"):  # what the run's numbers do not say (a loaded machine)
        out += [f"Note: {d['note']}", ""]
    out += table(["mode", "turn 2 alone", "with conversation", "original", "with / original", "target ≥ 90 %"],
                 [[m, r["recall@5_turn2_alone"], r["recall@5_with_conversation"], r["recall@5_original"],
                   r["with_conversation_over_original"], verdict(r["target_met"])] for m, r in d["modes"].items()])
    out += ["", "Examples:", ""]
    out += [f"- turn 1 \"{e['turn1']}\" · turn 2 \"{e['turn2']}\" · retrieved as \"{e['rewritten']}\""
            for e in d.get("examples", [])] + [""]
    return out


def targets(name: str, d: dict) -> list[list[str]]:
    if d.get("embedder") == "hash":  # a smoke run measures no target
        return []
    rows = []
    for mode, r in d["modes"].items():
        ratio = r["with_conversation_over_original"]
        ok = None if ratio is None else ratio >= TARGET
        gap = "" if ratio is None else (f"{(ratio - TARGET) * 100:.1f} points to spare" if ok
                                        else f"{(TARGET - ratio) * 100:.1f} points short")
        rows.append([f"follow-up: Recall@5 with the conversation ≥ 90 % of the original ({d['data']}, {mode})",
                     f"`{name}` ({d['pairs']} pairs, {d.get('embedder')})", fmt(ratio), verdict(ok), gap])
    return rows
