"""Port contract fixtures: ``graph_store``, ``vector_index``, ``blob_store``, ``queue``.

Every test that uses one of them runs once per backend registered in ``factories.py`` (read at
collection time, so plugins may register more). Tests marked ``persistent`` run only on backends
whose factory reopens the same data; they get the ``<port>_backend`` fixture to open further
handles on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .factories import REGISTRIES, AdapterFactory
from . import aws_factories  # noqa: F401,E402  registers the AWS backends (moto, OpenSearch fake)


class Backend:
    """One backend under test: opens handles on the test's data and closes them afterwards."""

    def __init__(self, name: str, factory: AdapterFactory, workdir: Path) -> None:
        self.name = name
        self.factory = factory
        self.workdir = workdir
        self._open: list[Any] = []

    def open(self) -> Any:
        adapter = self.factory.make(self.workdir)
        self._open.append(adapter)
        return adapter

    def close(self, adapter: Any) -> None:
        if any(a is adapter for a in self._open):
            self._open = [a for a in self._open if a is not adapter]
            self.factory.close(adapter)

    def reopen(self, adapter: Any) -> Any:
        """Close ``adapter`` and open a new handle on the same data."""
        self.close(adapter)
        return self.open()

    def close_all(self) -> None:
        for adapter in reversed(self._open):
            self.factory.close(adapter)
        self._open.clear()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "persistent: needs a backend whose data survives reopening")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    persistent_only = metafunc.definition.get_closest_marker("persistent") is not None
    for port, registry in REGISTRIES.items():
        fixture = f"{port}_backend"
        if fixture in metafunc.fixturenames:
            names = sorted(n for n, f in registry.items() if f.persistent or not persistent_only)
            metafunc.parametrize(fixture, names, indirect=True)


def _backend(request: pytest.FixtureRequest, tmp_path: Path, port: str):
    name = request.param
    factory = REGISTRIES[port][name]
    with factory.context():
        backend = Backend(name, factory, tmp_path / f"{port}-{name}")
        backend.workdir.mkdir(parents=True, exist_ok=True)
        try:
            yield backend
        finally:
            backend.close_all()


@pytest.fixture
def graph_store_backend(request, tmp_path):
    yield from _backend(request, tmp_path, "graph_store")


@pytest.fixture
def vector_index_backend(request, tmp_path):
    yield from _backend(request, tmp_path, "vector_index")


@pytest.fixture
def blob_store_backend(request, tmp_path):
    yield from _backend(request, tmp_path, "blob_store")


@pytest.fixture
def queue_backend(request, tmp_path):
    yield from _backend(request, tmp_path, "queue")


@pytest.fixture
def graph_store(graph_store_backend):
    return graph_store_backend.open()


@pytest.fixture
def vector_index(vector_index_backend):
    return vector_index_backend.open()


@pytest.fixture
def blob_store(blob_store_backend):
    return blob_store_backend.open()


@pytest.fixture
def queue(queue_backend):
    return queue_backend.open()
