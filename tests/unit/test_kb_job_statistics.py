"""An ingestion job's statistics when the ingest path fails a document it was handed (the ingest
function rejects it after the job compared it as new or modified): Bedrock counts such a document
failed only, so the job moves it out of new (or modified, when a stored version stays) into
failed, with its reason."""

from __future__ import annotations

import time

from eragraph.adapters.memory.blob_memory import MemoryBlobStore
from eragraph.bootstrap import build_engine, document_pipeline
from eragraph.bootstrap.memory import MemoryProfile
from eragraph.config import settings_from_env
from eragraph.domain import kb_sync
from eragraph.domain.ids import document_id_for_source
from eragraph.services import doc_status, kb_jobs, kb_sources

ENV = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none"}
REASON = "the document is too large for one store item"


class Rejecting:
    """The memory profile's pipeline, except that its ingest rejects what it is handed, as the
    ingest function records a document it cannot take (services.doc_status.record_failed)."""

    def __init__(self, pipeline) -> None:
        self.pipeline = pipeline

    def __getattr__(self, name):
        return getattr(self.pipeline, name)

    def ingest(self, engine, keys) -> None:
        for key in keys:
            source = self.pipeline.source_of(engine, key)
            doc_status.record_failed(engine, source, REASON, document_id_for_source(source))


def run(engine, pipeline, record) -> dict:
    job = kb_jobs.start(engine, pipeline, record)
    deadline = time.monotonic() + 60
    while job["status"] in kb_sync.RUNNING and time.monotonic() < deadline:
        getattr(pipeline, "wait_idle", lambda _s: None)(30)
        job = kb_jobs.advance(engine, pipeline, record, kb_jobs.get(engine, record["dataSourceId"],
                                                                   job["ingestionJobId"]))
    assert job["status"] == kb_sync.COMPLETE, job
    return job


def test_a_document_the_ingest_path_fails_is_counted_failed_only(monkeypatch):
    bucket = MemoryBlobStore()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    try:
        record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
        bucket.put("docs/kept.txt", b"The ferry leaves Skarvik harbour at dawn. " * 3)
        first = run(engine, pipeline, record)["statistics"]
        assert (first["numberOfNewDocumentsIndexed"], first["numberOfDocumentsFailed"]) == (1, 0), first

        bucket.put("docs/kept.txt", b"The ferry leaves Skarvik harbour at noon. " * 3)  # modified
        bucket.put("docs/new.txt", b"The lighthouse keeper writes the ship log. " * 3)  # new
        job = run(engine, Rejecting(pipeline), record)
        stats = job["statistics"]
        assert (stats["numberOfDocumentsScanned"], stats["numberOfNewDocumentsIndexed"],
                stats["numberOfModifiedDocumentsIndexed"], stats["numberOfDocumentsFailed"]) == (2, 0, 0, 2), stats
        assert sorted(r.split(": ", 1)[1] for r in job["failureReasons"]) == [REASON, REASON]
    finally:
        pipeline.close()


def test_the_default_tenants_sync_of_a_whole_bucket_skips_the_tenants_areas(monkeypatch):
    """The sharing model (domain.kb_sync): a data source of the default tenant over the whole
    bucket takes its keys outside ``tenants/`` only; one over ``tenants/`` is refused."""
    import pytest

    bucket = MemoryBlobStore()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    try:
        with pytest.raises(kb_sync.SyncError, match="must not be under 'tenants/'") as info:
            kb_sources.create(engine, "KB", {"name": "theirs", "dataSourceConfiguration": {
                "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes", "inclusionPrefixes": ["tenants/b/"]}}})
        assert info.value.code == "AccessDeniedException"
        record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
        bucket.put("docs/kept.txt", b"The ferry leaves Skarvik harbour at dawn. " * 3)
        bucket.put("tenants/b/secret.txt", b"Tenant b keeps the harbour accounts here. " * 3)
        stats = run(engine, pipeline, record)["statistics"]
        assert (stats["numberOfDocumentsScanned"], stats["numberOfNewDocumentsIndexed"]) == (1, 1), stats
        assert [s.source for s in engine.graph.doc_statuses("")] == ["notes/docs/kept.txt"]
    finally:
        pipeline.close()


class CountedBucket(MemoryBlobStore):
    """A memory bucket that counts its listings and the names each returned."""

    def __init__(self) -> None:
        super().__init__()
        self.whole, self.paged, self.names = 0, 0, 0

    def list(self, prefix: str = "") -> list[str]:
        out = super().list(prefix)
        if not getattr(self, "_inner", False):
            self.whole += 1
            self.names += len(out)
        return out

    def list_after(self, prefix: str, after: str, limit: int) -> list[str]:
        self._inner = True
        try:
            out = super().list_after(prefix, after, limit)
        finally:
            self._inner = False
        self.paged += 1
        self.names += len(out)
        return out


def test_a_job_resumes_its_listing_from_the_cursor_and_never_lists_the_prefix_whole(monkeypatch):
    """Each step lists one page after the job's cursor (never the whole prefix again), the
    removal pass too. A sidecar on the far side of a page boundary is still found."""
    bucket = CountedBucket()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    total = 3 * kb_jobs.STEP_DOCUMENTS + 4
    for n in range(total):
        bucket.put(f"docs/{n:03d}.txt", f"Ferry crossing {n} logged by the harbour master at dawn. ".encode() * 3)
    for n in range(0, total, 7):  # sidecars, some of them past the page that holds their document
        bucket.put(f"docs/{n:03d}.txt.metadata.json", b'{"metadataAttributes": {"year": 2031}}')
    try:
        record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
        stats = run(engine, pipeline, record)["statistics"]
        assert stats["numberOfDocumentsScanned"] == total and stats["numberOfNewDocumentsIndexed"] == total
        assert stats["numberOfMetadataDocumentsScanned"] == len(range(0, total, 7))
        assert bucket.whole == 0, bucket.whole  # the removal pass pages too
        assert bucket.paged >= 4
        assert bucket.names <= 3 * (total + len(range(0, total, 7))), bucket.names  # not a listing a step
    finally:
        pipeline.close()


def test_the_removal_pass_pages_its_documents_and_the_listing_from_its_cursor(monkeypatch):
    """Objects deleted since the last sync are removed by a pass over the data source's stored
    documents a page a step (GONE_PAGE) beside one listing page from the same place (LIST_PAGE;
    a name past it asked of the bucket): exactly the gone ones, the prefix never listed whole,
    whichever side of a page boundary they fall on."""
    monkeypatch.setattr(kb_jobs, "GONE_PAGE", 7)
    monkeypatch.setattr(kb_jobs, "LIST_PAGE", 5)
    bucket = CountedBucket()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    total = 40
    for n in range(total):
        bucket.put(f"docs/{n:03d}.txt", f"Ferry crossing {n} logged by the harbour master at dawn. ".encode() * 3)
    try:
        record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
        run(engine, pipeline, record)
        gone = {0, 6, 7, 13, 20, 21, 22, 39}
        for n in gone:
            bucket.delete(f"docs/{n:03d}.txt")
        steps = []
        real = kb_jobs._gone
        monkeypatch.setattr(kb_jobs, "_gone", lambda *a: (steps.append(1), real(*a)))
        job = run(engine, pipeline, record)
        assert job["statistics"]["numberOfDocumentsDeleted"] == len(gone), job
        left = {d.source.rsplit("/", 1)[1] for d in engine.graph.list_documents()}
        assert left == {f"{n:03d}.txt" for n in range(total) if n not in gone}
        assert len(steps) >= (total + 6) // 7 and bucket.whole == 0
    finally:
        pipeline.close()


def test_a_data_source_keeps_its_last_jobs_only(monkeypatch):
    """The oldest ended jobs go as new ones start: ListIngestionJobs reads at most MAX_JOBS."""
    bucket = MemoryBlobStore()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    monkeypatch.setattr(kb_jobs, "MAX_JOBS", 3)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    bucket.put("docs/kept.txt", b"The ferry leaves Skarvik harbour at dawn. " * 3)
    try:
        record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
            "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
        started = [run(engine, pipeline, record)["ingestionJobId"] for _ in range(5)]
        assert [j["ingestionJobId"] for j in kb_jobs.jobs(engine, record["dataSourceId"])] == started[-3:]
    finally:
        pipeline.close()


def _synced(monkeypatch, total: int):
    bucket = CountedBucket()
    monkeypatch.setitem(MemoryProfile.BUCKETS, "notes", bucket)
    engine = build_engine("memory", settings=settings_from_env(ENV))
    pipeline = document_pipeline("memory", None, engine.settings, lambda tenant: engine)
    for n in range(total):
        bucket.put(f"docs/{n:03d}.txt", f"Ferry crossing {n} logged by the harbour master at dawn. ".encode() * 3)
    record = kb_sources.create(engine, "KB", {"name": "notes", "dataSourceConfiguration": {
        "type": "S3", "s3Configuration": {"bucketArn": "arn:aws:s3:::notes"}}})
    return bucket, engine, pipeline, record


def test_the_wait_pages_the_statuses_from_its_cursor_and_never_reads_them_whole(monkeypatch):
    """The wait reads the data source's statuses a page at a time (GONE_PAGE) from its own
    cursor, never the source's whole listing on a poll; a document the ingest path failed is
    still counted failed, exactly once."""
    monkeypatch.setattr(kb_jobs, "GONE_PAGE", 7)
    bucket, engine, pipeline, record = _synced(monkeypatch, 30)
    pages: list[int] = []
    real_page, real_whole = engine.graph.doc_statuses_page, engine.graph.doc_statuses
    paging = [False]  # the memory store's page filters its listing: a store's own business

    def page(prefix, after, limit):
        paging[0] = True
        try:
            found = real_page(prefix, after, limit)
        finally:
            paging[0] = False
        pages.append(len(found[0]))
        return found

    def whole(prefix=""):
        assert paging[0], f"the statuses under {prefix!r} read whole"
        return real_whole(prefix)
    try:
        run(engine, pipeline, record)
        bucket.put("docs/005.txt", b"The ferry now leaves Skarvik harbour at noon. " * 3)
        bucket.put("docs/new.txt", b"The lighthouse keeper writes the ship log. " * 3)
        monkeypatch.setattr(engine.graph, "doc_statuses", whole)
        monkeypatch.setattr(engine.graph, "doc_statuses_page", page)
        job = run(engine, Rejecting(pipeline), record)
        stats = job["statistics"]
        assert (stats["numberOfModifiedDocumentsIndexed"], stats["numberOfNewDocumentsIndexed"],
                stats["numberOfDocumentsFailed"]) == (0, 0, 2), stats
        assert len(job["failureReasons"]) == 2 and pages and max(pages) <= 7
    finally:
        pipeline.close()


def test_a_jobs_list_of_removals_in_flight_stays_bounded(monkeypatch):
    """The removals a job waits for are listed in its record up to MAX_DELETING (an item of at
    most 400 KB): the removal pass lets those land before it makes more; the count stays exact."""
    monkeypatch.setattr(kb_jobs, "GONE_PAGE", 3)
    monkeypatch.setattr(kb_jobs, "MAX_DELETING", 5)
    bucket, engine, pipeline, record = _synced(monkeypatch, 40)
    longest = [0]
    real_put = engine.graph.put_meta

    def put(key, value):
        if key.startswith(kb_jobs.JOB):
            longest[0] = max(longest[0], len(value.get("deleting", ())))
        real_put(key, value)
    try:
        run(engine, pipeline, record)
        gone = set(range(0, 40, 3))
        for n in gone:
            bucket.delete(f"docs/{n:03d}.txt")
        monkeypatch.setattr(engine.graph, "put_meta", put)
        job = run(engine, pipeline, record)
        assert job["statistics"]["numberOfDocumentsDeleted"] == len(gone), job
        assert "deleting" not in job and 0 < longest[0] <= 5, longest
        left = {d.source.rsplit("/", 1)[1] for d in engine.graph.list_documents()}
        assert left == {f"{n:03d}.txt" for n in range(40) if n not in gone}
    finally:
        pipeline.close()
