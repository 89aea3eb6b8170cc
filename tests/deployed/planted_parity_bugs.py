"""How many questions the parity test (test_deployed_parity.py, ``test_top5_every_mode``) needs to
see a divergence between the stores: bugs planted in the local side's adapters and ranking (the
side that runs in this process), each the kind of difference a second store can have (an
off-by-one page, a tie broken the other way, a float rounded, a count not added, an index not
replicated). For each bug and mode: the index of the first of the parity questions whose top 5
differ from the deployed query function's (None: none of them). The parity test's question
count is set from these (docs/testing/index.md, "CI time"). Not collected by the suite (no
``test_`` prefix):

    ERAGRAPH_PARITY_QUESTIONS=30 python -m pytest -q -n 0 -s tests/deployed/planted_parity_bugs.py

writes bench-results/planted-bugs-parity.json. The deployed side is asked once per question and
mode; each bug then runs the local side alone, on a fresh engine over a copy of the saved store
(no cache of an earlier run hides the bug). ``PARITY_SNAPSHOT=<folder>``: the parity stores a
run of the parity test saved (tests/deployed/parity_snapshot.py; its session's
``deployed-parity`` folder) instead of building them again, and the deployed side's answers kept
there for the next run."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from engine_view import environment
import test_deployed_parity
from parity_snapshot import DONE, shared_stores
from test_deployed_parity import QUESTIONS, _musique, aws_top, data, local_top, query_fn, settings  # noqa: F401

from planted import planted, selected
from eragraph.adapters.local import entity_sqlite as es, lexical_fts5 as lx, vector_faiss as vf
from eragraph.domain import ranking
from eragraph.services.modes import mode_names

pytestmark = pytest.mark.timeout(7200)
OUT = Path(__file__).resolve().parents[2] / "bench-results" / "planted-bugs-parity.json"

Lex, Vec, Ent = lx.Fts5LexicalIndex, vf.FaissVectorIndex, es.SqliteEntityStore
lex_search, vec_search = Lex.search, Vec.search
postings, cooccurring, synonyms = Ent.postings, Ent.cooccurring, Ent.synonyms
frequencies, sentences_of = Ent.frequencies, Ent.sentences_of


def lexical_short_page(self, text, k, where=None):  # a page one hit short
    return lex_search(self, text, k, where)[:max(k - 1, 0)]


def lexical_ties_reversed(self, text, k, where=None):  # equal scores in the other order
    hits = lex_search(self, text, k + 5, where)
    return sorted(hits, key=lambda h: (-round(h.score, 6), [-ord(c) for c in h.node_id]))[:k]


def vector_half_precision(self, vector, k, *args, **kwargs):  # the query vector stored as float16
    return vec_search(self, np.asarray(vector, dtype=np.float16).astype(np.float32), k, *args, **kwargs)


def vector_short_page(self, vector, k, *args, **kwargs):
    return vec_search(self, vector, k, *args, **kwargs)[:max(k - 1, 0)]


def _rounded(hits, digits):
    return sorted([type(h)(h.node_id, round(h.score, digits)) for h in hits], key=lambda h: -h.score)


def lexical_scores_rounded(self, text, k, where=None):  # scores kept to one decimal (a float's precision lost)
    return _rounded(lex_search(self, text, k, where), 1)


def vector_scores_rounded(self, vector, k, *args, **kwargs):
    return _rounded(vec_search(self, vector, k, *args, **kwargs), 3)


def postings_one_more(self, entities):  # a mention counted twice (an ADD retried)
    return {e: {c: n + 1 for c, n in row.items()} for e, row in postings(self, entities).items()}


def cooccurring_page_cut(self, entities):  # each entity's rarest neighbour lost to a page boundary
    out = {}
    for e, row in cooccurring(self, entities).items():
        keep = sorted(row.items(), key=lambda kv: (-kv[1], kv[0]))
        out[e] = dict(keep[:-1] if len(keep) > 1 else keep)
    return out


def synonyms_missing(self, entities):  # the synonym edges not replicated
    return {}


def frequencies_one_more(self, entities):
    return {e: n + 1 for e, n in frequencies(self, entities).items()}


def sentences_first_only(self, entities):  # an entity's sentences cut to its first
    return {e: ids[:1] for e, ids in sentences_of(self, entities).items()}


BUGS = {
    "lexical_short_page": [(Lex, "search", lexical_short_page)],
    "lexical_ties_reversed": [(Lex, "search", lexical_ties_reversed)],
    "vector_half_precision": [(Vec, "search", vector_half_precision)],
    "vector_short_page": [(Vec, "search", vector_short_page)],
    "lexical_scores_rounded": [(Lex, "search", lexical_scores_rounded)],
    "vector_scores_rounded": [(Vec, "search", vector_scores_rounded)],
    "postings_one_more": [(Ent, "postings", postings_one_more)],
    "cooccurring_page_cut": [(Ent, "cooccurring", cooccurring_page_cut)],
    "synonyms_missing": [(Ent, "synonyms", synonyms_missing)],
    "frequencies_one_more": [(Ent, "frequencies", frequencies_one_more)],
    "sentences_first_only": [(Ent, "sentences_of", sentences_first_only)],
    "ties_to_three_digits": [(ranking, "SCORE_DIGITS", 3)],
}
BUGS, OUT = selected(BUGS, OUT)
SNAPSHOT = os.environ.get("PARITY_SNAPSHOT")


@pytest.fixture(scope="module")
def stores(cloud, launch, data, settings, tmp_path_factory):  # noqa: F811
    if SNAPSHOT and (Path(SNAPSHOT) / DONE).is_file():
        return shared_stores(Path(SNAPSHOT), cloud, build=None)[0]
    return test_deployed_parity.session_stores(cloud, launch, data, settings, tmp_path_factory)


def deployed_answers(query_fn, questions, modes) -> dict:  # noqa: F811
    kept = Path(SNAPSHOT) / f"deployed-top5-{len(questions)}.json" if SNAPSHOT else None
    if kept is not None and kept.is_file():
        return json.loads(kept.read_text())
    want = {m: [aws_top(query_fn, q, m) for q in questions] for m in modes}
    if kept is not None:
        kept.write_text(json.dumps(want))
    return want


def test_plant(stores, request, data, settings, tmp_path):  # noqa: F811
    from eragraph.bootstrap import build_engine
    from eragraph.bootstrap.local import close

    _, questions = data
    modes = mode_names()
    kept = Path(SNAPSHOT or "-") / f"deployed-top5-{len(questions)}.json"
    want = deployed_answers(None if kept.is_file() else request.getfixturevalue("query_fn"), questions, modes)
    out, clean = {}, {}
    for name, patches in [("none", [])] + list(BUGS.items()):
        store = tmp_path / name
        shutil.copytree(stores, store)
        with planted(patches), environment(settings):
            engine = build_engine("local", store=store)
            try:
                first = {}
                for m in modes:
                    got = [local_top(engine, settings, q, m) for q in questions]
                    first[m] = next((i for i, (a, b) in enumerate(zip(want[m], got)) if a != b), None)
            finally:
                close(engine)
        (clean if name == "none" else out)[name] = first
        print(name, first, flush=True)
        caught = {b: min((i for i in f.values() if i is not None), default=None) for b, f in out.items()}
        OUT.write_text(json.dumps({
            "command": f"ERAGRAPH_PARITY_QUESTIONS={QUESTIONS} python -m pytest -q -n 0 -s "
                       f"tests/deployed/{Path(__file__).name}",
            "questions": len(questions),
            "note": "per bug and mode, the index (0-based) of the first parity question whose top 5 differ "
                    "from the deployed function's; null: none of them. 'caught_at' is the earliest over the "
                    "modes (the parity test fails when any mode fails). 'unplanted' must be all null.",
            "unplanted": clean.get("none"), "caught_at": caught, "first_differing_question": out}, indent=1) + "\n")
    assert all(v is None for v in clean["none"].values()), clean
