"""The order scripts/test.sh's workers take the units in (tests/xdist_order.py): long ones first,
the parity stores' build before every other parity test, the rest as collected."""

from __future__ import annotations

import ast
from pathlib import Path

from xdist_order import START_FIRST, ordered, rank

ROOT = Path(__file__).resolve().parents[2]
PARITY = "tests/deployed/test_deployed_parity.py"


def test_listed_units_come_first_in_the_lists_order_and_the_rest_keep_theirs():
    units = ["tests/unit/test_b.py::test_x", f"{PARITY}::test_top5_every_mode[dense]",
             "tests/deployed/test_deployed_smoke.py",  # a file run as one group
             f"{PARITY}::test_store_digest", "tests/unit/test_a.py::test_y",
             f"{PARITY}::test_top5_every_mode[bm25]", f"{PARITY}::test_node_ids_per_layer",
             "tests/aws/test_tenants_property_aws.py::test_aws_profile_deletes_one_tenant_only",
             "tests/aws/test_tenants_property_aws.py::test_aws_profile_tenants_leak_nothing"]
    assert ordered(units) == [
        f"{PARITY}::test_node_ids_per_layer",
        "tests/aws/test_tenants_property_aws.py::test_aws_profile_tenants_leak_nothing",
        "tests/deployed/test_deployed_smoke.py",
        "tests/aws/test_tenants_property_aws.py::test_aws_profile_deletes_one_tenant_only",
        f"{PARITY}::test_top5_every_mode[dense]", f"{PARITY}::test_top5_every_mode[bm25]",
        f"{PARITY}::test_store_digest",
        "tests/unit/test_b.py::test_x", "tests/unit/test_a.py::test_y"]


def test_a_file_run_as_one_group_takes_the_place_of_its_listed_test():
    first = ("tests/contract/test_graph_store.py::test_large_node_batches",)
    assert rank("tests/contract/test_graph_store.py", first) == 0
    assert rank("tests/contract/test_graph_store.py::test_large_node_batches[dynamodb]", first) == 0
    assert rank("tests/contract/test_graph_store_more.py", first) == 1


def test_the_store_building_test_is_first_and_the_other_parity_tests_after_the_long_ones():
    assert START_FIRST[0] == f"{PARITY}::test_node_ids_per_layer"
    assert all(e.startswith(PARITY) for e in START_FIRST[START_FIRST.index(f"{PARITY}::test_top5_every_mode"):])


def test_every_entry_names_a_test_that_exists():
    """A renamed test would drop out of the order silently: each entry's file and function exist."""
    for entry in START_FIRST:
        path, _, name = entry.partition("::")
        assert (ROOT / path).is_file(), entry
        if name:
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, entry
