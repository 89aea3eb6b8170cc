"""Settings: validation, ERAGRAPH_* environment parsing, explicit overrides."""

from __future__ import annotations

import pytest

from eragraph.config import GRAPH_SETTINGS, Settings, settings_from_env


def test_defaults_follow_erarag_and_minilm_limits():
    s = Settings()
    assert (s.s_min, s.s_max) == (6, 12)
    assert s.s_max >= 2 * s.s_min - 1  # every count >= S_min can be cut within bounds
    assert s.chunk_tokens + 2 <= 256  # MiniLM reads 256 word pieces incl. [CLS]/[SEP]
    assert 0 <= s.chunk_overlap < s.chunk_tokens


@pytest.mark.parametrize("kwargs", [
    {"s_min": 0}, {"s_min": 1, "s_max": 1}, {"s_min": 9, "s_max": 8}, {"n_planes": 0},
    {"n_planes": 63}, {"max_layers": -1}, {"chunk_overlap": 200}, {"chunk_overlap": -1},
    {"summary_tokens": 7}, {"bias_p": 1.01}, {"bias_p": -0.1}, {"top_k": 0},
])
def test_validation_errors(kwargs):
    with pytest.raises(ValueError):
        Settings(**kwargs)


def test_env_parsing_by_type():
    env = {"ERAGRAPH_S_MIN": "4", "ERAGRAPH_S_MAX": "6", "ERAGRAPH_BIAS_P": "0.25",
           "ERAGRAPH_EMBED_CACHE": "no", "ERAGRAPH_SUMMARIZER": "openai", "ERAGRAPH_TOP_K": "",
           "UNRELATED": "x"}
    s = settings_from_env(env)
    assert (s.s_min, s.s_max, s.bias_p, s.embed_cache, s.summarizer) == (4, 6, 0.25, False, "openai")
    assert s.top_k == Settings().top_k  # empty values are ignored
    assert settings_from_env({"ERAGRAPH_EMBED_CACHE": "TRUE"}).embed_cache is True


def test_env_bad_value_names_the_variable():
    with pytest.raises(ValueError, match="ERAGRAPH_S_MAX"):
        settings_from_env({"ERAGRAPH_S_MAX": "twelve"})
    with pytest.raises(ValueError):
        settings_from_env({"ERAGRAPH_S_MIN": "20"})  # parses, but S_min > S_max


def test_overrides_win_over_env_and_none_is_ignored():
    s = settings_from_env({"ERAGRAPH_TOP_K": "7", "ERAGRAPH_S_MAX": "15"}, top_k=3, s_max=None)
    assert s.top_k == 3 and s.s_max == 15
    assert Settings().with_overrides(top_k=None) == Settings()
    with pytest.raises(ValueError):
        Settings().with_overrides(s_min=20)


def test_settings_from_real_environment(monkeypatch):
    monkeypatch.setenv("ERAGRAPH_N_PLANES", "16")
    assert settings_from_env().n_planes == 16


def test_graph_settings_and_dict():
    s = Settings(s_min=5, s_max=9)
    g = s.graph_settings()
    assert set(g) == set(GRAPH_SETTINGS)
    assert g["s_min"] == 5 and g["s_max"] == 9
    assert s.to_dict()["s_max"] == 9 and "embedder" in s.to_dict()
    assert Settings(**s.to_dict()) == s


def test_every_variable_the_package_names_is_declared_in_config():
    """One settings surface: an ERAGRAPH_* name anywhere in the package is a Settings or
    GraphSettings field or is declared in config.py (where alone the environment is read)."""
    import dataclasses
    import re
    from pathlib import Path

    from eragraph import config

    package = Path(config.__file__).parent
    declared = set(re.findall(r"\bERAGRAPH_[A-Z0-9_]+\b", Path(config.__file__).read_text(encoding="utf-8")))
    declared |= {"ERAGRAPH_" + f.name.upper() for f in dataclasses.fields(Settings)}
    declared |= {"ERAGRAPH_GRAPH_" + f.name.upper() for f in dataclasses.fields(config.GraphSettings)}
    named = {(n, str(p.relative_to(package))) for p in package.rglob("*.py")
             for n in re.findall(r"\bERAGRAPH_[A-Z0-9_]*[A-Z0-9]\b", p.read_text(encoding="utf-8"))}
    assert sorted(pair for pair in named if pair[0] not in declared) == []
    assert set(config.aws_environment({"ERAGRAPH_TABLE": "t", "UNRELATED": "x"})) == {"ERAGRAPH_TABLE"}
