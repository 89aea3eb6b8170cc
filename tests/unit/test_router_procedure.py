"""How the router's thresholds are chosen (training.router_fit.Procedure, choose_thresholds): the
mean objective, the worst dataset's regret, and whether the fusion band may be empty; on runs
built so that every route's Recall@5 is known question by question."""

from __future__ import annotations

import numpy as np
import pytest

from eragraph.training.router_fit import Dataset, Procedure, choose_thresholds, routed

N = 40


def runs(name: str, side_hits: list[bool], graph_hits: list[bool]) -> Dataset:
    """One question per entry: the dense side's (dense = bm25 = hybrid) and the graph's five
    passages each, the supporting one fifth in a list that finds it."""
    rows = []
    for i, (side, graph) in enumerate(zip(side_hits, graph_hits)):
        dense = [f"{name}{i}-s{j}" for j in range(5)]
        graph_list = [f"{name}{i}-g{j}" for j in range(5)]
        doc = {c: c + "-doc" for c in dense + graph_list}
        if side:
            doc[dense[4]] = f"{name}{i}-gold"
        if graph:
            doc[graph_list[4]] = f"{name}{i}-gold"
        rows.append({"id": f"{name}{i}", "question": f"Which river is {name} {i}?", "vector": [0.0, 1.0],
                     "support": [f"{name}{i}-gold"], "dense": dense, "bm25": dense, "graph": graph_list, "doc": doc})
    return Dataset(name, rows)


@pytest.fixture(scope="module")
def two_datasets():
    """``graph_better``: the graph finds every other question, the dense side none (best 0.5);
    ``side_better``: the dense side finds every question, the graph none (best 1). The scorer
    tells them apart not at all: both get the same spread of scores, so a threshold sending a
    share f of each to the graph leaves regrets -0.5 (1 - f) and -f (the worst is least at
    f = 1/3); the mean routed Recall@5 is highest at f = 0 (the graph lifts the first by half
    what it takes from the second). The fused lists find nothing (given as such), so a fusion
    band only costs."""
    graph_better = runs("g", [False] * N, [i % 2 == 0 for i in range(N)])
    side_better = runs("s", [True] * N, [False] * N)
    s = (np.arange(N) + 0.5) / N
    return [(graph_better, s, np.zeros(N)), (side_better, s, np.zeros(N))]


def graph_shares_and_regrets(parts, lo, hi):
    shares, regrets = [], []
    for d, s, fused in parts:
        r, share = routed(d, s, fused, "hybrid", lo, hi)
        shares.append(share["tri_graph"])
        regrets.append(r - max(d.r["hybrid"].mean(), d.r["graph"].mean()))
    return shares, regrets


def test_the_runs_are_what_they_say(two_datasets):
    (g, _, _), (d, _, _) = two_datasets
    assert list(g.r["graph"]) == [1.0, 0.0] * (N // 2) and g.r["hybrid"].sum() == 0
    assert d.r["hybrid"].sum() == N and d.r["graph"].sum() == 0


def test_the_mean_objective_sends_nothing_to_the_graph(two_datasets):
    lo, hi = choose_thresholds(two_datasets, "hybrid", Procedure("mean", "optional"))
    shares, regrets = graph_shares_and_regrets(two_datasets, lo, hi)
    assert shares == [0.0, 0.0] and min(regrets) == pytest.approx(-0.5)


def test_the_worst_objective_balances_the_two_regrets(two_datasets):
    lo, hi = choose_thresholds(two_datasets, "hybrid", Procedure("worst", "optional"))
    shares, regrets = graph_shares_and_regrets(two_datasets, lo, hi)
    # f = 1/3 on a 0.05 grid: 0.30 or 0.35 to the graph, the worst regret -0.35 (against -0.5
    # for the mean objective; a worst over raw Recall@5 instead of regret would send 2/3, a
    # regret against the graph alone everything)
    assert lo == hi and 0.25 <= shares[0] <= 0.4 and shares[0] == shares[1]
    assert min(regrets) >= -0.36


def test_the_fusion_band_is_kept_unless_it_may_be_empty(two_datasets):
    for objective in ("mean", "worst"):
        lo, hi = choose_thresholds(two_datasets, "hybrid", Procedure(objective, "always"))
        assert hi - lo >= 0.05 - 1e-9
    lo, hi = choose_thresholds(two_datasets, "hybrid", Procedure("worst", "optional"))
    assert lo == hi  # the band's questions find nothing here: no band is better than any
    kept = choose_thresholds(two_datasets, "hybrid", Procedure("worst"))
    d, s, fused = two_datasets[0]
    assert routed(d, s, fused, "hybrid", *kept)[1]["fusion"] > 0 == routed(d, s, fused, "hybrid", lo, hi)[1]["fusion"]
    assert min(graph_shares_and_regrets(two_datasets, lo, hi)[1]) >= min(graph_shares_and_regrets(two_datasets, *kept)[1])


def test_the_default_procedure_is_the_mean_with_a_band():
    assert Procedure() == Procedure("mean", "always")
    for bad in ({"objective": "median"}, {"fusion_band": "never"}):
        with pytest.raises(ValueError, match="unknown"):
            Procedure(**bad)


def test_training_records_the_procedure_and_picks_the_scorer_by_it():
    from eragraph.training.router import train_sets

    rng = np.random.default_rng(3)
    sets = []
    for name in ("a", "b", "c"):
        hits = rng.random(N) < 0.5
        sets.append(runs(name, list(hits), list(~hits)))
    report, model = train_sets(sets, "text", procedure=Procedure("worst", "optional"))
    assert report["procedure"] == {"objective": "worst", "fusion_band": "optional", "thresholds": "own", "scorer": "best"}
    assert model.info["procedure"] == report["procedure"] and model.info["kind_chosen_by"].endswith("worst regret")
    lodo = report["lodo"]
    assert report["chosen"] == max(("logistic", "mlp"), key=lambda k: (lodo[k]["worst_regret@5"],
                                                                      lodo[k]["mean_recall@5_auto"]))
    for k in ("logistic", "mlp"):
        per = lodo[k]["per_dataset"].values()
        assert lodo[k]["worst_regret@5"] == pytest.approx(
            min(v["recall@5_auto"] - max(v["recall@5_hybrid"], v["recall@5_graph"]) for v in per), abs=1e-3)


def noise(name: str, seed: int, n: int = N) -> Dataset:
    """The graph finds the supporting passage of 70 % of the questions, the dense side of the
    others, and nothing in a question (its words, its 16-dimensional vector) says which."""
    rng = np.random.default_rng(seed)
    graph = rng.random(n) < 0.7
    d = runs(name, list(~graph), list(graph))
    d.vec = rng.normal(size=(n, 16))
    return d


def test_crossfit_thresholds_do_not_route_by_the_noise_the_scorer_fitted():
    from eragraph.training.router_fit import scores, thresholded

    sets = [noise("p", 11), noise("q", 12)]
    own = thresholded("logistic", sets, "hybrid", "text+vector", 16, Procedure())
    cross = thresholded("logistic", sets, "hybrid", "text+vector", 16, Procedure(thresholds="crossfit"))
    assert own.params["w"].tolist() == cross.params["w"].tolist()   # the same scorer, other thresholds
    fresh = [noise("p", 21, 200), noise("q", 22, 200)]              # questions neither saw

    def graph_share_and_recall(model, ds):
        out = [routed(d, scores(model, d), np.zeros(len(d.rows)), "hybrid", model.tau_low, model.tau_high) for d in ds]
        return np.mean([o[1]["tri_graph"] for o in out]), np.mean([o[0] for o in out])

    # on the questions it was fitted on the scorer seems to tell the sides apart, and the own-score
    # thresholds send a third of them away from the graph by that; out of fold it tells nothing,
    # and the crossfit thresholds keep every question on the graph, the better side: on fresh
    # questions that is worth 10 points and more
    assert graph_share_and_recall(own, sets)[0] < 0.8
    share, fresh_recall = graph_share_and_recall(cross, fresh)
    assert share == 1.0 and fresh_recall > graph_share_and_recall(own, fresh)[1] + 0.1


def test_a_given_scorer_kind_is_kept():
    from eragraph.training.router import train_head

    sets = [noise("p", 11), noise("q", 12), noise("r", 13)]
    part, model = train_head(sets, "hybrid", "text", procedure=Procedure(scorer="logistic", thresholds="crossfit"))
    assert part["chosen"] == model.kind == "logistic" and model.info["kind_chosen_by"] == "given (--scorer)"
    assert part["thresholds_from"].startswith("out-of-fold")
    with pytest.raises(ValueError, match="unknown threshold scores"):
        Procedure(thresholds="held-out")


def test_the_routed_halves_keep_each_question_s_recall_to_pair():
    from eragraph.domain.halves import halves
    from eragraph.training.router_fit import held_out_halves

    sets = [noise("p", 11), noise("q", 12)]
    out = held_out_halves("logistic", sets, "hybrid", "text", procedure=Procedure(thresholds="crossfit"))
    for d in sets:
        h = np.array(halves(r["id"] for r in d.rows))
        test = d.subset(h == 1)
        row = out["train0_test1"][d.name]
        each = row["per_question"]
        assert each["ids"] == [r["id"] for r in test.rows]
        assert each["graph"] == test.r["graph"].tolist() and each["hybrid"] == test.r["hybrid"].tolist()
        assert np.mean(each["auto"]) == pytest.approx(row["recall@5_auto"], abs=1e-4)
        assert all(a in (g, s) for a, g, s in zip(each["auto"], each["graph"], each["hybrid"]))
