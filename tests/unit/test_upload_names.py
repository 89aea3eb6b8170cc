"""A submitted document's name is an object key and, on the local store, a file path: a part of
it (between '/') over 255 bytes made the filesystem refuse it after its status was recorded
``received`` (a 500, and a status the console polled forever). Each part is now checked first
(at most MAX_PART_BYTES, room left for a sidecar and a temporary name): a 400 in words and no status at all.
A name the store still refuses settles as failed, said without a server path."""

from __future__ import annotations

import pytest

from eragraph.bootstrap import build_engine, document_pipeline
from eragraph.config import settings_from_env
from eragraph.services import uploads

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none"}


@pytest.fixture
def local(tmp_path):
    engine = build_engine("local", tmp_path / "store", settings_from_env(ENV))
    pipeline = document_pipeline("local", tmp_path / "store", engine.settings, lambda tenant: engine)
    try:
        yield engine, pipeline
    finally:
        pipeline.close()


@pytest.mark.parametrize("name", ["notes/" + "a" * 300 + ".txt", "é" * 130 + "/a.txt", "a" * 193])
def test_a_name_part_over_the_limit_is_refused_before_any_status(local, name):
    engine, pipeline = local
    with pytest.raises(uploads.UploadError, match="longer than 192 bytes") as info:
        uploads.submit(engine, pipeline, [uploads.Upload(source=name, data=b"The ferry log.")])
    assert info.value.status == 400
    assert list(engine.graph.doc_statuses("")) == []


def test_a_part_at_the_limit_is_stored(local):
    engine, pipeline = local
    [out] = uploads.submit(engine, pipeline, [uploads.Upload(source="n/" + "b" * 192, data=b"The ferry log.",
                                                             metadata={"year": 2020})])
    assert out["state"] == "received"


def test_a_name_the_filesystem_refuses_settles_failed_without_a_path(local, monkeypatch):
    engine, pipeline = local

    def refuse(*_a, **_k):
        raise OSError(36, "File name too long", "/srv/store/blobs/x")

    monkeypatch.setattr(engine.blobs, "put", refuse)
    with pytest.raises(uploads.UploadError) as info:
        uploads.submit(engine, pipeline, [uploads.Upload(source="notes/a.txt", data=b"The ferry log.")])
    assert info.value.status == 409 and "/srv" not in str(info.value), str(info.value)
    [status] = engine.graph.doc_statuses("")
    assert status.state == "failed"
