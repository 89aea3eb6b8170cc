"""S3 blob store: one bucket (optionally a key prefix) behind the BlobStore port."""

from __future__ import annotations

from typing import Any


def _missing(exc) -> bool:
    """A ClientError that says the key does not exist (GetObject: NoSuchKey; HeadObject has no
    body, so its error code is the status: 404 / NotFound). A missing bucket is not that."""
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("404", "NoSuchKey", "NotFound") or (status == 404 and code != "NoSuchBucket")


class S3BlobStore:
    """``ingested``: every object put in the bucket is ingested by its notification (the
    documents bucket), so only documents may be put in it (ports.blobs)."""

    def __init__(self, bucket: str, client: Any = None, prefix: str = "", ingested: bool = False) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.bucket = bucket
        self.client = client
        self.prefix = prefix
        self.ingested = ingested

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=bytes(data))

    def _get_object(self, key: str) -> dict:
        """GetObject; KeyError when there is no such key. S3 answers a missing key with 404
        (NoSuchKey) only to a caller allowed s3:ListBucket on the bucket; to any other it
        answers 403 AccessDenied, which stays an error here (a real permission fault must not
        read as a deleted object): the template grants the ingest role s3:ListBucket."""
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except self.client.exceptions.ClientError as exc:
            if _missing(exc):
                raise KeyError(key) from None
            raise

    def get(self, key: str) -> bytes:
        """The object's bytes; KeyError when there is no such key."""
        return self._get_object(key)["Body"].read()

    def get_with_metadata(self, key: str) -> tuple[bytes, dict[str, str]]:
        """The object's bytes and its user-defined metadata (the ``x-amz-meta-*`` headers, the
        prefix stripped and the names lower-cased by S3), from one read, so both are of one
        version of the object; KeyError when there is no such key."""
        response = self._get_object(key)
        return response["Body"].read(), {str(k): str(v) for k, v in (response.get("Metadata") or {}).items()}

    def size(self, key: str) -> int:
        """Object size without reading it (the ingest handler refuses huge objects early)."""
        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=self.prefix + key)["ContentLength"])
        except self.client.exceptions.ClientError as exc:
            if _missing(exc):
                raise KeyError(key) from None
            raise

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)

    def purge_versions(self, prefix: str) -> int:
        """Delete every version and delete marker of the keys under ``prefix`` (a versioned
        bucket keeps a deleted object's old versions until its lifecycle expires them: a
        tenant's deletion must not); how many were deleted. Idempotent."""
        deleted = 0
        paginator = self.client.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            entries = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                       for v in [*page.get("Versions", ()), *page.get("DeleteMarkers", ())]]
            for start in range(0, len(entries), 1000):  # DeleteObjects takes at most 1,000 keys
                batch = entries[start:start + 1000]
                out = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
                if out.get("Errors"):
                    raise RuntimeError(f"{len(out['Errors'])} object versions were not deleted: {out['Errors'][:3]}")
                deleted += len(batch)
        return deleted

    def list(self, prefix: str = "") -> list[str]:
        keys = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            keys += [o["Key"][len(self.prefix):] for o in page.get("Contents", ())]
        return sorted(keys)

    def list_after(self, prefix: str, after: str, limit: int) -> list[str]:
        """One ListObjectsV2 from ``after`` (StartAfter; S3 lists in key order), at most ``limit``."""
        args = {"Bucket": self.bucket, "Prefix": self.prefix + prefix, "MaxKeys": min(max(limit, 1), 1000)}
        if after:
            args["StartAfter"] = self.prefix + after
        listed = self.client.list_objects_v2(**args)
        return [o["Key"][len(self.prefix):] for o in listed.get("Contents", ())][:limit]
