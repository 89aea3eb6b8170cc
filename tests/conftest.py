"""Shared fixtures."""

from __future__ import annotations

import pytest
from support import make_engine

from eragraph.services.engine import Engine


@pytest.fixture
def engine() -> Engine:
    return make_engine()
