"""The parity run's two stores, built once per test session and shared by every worker that runs a
part of tests/deployed/test_deployed_parity.py.

The first worker to need them builds them under a file lock in the session's shared temporary
folder (pytest-xdist's workers share its parent): the AWS side through the deployed functions
(S3 -> ingest -> summarize FIFO -> DynamoDB + OpenSearch), the local side through the local
profile, then writes what each holds: the DynamoDB items and S3 objects moto holds, the
OpenSearch fake's indexes, and the local store's folder. A worker that finds them written loads
them into its own loopback cloud (moto's backend and the fake, in process: no function runs
again) and copies the local folder. What the tests compare is therefore what the functions
wrote, byte for byte, whichever worker reads it."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deployed import LoopbackCloud

DONE = "written"  # the last file written: its presence says the rest is complete


def shared_folder(tmp_path_factory: Any, name: str) -> Path:
    """A folder every worker of this session sees: the parent of the worker's base temp under
    pytest-xdist, the base temp itself in one process."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    with open(folder / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _dynamodb_backend(cloud: LoopbackCloud) -> Any:
    """moto's in-process DynamoDB backend that holds the cloud's graph table."""
    from moto.dynamodb.models import dynamodb_backends

    for account in dynamodb_backends:
        for backend in dynamodb_backends[account].values():
            if cloud.table in backend.tables:
                return backend
    raise AssertionError(f"no moto DynamoDB backend holds {cloud.table}")


def _items(table: Any) -> list[dict]:
    out = []
    for item in table.items.values():
        for one in (item.values() if isinstance(item, dict) else [item]):
            out.append(one.to_json()["Attributes"])
    return out


def save(cloud: LoopbackCloud, local_store: Path, folder: Path) -> None:
    """Write what the cloud and the local store hold into ``folder`` (the local store closed)."""
    backend = _dynamodb_backend(cloud)
    tables = {name: _items(table) for name, table in backend.tables.items() if name.startswith(cloud.prefix)}
    (folder / "dynamodb.json").write_text(json.dumps(tables), encoding="utf-8")
    objects = {}
    for page in cloud.s3.get_paginator("list_objects_v2").paginate(Bucket=cloud.bucket):
        for entry in page.get("Contents", []):
            objects[entry["Key"]] = cloud.s3.get_object(Bucket=cloud.bucket, Key=entry["Key"])["Body"].read()
    (folder / "s3.pickle").write_bytes(pickle.dumps(objects))
    (folder / "opensearch.pickle").write_bytes(pickle.dumps(cloud.search.fake.indexes))
    shutil.copytree(local_store, folder / "local")
    (folder / DONE).write_text("1")


def load(cloud: LoopbackCloud, folder: Path) -> None:
    """Put what ``save`` wrote into a fresh cloud (made with the same prefix): its tables' items,
    its bucket's objects (their notifications dropped from the ingest queue: nothing is ingested
    again) and the OpenSearch fake's indexes."""
    backend = _dynamodb_backend(cloud)
    tables = json.loads((folder / "dynamodb.json").read_text(encoding="utf-8"))
    assert set(tables) <= set(backend.tables), (sorted(tables), sorted(backend.tables))
    for name, items in tables.items():
        assert not _items(backend.tables[name]), f"{name} is not empty"
        for attrs in items:
            backend.put_item(name, attrs)
    for key, body in pickle.loads((folder / "s3.pickle").read_bytes()).items():
        cloud.s3.put_object(Bucket=cloud.bucket, Key=key, Body=body)
    cloud.sqs.purge_queue(QueueUrl=cloud.ingest_url)
    cloud.search.fake.indexes = pickle.loads((folder / "opensearch.pickle").read_bytes())


def shared_stores(folder: Path, cloud: LoopbackCloud, build: Callable[[], Path]) -> tuple[Path, bool]:
    """The saved stores in ``folder``: built into ``cloud`` by ``build()`` (which returns the
    closed local store's folder) and saved by the first caller of the session, loaded into
    ``cloud`` by every later one. Returns the saved local store's folder (copy it before opening:
    a query may write) and whether this call built them."""
    with locked(folder):
        failed = folder / "failed"
        if failed.is_file():  # the first build failed (its test said why): not again on every worker
            raise AssertionError(f"the parity stores could not be built: {failed.read_text(encoding='utf-8')}")
        if not (folder / DONE).is_file():
            try:
                save(cloud, build(), folder)
            except BaseException as error:
                failed.write_text(f"{type(error).__name__}: {error}"[:2000], encoding="utf-8")
                raise
            return folder / "local", True
    load(cloud, folder)
    return folder / "local", False
