"""The router's two heads: training (training.router.train_sets on synthetic runs: a text-only
head beside the text+vector head, leave-one-dataset-out and held-out halves for both) and the
query side (RouterModel.head_for, services.routing: the text+vector head only for vectors of the
embedder it was trained with; older single-head files keep their behaviour)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from eragraph.domain.halves import half_of, halves
from eragraph.domain.question_features import LEXICAL_FEATURE_NAMES
from eragraph.domain.router_model import RouterModel
from eragraph.services.routing import load_router, scored_by_head

DIM = 6
CHAIN = "Which river runs through the capital of the country of birth of the author of Sea {i}?"
PLAIN = "Who wrote Sea {i}"


def synthetic(name: str, n: int, seed: int, signal_in_vector: bool = True) -> list[dict]:
    """Runs where the graph finds the supporting passage of every chain question (many "of",
    a question mark) and the dense side that of every plain one: the text alone tells them apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        chain = rng.random() < 0.5
        vec = rng.normal(size=DIM)
        if signal_in_vector:
            vec[0] += 3.0 if chain else -3.0
        hit, miss = [f"{name}-c{i}", f"{name}-x{i}"], [f"{name}-y{i}", f"{name}-z{i}"]
        rows.append({"id": f"{name}-{i}", "question": (CHAIN if chain else PLAIN).format(i=i),
                     "support": [f"{name}-d{i}"], "vector": vec.tolist(),
                     "graph": hit if chain else miss, "dense": miss if chain else hit, "bm25": miss,
                     "doc": {f"{name}-c{i}": f"{name}-d{i}", f"{name}-x{i}": f"{name}-e{i}",
                             f"{name}-y{i}": f"{name}-f{i}", f"{name}-z{i}": f"{name}-g{i}"}})
    return rows


@pytest.fixture(scope="module")
def trained():
    from eragraph.training.router import Dataset, train_sets

    sets = [Dataset(n, synthetic(n, 40, s)) for n, s in (("alpha", 1), ("beta", 2), ("gamma", 3))]
    report, model = train_sets(sets, "text+vector", components=2, embedder="toy-embedder#weights-sha256:abc")
    return sets, report, model


def test_halves_are_fixed_by_the_id_and_split_about_evenly():
    ids = [f"q{i}" for i in range(400)]
    assert halves(ids) == [half_of(i) for i in ids] and set(halves(ids)) == {0, 1}
    assert 150 < sum(halves(ids)) < 250
    assert half_of("2hop__13548_13529") == half_of("2hop__13548_13529")        # no per-process seed
    assert halves(reversed(ids)) == list(reversed(halves(ids)))              # order does not move a question


def test_training_ships_both_heads_with_the_embedder(trained):
    _, report, model = trained
    assert report["inputs"] == "text+vector" and report["embedder"] == "toy-embedder#weights-sha256:abc"
    assert model.inputs == "text+vector" and model.embedder == "toy-embedder#weights-sha256:abc"
    text = model.text_head
    assert text is not None and text.inputs == "text" and text.embedder == model.embedder
    assert text.feature_names == LEXICAL_FEATURE_NAMES and text.projection is None
    assert report["text_head"]["features"] == list(LEXICAL_FEATURE_NAMES)
    back = RouterModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert back.text_head.inputs == "text" and back.embedder == model.embedder
    q = "Which lake lies in the capital of the country of the author of Sea 7?"
    assert back.text_head.score(back.text_head.phi(q, None)[0]) == pytest.approx(text.score(text.phi(q, None)[0]))


def test_both_heads_are_measured_out_of_sample(trained):
    sets, report, _ = trained
    for head in (report, report["text_head"]):
        for kind in ("logistic", "mlp"):
            assert set(head["lodo"][kind]["per_dataset"]) == {"alpha", "beta", "gamma"}
        halves_ = head["halves"]
        for d in sets:
            h = np.array(halves(r["id"] for r in d.rows))
            assert halves_["train0_test1"][d.name]["questions"] == int((h == 1).sum())
            assert halves_["train1_test0"][d.name]["questions"] == int((h == 0).sum())
            both = halves_["both"][d.name]
            assert both["questions"] == len(d.rows)                    # every question routed once, unseen
            oracle = float(np.maximum(d.r["graph"], d.r["dense"]).mean())
            best_single = max(both[f"recall@5_{m}"] for m in ("dense", "hybrid", "graph"))
            # the text tells the winner: the text-only head routes every held-out question right
            assert both["recall@5_auto"] == pytest.approx(oracle) and both["recall@5_auto"] > best_single
        lodo = head["lodo"][head["chosen"]]["per_dataset"]
        assert all(r["recall@5_auto"] == pytest.approx(1.0) for r in lodo.values())


def test_text_only_training_reads_no_vector():
    from eragraph.training.router import Dataset, train_sets

    sets = [Dataset(n, synthetic(n, 30, s, signal_in_vector=False)) for n, s in (("a", 4), ("b", 5), ("c", 6))]
    for d in sets:
        d.vec[:] = np.nan                                   # a vector read anywhere would poison the scores
    report, model = train_sets(sets, "text", embedder="bedrock:amazon.titan-embed-text-v2:0@1024")
    assert model.inputs == "text" and model.text_head is None and "text_head" not in report
    assert report["features"] == list(LEXICAL_FEATURE_NAMES)
    assert all(r["recall@5_auto"] == pytest.approx(1.0) for r in report["halves"]["both"].values())


# ------------------------------------------------------------------ choosing the head at query time


def two_heads(embedder="minilm#weights-sha256:aa") -> RouterModel:
    rng = np.random.default_rng(0)
    n_lex = len(LEXICAL_FEATURE_NAMES)
    names = (*LEXICAL_FEATURE_NAMES, "embedding_pc1", "embedding_pc2")
    text = RouterModel(LEXICAL_FEATURE_NAMES, np.zeros(n_lex), np.ones(n_lex), "logistic",
                       {"w": rng.normal(size=n_lex), "b": np.array(0.0)}, 0.0, 0.0, inputs="text", embedder=embedder)
    return RouterModel(names, np.zeros(n_lex + 2), np.ones(n_lex + 2), "logistic",
                       {"w": rng.normal(size=n_lex + 2), "b": np.array(0.0)}, 1.0, 1.0, inputs="text+vector",
                       projection=np.eye(2, 4), projection_mean=np.zeros(4), embedder=embedder, text_head=text)


def test_the_text_vector_head_only_for_its_own_embedder():
    m, v = two_heads(), np.array([3.0, -1.0, 0.0, 0.0])
    assert m.head_for("minilm#weights-sha256:aa", v) == (m, "")
    for other, vec, said in (("minilm#weights-sha256:bb", v, "minilm#weights-sha256:bb"),   # other weights
                             ("bedrock:amazon.titan-embed-text-v2:0@4", v, "titan"),          # same dimension
                             ("minilm#weights-sha256:aa", np.ones(7), "7-dimensional"),
                             ("minilm#weights-sha256:aa", None, "no query embedding")):
        head, note = m.head_for(other, vec)
        assert head is m.text_head and said in note and "text-only head" in note
    q = "Who wrote Sea 3?"
    s, note, head = scored_by_head(q, m, object(), v, "bedrock:amazon.titan-embed-text-v2:0@4")
    assert head is m.text_head and "text-only head" in note
    assert s == pytest.approx(m.text_head.score(m.text_head.phi(q, None)[0]))
    assert head.route(s) == "tri_graph"                 # the text head's thresholds (0, 0), not the main's (1, 1)
    s, note, head = scored_by_head(q, m, object(), v, "minilm#weights-sha256:aa")
    assert head is m and note == "" and head.route(s) == "hybrid"


def test_a_recorded_embedder_without_a_text_head_reads_no_foreign_vector():
    m = dataclasses.replace(two_heads(), text_head=None)
    v = np.array([3.0, -1.0, 0.0, 0.0])
    phi, note = m.phi("Who wrote Sea 3?", v, "bedrock:amazon.titan-embed-text-v2:0@4")
    assert not phi[len(LEXICAL_FEATURE_NAMES):].any() and "titan" in note and "text only" in note
    phi, note = m.phi("Who wrote Sea 3?", v, "minilm#weights-sha256:aa")
    assert phi[len(LEXICAL_FEATURE_NAMES):].tolist() == [3.0, -1.0] and note == ""


def test_an_old_single_head_file_loads_and_routes_as_before():
    old = {k: v for k, v in two_heads().to_dict().items() if k not in ("embedder", "text_head")}
    m = RouterModel.from_dict(old)
    assert m.embedder == "" and m.text_head is None
    v = np.array([3.0, -1.0, 0.0, 0.0])
    for identity in (None, "anything", "bedrock:amazon.titan-embed-text-v2:0@4"):   # any vector of its dimension
        s, note, head = scored_by_head("Who wrote Sea 3?", m, object(), v, identity)
        assert head is m and note == "" and s == pytest.approx(m.score(m.phi_text_vector("Who wrote Sea 3?", v)[0]))
    s, note, head = scored_by_head("Who wrote Sea 3?", m, object(), np.ones(1024), "bedrock:titan@1024")
    assert head is m and "1024-dimensional" in note and "text only" in note


def test_a_titan_vector_with_the_shipped_weights_scores_the_text_and_says_so():
    shipped = load_router()
    assert shipped.embedder.startswith("sentence-transformers/all-MiniLM-L6-v2#weights-sha256:")
    titan = "bedrock:amazon.titan-embed-text-v2:0@1024"
    s, note, head = scored_by_head("Which river flows through the capital of France?", shipped, object(),
                                   np.full(1024, 0.03), titan)
    assert 0 < s < 1 and ("text only" in note or "text-only head" in note)
    assert head is (shipped.text_head or shipped)
    if shipped.text_head is None:     # one head: the embedding part is the training mean
        phi, _ = shipped.phi("Which river flows through the capital of France?", np.full(1024, 0.03), titan)
        assert not phi[len(LEXICAL_FEATURE_NAMES):].any()
    # a Titan at 384 dimensions is not MiniLM: its vector is never projected on MiniLM's directions
    s384, note, head = scored_by_head("Which river flows through the capital of France?", shipped, object(),
                                      np.full(384, 0.05), "bedrock:amazon.titan-embed-text-v2:0@384")
    assert "bedrock:amazon.titan-embed-text-v2:0@384" in note


def test_auto_routes_an_engine_by_its_embedders_identity():
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.services.ingest import SourceDoc, ingest
    from eragraph.services.query import query

    eng = build_engine("memory", settings=dataclasses.replace(settings_from_env({}), embedder="hash"))
    ingest(eng, [SourceDoc(source="d0", text="Marie Curie discovered radium in Paris.", doc_id="d0"),
                 SourceDoc(source="d1", text="The Eiffel Tower is in Paris.", doc_id="d1")])
    base = two_heads()
    dim = eng.embedder.dim
    own = dataclasses.replace(base, projection=np.eye(2, dim), projection_mean=np.zeros(dim),
                              embedder=eng.embedder.identity)
    eng.router = own
    r = query(eng, "Who discovered radium?", mode="auto", k=2)
    assert "text-only head" not in (r.note or "") and r.route == "hybrid"        # the main head: (1, 1)
    eng.router = dataclasses.replace(own, embedder="sentence-transformers/all-MiniLM-L6-v2#weights-sha256:x")
    r = query(eng, "Who discovered radium?", mode="auto", k=2)
    assert "text-only head" in r.note and r.route == "tri_graph"                # the text head: (0, 0)


def test_the_report_page_sets_both_heads_side_by_side(trained, tmp_path):
    from eragraph.bench.report import router as page

    _, report, _ = trained
    lines = page.section("router-train", report, tmp_path)
    text = "\n".join(lines)
    assert "The text-only head (AWS) beside the text+vector head" in text
    assert "toy-embedder#weights-sha256:abc" in text
    lodo_at = text.index("Leave-one-dataset-out:")
    halves_at = text.index("Held-out halves")
    rows = [ln for ln in lines if ln.startswith("| alpha |")]
    assert len(rows) == 2 and lodo_at < halves_at                  # LODO, then the halves
    cells = rows[1].strip("|").split("|")
    both = report["halves"]["both"]["alpha"]
    assert cells[1].strip() == str(both["questions"]) and float(cells[2]) == pytest.approx(both["recall@5_auto"], abs=1e-3)
    mode, best = page.best_single(both)
    assert cells[4].strip() == f"{mode} {best:.3f}"
    assert float(cells[5]) == pytest.approx(both["recall@5_auto"] - best, abs=2e-3)
    targets = page.targets("router-train", report)
    aws = [t for t in targets if t[0].startswith("text-only router (AWS)")]
    assert len(aws) == 6 and all(t[3] == "**met**" for t in aws)   # 3 datasets x (LODO, halves)
    older = {k: v for k, v in report.items() if k not in ("text_head", "halves")}
    assert page.heads_section(older) == [] and page.text_head_target_rows(older) == []
