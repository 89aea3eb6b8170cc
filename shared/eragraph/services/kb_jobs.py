"""Bedrock Knowledge Bases' ingestion jobs: a sync of one data source (services.kb_sources)
into the tenant's store, through THE ingest path (services.uploads: on AWS the object is put in
the documents bucket and its notification ingests it; locally the serving process's worker
does), never a second pipeline.

A job is a record in the store's meta (``kb-job:<data source id>:<job id>``). It runs in bounded
steps (``advance``: at most STEP_DOCUMENTS objects or STEP_SECONDS a step), so that the API
function, which answers within seconds, needs no worker of its own: StartIngestionJob takes the
first step, and every GetIngestionJob or ListIngestionJobs of a running job takes the next one
(a client polls GetIngestionJob until the job ends, as it does Bedrock's). A step:

- **scan**: lists a page of the bucket's keys under the data source's prefix after the job's
  cursor (S3's ListObjectsV2 from StartAfter: a step never lists the whole prefix again) and
  reads them: each object's size (too large: failed, unread), bytes, sidecar
  (``<key>.metadata.json``: counted as a metadata document) and text (unreadable, binary or
  empty: failed, with the reason). Its text's content hash against the stored document's says
  new, modified, metadata only modified (the attributes differ) or unchanged (skipped); a
  document the ingest path holds still (``received``) is skipped too. New and modified ones are
  submitted, 25 at most a call (services.uploads.submit), and the cursor moves past them.
- **gone**: once every key is scanned, the data source's stored documents are read a page a
  step (GONE_PAGE, from the job's own cursor over them) beside one page of the bucket's listing
  resumed from the same place (a name past that page's last is asked of the bucket, one size
  request); a document whose object is not there is removed (services.uploads.delete):
  **deleted**. Neither the prefix's keys nor its documents are ever read whole;
- **wait**: the job is COMPLETE when none of the data source's documents is ``received`` any
  more and its removals are done. The statuses are read a page a poll (GONE_PAGE, from the
  job's ``wait_after`` cursor, which stops before the first still ``received``), never whole;
  documents that ended ``failed`` since the job started count as failed as the cursor passes
  them, with their reasons, and one the job handed over is then no longer counted new (or
  modified, when a stored version stays): Bedrock counts such a document failed only. The
  removals in flight the record lists (``deleting``) are at most MAX_DELETING: when the list is
  full the removal pass waits for them to land (pruned in order) before it makes more, so the
  record stays far within DynamoDB's 400 KB item and the deleted count stays exact.

A data source keeps its last MAX_JOBS jobs (the oldest go as a new one starts; a job also
lapses 90 days after its last step, on every profile: domain.expiry), so ListIngestionJobs reads
a bounded set.

StopIngestionJob stops a running job at once (what it handed over is still ingested); a new
job resumes the sync: the documents already in are unchanged, so it takes only what is left.
A data source whose bucket cannot be read any more fails the job, with the reason. Two steps of
one job at once (two polls) are kept apart by a lease in the record (LEASE_SECONDS)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ..domain import kb_sync
from ..domain.doc_status import RECEIVED
from ..domain.filters import MetadataError
from ..domain.ids import content_hash, document_id_for_source
from ..domain.model import BadInputError
from ..domain.refusals import reason, reason_of
from ..domain.text import check_size
from ..providers.extractors import ReadLimits
from . import kb_sources
from .idempotency import once
from .engine import Engine
from .ingest import same_attributes
from .sources import SIDECAR_SUFFIX, is_sidecar, read_document, sidecar_metadata

JOB = "kb-job:"
STEP_DOCUMENTS = 25  # objects read a step (one submit call: services.uploads.MAX_DOCUMENTS)
STEP_SECONDS = 8.0
GONE_PAGE = 200  # stored documents checked a step for an object that is gone
LIST_PAGE = 1000  # names of one listing page (S3's ListObjectsV2 page)
MAX_DELETING = 2000  # removals in flight a job record lists (~70 bytes each: far within an item's 400 KB)
MAX_JOBS = 100  # jobs kept per data source (the oldest ended ones go as new ones start): a listing reads at most these
LEASE_SECONDS = 30.0
NEW, MODIFIED, METADATA = ("numberOfNewDocumentsIndexed", "numberOfModifiedDocumentsIndexed",
                           "numberOfMetadataDocumentsModified")

LOG = logging.getLogger("eragraph.kb")


def _key(ds_id: str, job_id: str) -> str:
    return f"{JOB}{ds_id}:{job_id}"


def jobs(engine: Engine, ds_id: str) -> list[dict[str, Any]]:
    """The data source's jobs, oldest first."""
    records = [engine.graph.get_meta(k) for k in engine.graph.meta_keys(f"{JOB}{ds_id}:")]
    return sorted((r for r in records if r is not None), key=lambda r: (r["startedAt"], r["ingestionJobId"]))


def get(engine: Engine, ds_id: str, job_id: str) -> dict[str, Any]:
    job = engine.graph.get_meta(_key(ds_id, job_id))
    if job is None:
        raise kb_sync.SyncError("ResourceNotFoundException", f"no ingestion job {job_id} of data source {ds_id}")
    return job


def _save(engine: Engine, job: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    job["updatedAt"] = time.time() if now is None else now
    engine.graph.put_meta(_key(job["dataSourceId"], job["ingestionJobId"]), job)
    return job


def start(engine: Engine, pipeline: Any, record: Mapping[str, Any], token: str | None = None,
          description: str | None = None) -> dict[str, Any]:
    """StartIngestionJob: a new job of the data source ``record``, its first step taken (a
    retried clientToken: the job it started, services.idempotency)."""
    started: list[dict[str, Any]] = []

    def make() -> tuple[dict[str, Any], str]:
        started.append(_new(engine, record, description))
        return started[0], started[0]["ingestionJobId"]
    request = {"dataSourceId": record["dataSourceId"], "description": description}
    job = once(engine.graph, "StartIngestionJob", token, request, make,
               lambda job_id: get(engine, record["dataSourceId"], job_id))
    return advance(engine, pipeline, record, job) if started else job  # the token remembered first


def _new(engine: Engine, record: Mapping[str, Any], description: str | None) -> dict[str, Any]:
    if record["dataSourceConfiguration"]["type"] != "S3":
        raise kb_sync.SyncError("ValidationException", f"data source {record['dataSourceId']} is of type CUSTOM: "
                                "its documents are ingested directly (IngestKnowledgeBaseDocuments); there is "
                                "nothing to sync")
    earlier = jobs(engine, record["dataSourceId"])
    running = [j for j in earlier if j["status"] in kb_sync.RUNNING]
    if running:
        raise kb_sync.SyncError("ConflictException", f"ingestion job {running[0]['ingestionJobId']} of this data "
                                "source is running: stop it (StopIngestionJob) or wait for it to end")
    for old in earlier[: max(0, len(earlier) - MAX_JOBS + 1)]:  # all ended (none runs): the oldest go
        engine.graph.delete_meta(_key(old["dataSourceId"], old["ingestionJobId"]))
    now = time.time()
    job = kb_sync.new_job(kb_sources.new_id(), record["knowledgeBaseId"], record["dataSourceId"], description, now)
    _save(engine, job, now)
    return job


def stop(engine: Engine, ds_id: str, job_id: str) -> dict[str, Any]:
    """StopIngestionJob: a running job STOPPED (ConflictException for one that has ended)."""
    job = get(engine, ds_id, job_id)
    if job["status"] not in kb_sync.RUNNING:
        raise kb_sync.SyncError("ConflictException", f"ingestion job {job_id} is {job['status']}: only a running "
                                "job can be stopped (start a new one to sync again)")
    job["status"] = kb_sync.STOPPED
    return _save(engine, job)


def advance(engine: Engine, pipeline: Any, record: Mapping[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """One step of a running job (nothing for an ended one, or one another step holds)."""
    now = time.time()
    if job["status"] not in kb_sync.RUNNING or job.get("lease", 0) > now:
        return job
    job["lease"] = now + LEASE_SECONDS
    _save(engine, job, now)
    try:
        if job["phase"] == kb_sync.SCAN:
            _scan(engine, pipeline, record, job, now + STEP_SECONDS)
        if job["phase"] == kb_sync.GONE and time.time() < now + STEP_SECONDS:
            _gone(engine, pipeline, record, job, now + STEP_SECONDS)
        if job["phase"] == kb_sync.WAIT and time.time() < now + STEP_SECONDS:
            _wait(engine, pipeline, record, job, now + STEP_SECONDS)
    except kb_sync.SyncError as exc:  # the bucket cannot be read any more
        job["status"] = kb_sync.FAILED
        job["failureReasons"].append(str(exc))
    current = engine.graph.get_meta(_key(job["dataSourceId"], job["ingestionJobId"]))
    if current is not None and current["status"] == kb_sync.STOPPED:  # stopped during the step
        job["status"] = kb_sync.STOPPED
    job.pop("lease", None)
    return _save(engine, job)


def _listed(engine: Engine, record: Mapping[str, Any], after: str | None = None,
            limit: int = 0) -> tuple[Any, list[str], set[str], str | None]:
    """The data source's keys and sidecars in its tenant's area: all of them, or (with ``after``)
    those of one page of at most ``limit`` names resumed from that cursor, with the page's last
    name when more may follow (None: the listing is done)."""
    bucket, prefix = kb_sync.bucket_of(record["dataSourceConfiguration"])
    store = kb_sources.bucket_store(engine, bucket)
    more = False
    try:
        if after is None:
            names = store.list(prefix)
        else:
            names = store.list_after(prefix, after, limit)
            more = len(names) == limit
    except Exception as exc:  # noqa: BLE001 (any failure of the listing: the job's reason, in words)
        LOG.warning("data source bucket not listed", extra={"bucket": bucket, "error": f"{type(exc).__name__}: {exc}"})
        code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")  # botocore's ClientError
        why = {"AccessDenied": "access denied", "NoSuchBucket": "no such bucket"}.get(code, "the detail is in the logs")
        raise kb_sync.SyncError("ValidationException", f"bucket {bucket!r} cannot be listed ({why})") from None
    last = names[-1] if more else None
    names = [k for k in names if kb_sync.in_area(engine.tenant, k)]  # never another tenant's objects
    return store, sorted(k for k in names if not is_sidecar(k)), {k for k in names if is_sidecar(k)}, last


def _has_sidecar(store: Any, key: str, sidecars: set[str], listed_to: str | None) -> bool:
    """Whether ``key`` has a sidecar: in the page's names, or, when it would sort past the page's
    last name (``listed_to``), asked of the store (one size request)."""
    side = key + SIDECAR_SUFFIX
    if side in sidecars or listed_to is None or side <= listed_to:
        return side in sidecars
    try:
        store.size(side)
        return True
    except KeyError:
        return False


def _scan(engine: Engine, pipeline: Any, record: Mapping[str, Any], job: dict[str, Any], deadline: float) -> None:
    """One step of the scan: a page of the listing resumed from the job's cursor (never the
    whole prefix again), then, once the last page is read, the full listing once to find the
    documents whose objects are gone."""
    from . import uploads

    page = 2 * STEP_DOCUMENTS + 1  # names: each key may come with its sidecar
    store, todo, sidecars, listed_to = _listed(engine, record, job["cursor"], page)
    if listed_to is not None and not todo:  # a page of sidecars or other tenants' names only: past it
        job["cursor"] = listed_to
        return
    batch: list[Any] = []
    for key in todo[:STEP_DOCUMENTS]:
        if time.time() > deadline and batch:
            break
        job["cursor"] = key
        found = _compare(engine, pipeline, record, job, store, key, _has_sidecar(store, key, sidecars, listed_to))
        if found is not None:
            batch.append(found)
    _submit(engine, pipeline, job, batch)
    if listed_to is None and job["cursor"] >= (todo[-1] if todo else ""):
        job["phase"], job["deleting"] = kb_sync.GONE, []


def _gone(engine: Engine, pipeline: Any, record: Mapping[str, Any], job: dict[str, Any], deadline: float) -> None:
    """One step of the removal pass: a page of the data source's stored documents after the
    job's ``gone_after`` cursor, and one page of the bucket's keys listed from the same place;
    each document whose object is neither listed nor (past the listing's page) found is removed.
    The pass ends (the job waits) after the last page."""
    from . import uploads

    if len(job["deleting"]) + GONE_PAGE > MAX_DELETING:
        _pruned(engine, job)
        if len(job["deleting"]) + GONE_PAGE > MAX_DELETING:
            return  # the list is full: its removals land before more are made (a later poll)
    prefix = kb_sources.stored_source(engine, pipeline, kb_sources.upload_name(record, ""))
    after = job.get("gone_after")
    statuses, following = engine.graph.doc_statuses_page(prefix, tuple(after) if after else None, GONE_PAGE)
    if statuses:
        start = after[0][len(prefix):] if after else ""
        store, keys, _sidecars, listed_to = _listed(engine, record, start, LIST_PAGE)
        _bucket, area = kb_sync.bucket_of(record["dataSourceConfiguration"])
        present = set(keys)
        for status in statuses:
            if time.time() > deadline and status is not statuses[0]:  # the rest next step
                following = _before(statuses, status)
                break
            key = status.source[len(prefix):]
            if key in present or (listed_to is not None and key > listed_to and key.startswith(area)
                                  and kb_sync.in_area(engine.tenant, key) and _exists(store, key)):
                continue
            try:
                uploads.delete(engine, pipeline, status.doc_id)
            except (uploads.UnknownDocument, BadInputError) as exc:
                LOG.warning("document not removed", extra={"source": status.source, "error": str(exc)})
                why = "it is no longer known" if isinstance(exc, uploads.UnknownDocument) else "refused (the detail is in the logs)"
                kb_sync.fail_document(job, status.source, reason("not_removed", why=why))
                continue
            job["deleting"].append(status.doc_id)
            kb_sync.count(job, "numberOfDocumentsDeleted")
    if following is None:
        job["phase"] = kb_sync.WAIT
        job.pop("gone_after", None)
    else:
        job["gone_after"] = list(following)


def _before(statuses: list, status: Any) -> tuple[str, str]:
    """The cursor that resumes a page at ``status`` (not its first): the one before it."""
    index = statuses.index(status)
    return statuses[index - 1].source, statuses[index - 1].doc_id


def _exists(store: Any, key: str) -> bool:
    try:
        store.size(key)
        return True
    except KeyError:
        return False


def _compare(engine: Engine, pipeline: Any, record: Mapping[str, Any], job: dict[str, Any], store: Any, key: str,
             has_sidecar: bool) -> tuple[Any, str] | None:
    """The Upload of one object when it is new or changed, and the statistic it was counted in
    (None: unchanged, in flight or failed)."""
    from .uploads import Upload

    name = kb_sources.upload_name(record, key)
    kb_sync.count(job, "numberOfDocumentsScanned")
    limits = ReadLimits.from_settings(engine.settings)
    try:
        check_size(key, store.size(key), limits.max_bytes)
        data = store.get(key)
        metadata: dict[str, Any] = {}
        if has_sidecar:
            kb_sync.count(job, "numberOfMetadataDocumentsScanned")
            side = key + SIDECAR_SUFFIX
            metadata = sidecar_metadata(side, store.size(side), lambda: store.get(side))
        [doc] = read_document(data, key, name, key.rsplit("/", 1)[-1], limits, [])
    except KeyError:  # deleted since it was listed: the next job removes it
        kb_sync.count(job, "numberOfDocumentsSkipped")
        return None
    except (BadInputError, MetadataError, ValueError) as exc:
        LOG.info("document not taken", extra={"source": name, "error": str(exc)})
        kb_sync.fail_document(job, name, reason_of(exc) if isinstance(exc, (BadInputError, MetadataError))
                              else reason("unreadable"))
        return None
    source = kb_sources.stored_source(engine, pipeline, name)
    stored = engine.graph.get_document(document_id_for_source(source))
    status = engine.graph.get_doc_status(document_id_for_source(source))
    if stored is None or stored.is_tombstone:
        if status is not None and status.state == RECEIVED:  # handed over already, not in yet
            kb_sync.count(job, "numberOfDocumentsSkipped")
            return None
        statistic = NEW
    elif stored.content_hash != content_hash(doc.text):
        statistic = MODIFIED
    elif not same_attributes(stored, metadata, stored.title):
        statistic = METADATA
    else:
        kb_sync.count(job, "numberOfDocumentsSkipped")
        return None
    kb_sync.count(job, statistic)
    return Upload(source=name, data=data, metadata=metadata), statistic


def _submit(engine: Engine, pipeline: Any, job: dict[str, Any], batch: list[tuple[Any, str]]) -> None:
    """Hand ``batch`` to the ingest path; a refused document fails alone (counted failed only,
    no longer new or modified), the rest go on."""
    from . import uploads

    if not batch:
        return
    try:
        uploads.submit(engine, pipeline, [up for up, _ in batch])
        return
    except uploads.UploadError:
        pass
    for up, statistic in batch:
        try:
            uploads.submit(engine, pipeline, [up])
        except uploads.UploadError as exc:  # the caller's own input, in words (the API's 400s)
            _uncount(job, statistic)
            kb_sync.fail_document(job, up.source, str(exc))


def _uncount(job: dict[str, Any], *statistics: str) -> None:
    """A document counted in the first of ``statistics`` that holds one ends failed: it is
    counted failed only (as Bedrock counts it)."""
    for statistic in statistics:
        if job["statistics"][statistic] > 0:
            kb_sync.count(job, statistic, -1)
            return


def _wait(engine: Engine, pipeline: Any, record: Mapping[str, Any], job: dict[str, Any], deadline: float) -> None:
    """One step of the wait: the data source's statuses a page at a time (GONE_PAGE) from the
    job's ``wait_after`` cursor, which moves past each settled one (a ``failed`` one since the
    job started counted as it passes) and stops before the first still ``received``; the
    removals' own list is pruned (_pruned). Never the source's statuses whole."""
    prefix = kb_sources.stored_source(engine, pipeline, kb_sources.upload_name(record, ""))
    if not _pruned(engine, job):
        return
    after = job.get("wait_after")
    while True:
        statuses, following = engine.graph.doc_statuses_page(prefix, tuple(after) if after else None, GONE_PAGE)
        for s in statuses:
            if s.state == RECEIVED:  # not in yet: the next poll resumes here
                job["wait_after"] = after
                return
            if s.state == "failed" and s.updated_at >= job["startedAt"]:
                _failed(engine, job, s)
            after = [s.source, s.doc_id]
        if following is None:
            break
        after = list(following)
        if time.time() > deadline:
            job["wait_after"] = after
            return
    job["status"] = kb_sync.COMPLETE
    job.pop("deleting", None)
    job.pop("wait_after", None)


def _failed(engine: Engine, job: dict[str, Any], s: Any) -> None:
    if s.received_at >= job["startedAt"]:  # handed over by this job: counted new or modified
        stored = engine.graph.get_document(s.doc_id)
        if stored is None or stored.is_tombstone:
            _uncount(job, NEW)
        else:  # the stored version stays: it was a modification
            _uncount(job, MODIFIED, METADATA)
    kb_sync.fail_document(job, s.source, s.reason)


def _pruned(engine: Engine, job: dict[str, Any]) -> bool:
    """Drop from the job's ``deleting`` list (its removals in flight) those whose status is gone,
    in order, up to the first still there; whether none is left. Each poll reads the removals
    that landed since the last plus one."""
    deleting = job.get("deleting", [])
    done = 0
    for doc_id in deleting:
        if engine.graph.get_doc_status(doc_id) is not None:
            break
        done += 1
    del deleting[:done]
    return not deleting
