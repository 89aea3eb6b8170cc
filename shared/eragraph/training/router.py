"""`eragraph router train`: fit the complexity router (EA-GraphRAG §3.3-3.4) on the dev
questions and write its weights (numpy-free JSON, loaded without torch) and a report.

    eragraph router train --data ../shared/data --stores stores \\
        --datasets musique,hotpotqa,popqa,multihop_rag --limit 300 \\
        --weights shared/eragraph/weights/router.json --report bench-results/router-train.json

1. Runs. For every dataset, the store ``STORES/<dataset>`` (built by `eragraph bench retrieval`)
   answers each dev question with dense, bm25 and tri_graph (top 20 leaf chunks each); the
   hybrid list is their RRF, exactly as the ``hybrid`` mode computes it. The runs and the
   question's embedding are cached in ``STORES/<dataset>/router-runs.json`` (delete it after a
   change to retrieval: the lists are the code's of the day they were run).
   Inputs phi(q) (``--inputs``): ``text+vector`` (the default) is the question's lexical cues
   and its embedding projected on the leading ``--components`` principal directions of the
   training questions' embeddings (fitted on the training datasets only, fold by fold); no
   parser runs. ``text`` is the lexical cues alone. ``parse`` is the features of a spaCy parse
   (the router's earlier inputs). ``text+vector+agreement`` adds what the cached lists themselves
   say (domain.retrieval_features: the dense side's and the graph's agreement, the dense scores;
   runs cached before the scores were kept get them from the store's chunk vectors, no retrieval
   again); ``auto`` with such weights runs the dense side and the graph before it routes.
   The embeddings are the store's embedder's (or ``--embedder``'s):
   its identity is recorded in the report and in each head of the weights.
2. Labels. The dense side (dense or hybrid: whichever has the higher pooled Recall@5) against
   tri_graph; the disagreement set is the questions where exactly one of them gets more
   supporting passages into the top 5; y = 1 when the graph does.
3. Scorers. Logistic regression and an MLP with feature attention (torch, training only), on
   z-scored features. Leave-one-dataset-out: train on three datasets, choose the thresholds on
   them, evaluate routing on the fourth. The scorer with the higher mean held-out Recall@5
   (then AUC) is kept.
4. Thresholds tau_L < tau_H (one grid step, 0.05, apart at least) maximize the mean per-dataset Recall@5 of the routed answers minus
   a small latency price per question sent to the graph (fusion or tri_graph), on the scores of
   the model being thresholded over its own training datasets (in each fold: the three it was
   fit on). ``--objective worst`` maximizes instead the worst training dataset's regret (its
   routed Recall@5, less the price, minus the better of its dense side's and the graph's), and
   keeps the scorer with the better worst leave-one-dataset-out regret; ``--fusion-band
   optional`` also allows tau_L = tau_H (no fusion route); ``--thresholds crossfit`` chooses them
   on out-of-fold scores (each training question scored by a model fitted on the other two
   thirds of every dataset) instead of the model's own; ``--scorer`` fixes the scorer kind. The
   report's ``procedure`` says which.
5. The final scorer is fit on every dataset and thresholded the same way: the shipped router is
   the procedure the leave-one-dataset-out rows evaluate, run on all four. Its figures on the
   questions it was fit on are reported as ``in_sample`` only.
6. Held-out halves. Every dataset's questions split in two by a hash of the question id
   (domain.halves): the procedure run on half 0 of every dataset routes half 1 of each, and the
   reverse, beside each single mode's Recall@5 on the same half (report ``halves``).
7. Two heads. With text+vector inputs, a text-only head (``--inputs text``'s model) is trained
   by the same procedure and shipped inside the same weights (``text_head``; report
   ``text_head``): the query router scores with the text+vector head only vectors of the
   embedder it was trained with, and with the text-only head any other (Titan on AWS). A store
   built by another embedder (``ERAGRAPH_EMBEDDER=bedrock``) trains heads for that embedder.
8. The graph side. ``--graph-mode paths`` takes the graph list from the ``paths`` mode instead of
   tri_graph (cached beside it as ``graph_paths``): the labels, thresholds and held-out rows are
   then paths against the dense side, and the weights' info says they expect
   ``ERAGRAPH_GRAPH_ROUTE=paths``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..bench.common import run_record
from ..domain.question_features import features
from ..domain.router_model import VECTOR_INPUTS, RouterModel
from .router_fit import (BANDS, COMPONENTS, CURRENT, FETCH, GRAPH_PRICE, OBJECTIVES, SCORERS, THRESHOLD_SCORES, Dataset,
                         Inputs, Procedure, evaluate, held_out_halves, leave_one_dataset_out, thresholded)
from .router_fit import auc, choose_thresholds, model_for, recall, routed, scores  # noqa: F401  (tests, callers)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("train", help="train the auto router on dev questions",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder with <dataset>/questions.jsonl")
    p.add_argument("--stores", required=True, help="folder with one built store per dataset")
    p.add_argument("--datasets", default="musique,hotpotqa,popqa,multihop_rag")
    p.add_argument("--limit", type=int, default=300, help="dev questions per dataset (file order)")
    p.add_argument("--weights", required=True, help="where to write the router weights (JSON)")
    p.add_argument("--report", required=True, help="where to write the training report (JSON)")
    p.add_argument("--inputs", choices=("text+vector", "text", "parse", "text+vector+agreement"), default="text+vector",
                   help="the router's features: lexical cues + projected embedding (default; a text-only head "
                        "is trained beside it), the lexical cues alone, a spaCy parse, or text+vector and the "
                        "agreement of the dense side's and the graph's lists (auto then runs both first)")
    p.add_argument("--no-text-head", action="store_true",
                   help="with text+vector inputs, do not train the text-only head")
    p.add_argument("--embedder", default=None,
                   help="embed the questions with this ERAGRAPH_EMBEDDER choice (default: the store's own); "
                        "the heads record its identity")
    p.add_argument("--components", type=int, default=COMPONENTS,
                   help="principal directions of the question embedding (text+vector inputs)")
    p.add_argument("--graph-mode", choices=("tri_graph", "paths"), default="tri_graph",
                   help="the graph side the router learns to choose: tri_graph (default) or paths (the "
                        "weights then expect GRAPH_ROUTE=paths at query time; their info says so)")
    p.add_argument("--objective", choices=OBJECTIVES, default="mean",
                   help="thresholds (and the scorer kind) by the mean routed Recall@5 over the training datasets "
                        "(default) or by the worst dataset's regret against the better of its two sides")
    p.add_argument("--fusion-band", choices=BANDS, default="always",
                   help="always: tau_L < tau_H (default); optional: tau_L = tau_H allowed (no fusion route)")
    p.add_argument("--thresholds", choices=THRESHOLD_SCORES, default="own",
                   help="choose tau on the model's own scores of its training questions (default) or on "
                        "out-of-fold scores (crossfit: each question scored by a model fitted without it)")
    p.add_argument("--scorer", choices=SCORERS, default="best",
                   help="the scorer kind: the better by leave-one-dataset-out (best, default), logistic or mlp")
    p.add_argument("--no-progress", action="store_true")
    return p


# ----------------------------------------------------------------------------- runs


def collect(store: Path, questions_path: Path, limit: int, show: bool, parse: bool = False,
            embedder: str | None = None, graph_mode: str = "tri_graph") -> tuple[list[dict], str]:
    """(per question: its embedding (and with ``parse`` its parse features), the supporting ids
    and the dense / bm25 / graph leaf lists (``graph_mode``'s: tri_graph or paths, cached apart);
    the identity of the embedder that made the embeddings: the store's own, or ``embedder`` (an
    ERAGRAPH_EMBEDDER choice) when given)."""
    cache_path = store / "router-runs.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    from ..bench.common import load_questions, progress
    from ..bootstrap import build_engine
    from ..config import settings_from_env
    from ..services import graph_query, path_query
    from ..services.summary_search import search

    settings = settings_from_env()
    if embedder:
        settings = dataclasses.replace(settings, embedder=embedder)
    engine = build_engine("local", store, settings)
    if not engine.lexical.ready():
        raise SystemExit(f"{store}: no lexical index yet; run `eragraph reindex --store {store}`")
    corpus = {d.doc_id for d in engine.graph.list_documents()}
    questions = load_questions(questions_path, limit, corpus_ids=corpus)
    rows = []
    graph_key = "graph" if graph_mode == "tri_graph" else "graph_" + graph_mode
    graph_fn = graph_query.tri_graph if graph_mode == "tri_graph" else path_query.paths

    def stale(key: str) -> bool:
        return key not in cache or "vector" not in cache[key] or (parse and "phi" not in cache[key]) or \
            graph_key not in cache[key]

    todo = [q for q in questions if stale(str(q["id"]))]
    bar = progress(len(todo), f"runs {store.name}", show)
    for q in questions:
        key = str(q["id"])
        if not stale(key) and "dense_scores" not in cache[key]:  # runs cached before the scores were kept
            cache[key]["dense_scores"] = dense_scores(engine, cache[key]["vector"], cache[key]["dense"])
        if stale(key):
            text = q["question"]
            vector = engine.embedder.embed([text])[0]
            hits = search(engine, "dense", vector, FETCH, None, 0.6)
            dense = [c.node_id for c in hits]
            bm25 = [h.node_id for h in engine.lexical.search(text, FETCH)]
            graph = [c.node_id for c in graph_fn(engine, text, vector, FETCH, None)]
            ids = set(dense) | set(bm25) | set(graph)
            nodes = engine.graph.get_nodes(ids)
            row = cache.get(key, {})
            row.update({"vector": [round(float(x), 6) for x in vector], "dense": [c.node_id for c in hits],
                        "dense_scores": [round(float(c.score), 6) for c in hits], "bm25": bm25, graph_key: graph})
            row["doc"] = {**row.get("doc", {}), **{i: nodes[i].doc_id for i in ids if i in nodes}}
            cache[key] = row
            if parse:
                cache[key]["phi"] = features(engine.question_parser.parse(text)).tolist()
            bar.update(1)
        rows.append({"id": key, "question": q["question"], "support": list(q["supporting_ids"]), **cache[key],
                     "graph": cache[key][graph_key]})
    bar.close()
    cache_path.write_text(json.dumps(cache))
    return rows, engine.embedder.identity


def dense_scores(engine, vector: list[float], ids: list[str]) -> list[float]:
    """The dense list's scores (inner products with the question's vector, as the index scores
    them) from the store's chunk vectors: no search runs again."""
    vecs = engine.vectors.get_vectors(ids)
    q = np.asarray(vector, dtype=np.float32)
    return [round(float(vecs[i] @ q), 6) if i in vecs else 0.0 for i in ids]


def train_head(sets: list[Dataset], side: str, inputs: str, components: int = COMPONENTS,
               embedder: str = "", procedure: Procedure = CURRENT) -> tuple[dict, RouterModel]:
    """One head on ``inputs``: both scorers left out one dataset at a time, the better kept (by
    ``procedure``'s objective: the mean routed Recall@5, or the worst dataset's regret), its
    held-out halves, and the head fit on every dataset by the same procedure (``in_sample``
    reports it on the questions it saw)."""
    part: dict[str, Any] = {"inputs": inputs, "features": list(Inputs(inputs, sets, components).names),
                            "lodo": {k: leave_one_dataset_out(k, sets, side, inputs, components, procedure)
                                     for k in ("logistic", "mlp")}}
    first = "mean_recall@5_auto" if procedure.objective == "mean" else "worst_regret@5"
    kind = procedure.scorer if procedure.scorer != "best" else max(
        ("logistic", "mlp"), key=lambda k: (part["lodo"][k][first], part["lodo"][k]["mean_recall@5_auto"],
                                            part["lodo"][k]["mean_auc"] or 0))
    final = thresholded(kind, sets, side, inputs, components, procedure)
    in_sample = {}
    for d in sets:
        r = evaluate(final, d, side)
        in_sample[d.name] = {"recall@5_auto": r["recall@5_auto"], "route_shares": r["route_shares"]}
    info = {"trained_on": {d.name: len(d.rows) for d in sets},
            "kind_chosen_by": ("leave-one-dataset-out " + ("Recall@5" if procedure.objective == "mean" else "worst regret")
                               if procedure.scorer == "best" else "given (--scorer)"),
            **({} if procedure == CURRENT else {"procedure": procedure.describe()}),
            "lodo_mean_recall@5": part["lodo"][kind]["mean_recall@5_auto"], "command": "eragraph router train"}
    model = dataclasses.replace(final, info=info, embedder=embedder)
    part.update({"chosen": kind, "tau_low": final.tau_low, "tau_high": final.tau_high,
                 "thresholds_from": ("the final model's scores of its training questions" if procedure.thresholds == "own"
                                     else "out-of-fold scores of its training questions (3 folds by question id)")
                                    + " (the procedure of every LODO fold)",
                 "halves": held_out_halves(kind, sets, side, inputs, components, procedure), "in_sample": in_sample})
    return part, model


def run(args: Any) -> dict:
    started = time.perf_counter()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    show = not args.no_progress
    inputs = getattr(args, "inputs", "text+vector")
    components = getattr(args, "components", COMPONENTS)
    graph_mode = getattr(args, "graph_mode", "tri_graph")
    collected = [collect(Path(args.stores) / n, Path(args.data) / n / "questions.jsonl", args.limit, show,
                         parse=inputs == "parse", embedder=getattr(args, "embedder", None), graph_mode=graph_mode)
                 for n in names]
    identities = {identity for _, identity in collected}
    if len(identities) > 1:
        raise SystemExit("the stores were built by different embedders (" + ", ".join(sorted(identities)) +
                         "): one router head is trained on one embedder's vectors")
    embedder = identities.pop() if identities else ""
    sets = [Dataset(n, rows) for n, (rows, _) in zip(names, collected)]
    procedure = Procedure(getattr(args, "objective", "mean"), getattr(args, "fusion_band", "always"),
                          getattr(args, "thresholds", "own"), getattr(args, "scorer", "best"))
    report, model = train_sets(sets, inputs, components, embedder, text_head=not getattr(args, "no_text_head", False),
                               procedure=procedure)
    if graph_mode != "tri_graph":  # the graph side it learned: the query needs GRAPH_ROUTE to match
        model = dataclasses.replace(model, info={**model.info, "graph_mode": graph_mode,
                                                 "needs": f"ERAGRAPH_GRAPH_ROUTE={graph_mode}"})
        report["graph_mode"] = graph_mode
    Path(args.weights).parent.mkdir(parents=True, exist_ok=True)
    Path(args.weights).write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    import shlex

    report.update({"command": "eragraph " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["router"]
                   else "eragraph router train", "seconds": round(time.perf_counter() - started, 1),
                   "run": run_record()})
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=1) + "\n")
    heads = [("", report)] + ([("text_head", report["text_head"])] if "text_head" in report else [])
    print(json.dumps({k: report[k] for k in ("dense_side", "embedder")}
                     | {name or "head": {"inputs": h["inputs"], "chosen": h["chosen"], "tau": [h["tau_low"], h["tau_high"]],
                                         "lodo_mean_recall@5_auto": h["lodo"][h["chosen"]]["mean_recall@5_auto"]}
                        for name, h in heads}, indent=1))
    return report


def train_sets(sets: list[Dataset], inputs: str = "text+vector", components: int = COMPONENTS, embedder: str = "",
               text_head: bool = True, procedure: Procedure = CURRENT) -> tuple[dict, RouterModel]:
    """(the training report, the weights) from collected runs: the head on ``inputs`` and, for
    text+vector inputs, a text-only head by the same procedure (``text_head`` in both)."""
    pooled = {m: float(np.mean(np.concatenate([d.r[m] for d in sets]))) for m in ("dense", "hybrid")}
    side = "hybrid" if pooled["hybrid"] >= pooled["dense"] else "dense"
    report: dict[str, Any] = {
        "datasets": {d.name: {"questions": len(d.rows), **{f"recall@5_{m}": round(float(v.mean()), 4)
                                                            for m, v in d.r.items()},
                              "disagreement": int((d.r["graph"] != d.r[side]).sum()),
                              "graph_wins": int((d.r["graph"] > d.r[side]).sum())} for d in sets},
        "dense_side": side, "dense_side_reason": f"pooled Recall@5 dense {pooled['dense']:.4f}, hybrid {pooled['hybrid']:.4f}",
        "graph_price": GRAPH_PRICE, "procedure": procedure.describe(), "embedder": embedder, "halves_by": "domain.halves.half_of: sha256 of the question id",
    }
    part, model = train_head(sets, side, inputs, components, embedder, procedure)
    report.update(part)
    if text_head and inputs in VECTOR_INPUTS:
        report["text_head"], text = train_head(sets, side, "text", components, embedder, procedure)
        model = dataclasses.replace(model, text_head=text)
    return report, model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eragraph router")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
