"""Bedrock Knowledge Bases' data sources and ingestion jobs, as records (no I/O).

A data source names what a knowledge base syncs: ``S3`` (a bucket and at most one prefix; on
the local profile a bucket is a folder) or ``CUSTOM`` (documents ingested directly only). Its
documents are stored under source names ``<data source name>/<key>``: the S3 key below the
prefix, or the custom document id, so that a document's name says where it came from and a
data source's documents are one prefix of the store's.

Sharing model: the data source buckets (the deployment's DataSourceBuckets, locally the bucket
folder) are shared by every tenant, each with its own area in each: tenant ``t``'s keys are
under ``tenants/<t>/`` (the layout of the documents bucket), the default tenant's are every key
outside ``tenants/``. A data source's prefix must lie in its tenant's area (``check_area``), a
sync takes only the keys of that area (``in_area``), and every S3 URI a request names must be an
object of the area (``check_key``), so no tenant can sync, ingest or read another's objects.

An ingestion job goes ``IN_PROGRESS`` -> (scan, then wait for what it handed over) ->
``COMPLETE``; or ``STOPPED`` (StopIngestionJob) or ``FAILED`` (the bucket cannot be read).
A job keeps Bedrock's statistics: documents scanned, metadata files scanned, new, modified,
metadata-modified, deleted, failed, skipped (unchanged), and up to MAX_REASONS failure reasons."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

IN_PROGRESS, COMPLETE, FAILED, STOPPING, STOPPED = "IN_PROGRESS", "COMPLETE", "FAILED", "STOPPING", "STOPPED"
RUNNING = (IN_PROGRESS, STOPPING, "STARTING")
ENDED = (COMPLETE, FAILED, STOPPED)
SCAN, GONE, WAIT = "scan", "gone", "wait"  # a running job's phases, in order
MAX_REASONS = 50
STATISTICS = ("numberOfDocumentsScanned", "numberOfMetadataDocumentsScanned", "numberOfNewDocumentsIndexed",
              "numberOfModifiedDocumentsIndexed", "numberOfMetadataDocumentsModified", "numberOfDocumentsDeleted",
              "numberOfDocumentsFailed", "numberOfDocumentsSkipped")
NAME = re.compile(r"([0-9a-zA-Z][_-]?){1,100}")  # the service model's data source name pattern
BUCKET_ARN = re.compile(r"arn:aws(|-cn|-us-gov):s3:::([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])")


class SyncError(ValueError):
    """A request about data sources or jobs refused, with Bedrock's error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def iso(epoch: float) -> str:
    """A timestamp as the service writes it (ISO 8601, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


def bucket_of(config: Mapping[str, Any]) -> tuple[str, str]:
    """The bucket name and prefix of an S3 data source configuration (SyncError if malformed)."""
    s3 = config.get("s3Configuration") or {}
    match = BUCKET_ARN.fullmatch(s3.get("bucketArn", ""))
    if match is None:
        raise SyncError("ValidationException", "s3Configuration.bucketArn must be an S3 bucket ARN, "
                        "arn:aws:s3:::<bucket name>")
    prefixes = s3.get("inclusionPrefixes") or [""]
    return match.group(2), prefixes[0]


TENANTS = "tenants/"  # the prefix under which each tenant has its own area of a shared bucket


def tenant_area(tenant: str) -> str:
    """The prefix of ``tenant``'s area in a shared bucket ("" for the default tenant: every key
    outside ``tenants/``)."""
    return f"{TENANTS}{tenant}/" if tenant else ""


def in_area(tenant: str, key: str) -> bool:
    """Whether ``key`` is in ``tenant``'s area of a shared bucket."""
    return key.startswith(tenant_area(tenant)) if tenant else not key.startswith(TENANTS)


def _whose(tenant: str) -> str:
    return f"tenant {tenant!r}" if tenant else "the default tenant"


def check_area(tenant: str, config: Mapping[str, Any]) -> None:
    """AccessDeniedException unless an S3 data source's prefix lies in ``tenant``'s area (for the
    default tenant, a prefix that names no tenant's area; the sync skips ``tenants/`` keys)."""
    _bucket, prefix = bucket_of(config)
    area = tenant_area(tenant)
    if tenant and not prefix.startswith(area):
        raise SyncError("AccessDeniedException", f"inclusionPrefixes must be under {area!r}: {_whose(tenant)}'s "
                        f"area of a shared bucket (got {prefix[:200]!r})")
    if not tenant and prefix.startswith(TENANTS):
        raise SyncError("AccessDeniedException", f"inclusionPrefixes must not be under {TENANTS!r}, the other "
                        f"tenants' areas of a shared bucket (got {prefix[:200]!r})")


def check_key(tenant: str, key: str, where: str, prefix: str = "") -> None:
    """AccessDeniedException unless the object ``key`` is in ``tenant``'s area (and under the
    data source's ``prefix``, when it has one)."""
    if not in_area(tenant, key):
        area = f"keys under {tenant_area(tenant)!r}" if tenant else f"keys outside {TENANTS!r}"
        raise SyncError("AccessDeniedException", f"{where}: {key[:200]!r} is not in {_whose(tenant)}'s area of "
                        f"the bucket ({area})")
    if not key.startswith(prefix):
        raise SyncError("AccessDeniedException", f"{where}: {key[:200]!r} is not under the data source's "
                        f"prefix {prefix[:200]!r}")


def check_data_source(name: str, config: Mapping[str, Any]) -> str:
    """The type of a data source that may be created (S3 or CUSTOM), else SyncError."""
    if NAME.fullmatch(name) is None:
        raise SyncError("ValidationException", f"name {name[:120]!r} must be 1 to 100 letters or digits, each "
                        "optionally followed by one '_' or '-'")
    kind = config.get("type")
    if kind not in ("S3", "CUSTOM"):
        raise SyncError("ValidationException", f"a data source of type {kind} cannot be synced by Eragraph: "
                        "create one of type S3 (a bucket and prefix) or CUSTOM (documents ingested directly)")
    if kind == "S3":
        bucket_of(config)
    elif config.get("s3Configuration"):
        raise SyncError("ValidationException", "a CUSTOM data source takes no s3Configuration")
    return kind


def document_name(data_source: str, key: str) -> str:
    """The source name a data source's document is stored under."""
    return f"{data_source}/{key}"


def new_job(job_id: str, kb_id: str, ds_id: str, description: str | None, now: float) -> dict[str, Any]:
    job: dict[str, Any] = {"knowledgeBaseId": kb_id, "dataSourceId": ds_id, "ingestionJobId": job_id,
                           "status": IN_PROGRESS, "statistics": {k: 0 for k in STATISTICS}, "failureReasons": [],
                           "startedAt": now, "updatedAt": now, "phase": SCAN, "cursor": ""}
    if description:
        job["description"] = description
    return job


def count(job: dict[str, Any], statistic: str, n: int = 1) -> None:
    job["statistics"][statistic] += n


def fail_document(job: dict[str, Any], name: str, reason: str) -> None:
    """One document the job could not take: counted, and its reason kept (the first MAX_REASONS)."""
    count(job, "numberOfDocumentsFailed")
    if len(job["failureReasons"]) < MAX_REASONS:
        job["failureReasons"].append(f"{name}: {reason}"[:2048])


def public_job(job: Mapping[str, Any], summary: bool = False) -> dict[str, Any]:
    """A job record as the service answers it (IngestionJob, or IngestionJobSummary)."""
    out = {k: job[k] for k in ("knowledgeBaseId", "dataSourceId", "ingestionJobId", "status", "statistics")}
    if job.get("description"):
        out["description"] = job["description"]
    out["startedAt"], out["updatedAt"] = iso(job["startedAt"]), iso(job["updatedAt"])
    if not summary:
        out["failureReasons"] = list(job["failureReasons"])
    return out


# a stored document's state (domain.doc_status) as Bedrock's DocumentStatus
DOCUMENT_STATUS = {"received": "IN_PROGRESS", "indexed": "INDEXED", "summaries_pending": "INDEXED",
                   "done": "INDEXED", "failed": "FAILED"}
