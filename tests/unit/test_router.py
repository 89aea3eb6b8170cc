"""Reciprocal rank fusion, the question features phi(q), the router's scorer and thresholds,
the mode registry, and the fusion/auto modes' fallbacks and bad input."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from eragraph.domain.fusion import RRF_C, rrf, weighted_rrf
from eragraph.domain.question_features import FEATURE_NAMES, ParsedQuestion, Token, features
from eragraph.domain.router_model import RouterModel, sigmoid

# ------------------------------------------------------------------ RRF


def test_rrf_sums_reciprocal_ranks():
    fused = dict(rrf([["a", "b", "c"], ["b", "d"]]))
    assert fused["b"] == pytest.approx(1 / (RRF_C + 2) + 1 / (RRF_C + 1))
    assert fused["a"] == pytest.approx(1 / (RRF_C + 1))
    assert fused["d"] == pytest.approx(1 / (RRF_C + 2))
    assert [i for i, _ in rrf([["a", "b", "c"], ["b", "d"]])] == ["b", "a", "d", "c"]


def test_rrf_ignores_duplicates_within_a_list_and_breaks_ties_by_id():
    assert rrf([["x", "x", "y"]]) == [("x", 1 / 61), ("y", 1 / 62)]
    assert [i for i, _ in rrf([["b"], ["a"]])] == ["a", "b"]


def test_weighted_rrf_is_eq8():
    dense, graph = ["d1", "g1"], ["g1", "g2"]
    assert [i for i, _ in weighted_rrf(dense, graph, 0.0)][:1] == ["d1"]
    fused = dict(weighted_rrf(dense, graph, 0.3))
    assert fused["g1"] == pytest.approx(0.7 / 62 + 0.3 / 61)
    assert fused["g2"] == pytest.approx(0.3 / 62)
    with pytest.raises(ValueError):
        weighted_rrf(dense, graph, 1.5)
    with pytest.raises(ValueError):
        rrf([["a"]], [1.0, 2.0])


def test_weighted_rrf_with_full_graph_weight_keeps_graph_order():
    assert [i for i, s in weighted_rrf(["d1"], ["g1", "g2"], 1.0) if s > 0] == ["g1", "g2"]


# ------------------------------------------------------------------ features


def tok(text, pos, dep, head, tag="", stop=False):
    return Token(text=text, pos=pos, tag=tag or pos, dep=dep, head=head, is_stop=stop)


SIMPLE = ParsedQuestion(tokens=(tok("Who", "PRON", "nsubj", 1, "WP", True), tok("wrote", "VERB", "ROOT", 1),
                                tok("Hamlet", "PROPN", "dobj", 1), tok("?", "PUNCT", "punct", 1)),
                        entities=(("Hamlet", "NAME"),), noun_chunks=2)
# "Which magazine was started first , A or B ?" with a long-range dependency and a comparison
COMPARE = ParsedQuestion(tokens=(
    tok("Which", "DET", "det", 1, "WDT", True), tok("magazine", "NOUN", "nsubjpass", 3),
    tok("was", "AUX", "auxpass", 3, "VBD", True), tok("started", "VERB", "ROOT", 3),
    tok("first", "ADV", "advmod", 3, "RB", True), tok(",", "PUNCT", "punct", 3),
    tok("Arthur", "PROPN", "appos", 1), tok("or", "CCONJ", "cc", 6, "CC", True),
    tok("Women", "PROPN", "conj", 6), tok("?", "PUNCT", "punct", 3)),
    entities=(("Arthur", "NAME"), ("Women", "NAME")), noun_chunks=3)


def f(q):
    return dict(zip(FEATURE_NAMES, features(q)))


def test_features_of_a_simple_question():
    x = f(SIMPLE)
    assert x["tokens"] == 3 and x["entities"] == 1 and x["ent_name"] == 1
    assert x["wh_who"] == 1 and x["wh_which"] == 0 and x["yes_no"] == 0
    assert x["depth_max"] == 1 and x["dep_dist_max"] == 1 and x["long_range"] == 0
    assert x["type_token_ratio"] == 1.0


def test_features_see_long_range_dependencies_and_comparison():
    x = f(COMPARE)
    assert x["dep_dist_max"] == 5  # Arthur -> magazine
    assert x["long_range"] == 1 and x["depth_max"] == 3
    assert x["comparison"] == 2  # "first", "or"
    assert x["conj"] == 2 and x["entities"] == 2 and x["wh_which"] == 1


def test_features_of_an_empty_parse_are_finite_zeros():
    x = features(ParsedQuestion(tokens=()))
    assert x.shape == (len(FEATURE_NAMES),) and np.isfinite(x).all() and x.sum() == 1.0  # sentences = 1


def test_features_survive_a_cyclic_head_table():
    q = ParsedQuestion(tokens=(tok("a", "NOUN", "dep", 1), tok("b", "NOUN", "dep", 0)))
    assert np.isfinite(features(q)).all()


# ------------------------------------------------------------------ scorer


def model(kind="logistic", **kw):
    d = len(FEATURE_NAMES)
    rng = np.random.default_rng(0)
    params = ({"w": rng.normal(size=d), "b": np.array(0.1)} if kind == "logistic" else
              {"Wa": rng.normal(size=(d, d)), "ba": rng.normal(size=d), "W1": rng.normal(size=(4, d)),
               "b1": rng.normal(size=4), "w2": rng.normal(size=4), "b2": np.array(-0.2)})
    args = dict(feature_names=FEATURE_NAMES, mean=np.ones(d), std=np.full(d, 2.0), kind=kind, params=params,
                tau_low=0.3, tau_high=0.7)
    args.update(kw)
    return RouterModel(**args)


def test_logistic_score_is_sigmoid_of_the_z_scored_features():
    m = model()
    phi = np.arange(len(FEATURE_NAMES), dtype=float)
    z = (phi - 1.0) / 2.0
    assert m.score(phi) == pytest.approx(1 / (1 + math.exp(-(z @ m.params["w"] + 0.1))))


def two_feature_model(kind: str, params: dict) -> RouterModel:
    return RouterModel(feature_names=("f0", "f1"), mean=np.ones(2), std=np.full(2, 2.0), kind=kind,
                       params={k: np.asarray(v, dtype=float) for k, v in params.items()}, tau_low=0.3, tau_high=0.7)


def test_mlp_with_feature_attention_by_hand():
    """Worked by hand on two features: phi = (5, -1) -> z = (2, -1); attention logits
    W_a z + b_a = (-ln 3 * -1, 0) = (ln 3, 0) -> a = (3/4, 1/4); a * z * d = (3, -0.5);
    W_1 (.) + b_1 = (3, -0.5, 1, 1.5) -> relu (3, 0, 1, 1.5); w_2 . h + b_2 = 1.5 + 0 - 1 + 3 - 0.5
    = 3 -> sigmoid(3). A second row z = (0, 0): h = relu(b_1) = 0 -> sigmoid(b_2)."""
    m = two_feature_model("mlp", {"Wa": [[0.0, -math.log(3)], [0.0, 0.0]], "ba": [0.0, 0.0],
                                  "W1": [[1, 0], [0, 1], [0, -2], [1, 1]], "b1": [0, 0, 0, -1],
                                  "w2": [0.5, 7, -1, 2], "b2": -0.5})
    assert m.score(np.array([5.0, -1.0])) == pytest.approx(0.9525741268224334, abs=1e-12)
    batch = m.score_z(np.array([[2.0, -1.0], [0.0, 0.0]]))
    assert batch.shape == (2,)
    assert batch.tolist() == pytest.approx([0.9525741268224334, 0.3775406687981454], abs=1e-12)


def test_logistic_by_hand():
    m = two_feature_model("logistic", {"w": [1.0, -2.0], "b": 0.5})
    assert m.score(np.array([5.0, -1.0])) == pytest.approx(0.9890130573694068, abs=1e-12)  # sigmoid(2 + 2 + 0.5)


def test_thresholds_route_low_mid_high():
    m = model(low_route="dense")
    assert [m.route(s) for s in (0.0, 0.29, 0.3, 0.69, 0.7, 1.0)] == \
        ["dense", "dense", "fusion", "fusion", "tri_graph", "tri_graph"]
    with pytest.raises(ValueError):
        model(tau_low=0.8, tau_high=0.2)
    with pytest.raises(ValueError):
        model(low_route="bm25")


def test_round_trip_through_json_and_zero_std_is_guarded():
    m = model("mlp")
    back = RouterModel.from_dict(json.loads(json.dumps(m.to_dict())))
    phi = np.ones(len(FEATURE_NAMES))
    assert back.score(phi) == pytest.approx(m.score(phi))
    d = m.to_dict()
    d["std"] = [0.0] * len(FEATURE_NAMES)
    assert np.isfinite(RouterModel.from_dict(d).score(phi))


def test_shipped_weights_load_without_torch():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from eragraph.services.routing import load_router\n"
            "m = load_router(); import numpy as np\n"
            "s = m.score(np.zeros(len(m.feature_names))); assert 0 < s < 1\n"
            "from eragraph.domain.question_features import FEATURE_NAMES\n"
            "assert tuple(m.feature_names) == FEATURE_NAMES\n"
            "assert 0 <= m.tau_low <= m.tau_high <= 1\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ registry and modes


def test_registry_is_the_one_list():
    from eragraph.services.modes import MODES, RetrievalMode, mode_names

    assert mode_names() == list(MODES)
    assert {"dense", "bm25", "hybrid", "tri_graph", "fusion", "auto"} <= set(MODES)
    assert all(isinstance(m, RetrievalMode) and m.name == n and callable(m.run) for n, m in MODES.items())
    assert MODES["tri_graph"].needs_entity_graph and MODES["hybrid"].needs_lexical
    assert not MODES["auto"].needs_entity_graph  # it falls back instead


def test_no_import_circle_between_entity_index_and_graph_query():
    import subprocess
    import sys

    for first in ("eragraph.services.graph_query", "eragraph.services.entity_index", "eragraph.services.query"):
        subprocess.run([sys.executable, "-c", f"import {first}"], check=True)
    import ast
    import pathlib

    import eragraph.services.entity_index as ei

    tree = ast.parse(pathlib.Path(ei.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "graph_query" not in imported


@pytest.fixture
def engine():
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.services.ingest import SourceDoc, ingest
    from eragraph.services.resummarize import drain

    eng = build_engine("memory", settings=dataclasses.replace(settings_from_env({}), embedder="hash"))
    texts = ["Marie Curie discovered radium in Paris with Pierre Curie.", "The Eiffel Tower is in Paris.",
             "Albert Einstein developed relativity in Bern.", "Radium glows in the dark and is radioactive."]
    ingest(eng, [SourceDoc(source=f"d{i}", text=t, doc_id=f"d{i}") for i, t in enumerate(texts)])
    drain(eng)
    return eng


@pytest.mark.parametrize("mode", ["bm25", "hybrid", "fusion", "auto"])
def test_new_modes_answer_and_say_their_route(engine, mode):
    from eragraph.services.query import query

    r = query(engine, "Who discovered radium in Paris?", mode=mode, k=3)
    assert r.results and r.results[0].doc_id == "d0"
    if mode in ("fusion", "auto"):
        assert 0 <= r.router_score <= 1 and r.route in ("dense", "hybrid", "fusion", "tri_graph")
        assert "router_score" in r.to_dict()
    else:
        assert r.route == mode and r.router_score is None


def test_auto_without_entity_graph_falls_back_and_says_so(engine):
    from eragraph.services.query import available_modes, query

    engine.entities = None
    assert "tri_graph" not in available_modes(engine) and "auto" in available_modes(engine)
    for mode in ("auto", "fusion"):
        r = query(engine, "Which scientist who worked in Paris discovered radium?", mode=mode, k=3)
        assert r.results and r.route in ("dense", "hybrid")
        if mode == "fusion":
            assert "no entity graph" in r.note


def test_auto_with_a_store_lacking_the_lexical_index(engine, monkeypatch):
    from eragraph.domain.model import LexicalIndexMissing
    from eragraph.services.query import query

    monkeypatch.setattr(engine.lexical, "ready", lambda: False)

    def refuse(text, k, where=None):
        raise LexicalIndexMissing("this store")

    monkeypatch.setattr(engine.lexical, "search", refuse)
    with pytest.raises(LexicalIndexMissing, match="eragraph reindex"):
        query(engine, "radium", mode="hybrid")
    r = query(engine, "Who discovered radium?", mode="fusion", k=2)
    assert r.results and "eragraph reindex" in r.note


@pytest.mark.parametrize("text", ["???", "!!! ... ---", "🙂🙂"])
def test_unparsable_question_gets_the_dense_side(engine, text):
    from eragraph.services.query import query

    r = query(engine, text, mode="auto", k=2)
    assert r.router_score == 0.0 and "s(q) = 0" in r.note and r.route in ("dense", "hybrid")


def test_empty_and_huge_questions_are_refused(engine):
    from eragraph.services.query import BadQueryError, query

    for text in ("", "   "):
        with pytest.raises(BadQueryError, match="empty"):
            query(engine, text, mode="auto")
    with pytest.raises(BadQueryError, match="longer than"):
        query(engine, "radium " * 1000, mode="auto")
    with pytest.raises(BadQueryError, match="unknown mode"):
        query(engine, "radium", mode="sideways")
