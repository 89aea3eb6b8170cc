"""Fixtures of the deployed suite: the functions ``sam build`` made, run under Python 3.12 with
only their code, their layers and the Lambda runtime's packages on sys.path (lambda_driver.py),
against moto and the HTTP OpenSearch fake on loopback (deployed.py).

Without a build folder (``.aws-sam/build``, made by scripts/build_lambda.sh or ``sam build``)
or without Python 3.12 these tests skip, saying why; with ERAGRAPH_REQUIRE_BUILD=1 (CI) they fail."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import deployed as dp

from deployed import SMALL_GRAPH  # noqa: E402


def unavailable(reason: str) -> None:
    if os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1":
        pytest.fail(f"{reason} (ERAGRAPH_REQUIRE_BUILD=1: the deployed suite must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def sam_build() -> dict[str, dp.BuiltFunction]:
    folder = dp.build_dir()
    if not (folder / "template.yaml").is_file():
        unavailable(f"no sam build in {folder}: run scripts/build_lambda.sh (sam build) first")
    functions = dp.load_build(folder)
    stale = dp.stale_files(functions)
    if stale:
        unavailable(f"the sam build in {folder} is older than the sources ({', '.join(stale[:5])}"
                    f"{' ...' if len(stale) > 5 else ''}): run scripts/build_lambda.sh (sam build) again")
    return functions


@pytest.fixture(scope="session")
def python312() -> str:
    python = dp.find_python312()
    if python is None:
        unavailable("no Python 3.12 (the Lambda runtime's) found: set ERAGRAPH_PYTHON312")
    return python


@pytest.fixture(scope="session")
def lambda_runtime(python312) -> Path:
    return dp.ensure_runtime(python312)


@pytest.fixture(scope="module")
def cloud() -> Iterator[dp.LoopbackCloud]:
    c = dp.LoopbackCloud().start()
    yield c
    c.stop()


Launcher = Callable[..., dp.LambdaProcess]


@pytest.fixture(scope="module")
def launch(sam_build, python312, lambda_runtime, cloud, tmp_path_factory) -> Iterator[Launcher]:
    """launch(name, settings=None, start=True, **driver options) -> a started LambdaProcess of
    functions/<name> (closed at the end of the module). ``settings``: the test's ERAGRAPH_*
    settings over the template's environment (default SMALL_GRAPH; given ones replace it whole,
    so that the functions run with exactly what a test compares against)."""
    started: list[dp.LambdaProcess] = []
    logs = tmp_path_factory.mktemp("lambda-logs")

    def go(name: str, settings: dict | None = None, *, start: bool = True, **options) -> dp.LambdaProcess:
        fn = dp.function_for(sam_build, name)
        env = cloud.environment(fn, SMALL_GRAPH if settings is None else settings)
        proc = dp.LambdaProcess(fn, env, python312, lambda_runtime, logs, **options)
        started.append(proc)
        if start:
            proc.start()
        return proc

    yield go
    for proc in started:
        proc.close()
