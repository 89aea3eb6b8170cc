"""Shared fixtures."""

from __future__ import annotations

import pytest
from support import make_engine

from eragraph.services.engine import Engine


@pytest.fixture
def engine() -> Engine:
    return make_engine()


def pytest_sessionfinish(session, exitstatus):
    from reliability_cases import write

    write()
