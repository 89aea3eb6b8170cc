"""What the command line needs of a local store directory besides its engine (``build_engine``):
the file every store holds, the writer lock its write commands hold, the embedder it was built
with, and its tenancy. The CLI reaches the local adapters only through here and
``build_engine``, so a renamed adapter or a changed store layout is one edit here."""

from __future__ import annotations

from pathlib import Path

from ..config import Settings
from .local import WRITER_LOCK, store_salt, tenant_store

STORE_MARK = "graph.sqlite"  # what every local store holds (bootstrap.local)


def writer_lock(store: Path):
    """The store's inter-process writer lock (``STORE/.writer.lock``, a ``filelock.FileLock``:
    ``acquire(timeout=0)`` raises ``filelock.Timeout`` while another process holds it)."""
    from ..adapters.local.files import writer_lock as file_lock

    return file_lock(Path(store) / WRITER_LOCK)


def recorded_embedder(store: Path, tenant: str = "") -> str | None:
    """The ERAGRAPH_EMBEDDER choice ``tenant``'s store inside ``store`` was built with (its
    recorded providers, or the embedder id its hyperplanes record), or None when it records none
    or one this cannot name (or has no graph: it is not created here)."""
    from ..adapters.local.graph_sqlite import SqliteGraphStore
    from ..services.store_providers import recorded_providers

    root = tenant_store(Path(store), tenant)
    if not (root / STORE_MARK).is_file():
        return None
    graph = SqliteGraphStore(root / STORE_MARK)
    try:
        record = recorded_providers(graph)
    finally:
        graph.close()
    return record["embedder"] if record else None


def local_tenancy(store: Path, settings: Settings):
    """The tenants of the local store ``store`` (``tenants()``, ``delete(tenant)``)."""
    from .tenancy import Tenancy

    return Tenancy("local", store=store, settings=settings)


def kb_id_salt(store: Path, settings: Settings) -> str:
    """The knowledge-base id salt of the local store ``store``: the setting's
    (ERAGRAPH_KB_ID_SALT) when given, else the store's own (bootstrap.local.store_salt)."""
    return settings.kb_id_salt or store_salt(Path(store))
