"""Access lists (domain.access): who may read a document, under the reserved metadata key
``access``. Validated wherever metadata is (a JSONL line, an S3 sidecar, POST /documents, a
bedrock-agent ingestion: they all go through check_metadata), malformed ones refused in words;
``--access`` on the CLI gives the documents without a list of their own one; a caller reads a
partition that names one of its principals, and the open partition unless the deployment denies."""

from __future__ import annotations

import json

import pytest
from support import make_engine

from eragraph.domain.access import (OPEN, AccessError, caller, canonical, check_access, parse_principals,
                                    partition_of)
from eragraph.domain.filters import MetadataError, check_metadata
from eragraph.cli.app import main
from eragraph.services import uploads
from eragraph.services.sources import parse_sidecar


@pytest.mark.parametrize("value, words", [
    ("group:finance", "is a list of principals"),
    ([], "at least one principal"),
    (["finance"], "is not a principal"),
    (["group:"], "is not a principal"),
    (["role:admin"], "is not a principal"),
    (["group:fin ance"], "is not a principal"),
    ([1], "is not a principal"),
    (["user:a"] * 101, "at most 100"),
])
def test_a_malformed_access_list_is_refused_in_words(value, words):
    with pytest.raises(MetadataError) as caught:
        check_metadata({"year": 2020, "access": value})
    assert words in str(caught.value) and "metadata.access" in str(caught.value)


def test_a_well_formed_list_is_kept_and_its_partition_is_its_canonical_form():
    meta = check_metadata({"access": ["user:alice", "group:finance", "user:alice"]})
    assert meta == {"access": ["user:alice", "group:finance", "user:alice"]}
    assert canonical(meta["access"]) == ("group:finance", "user:alice")
    assert partition_of(meta["access"]) == partition_of(["group:finance", "user:alice"])
    assert partition_of(["group:finance"]) != partition_of(["group:finance", "user:alice"])
    assert partition_of(None) == partition_of([]) == OPEN
    assert check_access(["user:a@example.com", "group:eu-west/legal"]) == ["user:a@example.com", "group:eu-west/legal"]


def test_an_s3_sidecar_carries_the_list_plain_or_typed_and_a_bad_one_is_refused():
    plain = json.dumps({"metadataAttributes": {"access": ["group:finance"]}}).encode()
    typed = json.dumps({"metadataAttributes": {"access": {"value": {"type": "STRING_LIST",
                                                                    "stringListValue": ["user:bob"]}}}}).encode()
    assert parse_sidecar(plain, "a.pdf.metadata.json") == {"access": ["group:finance"]}
    assert parse_sidecar(typed, "a.pdf.metadata.json") == {"access": ["user:bob"]}
    with pytest.raises(MetadataError, match="not a principal"):
        parse_sidecar(json.dumps({"metadataAttributes": {"access": ["bob"]}}).encode(), "a.pdf.metadata.json")


def test_post_documents_refuses_a_malformed_list_whole_and_stores_nothing():
    engine = make_engine()
    with pytest.raises(uploads.UploadError, match=r"documents\[1\]\.metadata\.access\[0\]: 'nobody' is not a principal") as caught:
        uploads.submit(engine, None, [uploads.Upload("a.md", b"fine text", {"access": ["group:ok"]}),
                                      uploads.Upload("b.md", b"more text", {"access": ["nobody"]})])
    assert caught.value.status == 400
    assert engine.graph.list_documents() == [] and engine.graph.doc_statuses() == []


def test_cli_access_gives_documents_without_a_list_one(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The board decided the merger in March."}) + "\n"
                      + json.dumps({"id": "b", "text": "Finance closed the quarter early.",
                                    "metadata": {"access": ["group:finance"]}}) + "\n", encoding="utf-8")
    store = tmp_path / "s"
    assert main(["ingest", "--store", str(store), "--embedder", "hash", "--quiet", str(corpus),
                 "--access", "user:alice,group:board"]) == 0
    from eragraph.bootstrap.local import build_local_engine, close
    from eragraph.config import Settings

    engine = build_local_engine(store, Settings(embedder="hash"))
    docs = {d.doc_id: d.metadata for d in engine.graph.list_documents()}
    close(engine)
    assert sorted(map(canonical, (m["access"] for m in docs.values()))) == [("group:board", "user:alice"),
                                                                            ("group:finance",)]
    capsys.readouterr()
    assert main(["ingest", "--store", str(store), "--embedder", "hash", "--quiet", str(corpus), "--access", "bob"]) != 0
    assert "--access: 'bob' is not a principal" in capsys.readouterr().err


def test_a_caller_reads_partitions_naming_it_and_the_open_one_unless_denied():
    alice = caller(["user:alice", "group:finance"])
    assert alice.may_read(["group:finance", "group:board"]) and alice.may_read(None)
    assert not alice.may_read(["group:board"])
    strict = caller(["user:alice"], default="deny")
    assert not strict.may_read(None) and strict.may_read(["user:alice"])
    assert caller(None).may_read(["group:anything"])  # the operator
    assert parse_principals(" group:b , user:a ") == ("group:b", "user:a")
    with pytest.raises(AccessError):
        parse_principals(" , ")
    with pytest.raises(AccessError):
        caller(["everyone"])


def test_cli_as_asks_inside_the_principals_view(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The board decided the merger in March."}) + "\n"
                      + json.dumps({"id": "b", "text": "Finance closed the quarter early.",
                                    "metadata": {"access": ["group:finance"]}}) + "\n", encoding="utf-8")
    store = str(tmp_path / "s")
    assert main(["ingest", "--store", store, "--embedder", "hash", "--quiet", str(corpus)]) == 0
    texts = {}
    for who in ("user:alice", "group:finance"):
        capsys.readouterr()
        assert main(["query", "--store", store, "finance quarter", "--as", who, "--json"]) == 0
        texts[who] = {r["doc_id"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert texts == {"user:alice": {"a"}, "group:finance": {"a", "b"}}
    assert main(["query", "--store", store, "finance", "--as", "finance"]) != 0
    assert "--as: 'finance' is not a principal" in capsys.readouterr().err
