"""Shared fixtures, and what the suite needs to run on pytest-xdist workers (scripts/test.sh)."""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import aws_limits
import moto_s3_events
import moto_speedups
import pytest
import xdist_order
from support import make_engine

from eragraph.services.engine import Engine

TESTS = Path(__file__).resolve().parent
# the IAM judge: every AWS call a function's code makes is judged against its role (tests/iam_judge.py)
pytest_plugins = ["iam_judge"]

# moto's TransactWriteItems saves the items it names, not the tables, for its rollback, and a Query
# reads its partition, not the sorted table (the same answers, in time that does not grow with it)
moto_speedups.install()
# AWS's size and count limits that moto does not hold (BatchWriteItem, transaction bytes, SQS bytes)
aws_limits.install()
# moto's S3 notifications as S3 sends them (a sequencer, no size on a removal, the key's / kept)
moto_s3_events.install()


@pytest.fixture
def engine() -> Engine:
    return make_engine()


# --- pytest-xdist ----------------------------------------------------------------------------
# scripts/test.sh runs the suite with `-n auto --dist loadgroup`. A test file whose tests share a
# module- or class-scoped fixture (a served store, a started Lambda function, a loopback cloud, a
# corpus ingested once) is one group, run whole on one worker, so that the fixture is set up
# once, not once per worker; every other test is a group of its own. The groups are read from the
# test files' source by the controller (which collects nothing): xdist's own loadgroup marks a
# group by rewriting the test's node id, which pytest 9.2 no longer reads. A file that sets
# ``SPREAD_OVER_WORKERS = True`` at its top level is spread test by test whatever its fixtures:
# it shares its costly set-up across workers itself (tests/deployed/parity_snapshot.py), and a
# worker that runs several of its tests apart sets up only its cheap module fixtures again.
# The units are handed out long ones first, in tests/xdist_order.py's order.

SHARED_SCOPES = {"module", "class", "package"}


def _defines_shared_fixture(path: Path) -> bool:
    """Whether the file defines a fixture with a module, class or package scope."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and any(
                        kw.arg == "scope" and isinstance(kw.value, ast.Constant) and kw.value.value in SHARED_SCOPES
                        for kw in dec.keywords):
                    return True
    return False


@functools.cache
def spreads_over_workers(test_file: str) -> bool:
    """Whether ``test_file`` (relative to the root) sets ``SPREAD_OVER_WORKERS = True``."""
    try:
        tree = ast.parse((TESTS.parent / test_file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return False
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is True
               and any(isinstance(t, ast.Name) and t.id == "SPREAD_OVER_WORKERS" for t in node.targets)
               for node in tree.body)


@functools.cache
def shares_fixtures(test_file: str) -> bool:
    """Whether ``test_file`` (relative to the root) or a conftest.py above it within tests/
    defines a fixture its tests share."""
    path = (TESTS.parent / test_file).resolve()
    if _defines_shared_fixture(path):
        return True
    folder = path.parent
    while folder == TESTS or TESTS in folder.parents:
        conftest = folder / "conftest.py"
        if folder != TESTS and conftest.is_file() and _defines_shared_fixture(conftest):
            return True
        folder = folder.parent
    return False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        """One work unit per test, except a file whose tests share a fixture: one unit."""

        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            test_file = nodeid.split("::", 1)[0]
            return test_file if shares_fixtures(test_file) and not spreads_over_workers(test_file) else nodeid

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the first assignment: the queue is complete, long units first
                self.ordered = True
                units = dict(self.workqueue)
                self.workqueue.clear()
                self.workqueue.update((unit, units[unit]) for unit in xdist_order.ordered(units))
            super()._assign_work_unit(node)

    return SharedFixtureScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from reliability_cases import CASES, write

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its cases go to the controller, which writes them all
        workeroutput["reliability_cases"] = json.dumps(CASES)
        return
    write()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist (controller): a worker ended; keep the reliability cases it recorded."""
    from reliability_cases import CASES

    CASES.extend(json.loads(getattr(node, "workeroutput", {}).get("reliability_cases", "[]")))
