"""The router's parse-free inputs: lexical cues of the question's text and its embedding
projected on the training questions' principal directions (domain.question_features
.lexical_features, RouterModel "text+vector", training.router.Inputs)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eragraph.domain.question_features import LEXICAL_FEATURE_NAMES, lexical_features
from eragraph.domain.router_model import RouterModel
from eragraph.services.routing import score_question


def lex(text: str) -> dict[str, float]:
    return {n: float(v) for n, v in zip(LEXICAL_FEATURE_NAMES, lexical_features(text)) if v}


def test_lexical_cues_counted_by_hand():
    got = lex("Who is the spouse of the Green performer?")
    assert got == pytest.approx({"words": 8, "chars_per_word": 33 / 8, "names": 1, "name_words_share": 1 / 8,
                                 "of_count": 1, "type_token_ratio": 7 / 8, "stop_share": 5 / 8, "long_words": 1,
                                 "wh_who": 1, "wh_first": 1, "question_mark": 1})


def test_names_years_numbers_relatives_and_yes_no():
    got = lex('Did "Nature" report, in 1998 or 2001, that the Red Cross of Geneva lost 3 of its 12 ships?')
    assert got["yes_no"] == 1 and got["quotes"] == 1 and got["commas"] == 2
    assert got["years"] == 2 and got["numbers"] == 2                 # 1998, 2001 | 3, 12
    assert got["names"] == 2                                         # Nature; Red Cross of Geneva
    assert got["relatives"] == 1 and got["and_or"] == 1 and got["of_count"] == 2
    assert got["comparison"] == 1                                    # "or"
    assert "wh_first" not in got


def test_no_words_is_finite_zeros():
    for text in ("", "???", "  \n"):
        v = lexical_features(text)
        assert v.shape == (len(LEXICAL_FEATURE_NAMES),) and not v.any()


def model(dim=4, m=2, **kw) -> RouterModel:
    names = (*LEXICAL_FEATURE_NAMES, *(f"embedding_pc{i + 1}" for i in range(m)))
    rng = np.random.default_rng(0)
    proj = np.linalg.qr(rng.normal(size=(dim, m)))[0].T
    d = len(names)
    args = dict(feature_names=names, mean=np.zeros(d), std=np.ones(d), kind="logistic",
                params={"w": rng.normal(size=d), "b": np.array(0.1)}, tau_low=0.3, tau_high=0.6,
                inputs="text+vector", projection=proj, projection_mean=np.full(dim, 0.5))
    args.update(kw)
    return RouterModel(**args)


def test_phi_is_the_cues_then_the_projected_embedding():
    m = model()
    v = np.array([1.0, 0.0, 2.0, 0.5])
    phi, note = m.phi_text_vector("Who wrote Hamlet?", v)
    assert note == ""
    assert phi[: len(LEXICAL_FEATURE_NAMES)].tolist() == lexical_features("Who wrote Hamlet?").tolist()
    assert phi[len(LEXICAL_FEATURE_NAMES):].tolist() == pytest.approx((m.projection @ (v - 0.5)).tolist())
    w = m.params["w"]
    assert m.score(phi) == pytest.approx(1 / (1 + np.exp(-(phi @ w + 0.1))))


def test_another_embedders_vector_scores_from_the_text_and_says_so():
    m = model()
    phi, note = m.phi_text_vector("Who wrote Hamlet?", np.ones(7))
    assert "4-dimensional" in note and "7-dimensional" in note
    assert not phi[len(LEXICAL_FEATURE_NAMES):].any()
    phi, note = m.phi_text_vector("Who wrote Hamlet?", None)
    assert "no embedding" in note


class Refusing:
    def parse(self, text):
        raise AssertionError("text+vector inputs must not parse")


def test_text_vector_weights_never_call_the_parser():
    m = model()
    s, note = score_question("Who wrote Hamlet?", m, Refusing(), np.array([1.0, 0.0, 2.0, 0.5]))
    assert 0 < s < 1 and note == ""
    s, note = score_question("???", m, Refusing(), np.ones(4))
    assert s == 0.0 and "s(q) = 0" in note
    s, note = score_question("Who wrote Hamlet?", m, None, np.ones(4))  # parser = none: the router is off
    assert s == 0.0 and "parser = none" in note


def test_json_round_trip_and_errors():
    m = model()
    back = RouterModel.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.inputs == "text+vector" and not back.needs_parse
    assert back.projection.ravel().tolist() == pytest.approx(m.projection.ravel().tolist())
    v = np.array([0.2, 0.4, 0.1, 0.9])
    assert back.score(back.phi_text_vector("Which river?", v)[0]) == pytest.approx(m.score(m.phi_text_vector("Which river?", v)[0]))
    with pytest.raises(ValueError, match="projection"):
        model(projection=None)
    with pytest.raises(ValueError, match="unknown router inputs"):
        model(inputs="tea leaves")
    older = {k: v for k, v in m.to_dict().items() if k not in ("inputs", "projection", "projection_mean")}
    older["feature_names"] = older["feature_names"][: len(LEXICAL_FEATURE_NAMES)]
    older["mean"], older["std"] = older["mean"][: len(LEXICAL_FEATURE_NAMES)], older["std"][: len(LEXICAL_FEATURE_NAMES)]
    assert RouterModel.from_dict(older).needs_parse  # files written before the inputs field read a parse


def test_the_fold_projection_sees_the_training_datasets_only():
    from eragraph.training.router import Inputs

    class D:
        def __init__(self, vec):
            self.vec = np.asarray(vec, dtype=np.float64)
            self.lex = np.zeros((len(vec), len(LEXICAL_FEATURE_NAMES)))

    rng = np.random.default_rng(1)
    a = D(rng.normal(size=(30, 5)) * [5, 1, 1, 1, 1])   # most spread along axis 0
    b = D(rng.normal(size=(30, 5)) * [5, 1, 1, 1, 1])
    held = D(rng.normal(size=(30, 5)) * [1, 1, 1, 1, 50] + 100)
    fold = Inputs("text+vector", [a, b], components=2)
    assert fold.projection_mean.tolist() == pytest.approx(np.vstack([a.vec, b.vec]).mean(axis=0).tolist())
    assert abs(fold.projection[0][0]) > 0.9             # the training sets' leading direction, not held's
    assert fold.phi(held).shape == (30, len(LEXICAL_FEATURE_NAMES) + 2)
    assert fold.names[-2:] == ("embedding_pc1", "embedding_pc2")
