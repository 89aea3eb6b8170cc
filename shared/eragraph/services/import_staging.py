"""An import into a tenant of a deployed stack, staged so that a failed one leaves nothing
half-written (``eragraph import --profile aws``; services.portable writes the records).

The target tenant's store is empty when the import starts (portable.load refuses any other), so
everything in its namespaces once the import has begun is the import's. The import:

1. writes a marker (meta key ``import-staging``) in the tenant's namespace before any record;
2. loads the dump while the tenant is not registered (if it was not already): the read paths
   (the query function, the API) see an unregistered tenant as empty, never a half-loaded one;
3. on success, deletes the marker and registers the tenant (the flip: the whole store appears);
4. on any failure (a write refused, a throttle past its retries, a record the dump's others do
   not fit, an interrupt), takes back what it wrote: every item of the tenant's DynamoDB
   namespace, every vector of its OpenSearch scope (node and entity indexes), the marker last.

A process killed before it could take back leaves the marker: the next import into that tenant
finds it and takes the leftovers back before loading (``begin``). The default tenant's namespace
is never dropped (it holds the tenant registry), so an import on AWS names a tenant.
Locally the import's directory is its staging area (eragraph.cli.portable)."""

from __future__ import annotations

import time
from typing import Any

from .engine import Engine

MARKER = "import-staging"


class StagingError(ValueError):
    """An import that cannot be staged here (the default tenant of a stack)."""


def _namespaces(engine: Engine) -> list[Any]:
    """The tenant's namespaced stores, the graph last (it holds the marker)."""
    entity_vectors = getattr(engine.entities, "vectors", None) if engine.entities is not None else None
    return [engine.vectors, *([entity_vectors] if entity_vectors is not None else []), engine.graph]


def stageable(engine: Engine) -> bool:
    """Whether the engine's stores are namespaces that can be dropped whole (a stack's tenant)."""
    return all(callable(getattr(store, "drop_namespace", None)) for store in _namespaces(engine))


def begin(engine: Engine) -> bool:
    """Before the first record: take back what an import cut short left (its marker found),
    refuse a target that is not empty (StagingError: nothing of it is touched), then write the
    marker. True when leftovers were taken back."""
    if not engine.tenant:
        raise StagingError("an import into a deployed stack goes into a named tenant (--tenant T): the default "
                           "tenant's namespace holds the stack's registry and cannot be taken back whole if the "
                           "import fails")
    leftovers = engine.graph.get_meta(MARKER) is not None
    if leftovers:
        take_back(engine)
    # a store's first ingest draws its hyperplanes; a refused upload leaves a status without them
    if engine.graph.get_lsh() is not None or engine.graph.doc_statuses_page("", None, 1)[0]:
        raise StagingError("the target store is not empty: import into a new store (or tenant)")
    engine.graph.put_meta(MARKER, {"started": time.time()})
    return leftovers


def take_back(engine: Engine) -> dict[str, int]:
    """Drop everything the import wrote (the tenant's namespaces, the marker with the graph's);
    how many items or vectors each store held."""
    dropped = {}
    for store in _namespaces(engine):
        dropped[type(store).__name__] = store.drop_namespace()
    return dropped


def finish(engine: Engine) -> None:
    """The whole dump is in: the marker goes (the caller then registers the tenant)."""
    engine.graph.delete_meta(MARKER)
