"""Imports and deletes cannot reach another tenant's objects of the shared documents bucket (on
moto): a dump whose documents are objects under ``tenants/orig/`` loads into tenant ``orig``
only (into another tenant it is refused before anything is written), and a document whose source
names another tenant's object (as an import kept it before imports checked sources) cannot be
deleted through the bucket pipeline: the DELETE is refused and the original object stays."""

from __future__ import annotations

import boto3
import pytest
from aws_helpers import BUCKET, TEST_SETTINGS
from contract.aws_factories import REGION

from eragraph.bootstrap import build_engine
from eragraph.config import settings_from_env
from eragraph.domain.ids import document_id_for_source
from eragraph.domain.model import Document
from eragraph.services import portable, uploads
from eragraph.services.ingest import SourceDoc, ingest

SOURCE = f"s3://{BUCKET}/tenants/orig/notes/plans.txt"
TEXT = "The harbour master keeps the ferry log and the winter plans. " * 4


def _dump(tmp_path) -> list[dict]:
    local = build_engine("local", tmp_path / "orig", settings_from_env(TEST_SETTINGS))
    ingest(local, [SourceDoc(source=SOURCE, text=TEXT)])
    return list(portable.dump(local))


def _tenant(env, fake, tenant: str):
    from eragraph.bootstrap.aws import build_aws_engine

    return build_aws_engine(environ=env, opensearch_client=fake, refresh=True, tenant=tenant)


def test_a_dump_of_another_tenants_objects_is_refused_whole(tmp_path, aws_engine):
    _default, env, fake = aws_engine
    records = _dump(tmp_path)
    acme = _tenant(env, fake, "acme")
    with pytest.raises(portable.DumpError, match="another tenant's object of the documents bucket"):
        portable.load(acme, records)
    assert acme.graph.get_document(document_id_for_source(SOURCE)) is None
    # the default tenant owns no tenants/ key either; the tenant whose objects they are loads it
    with pytest.raises(portable.DumpError, match="the default tenant's own prefix"):
        portable.load(_tenant(env, fake, ""), records)
    orig = _tenant(env, fake, "orig")
    assert portable.load(orig, records)["document"] == 1


def test_a_delete_cannot_remove_another_tenants_object(aws_engine):
    _default, env, fake = aws_engine
    s3 = boto3.client("s3", region_name=REGION)
    s3.put_object(Bucket=BUCKET, Key="tenants/orig/notes/plans.txt", Body=TEXT.encode())
    acme = _tenant(env, fake, "acme")
    doc_id = document_id_for_source(SOURCE)
    acme.graph.put_document(Document(doc_id=doc_id, source=SOURCE, title="plans", chunk_ids=(), content_hash="x"))
    pipeline = uploads.BucketPipeline()
    with pytest.raises(uploads.UploadError, match="not under this tenant's own prefix") as info:
        uploads.delete(acme, pipeline, doc_id)
    assert info.value.status == 403
    assert s3.get_object(Bucket=BUCKET, Key="tenants/orig/notes/plans.txt")["Body"].read() == TEXT.encode()
    # the tenant's own object is deleted as before
    own = f"s3://{BUCKET}/tenants/acme/notes/mine.txt"
    s3.put_object(Bucket=BUCKET, Key="tenants/acme/notes/mine.txt", Body=TEXT.encode())
    acme.graph.put_document(Document(doc_id=document_id_for_source(own), source=own, title="mine", chunk_ids=(), content_hash="y"))
    uploads.delete(acme, pipeline, document_id_for_source(own))
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix="tenants/acme/")
