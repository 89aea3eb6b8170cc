"""`eragraph reindex --profile aws --tenant ID` on moto (DynamoDB, S3, SQS; the vectors in the
recording OpenSearch fake, which the CLI's OpenSearch client is pointed at), through the CLI's
main(): a tenant written by the fixed ref layout of earlier versions, one of its chunks without a
vector, is migrated and repaired in one run, digest-equal to before, its audit time recorded in
the registry; a second run finds nothing to do. A tenant the stack has not registered is
refused in words (exit 1) and stays unregistered."""

from __future__ import annotations

import json
import time

from chaos import digest, first_difference
from support import synthetic_docs

from eragraph.cli.app import main


def legacy_tenant(name: str, docs: int):
    """A registered tenant whose store is written by the fixed layout of earlier versions
    (hyperplanes without the layout version: every layer keyed REF#<layer>#<shard>), settled."""
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine = LAMBDA_ENGINE.get(name)  # a write path registers the tenant
    engine.lsh()
    g = engine.graph
    g.Item(PK="META", SK="LSH").update(actions=[g.Item.version.remove()])
    g._store_current = False
    g.forget_layouts()
    ingest(engine, synthetic_docs(docs))
    drain(engine)
    assert g.layout(0).legacy and not g.store_current()
    return engine


def test_reindex_profile_aws_migrates_and_repairs_a_tenant(few_partitions, aws_engine, monkeypatch, capsys):
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    default, env, fake = aws_engine
    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: fake)  # the CLI's client: the fake
    acme = legacy_tenant("acme", 12)
    before = digest(acme)
    ghost = acme.graph.list_documents()[0].chunk_ids[0]
    acme.vectors.delete([ghost])
    assert ghost not in acme.vectors.ids()
    started = time.time()

    assert main(["reindex", "--profile", "aws", "--tenant", "acme", "--json"]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["tenant"] == "acme" and out["complete"], out
    assert out["layers_migrated"] and out["metrics"]["LayersMigrated"] == len(out["layers_migrated"])
    assert out["vectors_missing_reembedded"] == 1 and out["totals"]["VectorsReembedded"] == 1
    assert out["invariants"]["ok"], out["invariants"]

    tenant = build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant="acme")
    assert tenant.graph.store_current() and ghost in tenant.vectors.ids()
    after = digest(tenant)
    assert after == before, first_difference(after, before)
    recorded = LAMBDA_ENGINE.tenancy.registry().audit_since()["acme"]
    assert started <= recorded <= time.time()  # counted as audited whole, as a scheduled audit is
    assert not default.graph.list_documents()  # the default tenant is untouched

    # again, in words: nothing left to migrate or repair
    assert main(["reindex", "--profile", "aws", "--tenant", "acme"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("reindex of the aws profile's tenant acme") and "nothing to repair" in text, text
    assert "invariants hold" in text


def test_reindex_profile_aws_refuses_a_tenant_it_does_not_have(few_partitions, aws_engine, monkeypatch, capsys):
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    LAMBDA_ENGINE.get("acme")
    assert main(["reindex", "--profile", "aws", "--tenant", "nobody", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("eragraph: the aws profile has no tenant 'nobody'"), captured.err
    assert "Traceback" not in captured.err
    assert LAMBDA_ENGINE.tenancy.tenants() == ["acme"]  # the refusal registered nothing

    assert main(["reindex", "--profile", "aws", "--tenant", "Not A Tenant!"]) == 2  # a malformed id: usage
    assert "--tenant:" in capsys.readouterr().err


def test_reindex_profile_aws_waits_for_stuck_work_as_the_reindex_function(few_partitions, aws_engine, monkeypatch,
                                                                          capsys):
    """Without --stuck-after the deployed audit takes the stack's ERAGRAPH_STUCK_AFTER_SECONDS
    (else 3600, the reindex function's default), not the local 900: a layer marked dirty 1000 s
    ago is a consumer's work in progress, left alone; --stuck-after 900 re-announces it."""
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    monkeypatch.delenv("ERAGRAPH_STUCK_AFTER_SECONDS", raising=False)
    acme = LAMBDA_ENGINE.get("acme")
    ingest(acme, synthetic_docs(4))
    drain(acme)
    acme.graph.put_meta("dirty:0", time.time() - 1000)

    assert main(["reindex", "--profile", "aws", "--tenant", "acme", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["layers_in_progress"] == [0] and out["layers_requeued"] == []
    monkeypatch.setenv("ERAGRAPH_STUCK_AFTER_SECONDS", "600")
    assert main(["reindex", "--profile", "aws", "--tenant", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers_requeued"] == [0]
    monkeypatch.delenv("ERAGRAPH_STUCK_AFTER_SECONDS")
    acme.graph.put_meta("dirty:0", time.time() - 1000)  # the re-announce marked it anew
    assert main(["reindex", "--profile", "aws", "--tenant", "acme", "--stuck-after", "900", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers_requeued"] == [0]
