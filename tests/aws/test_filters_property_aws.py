"""Filtered queries on the AWS profile's adapters (DynamoDB under moto, the OpenSearch fake that
evaluates the filter DSL the adapter sends, the DynamoDB entity graph on its push path): no
leak in any mode and the true top-k in the exact ones (filter_cases.py), over
ERAGRAPH_FILTER_CASES cases (default 1,000). The corpus is built with moto's two
table-size costs taken out (bench/moto_lean.py: same answers, tested there); the queries under
test run on stock moto."""

from __future__ import annotations

import pytest

from aws_helpers import aws_engine  # noqa: F401  (fixture)
from filter_cases import build, cases_per_profile, corpus, run_cases

from eragraph.bench.moto_lean import lean_moto

# longer than the suite's per-test limit (pyproject.toml): 1,000 random cases over moto
pytestmark = pytest.mark.timeout(900)

N_DOCS = 36


def test_aws_profile_filters_every_mode_without_a_leak(aws_engine):  # noqa: F811
    engine, _env, _fake = aws_engine
    docs = corpus(N_DOCS, seed=13)
    with lean_moto():
        build(engine, docs)
    counts = run_cases(engine, docs, cases_per_profile(), seed=3)
    assert counts["exact_checked"] > 0
