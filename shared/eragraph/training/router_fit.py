"""The router's training procedure on runs already collected (training.router collects them):
per-dataset recalls (``Dataset``), the inputs of a fold (``Inputs``), the scorers (logistic
regression, an MLP with feature attention), the thresholds, and ``thresholded``: fit on some
datasets, then thresholds chosen on that model's own scores of them. Every evaluation (leave one
dataset out, held-out halves) and the shipped heads run this one procedure.

Inputs (``Inputs``): ``text+vector`` (lexical cues + the embedding projected on the leading
principal directions of the training questions' embeddings), ``text`` (the lexical cues alone:
the head for queries another embedder embedded) or ``parse`` (a spaCy parse's features)."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from ..domain.fusion import rrf, weighted_rrf
from ..domain.question_features import FEATURE_NAMES, LEXICAL_FEATURE_NAMES, lexical_features
from ..domain.retrieval_features import AGREEMENT_FEATURE_NAMES, agreement_features
from ..domain.router_model import VECTOR_INPUTS, RouterModel, project

FETCH = 20
K = 5
GRAPH_PRICE = 0.002  # Recall@5 a question must gain to be worth sending to the graph
SEED = 20250601
COMPONENTS = 8
OBJECTIVES = ("mean", "worst")
BANDS = ("always", "optional")
THRESHOLD_SCORES = ("own", "crossfit")
SCORERS = ("best", "logistic", "mlp")
CROSSFIT_FOLDS = 3


@dataclasses.dataclass(frozen=True)
class Procedure:
    """How thresholds (and the scorer kind) are chosen over the training datasets.

    ``objective``: ``mean`` maximizes the mean over the datasets of the routed Recall@5 minus
    the latency price; ``worst`` maximizes the worst dataset's regret, its routed Recall@5 minus
    the price minus the better of its two sides' (dense side, graph) Recall@5, the mean of the
    same breaking ties: a router that does not lose much on any dataset before one that gains on
    some. ``fusion_band``: ``always`` keeps tau_L < tau_H (the fusion band is never empty);
    ``optional`` also allows tau_L = tau_H, two routes and no fusion. ``thresholds``: ``own``
    chooses them on the fitted model's scores of its own training questions; ``crossfit`` on
    out-of-fold scores (``CROSSFIT_FOLDS`` folds by a hash of the question id, each fold scored
    by the model fitted on the others, every dataset in every fold): the scores a question gets
    from a scorer that never saw it, as a query's are, so a scorer that fits noise in its
    training questions does not take thresholds that route by that noise. ``scorer``: ``best``
    (the kind with the better leave-one-dataset-out figure), or ``logistic`` / ``mlp``."""

    objective: str = "mean"
    fusion_band: str = "always"
    thresholds: str = "own"
    scorer: str = "best"

    def __post_init__(self) -> None:
        for value, allowed, what in ((self.objective, OBJECTIVES, "objective"), (self.fusion_band, BANDS, "fusion band"),
                                     (self.thresholds, THRESHOLD_SCORES, "threshold scores"),
                                     (self.scorer, SCORERS, "scorer")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r} (choose {', '.join(allowed)})")

    def describe(self) -> dict:
        return {"objective": self.objective, "fusion_band": self.fusion_band, "thresholds": self.thresholds,
                "scorer": self.scorer}


CURRENT = Procedure()


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
        self._agree: np.ndarray | None = None
        self.r = {m: np.array([recall(r[m], r["doc"], r["support"]) for r in rows])
                  for m in ("dense", "bm25", "hybrid", "graph")}

    @property
    def agree(self) -> np.ndarray:
        """phi_agree of every question (domain.retrieval_features), from its cached lists: the
        dense side is the hybrid list, as ``auto`` reads it with the shipped dense side."""
        if self._agree is None:
            missing = [r["id"] for r in self.rows if "dense_scores" not in r]
            if missing:
                raise SystemExit(f"{self.name}: no dense scores cached for {len(missing)} questions "
                                 "(`eragraph router train` adds them to router-runs.json)")
            self._agree = np.array([agreement_features(r["dense"], r["dense_scores"], r["bm25"], r["hybrid"],
                                                       r["graph"]) for r in self.rows],
                                   dtype=np.float64).reshape(len(self.rows), len(AGREEMENT_FEATURE_NAMES))
        return self._agree

    def subset(self, keep: list[bool] | np.ndarray) -> Dataset:
        """The same dataset with only the questions where ``keep`` is true."""
        return Dataset(self.name, [r for r, k in zip(self.rows, keep) if k])

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
    principal directions of the training questions' embeddings), text (the cues alone), or the
    parse features."""

    def __init__(self, kind: str, train: list[Dataset], components: int = COMPONENTS) -> None:
        self.kind = kind
        self.projection = self.projection_mean = None
        if kind in VECTOR_INPUTS:
            vecs = np.vstack([d.vec for d in train])
            self.projection_mean = vecs.mean(axis=0)
            _, _, vt = np.linalg.svd(vecs - self.projection_mean, full_matrices=False)
            self.projection = vt[:components]
            self.names = (*LEXICAL_FEATURE_NAMES, *(f"embedding_pc{i + 1}" for i in range(len(self.projection))),
                          *(AGREEMENT_FEATURE_NAMES if kind == "text+vector+agreement" else ()))
        elif kind == "text":
            self.names = tuple(LEXICAL_FEATURE_NAMES)
        else:
            self.names = tuple(FEATURE_NAMES)

    def phi(self, d: Dataset) -> np.ndarray:
        if self.kind == "parse":
            if d.parse_phi is None:
                raise SystemExit(f"{d.name}: no parse features cached; rerun with the parser available")
            return d.parse_phi
        if self.kind == "text":
            return d.lex
        parts = [d.lex, project(d.vec, self.projection_mean, self.projection)]
        return np.hstack(parts + ([d.agree] if self.kind == "text+vector+agreement" else []))


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
    if model.inputs == "text":
        return model.score_z(model.z(d.lex))
    parts = [d.lex, project(d.vec, model.projection_mean, model.projection)]
    phi = np.hstack(parts + ([d.agree] if model.inputs == "text+vector+agreement" else []))
    return model.score_z(model.z(phi))


def routed_each(d: Dataset, s: np.ndarray, fused: np.ndarray, side: str, lo: float, hi: float) -> np.ndarray:
    """Every question's Recall@5 by the route its score takes."""
    return np.where(s < lo, d.r[side], np.where(s >= hi, d.r["graph"], fused))


def routed(d: Dataset, s: np.ndarray, fused: np.ndarray, side: str, lo: float, hi: float) -> tuple[float, dict]:
    low, high = s < lo, s >= hi
    mid = ~low & ~high
    r = routed_each(d, s, fused, side, lo, hi)
    return float(r.mean()), {side: float(low.mean()), "fusion": float(mid.mean()), "tri_graph": float(high.mean())}


def choose_thresholds(parts: list[tuple[Dataset, np.ndarray, np.ndarray]], side: str,
                      procedure: Procedure = CURRENT) -> tuple[float, float]:
    """(tau_L, tau_H) on a 0.05 grid (with 0 and past 1 at the ends) by ``procedure``'s
    objective over the datasets of ``parts`` (each with its scores and its fused recalls)."""
    grid = sorted({0.0, 1.0000001, *np.round(np.linspace(0.05, 0.95, 19), 2)})
    best_side = [max(float(d.r[side].mean()), float(d.r["graph"].mean())) for d, _, _ in parts]
    step = 0 if procedure.fusion_band == "optional" else 1
    best, best_val = (0.0, 1.0000001), (-np.inf, -np.inf)
    for i, lo in enumerate(grid):
        for hi in grid[i + step:]:  # "always": tau_L < tau_H, the fusion band never empty
            vals = []
            for d, s, fused in parts:
                r, shares = routed(d, s, fused, side, lo, hi)
                vals.append(r - GRAPH_PRICE * (shares["fusion"] + shares["tri_graph"]))
            mean = float(np.mean(vals))
            val = ((mean, mean) if procedure.objective == "mean"
                   else (float(min(v - b for v, b in zip(vals, best_side))), mean))
            if val[0] > best_val[0] + 1e-12 or (abs(val[0] - best_val[0]) <= 1e-12 and val[1] > best_val[1] + 1e-12):
                best, best_val = (float(min(lo, 1.0)), float(min(hi, 1.0))), val
    return best


def crossfit_fold(question_id: str, folds: int = CROSSFIT_FOLDS) -> int:
    return int(hashlib.sha256(("crossfit:" + question_id).encode()).hexdigest(), 16) % folds


def out_of_fold_scores(kind: str, sets: list[Dataset], side: str, inputs: str,
                       components: int = COMPONENTS) -> list[np.ndarray]:
    """Every training question's score by the model fitted (by ``model_for``) on the other
    folds of every dataset: one array per dataset, in its order."""
    folds = [np.array([crossfit_fold(str(r["id"])) for r in d.rows], dtype=int) for d in sets]
    out = [np.zeros(len(d.rows)) for d in sets]
    for f in range(CROSSFIT_FOLDS):
        train = [d.subset(fo != f) for d, fo in zip(sets, folds)]
        model = model_for(kind, [t for t in train if t.rows], side, inputs=inputs, components=components)
        for d, fo, o in zip(sets, folds, out):
            if (fo == f).any():
                o[fo == f] = scores(model, d.subset(fo == f))
    return out


def thresholded(kind: str, sets: list[Dataset], side: str, inputs: str, components: int = COMPONENTS,
                procedure: Procedure = CURRENT) -> RouterModel:
    """The procedure every evaluation runs and the shipped heads come from: fit on ``sets``, then
    the thresholds on that model's own scores of them, or (``procedure.thresholds ==
    "crossfit"``) on out-of-fold scores of the same datasets' questions by models of the same
    kind fitted on two thirds of them (thresholds chosen on the scores of models fitted on other
    datasets would be applied to another model's scale: on earlier runs they sent 98 % of
    HotpotQA to tri_graph)."""
    model = model_for(kind, sets, side, inputs=inputs, components=components)
    given = (out_of_fold_scores(kind, sets, side, inputs, components) if procedure.thresholds == "crossfit"
             else [scores(model, d) for d in sets])
    parts = [(d, s, d.fused(s, side)) for d, s in zip(sets, given)]
    lo, hi = choose_thresholds(parts, side, procedure)
    return dataclasses.replace(model, tau_low=lo, tau_high=hi)


def evaluate(model: RouterModel, d: Dataset, side: str, per_question: bool = False) -> dict:
    """Routed Recall@5 of ``model`` on ``d`` beside every single mode's on the same questions
    (with ``per_question``, also every question's: its id, the routed recall and the graph's)."""
    s = scores(model, d)
    fused = d.fused(s, side)
    r, shares = routed(d, s, fused, side, model.tau_low, model.tau_high)
    mask = d.r["graph"] != d.r[side]
    a = auc(s[mask], (d.r["graph"][mask] > d.r[side][mask]).astype(int)) if mask.any() else None
    each = ({"per_question": {"ids": [str(q["id"]) for q in d.rows],
                              "auto": [round(float(x), 4) for x in routed_each(d, s, fused, side, model.tau_low,
                                                                               model.tau_high)],
                              "graph": [round(float(x), 4) for x in d.r["graph"]],
                              side: [round(float(x), 4) for x in d.r[side]]}} if per_question else {})
    return {"questions": len(d.rows), "tau_low": model.tau_low, "tau_high": model.tau_high,
            "recall@5_auto": round(r, 4), "recall@5_fusion": round(float(fused.mean()), 4),
            "auc_disagreement": None if a is None else round(a, 4),
            "route_shares": {k: round(v, 3) for k, v in shares.items()},
            **{f"recall@5_{m}": round(float(v.mean()), 4) for m, v in d.r.items()}, **each}


def leave_one_dataset_out(kind: str, sets: list[Dataset], side: str, inputs: str,
                          components: int = COMPONENTS, procedure: Procedure = CURRENT) -> dict:
    """Each dataset routed by the procedure run on the others; ``worst_regret@5`` is the
    lowest, over the datasets, of its routed Recall@5 minus the better of its two sides'."""
    rows = {held.name: evaluate(thresholded(kind, [d for d in sets if d is not held], side, inputs, components,
                                            procedure), held, side)
            for held in sets}
    aucs = [v["auc_disagreement"] for v in rows.values() if v["auc_disagreement"] is not None]
    worst = min(v["recall@5_auto"] - max(v[f"recall@5_{side}"], v["recall@5_graph"]) for v in rows.values())
    return {"per_dataset": rows, "mean_recall@5_auto": round(float(np.mean([v["recall@5_auto"] for v in rows.values()])), 4),
            "worst_regret@5": round(float(worst), 4), "mean_auc": round(float(np.mean(aucs)), 4) if aucs else None}


def held_out_halves(kind: str, sets: list[Dataset], side: str, inputs: str, components: int = COMPONENTS,
                    procedure: Procedure = CURRENT) -> dict:
    """Every dataset split in two by the question id's hash (domain.halves): the procedure run on
    half 0 of all datasets routes half 1 of each, and the reverse; ``both`` pools the two, so
    that every question is routed once by a router that never saw it. Each routed half keeps
    every question's routed and graph Recall@5 (``per_question``), to pair them."""
    from ..domain.halves import halves

    split = [(d, np.array(halves(r["id"] for r in d.rows))) for d in sets]
    out: dict = {}
    for train_half in (0, 1):
        train = [d.subset(h == train_half) for d, h in split]
        model = thresholded(kind, [t for t in train if t.rows], side, inputs, components, procedure)
        out[f"train{train_half}_test{1 - train_half}"] = {
            d.name: evaluate(model, d.subset(h != train_half), side, per_question=True)
            for d, h in split if (h != train_half).any()}
    both = {}
    for d, _ in split:
        runs = [out[k][d.name] for k in ("train0_test1", "train1_test0") if d.name in out[k]]
        n = sum(r["questions"] for r in runs)
        both[d.name] = {"questions": n, **{key: round(sum(r[key] * r["questions"] for r in runs) / n, 4)
                                           for key in runs[0] if key.startswith("recall@5_")}}
    out["both"] = both
    return out
