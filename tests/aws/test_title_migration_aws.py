"""The titles migration on the aws profile (moto DynamoDB, the OpenSearch fake): a tenant's store
built with the earlier behaviour is migrated in runs stopped after every page, each a new engine
(the cursor is in the table's meta), every continuation chunk embedded once; then `eragraph
migrate titles --profile aws --tenant` finds it done, and migrates another tenant whole."""

from __future__ import annotations

import json

from aws_helpers import TEST_SETTINGS
from title_support import assert_titled, leaves, make_old, migrate_page_by_page, titled_docs

from eragraph.domain.text import embedding_text
from eragraph.cli.app import main
from eragraph.services.ingest import ingest
from eragraph.services.title_migration import migrated


def test_aws_migration_resumes_from_the_table_and_the_cli_runs_it(aws_engine, monkeypatch, capsys):
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    _, env, fake = aws_engine
    for k, v in TEST_SETTINGS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: fake)  # the CLI's client: the fake

    def tenant(name):
        return build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant=name)

    acme = LAMBDA_ENGINE.get("acme")  # registered, as a write path registers a new tenant
    ingest(acme, titled_docs(5))
    todo = make_old(acme)
    assert todo and not migrated(acme)
    embedded, runs = migrate_page_by_page(lambda: tenant("acme"))
    assert len(runs) > 2 and runs[-1]["totals"]["reembedded"] == len(todo)
    chunks = leaves(acme)
    assert sorted(embedded) == sorted(embedding_text(chunks[i][1].title, chunks[i][0].text) for i in todo)
    assert_titled(tenant("acme"))

    assert main(["migrate", "titles", "--profile", "aws", "--tenant", "acme", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["already"]

    other = LAMBDA_ENGINE.get("other")
    ingest(other, titled_docs(3))
    todo = make_old(other)
    assert main(["migrate", "titles", "--profile", "aws", "--tenant", "other", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["complete"] and out["run"]["reembedded"] == len(todo)
    assert_titled(tenant("other"))

    assert main(["migrate", "titles", "--profile", "aws", "--tenant", "nobody"]) == 1
    assert "no tenant 'nobody'" in capsys.readouterr().err
