"""The order in which scripts/test.sh's xdist workers take the suite's units of work.

pytest-xdist hands each worker the next unit of its queue whenever the worker's own list runs
short, so the queue's order is the schedule. By default the units run in collection order (the
files sharing a fixture first, most tests first): a 3-minute test collected late starts when the
other worker has little left and ends the run alone, and the parity tests' stores (built once,
by whichever worker asks first: tests/deployed/parity_snapshot.py) kept the second worker waiting
on their lock whenever it reached a parity test while the first one built them.

``START_FIRST`` names the long units, longest first (longest-processing-time-first: the short
ones fill the gaps at the end): first the parity test that builds the stores, then units long
enough to keep the other worker busy meanwhile, then the rest of the parity file, whose tests
load the stores built by then. A unit matches an entry when its id (a test's node id, or the file
of a group) starts with the entry, or is the file the entry's test is in; unlisted units keep
their order after the listed ones. The times beside the entries are from docs/testing/index.md
("CI time")."""

from __future__ import annotations

from collections.abc import Iterable

START_FIRST = (
    # builds both parity stores through the deployed functions (about 3 minutes of set-up)
    "tests/deployed/test_deployed_parity.py::test_node_ids_per_layer",
    # meanwhile, on the other worker (the second and fourth units go to it, the third waits
    # behind the build): the moto property suites, the loopback stacks of the smoke run
    "tests/aws/test_tenants_property_aws.py::test_aws_profile_tenants_leak_nothing",
    "tests/contract/test_graph_store.py::test_large_node_batches",
    "tests/aws/test_filters_property_aws.py",
    "tests/deployed/test_deployed_smoke.py",
    "tests/aws/test_tenants_property_aws.py",
    # the parity modes (1-2 minutes each), over both workers, on the stores built by now
    "tests/deployed/test_deployed_parity.py::test_top5_every_mode",
    "tests/deployed/test_deployed_parity.py",
)


def rank(unit: str, first: tuple[str, ...] = START_FIRST) -> int:
    """The unit's place: the index of the first entry it matches, else ``len(first)``. ``unit``
    is a node id or, for a file run as one group, the file's path."""
    for i, entry in enumerate(first):
        if unit.startswith(entry) or entry.split("::", 1)[0] == unit:
            return i
    return len(first)


def ordered(units: Iterable[str], first: tuple[str, ...] = START_FIRST) -> list[str]:
    """``units`` with the listed ones first, in the list's order; a stable sort, so units of one
    rank (the unlisted ones, the modes of the parity test) keep the order they came in."""
    return sorted(units, key=lambda unit: rank(unit, first))
