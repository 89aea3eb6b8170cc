"""`eragraph import --profile aws` is staged (services.import_staging), on moto: a failure while
writing (a vector write refused part-way, injected) leaves nothing of the import behind: no item
of the tenant's DynamoDB namespace, no vector of its scope, the tenant not registered; a good
import then succeeds. A process that died before taking back (the take-back itself failing,
injected) leaves the marker, and the next import takes the leftovers back before loading. A
target that is not empty is refused with nothing of it touched, and the default tenant of a
stack is refused before anything is written."""

from __future__ import annotations

import pytest
from aws_helpers import TEST_SETTINGS
from support import synthetic_docs

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.cli.app import main
from eragraph.services import import_staging
from eragraph.services.ingest import ingest

USES = ("embedder", "summarizer", "ner")


DOCS = 6


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    root = tmp_path_factory.mktemp("staged")
    source = build_engine("local", root / "kb", settings_from_env(TEST_SETTINGS), uses=USES)
    ingest(source, synthetic_docs(DOCS))
    path = root / "kb.dump.gz"
    assert main(["export", "--store", str(root / "kb"), str(path)]) == 0
    return path


def _tenant(aws_engine, name="acme"):
    from eragraph.bootstrap.aws import build_aws_engine

    _, env, fake = aws_engine
    return build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant=name)


def _items(aws_engine, tenant: str) -> int:
    """The items of the tenant's namespace, counted by a scan (opening its engine writes its
    first settings: counted before any is opened)."""
    import boto3
    from contract.aws_factories import REGION

    scanned = boto3.client("dynamodb", region_name=REGION).scan(TableName=aws_engine[1]["ERAGRAPH_TABLE"])["Items"]
    return sum(1 for i in scanned if i["PK"]["S"].startswith(f"T#{tenant}#"))


def _left(aws_engine, tenant="acme") -> tuple[int, int]:
    items = _items(aws_engine, tenant)
    return items, _tenant(aws_engine, tenant).vectors.count()


def _registered(aws_engine, tenant="acme") -> bool:
    from eragraph.adapters.aws.tenants_dynamodb import DynamoTenantRegistry

    return DynamoTenantRegistry(aws_engine[0].graph.Item).has_tenant(tenant)


def test_a_failure_mid_write_leaves_nothing_and_a_good_import_then_succeeds(dump, aws_engine, monkeypatch,
                                                                            few_partitions, capsys):
    from eragraph.adapters.aws import vector_opensearch

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    upsert, calls = vector_opensearch.OpenSearchVectorIndex.upsert, []

    def failing(self, *args, **kwargs):  # the second vector write of the import fails
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected: the vector index refused a write")
        return upsert(self, *args, **kwargs)

    monkeypatch.setattr(vector_opensearch.OpenSearchVectorIndex, "upsert", failing)
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump)]) != 0
    assert "injected" in capsys.readouterr().err
    assert len(calls) == 2  # it failed part-way: items and vectors had been written
    assert _left(aws_engine) == (0, 0) and not _registered(aws_engine)
    tenant = _tenant(aws_engine)

    monkeypatch.setattr(vector_opensearch.OpenSearchVectorIndex, "upsert", upsert)
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump), "--json"]) == 0, capsys.readouterr()
    assert len(tenant.graph.list_documents()) == DOCS and _registered(aws_engine)
    assert tenant.graph.get_meta(import_staging.MARKER) is None

    # into it again: refused, nothing of it touched
    before = _left(aws_engine)
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump)]) != 0
    assert "the target store is not empty" in capsys.readouterr().err
    assert _left(aws_engine) == before and _registered(aws_engine)


def test_leftovers_of_an_import_that_died_are_taken_back_by_the_next(dump, aws_engine, monkeypatch, few_partitions,
                                                                     capsys):
    from eragraph.adapters.aws import vector_opensearch

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    load = import_staging.take_back

    def died(engine):  # the process is gone before it could take back
        raise SystemExit("killed")

    from eragraph.services import portable

    real_load = portable.load

    def half(engine, records):  # half the records written, then the fault
        it = iter(records)
        header = [next(it)]
        real_load(engine, header + [r for r in it if r.get("kind") in ("document", "status")])
        raise RuntimeError("injected: the connection dropped")

    monkeypatch.setattr(portable, "load", half)
    monkeypatch.setattr(import_staging, "take_back", died)
    with pytest.raises(SystemExit):
        main(["import", "--profile", "aws", "--tenant", "globex", str(dump)])
    assert _items(aws_engine, "globex") > 2  # the marker, the settings and what was loaded
    tenant = _tenant(aws_engine, "globex")
    assert tenant.graph.get_meta(import_staging.MARKER) is not None
    assert not _registered(aws_engine, "globex")  # its readers see it empty meanwhile

    monkeypatch.setattr(portable, "load", real_load)
    monkeypatch.setattr(import_staging, "take_back", load)
    assert main(["import", "--profile", "aws", "--tenant", "globex", str(dump)]) == 0, capsys.readouterr()
    assert len(tenant.graph.list_documents()) == DOCS and _registered(aws_engine, "globex")
    assert tenant.graph.get_meta(import_staging.MARKER) is None


def test_the_default_tenant_of_a_stack_is_refused_before_any_write(dump, aws_engine, monkeypatch, capsys):
    from eragraph.adapters.aws import vector_opensearch

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    assert main(["import", "--profile", "aws", str(dump)]) != 0
    assert "goes into a named tenant" in capsys.readouterr().err
    assert aws_engine[0].graph.get_lsh() is None and aws_engine[0].graph.get_meta(import_staging.MARKER) is None
