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
   parser runs. ``parse`` is the features of a spaCy parse (the router's earlier inputs).
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
   fit on).
5. The final scorer is fit on every dataset and thresholded the same way: the shipped router is
   the procedure the leave-one-dataset-out rows evaluate, run on all four. Its figures on the
   questions it was fit on are reported as ``in_sample`` only.
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
from ..domain.fusion import rrf, weighted_rrf
from ..domain.question_features import FEATURE_NAMES, LEXICAL_FEATURE_NAMES, features, lexical_features
from ..domain.router_model import RouterModel, project

FETCH = 20
K = 5
GRAPH_PRICE = 0.002  # Recall@5 a question must gain to be worth sending to the graph
SEED = 20250601
COMPONENTS = 8


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("train", help="train the auto router on dev questions",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="folder with <dataset>/questions.jsonl")
    p.add_argument("--stores", required=True, help="folder with one built store per dataset")
    p.add_argument("--datasets", default="musique,hotpotqa,popqa,multihop_rag")
    p.add_argument("--limit", type=int, default=300, help="dev questions per dataset (file order)")
    p.add_argument("--weights", required=True, help="where to write the router weights (JSON)")
    p.add_argument("--report", required=True, help="where to write the training report (JSON)")
    p.add_argument("--inputs", choices=("text+vector", "parse"), default="text+vector",
                   help="the router's features: lexical cues + projected embedding (default), or a spaCy parse")
    p.add_argument("--components", type=int, default=COMPONENTS,
                   help="principal directions of the question embedding (text+vector inputs)")
    p.add_argument("--no-progress", action="store_true")
    return p


# ----------------------------------------------------------------------------- runs


def collect(store: Path, questions_path: Path, limit: int, show: bool, parse: bool = False) -> list[dict]:
    """Per question: its embedding (and with ``parse`` its parse features), the supporting ids
    and the dense / bm25 / tri_graph leaf lists."""
    cache_path = store / "router-runs.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    from ..bench.common import load_questions, progress
    from ..bootstrap import build_engine
    from ..config import settings_from_env
    from ..services import graph_query
    from ..services.summary_search import search

    engine = build_engine("local", store, settings_from_env())
    if not engine.lexical.ready():
        raise SystemExit(f"{store}: no lexical index yet; run `eragraph reindex --store {store}`")
    corpus = {d.doc_id for d in engine.graph.list_documents()}
    questions = load_questions(questions_path, limit, corpus_ids=corpus)
    rows = []
    def stale(key: str) -> bool:
        return key not in cache or "vector" not in cache[key] or (parse and "phi" not in cache[key])

    todo = [q for q in questions if stale(str(q["id"]))]
    bar = progress(len(todo), f"runs {store.name}", show)
    for q in questions:
        key = str(q["id"])
        if stale(key):
            text = q["question"]
            vector = engine.embedder.embed([text])[0]
            dense = [c.node_id for c in search(engine, "dense", vector, FETCH, None, 0.6)]
            bm25 = [h.node_id for h in engine.lexical.search(text, FETCH)]
            graph = [c.node_id for c in graph_query.tri_graph(engine, text, vector, FETCH, None)]
            ids = set(dense) | set(bm25) | set(graph)
            nodes = engine.graph.get_nodes(ids)
            cache[key] = {"vector": [round(float(x), 6) for x in vector], "dense": dense, "bm25": bm25,
                          "graph": graph, "doc": {i: nodes[i].doc_id for i in ids if i in nodes}}
            if parse:
                cache[key]["phi"] = features(engine.question_parser.parse(text)).tolist()
            bar.update(1)
        rows.append({"id": key, "question": q["question"], "support": list(q["supporting_ids"]), **cache[key]})
    bar.close()
    cache_path.write_text(json.dumps(cache))
    return rows


def recall(ids: list[str], doc: dict, support: list[str], k: int = K) -> float:
    """Recall@k over the first k documents of a chunk list: every leaf-level mode cuts its list
    one document at a time (services.leaf_ranking), so a second chunk of a document never takes
    a place another document could have."""
    docs = list(dict.fromkeys(doc[i] for i in ids if doc.get(i)))[:k]
    return len(set(support) & set(docs)) / len(support)


class Dataset:
    def __init__(self, name: str, rows: list[dict]) -> None:
        self.name = name
        self.rows = rows
        self.lex = np.array([lexical_features(r["question"]) for r in rows], dtype=np.float64)
        self.vec = np.array([r["vector"] for r in rows], dtype=np.float64)
        self.parse_phi = (np.array([r["phi"] for r in rows], dtype=np.float64) if rows and "phi" in rows[0]
                          else None)
        for r in rows:
            r["hybrid"] = [i for i, _ in rrf([r["dense"], r["bm25"]])][:FETCH]
        self.r = {m: np.array([recall(r[m], r["doc"], r["support"]) for r in rows])
                  for m in ("dense", "bm25", "hybrid", "graph")}

    def fused(self, s: np.ndarray, side: str) -> np.ndarray:
        return np.array([recall([i for i, _ in weighted_rrf(r[side], r["graph"], float(si))], r["doc"], r["support"])
                         for r, si in zip(self.rows, s)])


# ----------------------------------------------------------------------------- scorers


def fit(kind: str, z: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    if kind == "logistic":
        from sklearn.linear_model import LogisticRegression

        lr = LogisticRegression(C=0.1, class_weight="balanced", max_iter=2000)
        lr.fit(z, y)
        return {"w": lr.coef_[0].astype(np.float64), "b": np.array(float(lr.intercept_[0]))}
    import torch

    torch.manual_seed(SEED)
    d, hidden = z.shape[1], 16
    wa = torch.nn.Linear(d, d)
    l1 = torch.nn.Linear(d, hidden)
    l2 = torch.nn.Linear(hidden, 1)
    params = list(wa.parameters()) + list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.Adam(params, lr=0.01, weight_decay=1e-2)
    zt = torch.tensor(z, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    pos = max(float(y.mean()), 1e-3)
    weight = torch.where(yt > 0, 0.5 / pos, 0.5 / max(1 - pos, 1e-3))
    for _ in range(300):
        opt.zero_grad()
        a = torch.softmax(wa(zt), dim=-1)
        h = torch.relu(l1(a * zt * d))
        logit = l2(h).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, yt, weight=weight)
        loss.backward()
        opt.step()
    return {"Wa": wa.weight.detach().double().numpy(), "ba": wa.bias.detach().double().numpy(),
            "W1": l1.weight.detach().double().numpy(), "b1": l1.bias.detach().double().numpy(),
            "w2": l2.weight.detach().double().numpy()[0], "b2": np.array(float(l2.bias.detach()[0]))}


def auc(s: np.ndarray, y: np.ndarray) -> float | None:
    pos, neg = s[y == 1], s[y == 0]
    if not len(pos) or not len(neg):
        return None
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


class Inputs:
    """phi(q) for one fold: text+vector (lexical cues + the embedding projected on the leading
    principal directions of the training questions' embeddings), or the parse features."""

    def __init__(self, kind: str, train: list[Dataset], components: int = COMPONENTS) -> None:
        self.kind = kind
        self.projection = self.projection_mean = None
        if kind == "text+vector":
            vecs = np.vstack([d.vec for d in train])
            self.projection_mean = vecs.mean(axis=0)
            _, _, vt = np.linalg.svd(vecs - self.projection_mean, full_matrices=False)
            self.projection = vt[:components]
            self.names = (*LEXICAL_FEATURE_NAMES, *(f"embedding_pc{i + 1}" for i in range(len(self.projection))))
        else:
            self.names = tuple(FEATURE_NAMES)

    def phi(self, d: Dataset) -> np.ndarray:
        if self.kind == "parse":
            if d.parse_phi is None:
                raise SystemExit(f"{d.name}: no parse features cached; rerun with the parser available")
            return d.parse_phi
        return np.hstack([d.lex, project(d.vec, self.projection_mean, self.projection)])


def model_for(kind: str, sets: list[Dataset], side: str, tau=(0.5, 0.5), inputs: str = "text+vector",
              components: int = COMPONENTS) -> RouterModel:
    fold = Inputs(inputs, sets, components)
    phis = [fold.phi(d) for d in sets]
    phi = np.vstack(phis)
    mean, std = phi.mean(axis=0), phi.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    zs, ys = [], []
    for d, ph in zip(sets, phis):
        g, o = d.r["graph"], d.r[side]
        mask = g != o
        zs.append((ph[mask] - mean) / std)
        ys.append((g[mask] > o[mask]).astype(np.float64))
    params = fit(kind, np.vstack(zs), np.concatenate(ys))
    return RouterModel(fold.names, mean, std, kind, params, tau[0], tau[1], side, side, inputs=inputs,
                       projection=fold.projection, projection_mean=fold.projection_mean)


def scores(model: RouterModel, d: Dataset) -> np.ndarray:
    """s(q) of every question of d, with the model's own inputs (its projection, for text+vector)."""
    if model.needs_parse:
        return model.score_z(model.z(d.parse_phi))
    phi = np.hstack([d.lex, project(d.vec, model.projection_mean, model.projection)])
    return model.score_z(model.z(phi))


def routed(d: Dataset, s: np.ndarray, fused: np.ndarray, side: str, lo: float, hi: float) -> tuple[float, dict]:
    low, high = s < lo, s >= hi
    mid = ~low & ~high
    r = np.where(low, d.r[side], np.where(high, d.r["graph"], fused))
    return float(r.mean()), {side: float(low.mean()), "fusion": float(mid.mean()), "tri_graph": float(high.mean())}


def choose_thresholds(parts: list[tuple[Dataset, np.ndarray, np.ndarray]], side: str) -> tuple[float, float]:
    grid = sorted({0.0, 1.0000001, *np.round(np.linspace(0.05, 0.95, 19), 2)})
    best, best_val = (0.0, 1.0000001), -1.0
    for i, lo in enumerate(grid):
        for hi in grid[i + 1:]:  # tau_L < tau_H: the fusion band is never empty by construction
            vals = []
            for d, s, fused in parts:
                r, shares = routed(d, s, fused, side, lo, hi)
                vals.append(r - GRAPH_PRICE * (shares["fusion"] + shares["tri_graph"]))
            val = float(np.mean(vals))
            if val > best_val + 1e-12:
                best, best_val = (float(lo), float(min(hi, 1.0))), val
    return best


def run(args: Any) -> dict:
    started = time.perf_counter()
    names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    show = not args.no_progress
    inputs = getattr(args, "inputs", "text+vector")
    components = getattr(args, "components", COMPONENTS)
    sets = [Dataset(n, collect(Path(args.stores) / n, Path(args.data) / n / "questions.jsonl", args.limit, show,
                               parse=inputs == "parse"))
            for n in names]
    pooled = {m: float(np.mean(np.concatenate([d.r[m] for d in sets]))) for m in ("dense", "hybrid")}
    side = "hybrid" if pooled["hybrid"] >= pooled["dense"] else "dense"
    report: dict[str, Any] = {
        "datasets": {d.name: {"questions": len(d.rows), **{f"recall@5_{m}": round(float(v.mean()), 4)
                                                            for m, v in d.r.items()},
                              "disagreement": int((d.r["graph"] != d.r[side]).sum()),
                              "graph_wins": int((d.r["graph"] > d.r[side]).sum())} for d in sets},
        "dense_side": side, "dense_side_reason": f"pooled Recall@5 dense {pooled['dense']:.4f}, hybrid {pooled['hybrid']:.4f}",
        "inputs": inputs, "features": list(Inputs(inputs, sets, components).names), "graph_price": GRAPH_PRICE,
        "lodo": {},
    }
    for kind in ("logistic", "mlp"):
        rows = {}
        for held in sets:
            train = [d for d in sets if d is not held]
            model = model_for(kind, train, side, inputs=inputs, components=components)
            parts = []
            for d in train:
                s = scores(model, d)
                parts.append((d, s, d.fused(s, side)))
            lo, hi = choose_thresholds(parts, side)
            s = scores(model, held)
            fused = held.fused(s, side)
            r, shares = routed(held, s, fused, side, lo, hi)
            mask = held.r["graph"] != held.r[side]
            rows[held.name] = {"tau_low": lo, "tau_high": hi, "recall@5_auto": round(r, 4),
                               "recall@5_fusion": round(float(fused.mean()), 4),
                               "auc_disagreement": (round(auc(s[mask], (held.r["graph"][mask] > held.r[side][mask]).astype(int)), 4)
                                                    if mask.any() and auc(s[mask], (held.r["graph"][mask] > held.r[side][mask]).astype(int)) is not None else None),
                               "route_shares": {k: round(v, 3) for k, v in shares.items()},
                               **{f"recall@5_{m}": round(float(v.mean()), 4) for m, v in held.r.items()}}
        mean_r = float(np.mean([v["recall@5_auto"] for v in rows.values()]))
        aucs = [v["auc_disagreement"] for v in rows.values() if v["auc_disagreement"] is not None]
        report["lodo"][kind] = {"per_dataset": rows, "mean_recall@5_auto": round(mean_r, 4),
                                "mean_auc": round(float(np.mean(aucs)), 4) if aucs else None}
    kind = max(("logistic", "mlp"), key=lambda k: (report["lodo"][k]["mean_recall@5_auto"],
                                                    report["lodo"][k]["mean_auc"] or 0))
    # the shipped model is made by the very procedure each fold ran: fit on every dataset, then
    # thresholds on that model's own scores of them (thresholds chosen on the folds' out-of-fold
    # scores would be applied to another model's scale: on these runs they sent 98 % of HotpotQA
    # to tri_graph)
    final = model_for(kind, sets, side, inputs=inputs, components=components)
    parts = [(d, scores(final, d), d.fused(scores(final, d), side)) for d in sets]
    lo, hi = choose_thresholds(parts, side)
    final = dataclasses.replace(final, tau_low=lo, tau_high=hi)
    in_sample = {}
    for d in sets:
        s = scores(final, d)
        r, shares = routed(d, s, d.fused(s, side), side, lo, hi)
        in_sample[d.name] = {"recall@5_auto": round(r, 4), "route_shares": {k: round(v, 3) for k, v in shares.items()}}
    info = {"trained_on": {d.name: len(d.rows) for d in sets}, "kind_chosen_by": "leave-one-dataset-out Recall@5",
            "lodo_mean_recall@5": report["lodo"][kind]["mean_recall@5_auto"], "command": "eragraph router train"}
    model = RouterModel(final.feature_names, final.mean, final.std, kind, final.params, lo, hi, side, side, info,
                        inputs=final.inputs, projection=final.projection, projection_mean=final.projection_mean)
    Path(args.weights).parent.mkdir(parents=True, exist_ok=True)
    Path(args.weights).write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    import shlex

    report.update({"command": "eragraph " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["router"]
                   else "eragraph router train", "chosen": kind, "tau_low": lo, "tau_high": hi, "thresholds_from": "the final model's scores of its training questions (the procedure of every LODO fold)",
                   "in_sample": in_sample, "seconds": round(time.perf_counter() - started, 1),
                   "run": run_record()})
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("dense_side", "chosen", "tau_low", "tau_high")}
                     | {"lodo": {k: {"mean_recall@5_auto": v["mean_recall@5_auto"], "mean_auc": v["mean_auc"]}
                                 for k, v in report["lodo"].items()}}, indent=1))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eragraph router")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
