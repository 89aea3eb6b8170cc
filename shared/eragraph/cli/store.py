"""The store a command works on: its directory checked (read commands never create one), its
engine opened through bootstrap (with --tenant and the provider flags), and the writer lock a
write command holds for its whole run."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

from ..bootstrap.store_access import STORE_MARK
from ..config import Settings, settings_from_env
from .exits import EXIT_USAGE, CommandError

DEFAULT_STORE = "eragraph-store"


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings of the environment with the command's provider and CSV flags over them."""
    overrides = {name: getattr(args, name, None) for name in ("embedder", "summarizer", "generator", "csv_text_column",
                                                              "csv_id_column", "csv_title_column")}
    return settings_from_env(**overrides)


def existing_store(store: str | Path) -> Path:
    """The store directory of a command that reads or changes a store (query, stats, delete,
    reindex, serve, rebuild): it must exist; such a command never creates one (a mistyped
    --store is one line naming the path, not an empty store)."""
    path = Path(store)
    how = f"create one with `eragraph ingest PATH... --store {path}`"
    if not path.exists():
        raise CommandError(f"no store at {path}: {how}")
    if not path.is_dir():
        raise CommandError(f"{path} is a file, not a store directory: {how}")
    if not (path / STORE_MARK).is_file() and not (path / "tenants").is_dir():  # a root holding only tenants is one
        raise CommandError(f"{path} is not an eragraph store (it has no {STORE_MARK}): {how}")
    return path


def new_or_existing_store(store: str | Path) -> Path:
    """The store directory of a command that may create it (ingest, demo)."""
    path = Path(store)
    if path.exists() and not path.is_dir():
        raise CommandError(f"{path} is a file, not a store directory: give --store a folder (new or a store)")
    return path


def open_engine(args: argparse.Namespace, settings: Settings | None = None, create: bool = False):
    """The local engine over ``args.store``; only ``create`` (ingest, demo) may make the store."""
    from ..bootstrap import build_engine

    path = new_or_existing_store(args.store) if create else existing_store(args.store)
    tenant = tenant_of(args)
    if tenant and not create and not (path / "tenants" / tenant).is_dir():
        raise CommandError(f"the store {args.store} has no tenant {tenant!r} (`eragraph tenants --store "
                           f"{args.store}` lists them)")
    if not tenant and not create and not (path / STORE_MARK).is_file():
        # a root whose only content is tenants: its default tenant is not created by a read
        names = sorted(p.name for p in (path / "tenants").iterdir() if p.is_dir())
        raise CommandError(f"the store {args.store} holds only tenants ({', '.join(names) or 'none left'}): "
                           f"name one with --tenant ID")
    return build_engine("local", path, settings or settings_of(args), tenant=tenant)


def open_as_built(args: argparse.Namespace):
    """The engine of a command that only reads the store (stats, status): opened with the
    embedder the store was built with (its vectors' dimension), whatever ERAGRAPH_EMBEDDER says."""
    from dataclasses import replace

    from ..bootstrap.store_access import recorded_embedder

    settings = settings_of(args)
    built_with = recorded_embedder(existing_store(args.store), tenant_of(args))
    return open_engine(args, replace(settings, embedder=built_with) if built_with else settings)


def registered_tenant(args: argparse.Namespace):
    """The Tenancy of a profile that keeps no store directory (aws: the stack of the process's
    environment, ERAGRAPH_TABLE, ...) and the ``--tenant`` it is asked about; a tenant the
    profile has not registered is refused in words (its engine would be an empty one)."""
    from ..bootstrap.tenancy import Tenancy

    tenant = tenant_of(args)
    tenancy = Tenancy(args.profile, None, settings_of(args))
    if not tenancy.exists(tenant):
        raise CommandError(f"the {args.profile} profile has no tenant {tenant!r} (a tenant is registered by its "
                           f"first write: an upload, an ingest or an import)")
    return tenancy, tenant


def tenant_of(args: argparse.Namespace) -> str:
    """``--tenant`` validated ("" the default tenant)."""
    from ..domain.tenants import TenantError, check_tenant

    tenant = getattr(args, "tenant", None) or ""
    if not tenant:
        return ""
    try:
        return check_tenant(tenant)
    except TenantError as exc:
        raise CommandError(f"--tenant: {exc}", EXIT_USAGE) from None


@contextmanager
def writing(store: str | Path, create: bool = False):
    """Hold the store's inter-process writer lock (``STORE/.writer.lock``) for a whole write
    command: concurrent ``ingest``/``delete``/``reindex`` processes on one store take turns
    (queries take no lock and keep working). Only ``create`` (ingest, demo) may make the store."""
    from filelock import Timeout

    from ..bootstrap.store_access import writer_lock

    path = new_or_existing_store(store) if create else existing_store(store)
    path.mkdir(parents=True, exist_ok=True)
    lock = writer_lock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"waiting for another eragraph process writing to {store}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
