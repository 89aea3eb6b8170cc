"""Export -> import, local -> moto: `eragraph export` of a local store, then `eragraph import
--profile aws --tenant acme` into a stack on moto (DynamoDB, S3, SQS; the vectors in the recording
OpenSearch fake of tests/aws, which the CLI's OpenSearch client is pointed at). The tenant's store
is digest-equal to the source (tests/chaos.py digest), the query handler's read path sees the
tenant registered and answers the same top-k, no model is called on the way in, and nothing is
written to the documents bucket (whose every object its notification would ingest)."""

from __future__ import annotations

import gzip
import json

from aws_helpers import BUCKET, TEST_SETTINGS
from chaos import digest, first_difference
from contract.aws_factories import REGION
from support import synthetic_docs

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.cli.app import main
from eragraph.services.ingest import ingest
from eragraph.services.query import query

QUESTIONS = ["What is item d7 called?", "comet telescope galaxy", "bake bread oven", "Markerd3"]
USES = ("embedder", "summarizer", "ner")


def top_k(engine, mode):
    return [[(r.id, round(r.score, 4)) for r in query(engine, q, mode=mode, k=4).results] for q in QUESTIONS]


def ids(answers):
    return [[i for i, _ in answer] for answer in answers]


def _objects() -> list[str]:
    import boto3

    listed = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_a_local_dump_imports_into_a_moto_tenant_digest_equal(tmp_path, few_partitions, aws_engine, monkeypatch,
                                                              capsys):
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.bootstrap.aws import LAMBDA_ENGINE, build_aws_engine

    default, env, fake = aws_engine
    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: fake)  # the CLI's client: the fake
    source = build_engine("local", tmp_path / "kb", settings_from_env(TEST_SETTINGS), uses=USES)
    ingest(source, synthetic_docs(16))
    before = digest(source)

    dump = tmp_path / "kb.dump.gz"
    assert main(["export", "--store", str(tmp_path / "kb"), str(dump)]) == 0
    capsys.readouterr()
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump), "--json"]) == 0, capsys.readouterr()
    counts = json.loads(capsys.readouterr().out)["records"]
    assert counts["document"] == 16 and counts["node"] >= 16

    # the query function's read path (register=False): the tenant was registered by the import
    served = LAMBDA_ENGINE.get("acme", register=False)
    assert served.graph.list_documents(), "the imported tenant reads as unregistered (an empty engine)"
    tenant = build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant="acme")
    after = digest(tenant)
    assert after == before, first_difference(after, before)
    local = build_engine("local", tmp_path / "kb", settings_from_env(TEST_SETTINGS), uses=USES)
    assert top_k(served, "collapsed") == top_k(local, "collapsed")
    # the graph mode's passages are the same; their scores are the profile's (the same store
    # ingested on AWS scores them alike: a passage the walk does not reach is scored by the vector
    # index, whose inner products OpenSearch reports in its own scale)
    assert ids(top_k(served, "tri_graph")) == ids(top_k(local, "tri_graph"))
    native = build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant="native")
    ingest(native, synthetic_docs(16))
    assert top_k(served, "tri_graph") == top_k(native, "tri_graph")
    assert not default.graph.list_documents()  # the default tenant is untouched
    assert _objects() == []  # no stored text put where the bucket's notification would ingest it

    # into the same tenant again: refused in words, nothing changed
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump)]) != 0
    assert "the target store is not empty" in capsys.readouterr().err
    assert digest(tenant) == before


def test_an_older_dump_version_says_why_not(tmp_path, few_partitions, aws_engine, monkeypatch, capsys):
    from eragraph.adapters.aws import vector_opensearch

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    older = tmp_path / "v0.dump.gz"
    with gzip.open(older, "wt") as out:
        out.write(json.dumps({"format": "eragraph-dump", "version": 0, "providers": {}, "lsh": None}) + "\n")
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(older)]) != 0
    err = capsys.readouterr().err
    assert "this dump is version 0" in err and "older than" in err and "reads version 1" in err, err


def test_an_export_as_a_caller_from_a_moto_tenant_holds_only_its_view(tmp_path, few_partitions, aws_engine,
                                                                      monkeypatch, capsys):
    """`eragraph export --profile aws --tenant acme --as user:bob`: the deployed tenant's dump as
    bob sees it: his documents, chunks, summaries and entities, the same records as a local dump
    of the same store as bob, nothing of a document he may not read (its id, source, marker)."""
    import random
    import re

    from access_cases import tagged
    from eragraph.adapters.aws import vector_opensearch
    from eragraph.domain.access import caller
    from eragraph.services.resummarize import drain

    monkeypatch.setattr(vector_opensearch, "make_client", lambda *a, **k: aws_engine[2])
    source = build_engine("local", tmp_path / "kb", settings_from_env(TEST_SETTINGS), uses=USES)
    ingest(source, tagged(synthetic_docs(16), random.Random(11)))
    drain(source)
    dump = tmp_path / "kb.dump.gz"
    assert main(["export", "--store", str(tmp_path / "kb"), str(dump)]) == 0
    assert main(["import", "--profile", "aws", "--tenant", "acme", str(dump)]) == 0
    bob = caller(["user:bob"])
    hidden = [d for d in source.graph.list_documents() if not bob.may_read((d.metadata or {}).get("access"))]
    assert hidden and len(hidden) < 16
    capsys.readouterr()

    def records(path):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            return [json.loads(line) for line in lines]

    theirs, mine = tmp_path / "aws-bob.dump.gz", tmp_path / "local-bob.dump.gz"
    assert main(["export", "--profile", "aws", "--tenant", "acme", "--as", "user:bob", str(theirs)]) == 0, \
        capsys.readouterr().err
    assert main(["export", "--store", str(tmp_path / "kb"), "--as", "user:bob", str(mine)]) == 0
    text = json.dumps(records(theirs))
    for doc in hidden:
        for mark in (f'"{doc.doc_id}"', doc.source, f"Marker{doc.doc_id}"):
            assert not re.search(rf"(?<![\w]){re.escape(mark)}(?!\d)", text, re.IGNORECASE), mark
    kinds = ("partition", "node", "segment", "entity_chunk")
    pick = lambda rs: sorted(json.dumps(r, sort_keys=True) for r in rs if r.get("kind") in kinds)  # noqa: E731
    assert pick(records(theirs)) == pick(records(mine))
    assert [r["doc_id"] for r in records(theirs) if r.get("kind") == "document"] == \
        [r["doc_id"] for r in records(mine) if r.get("kind") == "document"]
    # a tenant the stack does not hold is refused in words
    assert main(["export", "--profile", "aws", "--tenant", "nobody", "--as", "user:bob", str(tmp_path / "x.gz")]) != 0
    assert "has no tenant 'nobody'" in capsys.readouterr().err
