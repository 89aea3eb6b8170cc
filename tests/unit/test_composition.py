"""The composition root: one Settings picks every provider and adapter of a profile, a missing
provider package fails at cold start in one line, and the services neither read the environment
nor choose adapters."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from lambda_support import ROOT

from eragraph.bootstrap import build_engine, preflight
from eragraph.config import GraphSettings, Settings, settings_from_env
from eragraph.providers.spacy_ner import CapitalizedPhraseExtractor, SpacyEntityExtractor

SERVICES = ROOT / "shared" / "eragraph" / "services"


def hash_settings(**overrides) -> Settings:
    return Settings(embedder="hash", s_min=3, s_max=5, n_planes=12, chunk_tokens=40, chunk_overlap=8,
                    summary_tokens=30, embed_cache=False).with_overrides(**overrides)


def test_settings_name_every_provider_and_refuse_unknown_ones():
    s = settings_from_env({"ERAGRAPH_NER": "spacy+nouns", "ERAGRAPH_PARSER": "none",
                           "ERAGRAPH_SENTENCE_VECTORS": "true", "ERAGRAPH_GRAPH_EXACT": "0",
                           "ERAGRAPH_GRAPH_HOPS": "3"})
    assert (s.ner, s.parser, s.sentence_vectors) == ("spacy+nouns", "none", True)
    assert s.graph_retrieval == GraphSettings(exact=False, hops=3)
    assert Settings(embedder="hash").entity_extractor() == "capitalized"
    assert Settings(embedder="bedrock").entity_extractor() == "spacy"
    assert Settings(embedder="hash", ner="spacy").entity_extractor() == "spacy"
    for field, bad in (("ner", "stanza"), ("parser", "benepar"), ("embedder", "word2vec"), ("summarizer", "gpt")):
        with pytest.raises(ValueError, match=f"unknown {field} '{bad}'"):
            Settings(**{field: bad})
    with pytest.raises(ValueError, match="ERAGRAPH_GRAPH_HOPS='two'"):
        settings_from_env({"ERAGRAPH_GRAPH_HOPS": "two"})


@pytest.mark.parametrize("ner,kind", [("capitalized", CapitalizedPhraseExtractor), ("spacy", SpacyEntityExtractor),
                                      ("auto", CapitalizedPhraseExtractor)])
def test_the_profile_builds_the_named_extractor(ner, kind):
    engine = build_engine("memory", settings=hash_settings(ner=ner))
    assert type(engine.entities.extractor) is kind
    assert engine.entities.embedder is engine.embedder
    assert engine.entities.extractor.__dict__.get("noun_chunks", False) is False


def test_local_profile_keeps_its_entity_graph_in_the_store(tmp_path):
    engine = build_engine("local", store=tmp_path / "s", settings=hash_settings(sentence_vectors=True))
    assert engine.entities.embed_sentences is True
    assert (tmp_path / "s" / "entities.sqlite").exists()
    assert len(engine.ingest_hooks) == 1 and len(engine.remove_hooks) == 1


def test_parser_none_routes_every_question_to_the_dense_side_and_says_so():
    from eragraph.services.ingest import SourceDoc, ingest
    from eragraph.services.query import query
    from eragraph.services.resummarize import drain

    engine = build_engine("memory", settings=hash_settings(parser="none"))
    assert engine.question_parser is None
    ingest(engine, [SourceDoc(source="m://a", doc_id="a", text="Marie Curie discovered radium in Paris.")])
    drain(engine)
    r = query(engine, "Which scientist who worked in Paris discovered radium?", mode="auto", k=2)
    assert r.router_score == 0.0 and r.route in ("dense", "hybrid")
    assert "no question parser" in r.note


def test_router_weights_come_from_the_setting(tmp_path):
    shipped = json.loads(resources.files("eragraph").joinpath("weights/router.json").read_text())
    mine = dict(shipped, tau_low=0.01, tau_high=0.02)
    path = tmp_path / "router.json"
    path.write_text(json.dumps(mine))
    assert build_engine("memory", settings=hash_settings()).router.tau_low == shipped["tau_low"]
    engine = build_engine("memory", settings=hash_settings(router_weights=str(path)))
    assert (engine.router.tau_low, engine.router.tau_high) == (0.01, 0.02)


def test_a_missing_provider_package_is_one_line_naming_it_and_its_setting(monkeypatch):
    monkeypatch.setitem(preflight.NEEDS, ("ner", "spacy"), ("spacy", "no_such_package_xyz"))
    for load in (False, True):
        with pytest.raises(preflight.ProviderUnavailable) as err:
            preflight.preflight(hash_settings(ner="spacy"), "memory", load=load)
        message = str(err.value)
        assert "\n" not in message
        assert "ERAGRAPH_NER=spacy" in message and "'no_such_package_xyz'" in message
    # a function that does not use NER does not need it
    preflight.preflight(hash_settings(ner="spacy"), "memory", uses=("embedder", "summarizer"), load=True)
    # auto is resolved and shown as such
    monkeypatch.setitem(preflight.NEEDS, ("ner", "capitalized"), ("no_such_package_xyz",))
    with pytest.raises(preflight.ProviderUnavailable, match=r"ERAGRAPH_NER=auto \(capitalized\)"):
        preflight.preflight(hash_settings(), "memory")
    with pytest.raises(preflight.ProviderUnavailable, match=r"ERAGRAPH_NER=auto \(capitalized\)"):
        build_engine("memory", settings=hash_settings())  # the CLI's and serve's path
    # a caller that names its uses is checked for those only (the summarize function has no spaCy)
    build_engine("memory", settings=hash_settings(), uses=("embedder", "summarizer"))
    monkeypatch.setitem(preflight.NEEDS, ("ner", "capitalized"), ())
    monkeypatch.setitem(preflight.PROFILE_NEEDS, "memory", ("no_such_adapter_xyz",))
    with pytest.raises(preflight.ProviderUnavailable, match="the memory profile needs the Python package"):
        build_engine("memory", settings=hash_settings())


def test_a_handler_whose_provider_is_missing_fails_its_import(monkeypatch):
    """Lambda's init phase is the handler's import: that is where a missing package must show."""
    import importlib.util

    monkeypatch.setitem(preflight.NEEDS, ("ner", "spacy"), ("no_such_package_xyz",))
    monkeypatch.setenv("ERAGRAPH_EMBEDDER", "hash")
    monkeypatch.setenv("ERAGRAPH_NER", "spacy")
    for name in ("ingest", "query", "reindex"):
        spec = importlib.util.spec_from_file_location(f"cold_start_{name}", ROOT / "functions" / name / "app.py")
        module = importlib.util.module_from_spec(spec)
        with pytest.raises(preflight.ProviderUnavailable, match="ERAGRAPH_NER=spacy needs the Python package"):
            spec.loader.exec_module(module)
    # summarize uses no NER: its cold start passes with the same settings
    spec = importlib.util.spec_from_file_location("cold_start_summarize", ROOT / "functions" / "summarize" / "app.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _calls_into_environment_or_adapters(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
            found.append(f"{path.name}:{node.lineno} os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module and "adapters" in node.module.split("."):
            found.append(f"{path.name}:{node.lineno} imports {node.module}")
        if isinstance(node, ast.Import) and any(".adapters" in a.name for a in node.names):
            found.append(f"{path.name}:{node.lineno} imports an adapter")
    return found


def test_services_neither_read_the_environment_nor_choose_adapters():
    found = [f for path in sorted(SERVICES.glob("*.py")) for f in _calls_into_environment_or_adapters(path)]
    assert found == []


def test_the_lambda_code_paths_import_no_scipy():
    """scipy (139 MB) ships in no function: only the local profile's exact graph path needs it,
    and the entity matrices' name lists are read without building a matrix."""
    code = (
        "import sys\n"
        "sys.modules['scipy'] = None\n"  # any import of scipy now raises ImportError
        "import eragraph.bootstrap.aws, eragraph.services.graph_query, eragraph.services.reindex\n"
        "import eragraph.services.invariants, eragraph.services.routing, eragraph.entrypoints.http.api\n"
        "import eragraph.adapters.aws.entity_dynamodb, eragraph.domain.graph_math\n"
        "from eragraph.ports.entity import build_matrices\n"
        "m = build_matrices(1, [('paris', 'c1', 2), ('curie', 'c1', 1)], [('c1#s0', 'paris')], [('curie', 'paris', 1)])\n"
        "assert m.entities == ['curie', 'paris'] and m.sentences == ['c1#s0'] and list(m.frequency) == [1.0, 2.0]\n"
        "try:\n    m.contain\nexcept ImportError:\n    print('matrices need scipy')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "matrices need scipy"


def test_matrices_built_lazily_equal_the_eager_construction():
    import numpy as np

    from eragraph.ports.entity import build_matrices

    m = build_matrices(3, [("b", "c2", 1), ("a", "c1", 2), ("b", "c1", 1)],
                       [("c1#s0", "a"), ("c1#s0", "b"), ("c2#s0", "b")], [("a", "b", 1)])
    assert m.contain.toarray().tolist() == [[2.0, 1.0], [0.0, 1.0]]
    assert m.mention.toarray().tolist() == [[1.0, 1.0], [0.0, 1.0]]
    assert m.cooccurrence.toarray().tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert np.array_equal(m.frequency, np.asarray(m.contain.sum(axis=0)).reshape(-1))
    assert m.sentence_chunk.tolist() == [0, 1]


def test_settings_round_trip_through_a_dict():
    s = hash_settings(graph_retrieval=GraphSettings(exact=False, hops=1), ner="spacy")
    assert Settings(**s.to_dict()) == s
    assert dataclasses.replace(s, parser="none").parser == "none"
