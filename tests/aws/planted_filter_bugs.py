"""How many cases of the AWS filter property suite (test_filters_property_aws.py) it takes to
catch bugs planted in the OpenSearch filter DSL and its callers: for each bug and seed, the index
of the first failing case out of up to 1,000 (None: not caught). The suite's case count is set
from these (docs/testing/index.md, "CI time"). Not collected by the suite (no ``test_`` prefix):

    python -m pytest -q -n 0 -s tests/aws/planted_filter_bugs.py

writes bench-results/planted-bugs-filters.json."""
import json, re
from pathlib import Path

import pytest
from aws_helpers import aws_engine  # noqa: F401
from filter_cases import build, corpus, run_cases
from eragraph.bench.moto_lean import lean_moto
from planted import planted, selected
from eragraph.adapters.aws import filter_dsl as fd, lexical_opensearch as lx, vector_opensearch as vo

pytestmark = pytest.mark.timeout(3000)
OUT = Path(__file__).resolve().parents[2] / "bench-results" / "planted-bugs-filters.json"
orig_compile, orig_where, orig_equals = fd.compile_filter, fd.where_clauses, fd._equals

def negation_lost(f):
    if isinstance(f, fd.Cond) and f.op in ("notEquals", "notIn"):
        return orig_equals(f.key, (f.value,) if f.op == "notEquals" else f.value)
    return orig_compile(f)
def gte_as_gt(f):
    out = orig_compile(f)
    if isinstance(f, fd.Cond) and f.op in ("greaterThanOrEquals", "lessThanOrEquals"):
        return {"range": {k: {op[:2]: v for op, v in r.items()} for k, r in out["range"].items()}}
    return out
def first_type_only(key, values):
    out = orig_equals(key, values)
    return out["bool"]["should"][0] if "bool" in out else out
def or_as_and(f):
    if isinstance(f, fd.AnyOf) and f.items:
        return {"bool": {"filter": [or_as_and(g) for g in f.items]}}
    return orig_compile(f) if not isinstance(f, fd.All) else {"bool": {"filter": [or_as_and(g) for g in f.items]}}
def prefix_as_term(f):
    out = orig_compile(f)
    if isinstance(f, fd.Cond) and f.op == "startsWith":
        return {"term": out["prefix"]}
    return out
def no_marker(where):
    return [] if where is None else [orig_compile(where)]
def lexical_unfiltered(where):
    return []

BUGS = {
    "negation_lost": [(fd, "compile_filter", negation_lost)],
    "gte_as_gt": [(fd, "compile_filter", gte_as_gt)],
    "in_first_type_only": [(fd, "_equals", first_type_only)],
    "or_as_and": [(fd, "compile_filter", or_as_and)],
    "prefix_as_term": [(fd, "compile_filter", prefix_as_term)],
    "no_has_attrs_marker": [(vo, "where_clauses", no_marker), (lx, "where_clauses", no_marker)],
    "bm25_unfiltered": [(lx, "where_clauses", lexical_unfiltered)],
}
BUGS, OUT = selected(BUGS, OUT)  # PLANTED=name,name: those bugs only, into planted-bugs-<kind>-<names>.json
SEEDS = [3, 11, 17, 23, 29, 31]


def test_plant(aws_engine):  # noqa: F811
    engine, _env, _fake = aws_engine
    docs = corpus(36, seed=13)
    with lean_moto():
        build(engine, docs)
    out = {}
    for name, patches in BUGS.items():
        for seed in SEEDS:
            with planted(patches):
                try:
                    run_cases(engine, docs, 1000, seed=seed)
                    out[f"{name}/{seed}"] = None
                except AssertionError as e:
                    m = re.search(r"case (\d+)", str(e))
                    out[f"{name}/{seed}"] = int(m.group(1)) if m else str(e)[:200]
            print(name, seed, out[f"{name}/{seed}"], flush=True)
            with open(OUT, "w") as fh:
                json.dump({"command": f"python -m pytest -q -n 0 -s tests/aws/{Path(__file__).name}", "cases_up_to": 1000,
                           "note": "index of the first failing case (0-based); null: not caught in 1,000",
                           "first_failing_case": out}, fh, indent=1)
