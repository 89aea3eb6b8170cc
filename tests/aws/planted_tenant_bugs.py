"""How many cases of the AWS tenant property suite (test_tenants_property_aws.py) it takes to
catch bugs planted in the OpenSearch adapters' tenant scope: for each bug and seed, the index of
the first failing case out of up to 1,000 (None: not caught), on the suite's corpus and ks. The
suite's case count is set from these (docs/testing/index.md, "CI time"). Not collected by the
suite (no ``test_`` prefix):

    python -m pytest -q -n 0 -s tests/aws/planted_tenant_bugs.py

writes bench-results/planted-bugs-tenants.json."""
import json, re, sys
from pathlib import Path

import pytest
from test_tenants_property_aws import aws_tenancy, KS  # noqa: F401
from tenant_cases import build_tenants, corpora, oracles, run_tenant_cases
from eragraph.bench.moto_lean import lean_moto
from planted import planted, selected
from eragraph.adapters.aws import vector_opensearch as vo

pytestmark = pytest.mark.timeout(3000)
OUT = Path(__file__).resolve().parents[2] / "bench-results" / "planted-bugs-tenants.json"
Index = next(v for v in vars(vo).values() if isinstance(v, type) and hasattr(v, "scope") and hasattr(v, "search_many"))
orig_scope, orig_filters = Index.scope, Index._filters

def scope_prefix(self):
    return {"prefix": {"tenant": self.tenant}} if self.tenant else orig_scope(self)
def default_sees_all(self):
    return orig_scope(self) if self.tenant else {"match_all": {}}
def lexical_unscoped(self):
    caller = sys._getframe(1).f_code
    return {"match_all": {}} if caller.co_filename.endswith("lexical_opensearch.py") else orig_scope(self)
def search_many_unscoped(self, layers, doc_ids=None, where=None):
    out = orig_filters(self, layers, doc_ids, where)
    return out[1:] if sys._getframe(1).f_code.co_name == "search_many" else out

BUGS = {"scope_prefix": [(Index, "scope", scope_prefix)], "default_sees_all": [(Index, "scope", default_sees_all)],
        "lexical_unscoped": [(Index, "scope", lexical_unscoped)],
        "search_many_unscoped": [(Index, "_filters", search_many_unscoped)]}
BUGS, OUT = selected(BUGS, OUT)  # PLANTED=name,name: those bugs only, into planted-bugs-<kind>-<names>.json
SEEDS = [5, 6, 11, 17, 23, 29]


def test_plant(aws_tenancy, atomic_requests):
    ten, env, fake, clients = aws_tenancy
    corpus = corpora(8, seed=25)
    with lean_moto():
        engines = build_tenants(ten, corpus)
        checks = oracles(engines, corpus)
    out = {}
    for name, patches in BUGS.items():
        for seed in SEEDS:
            with planted(patches), lean_moto():
                try:
                    run_tenant_cases(engines, corpus, 1000, seed=seed, checks=checks, ks=KS)
                    out[f"{name}/{seed}"] = None
                except AssertionError as e:
                    m = re.search(r"case (\d+)", str(e))
                    out[f"{name}/{seed}"] = int(m.group(1)) if m else str(e)[:300]
            print(name, seed, out[f"{name}/{seed}"], flush=True)
            with open(OUT, "w") as fh:
                json.dump({"command": f"python -m pytest -q -n 0 -s tests/aws/{Path(__file__).name}", "cases_up_to": 1000,
                           "note": "index of the first failing case (0-based); null: not caught in 1,000",
                           "first_failing_case": out}, fh, indent=1)
