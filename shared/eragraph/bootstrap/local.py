"""The local profile: one store directory holds everything.

    STORE/graph.sqlite       graph store (SQLite, WAL)
    STORE/vectors/           FAISS index + id map
    STORE/blobs/             copies of ingested files (the local "bucket")
    STORE/embeddings.sqlite  embedding cache keyed by (embedder id, content hash)
    STORE/entities.sqlite    entity graph (postings, mentions, co-occurrences)
    STORE/entity_vectors/    FAISS index of entity-name (and sentence) vectors
    STORE/tenants/<id>/      a tenant's own store, laid out as above

The tenants are the directories under ``STORE/tenants/`` (bootstrap.tenancy asks here)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..config import Settings
from ..services.engine import Engine
from .profile import Engines, Profile, UnknownTenant, compose


WRITER_LOCK = ".writer.lock"  # STORE/.writer.lock: one writer at a time on a store (bootstrap.store_access)
SALT_FILE = "kb-id-salt"  # STORE/kb-id-salt: the store's knowledge-base id salt (domain.knowledge_base)


def store_salt(store: Path) -> str:
    """The knowledge-base id salt of the local store ``store`` (its root, shared by its tenants):
    random, made with the store (or on its first open by this version) and kept in
    ``STORE/kb-id-salt``, so that an id reveals no tenant name here either. Two processes making
    it at once keep the first one written."""
    import os
    import secrets

    path = Path(store) / SALT_FILE
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip()
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(secrets.token_hex(16) + "\n")
    return path.read_text(encoding="ascii").strip()


def tenant_store(store: Path, tenant: str) -> Path:
    """The directory of ``tenant``'s store inside ``store`` (the default tenant: ``store``)."""
    return store / "tenants" / tenant if tenant else store


class LocalProfile(Profile):
    """One store directory (per tenant) holds everything."""

    name = "local"
    recheck_kept = True  # another process may delete a tenant's directory under a kept engine

    packages = ("faiss", "filelock")
    keeps_store = True

    @classmethod
    def opened(cls, store=None):
        if store is None:
            raise ValueError("the local profile needs a store directory")
        return cls(Path(store))

    def __init__(self, store: Path) -> None:
        self.store = Path(store)
        self.root = self.store

    def bind(self, tenant: str) -> LocalProfile:
        bound = super().bind(tenant)
        assert isinstance(bound, LocalProfile)
        bound.root = tenant_store(self.store, tenant)
        return bound

    def salt(self, settings: Settings) -> str:
        return settings.kb_id_salt or store_salt(self.store)

    def graph(self):
        from ..adapters.local.graph_sqlite import SqliteGraphStore

        self.root.mkdir(parents=True, exist_ok=True)
        return SqliteGraphStore(self.root / "graph.sqlite", tenant=self.tenant)

    def embed_cache(self):
        return self.root / "embeddings.sqlite"

    def vectors(self, dim):
        from ..adapters.local.vector_faiss import FaissVectorIndex

        return FaissVectorIndex(self.root / "vectors", dim)

    def queue(self):
        from ..adapters.local.queue_local import LocalQueue

        return LocalQueue()

    def blobs(self):
        from ..adapters.local.blob_fs import FsBlobStore

        return FsBlobStore(self.root / "blobs")

    def source_bucket(self, settings, name):
        from ..adapters.local.blob_fs import FsBlobStore

        if not settings.bucket_folder:
            raise LookupError("no folder holds the data source buckets: set ERAGRAPH_BUCKET_FOLDER "
                              "(bucket NAME is then the folder ERAGRAPH_BUCKET_FOLDER/NAME)")
        folder = Path(settings.bucket_folder).expanduser() / name
        if "/" in name or name in (".", "..") or not folder.is_dir():  # said without the server's path
            raise LookupError(f"no bucket {name!r}: no folder of that name in the bucket folder (ERAGRAPH_BUCKET_FOLDER)")
        return FsBlobStore(folder)

    def lexical(self, graph, vectors):
        from ..adapters.local.lexical_fts5 import Fts5LexicalIndex

        return Fts5LexicalIndex(graph)

    def entity_store(self, graph):
        from ..adapters.local.entity_sqlite import SqliteEntityStore

        return SqliteEntityStore(self.root / "entities.sqlite")

    def entity_vectors(self, dim):
        from ..adapters.local.vector_faiss import FaissVectorIndex

        return FaissVectorIndex(self.root / "entity_vectors", dim)

    def uploads(self, engines, settings):
        """A worker thread of the serving process with engines of its own (one per tenant, as
        another writer process would have), holding the store's writer lock as ``eragraph
        ingest`` does (services.upload_worker)."""
        from ..adapters.local.files import writer_lock
        from ..services.upload_worker import UploadWorker

        store, own = self.store, {}

        def writer(tenant: str) -> Engine:  # called by the worker's thread only
            if tenant not in own:
                own[tenant] = compose(LocalProfile(store), settings, tenant)
            return own[tenant]
        return UploadWorker(writer, writer_lock(store / WRITER_LOCK))

    # ----- tenants: the directories under STORE/tenants/ -----
    def exists(self, engines: Engines, tenant: str) -> bool:
        return tenant_store(self.store, tenant).is_dir()

    def tenants(self, engines: Engines) -> list[str]:
        root = self.store / "tenants"
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def delete(self, engines: Engines, tenant: str) -> dict[str, Any]:
        path = tenant_store(self.store, tenant)
        if not path.is_dir():
            raise UnknownTenant(f"no tenant {tenant!r} in {self.store}")
        engine = engines.engine(tenant, register=False)
        before = {"documents": len(engine.graph.list_documents()), "vectors": engine.vectors.count(),
                  "files": sum(1 for p in path.rglob("*") if p.is_file())}
        engines.forget(tenant)
        close(engine)
        shutil.rmtree(path)
        after = {"documents": 0, "vectors": 0, "files": 0 if not path.exists() else
                 sum(1 for p in path.rglob("*") if p.is_file())}
        return {"tenant": tenant, "before": before, "after": after}


def close(engine: Engine) -> None:
    """Release what an engine holds open (SQLite connections, FAISS files) before its files go."""
    for part in (engine.graph, engine.vectors, engine.entities and getattr(engine.entities, "store", None),
                 engine.entities and getattr(engine.entities, "vectors", None)):
        done = getattr(part, "close", None)
        if callable(done):
            try:
                done()
            except Exception:  # noqa: BLE001 (a close that fails leaves files rmtree removes anyway)
                pass


def build_local_engine(store: Path, settings: Settings, tenant: str = "") -> Engine:
    return compose(LocalProfile(store), settings, tenant)
