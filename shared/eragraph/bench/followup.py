"""`eragraph bench followup`: follow-up questions made standalone, measured on the QA dev sets.

A question whose first supporting document's title T appears in it becomes two turns: turn 1
"Tell me about T.", turn 2 the question with T replaced by "it" (MultiHop-RAG's questions name
the article's publication, never its headline: there T is the first supporting article's
``news_source``). Recall@5 (supporting documents among the first five results' documents) of
turn 2 asked alone, turn 2 with the conversation (made standalone by the local rewrite:
services.conversation.standalone, no model), and the original question. Target: with the
conversation, at least 90 % of the original's.

The store holds the pairs' supporting documents and, with ``--max-docs``, the first documents
of the corpus up to that many in all (a sample, stated in the result), else the whole corpus.
NER for the rewrite: spaCy's (the entity graph's model) with ``--ner spacy`` (default when it
is installed), else capitalized phrases."""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

from ..domain.conversation import USER, Message
from ..services import conversation as conversations
from ..services.ingest import ingest
from ..services.query import available_modes, query
from ..services.resummarize import drain
from .common import (add_common_options, bench_settings, close_engine, finish, fresh_dir, load_corpus,
                     load_questions, mean, open_engine, progress, read_jsonl, recall_at_k, result_doc_ids)

K = 5
TARGET = 0.9


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("followup", help="follow-up questions with and without the conversation (Recall@5)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="a QA folder holding corpus.jsonl and questions.jsonl")
    p.add_argument("--store", required=True, help="a store directory (made afresh)")
    p.add_argument("--modes", default="dense,hybrid", help="comma-separated retrieval modes (default dense,hybrid)")
    p.add_argument("--max-docs", type=int, help="documents in the store at most (the pairs' support first)")
    p.add_argument("--max-pairs", type=int, help="at most N pairs (in question order)")
    p.add_argument("--ner", choices=("spacy", "capitalized"), help="the rewrite's NER (default: spacy if installed)")
    p.add_argument("--reuse-store", action="store_true",
                   help="measure on the store --store holds (built by an earlier run with the same flags)")
    add_common_options(p)
    p.set_defaults(bench=run)
    return p


def subject(question: dict, rows: dict[str, dict]) -> str:
    """T: the first supporting document's title, or its ``news_source`` (MultiHop-RAG), when the
    question names it as a whole phrase; "" otherwise."""
    row = rows.get(question["supporting_ids"][0]) or {}
    for t in (row.get("title") or "", row.get("news_source") or ""):
        if t and re.search(rf"(?<!\w){re.escape(t)}(?!\w)", question["question"]):
            return t
    return ""


def pairs(questions: list[dict], rows: dict[str, dict]) -> list[dict]:
    out = []
    for q in questions:
        t = subject(q, rows)
        if not t:
            continue
        follow = re.sub(rf"(?<!\w){re.escape(t)}(?!\w)", "it", q["question"])
        out.append({"id": q.get("id"), "subject": t, "turn1": f"Tell me about {t}.", "turn2": follow,
                    "original": q["question"], "supporting_ids": q["supporting_ids"]})
    return out


def _finder(kind: str | None):
    if kind == "capitalized":
        return None, "capitalized phrases"
    try:
        from ..providers.spacy_ner import SpacyEntityExtractor

        extractor = SpacyEntityExtractor()
        extractor.load()
        return extractor.mentions, f"spaCy {extractor.identity} (with capitalized phrases)"
    except Exception as exc:  # noqa: BLE001 (not installed: the model-free mentions, said so)
        if kind == "spacy":
            raise
        return None, f"capitalized phrases (spaCy unavailable: {type(exc).__name__})"


def run(args: Any) -> dict:
    data = Path(args.data)
    rows = {str(r["id"]): r for r in read_jsonl(data / "corpus.jsonl")}
    built = pairs(load_questions(data / "questions.jsonl", corpus_ids=rows), rows)[:args.max_pairs]
    docs = load_corpus(data / "corpus.jsonl")
    if args.max_docs:
        need = {s for p in built for s in p["supporting_ids"]}
        kept = [d for d in docs if d.doc_id in need]
        kept += [d for d in docs if d.doc_id not in need][:max(0, args.max_docs - len(kept))]
        docs = kept
    settings = bench_settings(args)
    reuse = args.reuse_store and Path(args.store).is_dir()
    engine = open_engine(args.profile, Path(args.store) if reuse else fresh_dir(Path(args.store)), settings)
    engine.ingest_hooks, engine.remove_hooks, engine.entities = [], [], None  # no entity graph needed
    started = time.perf_counter()
    if not reuse:
        with progress(len(docs), "build store", not args.no_progress) as bar:
            ingest(engine, docs, progress=bar.update)
        drain(engine)
    build_seconds = None if reuse else time.perf_counter() - started
    missing = [d.doc_id for d in docs if engine.graph.get_document(d.doc_id) is None] if reuse else []
    if missing:
        raise ValueError(f"{args.store} lacks {len(missing)} of this run's documents (first: {missing[0]})")
    finder, ner = _finder(args.ner)
    if finder is not None:
        engine.entities = _Mentions(finder)  # read by services.conversation.mentions only
    modes = [m for m in args.modes.split(",") if m in available_modes(engine)]
    per_mode: dict[str, dict] = {}
    rewrites = []
    with progress(len(built) * len(modes), "pairs", not args.no_progress) as bar:
        for mode in modes:
            scores: dict[str, list[float]] = {"turn2_alone": [], "with_conversation": [], "original": []}
            for p in built:
                rewrite = conversations.standalone(engine, p["turn2"], [Message(USER, p["turn1"])])
                if mode == modes[0]:
                    rewrites.append(rewrite.how)
                for name, text in (("turn2_alone", p["turn2"]), ("with_conversation", rewrite.question),
                                   ("original", p["original"])):
                    saved, engine.entities = engine.entities, None  # modes never see the stand-in
                    try:
                        got = query(engine, text, mode=mode, k=K).results
                    finally:
                        engine.entities = saved
                    scores[name].append(recall_at_k(result_doc_ids(got), p["supporting_ids"], K))
                bar.update(1)
            means = {name: round(mean(v), 4) for name, v in scores.items()}
            ratio = means["with_conversation"] / means["original"] if means["original"] else None
            per_mode[mode] = {**{f"recall@{K}_{n}": v for n, v in means.items()},
                              "with_conversation_over_original": None if ratio is None else round(ratio, 4),
                              "target_met": ratio is not None and ratio >= TARGET}
    close_engine(engine)
    result = {"data": data.name, "documents": len(docs), "corpus_documents": len(rows),
              "sample": (f"the pairs' supporting documents and the corpus's first documents up to {args.max_docs}"
                         if args.max_docs else "the whole corpus"),
              "pairs": len(built), "embedder": settings.embedder, "profile": args.profile, "ner": ner,
              "rewrites": {how: rewrites.count(how) for how in sorted(set(rewrites))},
              "build_seconds": None if build_seconds is None else round(build_seconds, 1), "target": f"with_conversation >= {TARGET:.0%} of original",
              "examples": [{**{k: p[k] for k in ("subject", "turn1", "turn2", "original")},
                            "rewritten": conversations.standalone(engine, p["turn2"],
                                                                  [Message(USER, p["turn1"])]).question}
                           for p in built[:3]],
              "modes": per_mode}
    return finish(result, args, "followup")


class _Mentions:
    """An entity graph's stand-in for the rewrite only: its extractor's ``mentions``."""

    def __init__(self, finder) -> None:
        self.extractor = type("Finder", (), {"mentions": staticmethod(finder)})()
