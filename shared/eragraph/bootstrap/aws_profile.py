"""The AWS profile: S3 + DynamoDB + SQS FIFO + OpenSearch, configured from the environment
the SAM template sets on every function (config.AWS_ENV: the table, the bucket, the summarize
queue, the OpenSearch endpoint and indexes, the region, an optional local-cloud endpoint),
plus the ERAGRAPH_* settings (config.settings_from_env). Clients are created when the engine
is built, and the handlers build it lazily, once per container (bootstrap.aws.LAMBDA_ENGINE),
never at import.

The entity graph (services.entity_index) lives in the same DynamoDB table (``ENT#``/``CHUNK#``
items, adapters.aws.entity_dynamodb) and its vectors in a second OpenSearch index with the node
index's mapping (created on first use like it). A second index rather than layers -1/-2 of the
node index: the node index's audits treat every id that is no live node as an orphan
(``reindex.audit_vectors`` would delete the entity vectors, ``invariants`` would report them),
and its ``count()`` is the node count the stats report; a second index also keeps the filtered
k-NN searches of the summary graph off the (many more) entity-name vectors.

Tokens: the AWS profile embeds with Bedrock Titan V2, which reads up to 8k tokens, so chunks are
counted in word/punctuation tokens (RegexTokenizer) and no tokenizer files ride in the layer;
the MiniLM word-piece tokenizer is used only when the embedder is MiniLM (container image).

Tenants share the table, indexes and queue, with every key under ``T#<id>#`` (DynamoDB), every
document tagged and every query scoped by the adapter (OpenSearch), every message carrying the
tenant and grouped under it (SQS FIFO); the registry is ``TENANTS`` / ``T#<id>`` items of the
default namespace. ``delete`` also removes the tenant's objects under ``tenants/<id>/`` in the
documents bucket, their old versions and delete markers included."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from ..config import Settings, aws_environment, aws_region, settings_from_env
from ..domain.tenants import DEFAULT, KEY_PREFIX
from ..ports.tenants import Namespaced, TenantRegistry
from ..services.engine import Engine
from .profile import Engines, Profile, compose
from .providers import make_tokenizer

DEFAULT_INDEX = "eragraph-nodes"
DEFAULT_ENTITY_INDEX = "eragraph-entities"
REQUIRED = ("ERAGRAPH_TABLE", "ERAGRAPH_BUCKET", "ERAGRAPH_SUMMARIZE_QUEUE_URL", "ERAGRAPH_OPENSEARCH_ENDPOINT")


class MissingConfigError(RuntimeError):
    pass


def require(env: Mapping[str, str], *names: str) -> None:
    missing = [n for n in names if not env.get(n)]
    if missing:
        raise MissingConfigError(f"the aws profile needs {', '.join(missing)} in the environment")


class AwsProfile(Profile):
    """S3, DynamoDB (one table: graph, entity graph, tenant registry), SQS FIFO and OpenSearch
    (the node index and the entity index), every client built here from ``env`` (default: the
    process's config.aws_environment) on first use."""

    name = "aws"
    packages = ("boto3", "pynamodb", "opensearchpy")

    def __init__(self, env: Mapping[str, str] | None = None, opensearch_client: Any = None,
                 refresh: bool | str = False) -> None:
        self.env = aws_environment() if env is None else env
        self.region = aws_region(self.env)
        self.endpoint = self.env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None
        self.opensearch_client = opensearch_client
        self.refresh = refresh

    @cached_property
    def _session(self) -> Any:
        import boto3

        return boto3.session.Session(region_name=self.region)

    @cached_property
    def s3(self) -> Any:
        return self._session.client("s3", endpoint_url=self.endpoint)

    @cached_property
    def sqs(self) -> Any:
        return self._session.client("sqs", endpoint_url=self.endpoint)

    @property
    def replicas(self) -> int | None:
        raw = self.env.get("ERAGRAPH_OPENSEARCH_REPLICAS")
        return int(raw) if raw else None

    def graph(self):
        from ..adapters.aws.graph_dynamodb import DynamoGraphStore

        require(self.env, "ERAGRAPH_TABLE", "ERAGRAPH_BUCKET", "ERAGRAPH_SUMMARIZE_QUEUE_URL")
        return DynamoGraphStore(self.env["ERAGRAPH_TABLE"], region=self.region, host=self.endpoint,
                                tenant=self.tenant)

    def settled(self, graph, settings):
        from ..adapters.aws.graph_dynamodb import DynamoGraphStore

        return DynamoGraphStore(self.env["ERAGRAPH_TABLE"], models=graph.models, code_bits=settings.n_planes)

    def tokenizer(self, settings):
        if settings.embedder == "minilm":
            return make_tokenizer(settings)
        from ..providers.hashing import RegexTokenizer

        return RegexTokenizer()

    def _index(self, name: str, default: str, dim: int):
        from ..adapters.aws.vector_opensearch import OpenSearchVectorIndex, make_client

        if self.opensearch_client is None:
            require(self.env, "ERAGRAPH_OPENSEARCH_ENDPOINT")
            self.opensearch_client = make_client(self.env["ERAGRAPH_OPENSEARCH_ENDPOINT"], self.region,
                                                 self.env.get("ERAGRAPH_OPENSEARCH_SERVICE") or "es")
        return OpenSearchVectorIndex(self.opensearch_client, self.env.get(name) or default, dim,
                                     refresh=self.refresh, replicas=self.replicas, tenant=self.tenant)

    def vectors(self, dim):
        return self._index("ERAGRAPH_OPENSEARCH_INDEX", DEFAULT_INDEX, dim)

    def queue(self):
        from ..adapters.aws.queue_sqs import SqsQueue

        return SqsQueue(self.env["ERAGRAPH_SUMMARIZE_QUEUE_URL"], client=self.sqs, tenant=self.tenant)

    def blobs(self):
        from ..adapters.aws.blob_s3 import S3BlobStore

        return S3BlobStore(self.env["ERAGRAPH_BUCKET"], client=self.s3, ingested=True)

    def source_bucket(self, settings, name):
        from ..adapters.aws.blob_s3 import S3BlobStore

        allowed = [b.strip() for b in settings.source_buckets.split(",") if b.strip()]
        if name not in allowed:
            raise LookupError(f"bucket {name!r} is not one this deployment may read (the DataSourceBuckets "
                              f"parameter: {', '.join(allowed) or 'none'})")
        return S3BlobStore(name, client=self.s3)

    def lexical(self, graph, vectors):
        from ..adapters.aws.lexical_opensearch import OpenSearchLexicalIndex

        return OpenSearchLexicalIndex(vectors)

    def entity_store(self, graph):
        from ..adapters.aws.entity_dynamodb import DynamoEntityStore

        store = DynamoEntityStore(self.env["ERAGRAPH_TABLE"], models=graph.models)
        bucket = self.env.get("ERAGRAPH_SNAPSHOT_BUCKET")
        if self.env.get("ERAGRAPH_ENTITY_GRAPH_WARM", "").lower() not in ("1", "true", "yes") and not bucket:
            return store
        from ..adapters.aws.entity_snapshot_s3 import S3EntitySnapshots
        from ..adapters.aws.entity_warm import WarmEntityReads, held_chunk_cap

        # outside a walk (an ingest's, a reindex's reads) a warm reader reads the store, as without it
        snapshots = S3EntitySnapshots(bucket, self.s3, self.tenant) if bucket else None
        cap, memory = (self.env.get(k, "").strip() for k in ("ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS",
                                                               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
        if not (cap or "0").isdigit() or not (memory or "0").isdigit():
            raise ValueError(f"ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS={cap!r}, AWS_LAMBDA_FUNCTION_MEMORY_SIZE={memory!r}: "
                             "each must be a whole number")
        max_chunks = int(cap) if cap else held_chunk_cap(int(memory or 0))
        return WarmEntityReads(store, lambda: (r.node_id for r in graph.layer_refs(0)), snapshots=snapshots,
                               max_chunks=max_chunks, chunk_count=lambda: graph.layer_sizes().get(0, 0))

    def entity_vectors(self, dim):
        return self._index("ERAGRAPH_OPENSEARCH_ENTITY_INDEX", DEFAULT_ENTITY_INDEX, dim)

    def uploads(self, engines, settings):
        """The documents bucket: the object put is the hand-over, its notification runs the
        ingest function (services.uploads.BucketPipeline)."""
        from ..services.uploads import BucketPipeline

        return BucketPipeline(self.env.get("ERAGRAPH_DOCUMENT_PREFIX", ""), self.env.get("ERAGRAPH_DOCUMENT_SUFFIX", ""))

    # ----- tenants: the registry in the default namespace -----
    def registry(self, engines: Engines) -> TenantRegistry:
        from ..adapters.aws.tenants_dynamodb import DynamoTenantRegistry

        return DynamoTenantRegistry(engines.engine(DEFAULT).graph.Item)

    def exists(self, engines: Engines, tenant: str) -> bool:
        # the registry, not this process's engines: a deletion elsewhere, or a read path that
        # opened an unregistered tenant, is seen
        return self.registry(engines).has_tenant(tenant)

    def register(self, engines: Engines, tenant: str) -> None:
        registry = self.registry(engines)
        if not registry.has_tenant(tenant):  # one read per tenant and process
            registry.register_tenant(tenant)

    def tenants(self, engines: Engines) -> list[str]:
        return self.registry(engines).tenants()

    def delete(self, engines: Engines, tenant: str) -> dict[str, Any]:
        # the tenant's own adapters even when it is no longer registered (a rerun finishes a
        # deletion cut short: whatever it left is found by the scans below)
        engine = engines.kept(tenant) or engines.build(tenant)
        entity_vectors = getattr(engine.entities, "vectors", None) if engine.entities is not None else None
        before = {"items": engine.graph.namespace_size(), "vectors": engine.vectors.count(),
                  "entity_vectors": entity_vectors.count() if entity_vectors is not None else 0}
        objects = 0
        if engine.blobs is not None:  # the tenant's files first: their delete events find no store
            for key in engine.blobs.list(f"{KEY_PREFIX}{tenant}/"):
                engine.blobs.delete(key)
                objects += 1
        versions = 0
        purge = getattr(engine.blobs, "purge_versions", None)  # S3: the old versions and delete markers too
        if purge is not None:
            versions = purge(f"{KEY_PREFIX}{tenant}/")
        namespaces: list[Namespaced] = [engine.vectors, *([entity_vectors] if entity_vectors is not None else []),
                                        engine.graph]
        for store in namespaces:
            store.drop_namespace()
        snapshots = getattr(engine.entities.store, "snapshots", None) if engine.entities is not None else None
        if snapshots is not None:  # its entity graph's snapshot, after its items (entity_warm.keep_snapshot)
            snapshots.delete()
        self.registry(engines).delete_tenant(tenant)
        engines.forget(tenant)
        after = {"items": engine.graph.namespace_size(), "vectors": engine.vectors.count(),
                 "entity_vectors": entity_vectors.count() if entity_vectors is not None else 0}
        return {"tenant": tenant, "before": before, "after": after, "objects_deleted": objects,
                "versions_deleted": versions}


def build_aws_engine(settings: Settings | None = None, *, environ: Mapping[str, str] | None = None,
                     opensearch_client: Any = None, refresh: bool | str = False, tenant: str = "") -> Engine:
    """``opensearch_client`` replaces the SigV4 client (tests use a recording fake); ``tenant``:
    the namespace every adapter is bound to (DynamoDB key prefix, OpenSearch scope, queue
    groups; domain.tenants)."""
    settings = settings or settings_from_env(None if environ is None else dict(environ))
    return compose(AwsProfile(aws_environment(environ), opensearch_client, refresh), settings, tenant)
