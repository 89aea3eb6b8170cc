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


# "Was the longest bridge in Paris built by Gustave Eiffel 's firm more quickly ?" with its head
# table (root: "built", 6); every feature counted by hand below
PASSIVE = ParsedQuestion(tokens=(
    tok("Was", "AUX", "auxpass", 6, "VBD", True), tok("the", "DET", "det", 3, "DT", True),
    tok("longest", "ADJ", "amod", 3, "JJS"), tok("bridge", "NOUN", "nsubjpass", 6, "NN"),
    tok("in", "ADP", "prep", 3, "IN", True), tok("Paris", "PROPN", "pobj", 4, "NNP"),
    tok("built", "VERB", "ROOT", 6, "VBN"), tok("by", "ADP", "agent", 6, "IN", True),
    tok("Gustave", "PROPN", "compound", 9, "NNP"), tok("Eiffel", "PROPN", "poss", 11, "NNP"),
    tok("'s", "PART", "case", 9, "POS", True), tok("firm", "NOUN", "pobj", 7, "NN"),
    tok("more", "ADV", "advmod", 13, "RBR", True), tok("quickly", "ADV", "advmod", 6, "RB"),
    tok("?", "PUNCT", "punct", 6, ".")),
    entities=(("Paris", "GPE"), ("Gustave Eiffel", "PERSON")), noun_chunks=3)
# "Name the river that flows where Caesar crossed ?": the root first, a relative and an adverbial clause
CLAUSES = ParsedQuestion(tokens=(
    tok("Name", "VERB", "ROOT", 0, "VB"), tok("the", "DET", "det", 2, "DT", True),
    tok("river", "NOUN", "dobj", 0, "NN"), tok("that", "PRON", "nsubj", 4, "WDT", True),
    tok("flows", "VERB", "relcl", 2, "VBZ"), tok("where", "ADV", "advmod", 7, "WRB", True),
    tok("Caesar", "PROPN", "nsubj", 7, "NNP"), tok("crossed", "VERB", "advcl", 4, "VBD"),
    tok("?", "PUNCT", "punct", 0, ".")),
    entities=(("Caesar", "PERSON"),), noun_chunks=2)


def test_every_feature_of_two_questions_counted_by_hand():
    zero = dict.fromkeys(FEATURE_NAMES, 0.0)
    # 14 words (the "?" is no word), 63 letters; dependency distances 6 2 1 3 1 1 1 1 2 1 4 1 7
    # (the root and the punctuation have none): three longer than 3 ("bridge" at exactly 3 is
    # not); depths 1 2 2 1 2 3 0 1 4 3 4 2 2 1 1, five tokens at depth 1 and five at depth 2
    want = {**zero, "tokens": 14, "chars_per_token": 63 / 14, "sentences": 1,
            "dep_dist_mean": 31 / 13, "dep_dist_max": 7, "long_range_share": 3 / 13, "long_range": 3,
            "depth_max": 4, "depth_mean": 29 / 15, "width_max": 5,
            "preps": 2, "possessives": 2, "noun_chunks": 3,  # prep + agent; poss + case
            "nouns": 2, "propn": 3, "verbs": 2, "adjs": 1,  # Was (AUX) and built
            "content_share": 8 / 14, "type_token_ratio": 1.0,  # six stop words
            "entities": 2, "distinct_entity_types": 2, "entity_token_share": 3 / 14, "ent_name": 2,
            "yes_no": 1, "comparison": 1, "comparatives": 2}  # "Was" opens; "more"; JJS and RBR
    assert f(PASSIVE) == pytest.approx(want)
    # 8 words of 39 letters; distances 1 2 1 2 2 1 3 (none long); depths 0 2 1 3 2 4 4 3 1
    want = {**zero, "tokens": 8, "chars_per_token": 39 / 8, "sentences": 1,
            "dep_dist_mean": 12 / 7, "dep_dist_max": 3, "depth_max": 4, "depth_mean": 20 / 9, "width_max": 2,
            "clauses": 2, "subordinate": 2, "noun_chunks": 2,  # relcl and advcl are both
            "nouns": 1, "propn": 1, "verbs": 3, "content_share": 5 / 8, "type_token_ratio": 1.0,
            "entities": 1, "distinct_entity_types": 1, "entity_token_share": 1 / 8, "ent_name": 1,
            "wh_where": 1}  # "that" is no question word
    assert f(CLAUSES) == pytest.approx(want)


def test_a_one_word_question_and_one_of_punctuation_only():
    # "Napoleon ?" with a trailing space token: one word, all of it content and entity
    x = f(ParsedQuestion(tokens=(tok("Napoleon", "PROPN", "ROOT", 0, "NNP"), tok("?", "PUNCT", "punct", 0, "."),
                                 tok(" ", "SPACE", "dep", 1, "_SP")), entities=(("Napoleon", "PERSON"),)))
    assert (x["tokens"], x["chars_per_token"], x["content_share"], x["type_token_ratio"],
            x["entity_token_share"]) == (1, 8, 1, 1, 1)
    # no word at all: nothing opens a yes/no question, every feature finite
    q = ParsedQuestion(tokens=(tok("?", "PUNCT", "ROOT", 0, "."), tok("!", "PUNCT", "punct", 0, ".")))
    x = f(q)
    assert x["tokens"] == 0 and x["yes_no"] == 0 and np.isfinite(features(q)).all()


def test_quotes_count_pairs_of_straight_and_curly_marks():
    def quotes(texts):
        return f(ParsedQuestion(tokens=tuple(tok(t, "PUNCT" if t in "\"'“”" else "NOUN", "dep", 0)
                                             for t in texts)))["quotes"]

    marks = ["Who", "sang", "“", "Help", "”", "and", '"', "Yesterday", '"', "or", "'", "Girl", "'"]
    assert quotes(marks) == 3
    assert quotes(marks[:-1]) == 2  # an unclosed mark is no pair


def test_comparatives_and_superlatives_of_adjectives_and_adverbs():
    words = [("Which", "WDT"), ("is", "VBZ"), ("older", "JJR"), ("the", "DT"), ("most", "RBS"), ("visited", "VBN"),
             ("or", "CC"), ("the", "DT"), ("largest", "JJS"), ("park", "NN"), ("which", "WDT"), ("grew", "VBD"),
             ("faster", "RBR"), ("?", ".")]
    x = f(ParsedQuestion(tokens=tuple(tok(w, "PUNCT" if w == "?" else "X", "dep", 1, t) for w, t in words)))
    assert x["comparatives"] == 4 and x["comparison"] == 2  # cues: "older", "or"
    assert x["wh_which"] == 1


def test_heads_outside_the_question_are_read_as_its_first_or_last_token():
    # a parse with a head before the start (read as token 0, the root) and one past the end
    # (read as the last token, its own root)
    q = ParsedQuestion(tokens=(tok("a", "NOUN", "ROOT", 0), tok("b", "NOUN", "dep", -5), tok("c", "NOUN", "dep", 99)))
    x = f(q)
    assert (x["depth_max"], x["width_max"]) == (1, 2) and x["depth_mean"] == pytest.approx(1 / 3)


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


def test_the_attention_bias_alone_gives_the_same_attention():
    """The worked example above with the attention from b_a instead of W_a: b_a = (ln 3, 0) ->
    a = (3/4, 1/4) for any z, so phi = (5, -1) scores sigmoid(3) again."""
    m = two_feature_model("mlp", {"Wa": [[0.0, 0.0], [0.0, 0.0]], "ba": [math.log(3), 0.0],
                                  "W1": [[1, 0], [0, 1], [0, -2], [1, 1]], "b1": [0, 0, 0, -1],
                                  "w2": [0.5, 7, -1, 2], "b2": -0.5})
    assert m.score(np.array([5.0, -1.0])) == pytest.approx(0.9525741268224334, abs=1e-12)


def test_a_batch_scores_each_question_as_alone_even_with_extreme_attention_logits():
    """Attention logits of 2,000 in one row and 0 in the other: each row's softmax stays its own
    and finite; extreme scores saturate at 0 and 1 without an overflow."""
    m = two_feature_model("mlp", {"Wa": [[100.0, 0.0], [0.0, 0.0]], "ba": [0.0, 0.0],
                                  "W1": [[1, 0], [0, 1]], "b1": [0, 0], "w2": [1, 1], "b2": 0.0})
    rows = np.array([[20.0, 0.0], [0.0, 0.0], [4.0, 2.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        batch = m.score_z(rows)
        alone = [float(m.score_z(r)) for r in rows]
        assert np.isfinite(batch).all() and batch.tolist() == pytest.approx(alone, abs=1e-12)
        assert batch[0] == pytest.approx(sigmoid(40.0))  # all attention on feature 0: h = (2 * 20, 0)
        assert batch[1] == pytest.approx(0.5)
        assert sigmoid(np.array([-1000.0, 1000.0])).tolist() == pytest.approx([0.0, 1.0], abs=1e-20)


def test_thresholds_at_the_ends_and_equal_are_valid_and_the_errors_say_what_is_wrong():
    for low, high in ((0.0, 1.0), (0.5, 0.5), (0.0, 0.0), (1.0, 1.0)):
        model(tau_low=low, tau_high=high)
    assert [model(tau_low=0.5, tau_high=0.5).route(s) for s in (0.49, 0.5)] == ["hybrid", "tri_graph"]
    assert model(fusion_dense="dense").fusion_dense == "dense"
    d = len(FEATURE_NAMES)
    for kw, message in (({"tau_low": -0.1}, "thresholds must satisfy 0 <= tau_low <= tau_high <= 1"),
                        ({"tau_high": 1.5}, "thresholds must satisfy 0 <= tau_low <= tau_high <= 1"),
                        ({"fusion_dense": "bm25"}, "the dense side is dense or hybrid"),
                        ({"kind": "forest"}, "unknown scorer kind 'forest'"),
                        ({"std": np.ones(d - 1)}, "mean/std must have one entry per feature"),
                        ({"mean": np.ones(d + 1)}, "mean/std must have one entry per feature")):
        with pytest.raises(ValueError) as info:
            model(**kw)
        assert str(info.value) == message


def test_json_keeps_the_routes_info_and_deviations_and_older_files_load_with_defaults():
    m = model("mlp", low_route="dense", fusion_dense="dense", info={"trained_on": "hotpotqa"},
              std=np.linspace(0.5, 3.0, len(FEATURE_NAMES)))
    d = json.loads(json.dumps(m.to_dict()))
    back = RouterModel.from_dict(d)
    phi = np.arange(len(FEATURE_NAMES), dtype=float)
    assert back.z(phi).tolist() == pytest.approx(m.z(phi).tolist())  # deviations under 1 kept too
    near = 1.0 + 0.01 * np.arange(len(FEATURE_NAMES))  # close to the mean: a score short of 0 or 1
    assert 0.01 < m.score(near) < 0.99 and back.score(near) == pytest.approx(m.score(near), abs=1e-12)
    assert (back.low_route, back.fusion_dense, back.info) == ("dense", "dense", {"trained_on": "hotpotqa"})
    older = {k: v for k, v in d.items() if k not in ("low_route", "fusion_dense", "info")}
    old = RouterModel.from_dict(older)
    assert (old.low_route, old.fusion_dense, old.info) == ("hybrid", "hybrid", {})
    # a feature constant in training (deviation 0) counts its raw distance from the mean, as
    # training fit it (training.router: a zero deviation is 1)
    flat = dict(d, std=[0.0] * len(FEATURE_NAMES))
    assert RouterModel.from_dict(flat).z(phi).tolist() == pytest.approx((phi - 1.0).tolist())


def test_shipped_weights_load_without_torch():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from eragraph.services.routing import load_router\n"
            "m = load_router(); import numpy as np\n"
            "s = m.score(np.zeros(len(m.feature_names))); assert 0 < s < 1\n"
            "from eragraph.domain.question_features import LEXICAL_FEATURE_NAMES\n"
            "assert m.inputs == 'text+vector' and not m.needs_parse\n"
            "assert tuple(m.feature_names[:len(LEXICAL_FEATURE_NAMES)]) == LEXICAL_FEATURE_NAMES\n"
            "assert m.projection.shape == (len(m.feature_names) - len(LEXICAL_FEATURE_NAMES), 384)\n"
            "assert 0 <= m.tau_low <= m.tau_high <= 1\n"
            "phi, note = m.phi_text_vector('Who wrote Hamlet?', np.ones(384) / 384 ** 0.5)\n"
            "assert note == '' and 0 < m.score(phi) < 1\n")
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
