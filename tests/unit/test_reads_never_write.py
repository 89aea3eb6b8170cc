"""A query, stats or a document read of an unknown or a deleted tenant writes nothing: on the
memory profile the engines' contents stay item for item, on the local profile the store
directory stays byte for byte (a hash of every file), including when this process still holds
the engine of a tenant another process deleted."""

from __future__ import annotations

import hashlib

from read_only_cases import SETTINGS, assert_empty, fill, read_everything

from eragraph.bootstrap.tenancy import Tenancy


def memory_items(engine) -> tuple:
    graph = engine.graph
    return (repr(graph._lsh), repr(sorted(graph._meta.items())), repr(sorted(graph._ledger.items())),
            sorted(graph._docs), sorted(graph._nodes), sorted(engine.vectors.ids()),
            sorted(engine.entities.vectors.ids()) if engine.entities is not None else None)


def tree_hash(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_memory_reads_of_unknown_and_deleted_tenants_change_no_item():
    """The memory profile's storage is the tenancy's engines: the default one stays item for
    item, and no read brings the deleted tenant back (nor registers an unknown one)."""
    ten = Tenancy("memory", settings=SETTINGS)
    fill(ten.engine(""))
    fill(ten.engine("acme"))
    ten.delete("acme")
    before = memory_items(ten.engine(""))
    for tenant in ("ghost", "acme"):
        assert_empty(read_everything(ten.engine(tenant, register=False)))
    assert memory_items(ten.engine("")) == before
    assert ten.tenants() == [] and not ten.exists("acme") and not ten.exists("ghost")
    empty = ten.engine("ghost", register=False)
    read_everything(empty)
    assert empty.graph.get_lsh() is None and empty.graph._ledger == {}  # not even the throwaway engine is written


def test_local_reads_of_unknown_and_deleted_tenants_leave_the_store_byte_for_byte(tmp_path):
    root = tmp_path / "store"
    ten = Tenancy("local", store=root, settings=SETTINGS)
    fill(ten.engine(""))
    fill(ten.engine("acme"))
    fill(ten.engine("other"))
    held = ten.engine("acme")
    Tenancy("local", store=root, settings=SETTINGS).delete("acme")  # another process deletes it
    before = tree_hash(root)
    assert not any(name.startswith("tenants/acme") for name in before)
    for engine in (ten.engine("ghost", register=False), ten.engine("acme", register=False), held):
        read_everything(engine)
    assert_empty(read_everything(ten.engine("acme", register=False)))
    assert_empty(read_everything(ten.engine("ghost", register=False)))
    assert tree_hash(root) == before
    assert ten.tenants() == ["other"]
