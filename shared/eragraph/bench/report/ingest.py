"""The ingest throughput page: where an ingest's time goes, the models alone and in the
pipeline, and the throughput targets (`eragraph bench ingest`)."""

from __future__ import annotations

from pathlib import Path

from .markdown import fmt, table, verdict
from .runs import command, corpus_name, run_line

PAGE = PREFIX = "ingest"
TITLE = "Ingest throughput"
INTRO: list[str] = []
TARGETS = {"outside_models": 0.15, "model_efficiency": 0.90}


def dataset(name: str, data: dict) -> str:
    return corpus_name(name, data)


def section(name: str, d: dict, plots: Path) -> list[str]:
    out = [f"### {name}", "", f"Command: `{command(d)}`", "", run_line(d), "",
           f"{d['documents']} documents → {d['chunks']} chunks + {d['summaries']} summaries; embedder "
           f"`{d['embedder']}`, NER `{d.get('ner')}`; total {fmt(d['seconds']['total'])} s "
           f"({fmt(d['pipeline']['documents_per_s'])} documents/s, {fmt(d['pipeline']['chunks_per_s'])} chunks/s).", ""]
    out += table(["stage", "seconds", "share"],
                 [[k, v, d["stages_share"].get(k)] for k, v in d["stages_seconds"].items()])
    rows = [["embedder alone", d["embedder_alone"]["texts_per_s"], None],
            ["embedder in pipeline", d["embed_in_pipeline"]["texts_per_s"], d.get("embed_efficiency")]]
    if d.get("ner_alone"):
        rows += [["NER alone", d["ner_alone"]["texts_per_s"], None],
                 ["NER in pipeline", d["ner_in_pipeline"]["texts_per_s"], d.get("ner_efficiency")]]
    out += ["", *table(["model", "texts/s", "in-pipeline / alone"], rows),
            "", f"Time outside the models (embedder, NER): {fmt(d.get('outside_models_share'))} of the total.", ""]
    return out


def targets(name: str, d: dict) -> list[list[str]]:
    run = f"`{name}` ({d['documents']} docs, {d.get('embedder')}, NER {d.get('ner')})"
    v = d.get("outside_models_share")
    ok = None if v is None else v <= TARGETS["outside_models"]
    rows = [["ingest: time outside the models ≤ 15 %", run, fmt(v), verdict(ok),
             "" if ok or v is None else f"{100 * (v - TARGETS['outside_models']):+.1f} pt"]]
    for key, label in (("embed_efficiency", "embedder"), ("ner_efficiency", "NER")):
        v = d.get(key)
        ok = None if v is None else v >= TARGETS["model_efficiency"]
        note = "" if ok or v is None else f"{100 * (TARGETS['model_efficiency'] - v):.1f} pt short"
        if v is not None and v > 1.05:
            note = "above 1: load from other processes slowed the standalone pass; noise, not a speed-up"
        rows.append([f"ingest: {label} in pipeline ≥ 90 % of standalone", run, fmt(v), verdict(ok), note])
    return rows
