"""The router's text+vector+agreement inputs: the retrieval's own features
(domain.retrieval_features, counted by hand and against the definition of rank-biased overlap),
the input kind in RouterModel (validation, round trip, the agreement part), training on cached
runs (training.router_fit: the kind learns what the lists say when the text says nothing), and
``auto`` with such weights answering from lists it computed once (services.routing)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eragraph.domain.question_features import LEXICAL_FEATURE_NAMES
from eragraph.domain.retrieval_features import (AGREEMENT_FEATURE_NAMES, LIST_CAP, agreement_features,
                                                rank_biased_overlap)
from eragraph.domain.router_model import RouterModel, sigmoid


def feats(**kw) -> dict[str, float]:
    args = {"dense": [], "dense_scores": [], "bm25": [], "hybrid": [], "graph": []} | kw
    return dict(zip(AGREEMENT_FEATURE_NAMES, agreement_features(**args).tolist()))


def test_agreement_counted_by_hand():
    dense = ["a", "b", "c", "d", "e", "f"]
    f = feats(dense=dense, dense_scores=[0.9, 0.8, 0.7, 0.6, 0.5, 0.1], bm25=["a", "x", "y", "c", "z"],
              hybrid=["a", "c", "b", "x", "d", "y"], graph=["g", "c", "h", "a", "i", "b", "f"])
    assert f["agree_side_graph_at5"] == pytest.approx(2 / 5)           # a, c
    assert f["agree_side_graph_at20"] == pytest.approx(3 / 20)         # a, c, b
    assert f["agree_dense_graph_at5"] == pytest.approx(2 / 5)          # c, a
    assert f["agree_dense_bm25_at5"] == pytest.approx(2 / 5)           # a, c
    assert f["graph5_in_dense20"] == pytest.approx(2 / 5)              # c, a of g c h a i
    assert f["graph_top_in_side"] == 0.0                               # g is not on the dense side
    assert f["side_top_in_graph"] == pytest.approx(1 / 4)              # a is the graph's 4th
    assert f["dense_top1"] == pytest.approx(0.9)
    assert f["dense_margin5"] == pytest.approx(0.9 - 0.5)
    assert f["dense_spread20"] == pytest.approx(0.9 - 0.1)
    assert f["graph_short"] == 0.0
    assert feats(dense=["a", "b"], dense_scores=[0.5, 0.4], hybrid=["a", "b"], graph=["a"])["graph_short"] == 1.0


def rbo_by_definition(a, b, p=0.9, depth=LIST_CAP):
    num = sum(p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, depth + 1))
    return num / sum(p ** (d - 1) for d in range(1, depth + 1))


def test_rank_biased_overlap_is_its_definition():
    rng = np.random.default_rng(3)
    pool = [f"c{i}" for i in range(30)]
    for _ in range(40):
        a = list(rng.choice(pool, size=rng.integers(0, 21), replace=False))
        b = list(rng.choice(pool, size=rng.integers(0, 21), replace=False))
        assert rank_biased_overlap(a, b) == pytest.approx(rbo_by_definition(a, b))
        assert rank_biased_overlap(a, b) == pytest.approx(rank_biased_overlap(b, a))
    same = pool[:20]
    assert rank_biased_overlap(same, same) == pytest.approx(1.0)
    assert rank_biased_overlap(pool[:20], pool[10:30]) < rank_biased_overlap(pool[:20], pool[:10] + pool[20:30])
    assert rank_biased_overlap(pool[:10], pool[10:20]) == 0.0


def test_long_lists_are_cut_and_bad_scores_refused():
    long = [f"c{i}" for i in range(500)]
    f = feats(dense=long, dense_scores=np.linspace(1, 0, 500).tolist(), hybrid=long, graph=long[::-1])
    assert f["agree_side_graph_at20"] == 0.0                            # the cut lists share nothing
    assert f["dense_spread20"] == pytest.approx(1 - np.linspace(1, 0, 500)[19])
    with pytest.raises(ValueError):
        agreement_features(["a", "b"], [0.3], [], ["a"], ["b"])
    assert np.isfinite(agreement_features([], [], [], [], [])).all()


# ------------------------------------------------------------------ the input kind

DIM = 4


def agreement_model(w_agree: dict[str, float] | None = None, b: float = 0.0, tau=(0.45, 0.55)) -> RouterModel:
    names = (*LEXICAL_FEATURE_NAMES, "embedding_pc1", "embedding_pc2", *AGREEMENT_FEATURE_NAMES)
    n = len(names)
    w = np.zeros(n)
    for k, v in (w_agree or {}).items():
        w[names.index(k)] = v
    mean = np.zeros(n)
    mean[-len(AGREEMENT_FEATURE_NAMES):] = 0.25
    return RouterModel(names, mean, np.ones(n), "logistic", {"w": w, "b": np.array(b)}, tau[0], tau[1],
                       inputs="text+vector+agreement", projection=np.eye(2, DIM), projection_mean=np.zeros(DIM))


def test_the_agreement_kind_reads_the_lists_and_round_trips():
    m = agreement_model({"agree_side_graph_at5": 2.0})
    assert m.reads_lists and not m.needs_parse
    agree = np.arange(len(AGREEMENT_FEATURE_NAMES), dtype=float) / 10
    phi, note = m.phi("Who wrote Sea 3?", np.array([3.0, -1.0, 0.0, 0.0]), None, agree)
    assert note == "" and phi[len(LEXICAL_FEATURE_NAMES):len(LEXICAL_FEATURE_NAMES) + 2].tolist() == [3.0, -1.0]
    assert phi[-len(agree):].tolist() == agree.tolist()
    assert m.score(phi) == pytest.approx(float(sigmoid(2.0 * (agree[0] - 0.25))))
    phi, note = m.phi("Who wrote Sea 3?", np.zeros(DIM), None, None)       # no lists: the training mean, said
    assert phi[-len(agree):].tolist() == [0.25] * len(agree) and "training mean" in note
    back = RouterModel.from_dict(m.to_dict())
    assert back.inputs == "text+vector+agreement" and back.feature_names == m.feature_names
    assert back.score(back.phi("Who?", np.zeros(DIM), None, agree)[0]) == pytest.approx(m.score(m.phi("Who?", np.zeros(DIM), None, agree)[0]))
    with pytest.raises(ValueError):
        m.phi("Who?", np.zeros(DIM), None, agree[:-1])
    with pytest.raises(ValueError):                                         # the names must end with the agreement's
        dataclasses.replace(m, feature_names=m.feature_names[:-2] + m.feature_names[-1:] + m.feature_names[-2:-1])
    with pytest.raises(ValueError):
        dataclasses.replace(m, projection=None)


def test_older_kinds_do_not_read_lists():
    m = agreement_model()
    old = RouterModel(LEXICAL_FEATURE_NAMES, np.zeros(len(LEXICAL_FEATURE_NAMES)), np.ones(len(LEXICAL_FEATURE_NAMES)),
                      "logistic", {"w": np.ones(len(LEXICAL_FEATURE_NAMES)), "b": np.array(0.0)}, 0.4, 0.6, inputs="text")
    assert not old.reads_lists and m.reads_lists
    assert old.phi("Who wrote Sea 3?", None, None, np.ones(3))[0].shape == (len(LEXICAL_FEATURE_NAMES),)


# ------------------------------------------------------------------ training on cached runs


def runs(name: str, n: int, seed: int) -> list[dict]:
    """Questions whose text and vector say nothing (one template, noise) while the lists do: the
    graph wins where the dense side is unsure (a low top score). Each list is six documents long,
    the supporting one 4th in the winner's, so an even fusion (ranks 1, 1, 2, 2, 3) misses it."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        graph_wins = rng.random() < 0.5
        hit = [f"{name}-h{i}-{j}" for j in range(6)]
        miss = [f"{name}-m{i}-{j}" for j in range(6)]
        top = 0.2 if graph_wins else 0.8
        side = miss if graph_wins else hit
        rows.append({"id": f"{name}-{i}", "question": f"Who wrote Sea {i}?", "support": [f"{name}-d{i}-h3"],
                     "vector": rng.normal(size=DIM).tolist(), "dense": side, "bm25": side,
                     "dense_scores": [top - 0.01 * j for j in range(6)], "graph": hit if graph_wins else miss,
                     "doc": {c: f"{name}-d{i}-{c.split('-')[-2][0]}{c.split('-')[-1]}" for c in hit + miss}})
    return rows


def test_training_on_agreement_learns_what_the_text_cannot_tell():
    """The procedure of every evaluation and of the shipped heads (router_fit.thresholded,
    leave_one_dataset_out), logistic: no torch, so the test takes a second."""
    from eragraph.training.router_fit import Dataset, leave_one_dataset_out, thresholded

    sets = [Dataset(n, runs(n, 30, s)) for n, s in (("alpha", 1), ("beta", 2), ("gamma", 3))]
    model = thresholded("logistic", sets, "hybrid", "text+vector+agreement", components=2)
    assert model.inputs == "text+vector+agreement" and model.reads_lists
    assert model.feature_names[-len(AGREEMENT_FEATURE_NAMES):] == AGREEMENT_FEATURE_NAMES
    agree = leave_one_dataset_out("logistic", sets, "hybrid", "text+vector+agreement", components=2)
    assert all(v["recall@5_auto"] == pytest.approx(1.0) for v in agree["per_dataset"].values())
    plain = leave_one_dataset_out("logistic", sets, "hybrid", "text+vector", components=2)
    assert max(v["recall@5_auto"] for v in plain["per_dataset"].values()) < 0.9
    with pytest.raises(SystemExit):                                         # runs cached without their scores
        Dataset("old", [{k: v for k, v in r.items() if k != "dense_scores"} for r in runs("old", 4, 0)]).agree


# ------------------------------------------------------------------ auto answering from its lists


@pytest.fixture()
def engine():
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.services.ingest import SourceDoc, ingest

    eng = build_engine("memory", settings=dataclasses.replace(settings_from_env({}), embedder="hash"))
    texts = ["Marie Curie discovered radium in Paris.", "The Eiffel Tower is in Paris.",
             "Pierre Curie married Marie Curie in Sceaux.", "Radium glows in the dark.",
             "Sceaux is a town near Paris.", "The Louvre is a museum in Paris."]
    ingest(eng, [SourceDoc(source=f"d{i}", text=t, doc_id=f"d{i}") for i, t in enumerate(texts)])
    return eng


def counted(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def wrapper(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    monkeypatch.setattr(module, name, wrapper)
    return calls


@pytest.mark.parametrize("tau,route", [((1.0, 1.0), "hybrid"), ((0.0, 1.0), "fusion"), ((0.0, 0.0), "tri_graph")])
def test_auto_with_agreement_weights_answers_from_lists_computed_once(engine, monkeypatch, tau, route):
    from eragraph.services import routing
    from eragraph.services.graph_query import tri_graph
    from eragraph.services.leaf_ranking import fill_by_document
    from eragraph.services.lexical_search import fetch_size
    from eragraph.services.query import query
    from eragraph.services.summary_search import search

    from eragraph.domain.fusion import rrf, weighted_rrf

    q, k = "Where does radium glow near the Louvre museum?", 2     # its dense and hybrid orders differ
    n = fetch_size(k)
    vector = engine.embedder.embed([q])[0]
    dense = search(engine, "dense", vector, n, None, 0.6)
    bm25 = [h.node_id for h in engine.lexical.search(q, n)]
    side = rrf([[c.node_id for c in dense], bm25])[:n]
    graph = tri_graph(engine, q, vector, n, None)
    agree = agreement_features([c.node_id for c in dense], [c.score for c in dense], bm25, [i for i, _ in side],
                               [c.node_id for c in graph])
    engine.router = agreement_model({"agree_rbo": 4.0, "side_top_in_graph": 3.0, "dense_top1": -1.0}, tau=tau)
    calls = {name: counted(monkeypatch, routing, name) for name in ("search", "bm25_list", "tri_graph")}
    r = query(engine, q, mode="auto", k=k, vector=vector)
    assert {name: len(c) for name, c in calls.items()} == {"search": 1, "bm25_list": 1, "tri_graph": 1}
    assert r.route == route
    expected_s = engine.router.score(engine.router.phi(q, vector, engine.embedder.identity, agree)[0])
    assert r.router_score == pytest.approx(expected_s, abs=1e-4)
    answer = {"hybrid": side, "tri_graph": [(c.node_id, c.score) for c in graph],
              "fusion": weighted_rrf([i for i, _ in side], [c.node_id for c in graph], expected_s)[:n]}[route]
    assert [c.id for c in r.results] == [c.node_id for c in fill_by_document(engine, answer, k, None)]


def test_fusion_with_agreement_weights_fuses_by_the_listed_score(engine):
    from eragraph.services.query import query

    q = "Who married Marie Curie and where?"
    engine.router = agreement_model({"agree_side_graph_at20": 3.0}, b=0.0)
    fused = query(engine, q, mode="fusion", k=2)
    assert fused.route == "fusion" and fused.router_score is not None
    engine.router = agreement_model({"agree_side_graph_at20": 0.0}, b=0.0)
    assert query(engine, q, mode="fusion", k=2).router_score == pytest.approx(0.5)


def test_a_router_report_not_shipped_never_becomes_the_current_one():
    from eragraph.bench.report import router as page

    shipped = "eragraph router train --stores s --weights shared/eragraph/weights/router.json --report r.json"
    other = "eragraph router train --inputs text+vector+agreement --weights stores/x.json --report r.json"
    assert page.older("router-train", {"command": shipped}) is None
    assert "stores/x.json" in page.older("router-train-agreement", {"command": other})


def test_a_latency_run_with_other_router_weights_records_them_and_is_a_comparison():
    from eragraph.bench.query import weights_record
    from eragraph.bench.report import query as page
    from eragraph.config import settings_from_env

    assert weights_record(settings_from_env({})) == {}
    given = weights_record(settings_from_env({"ERAGRAPH_ROUTER_WEIGHTS": "stores/x.json"}))
    assert given == {"router_weights": "stores/x.json"}
    assert page.older("query-hotpotqa-x", {}) is None
    assert "stores/x.json" in page.older("query-hotpotqa-x", given)


def test_text_vector_weights_still_route_before_retrieval(engine, monkeypatch):
    """Older weights are unchanged: routed to the dense side, ``auto`` never walks the graph."""
    from eragraph.services import routing
    from eragraph.services.query import query

    m = agreement_model(tau=(1.0, 1.0))
    n = len(LEXICAL_FEATURE_NAMES) + 2
    engine.router = RouterModel(m.feature_names[:n], m.mean[:n], m.std[:n], "logistic",
                                {"w": np.zeros(n), "b": np.array(0.0)}, 1.0, 1.0, inputs="text+vector",
                                projection=m.projection, projection_mean=m.projection_mean)
    walks = counted(monkeypatch, routing, "tri_graph")
    r = query(engine, "Where does radium glow near the Louvre museum?", mode="auto", k=2)
    assert r.route == "hybrid" and walks == []
