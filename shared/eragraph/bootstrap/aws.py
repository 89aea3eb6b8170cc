"""The AWS profile: S3 + DynamoDB + SQS FIFO + OpenSearch, configured from the environment
the SAM template sets on every function:

    ERAGRAPH_TABLE                 DynamoDB table (single-table graph store)
    ERAGRAPH_BUCKET                documents bucket
    ERAGRAPH_SUMMARIZE_QUEUE_URL   FIFO queue of SegmentsAffected messages
    ERAGRAPH_OPENSEARCH_ENDPOINT   OpenSearch domain endpoint (SigV4-signed requests)
    ERAGRAPH_OPENSEARCH_INDEX      index name (default ``eragraph-nodes``)
    ERAGRAPH_OPENSEARCH_ENTITY_INDEX  index of entity-name (and sentence) vectors
                                   (default ``eragraph-entities``)
    ERAGRAPH_REINDEX_QUEUE_URL     FIFO queue of the reindex's per-tenant audits (the reindex
                                   function only: reindex_queue)
    ERAGRAPH_OPENSEARCH_REPLICAS   replicas of a newly created index: data nodes - 1
                                   (the template derives it from the domain's node count)
    AWS_REGION                     set by Lambda itself
    ERAGRAPH_AWS_ENDPOINT_URL      optional: one endpoint for S3/SQS/DynamoDB (a local cloud)
    ERAGRAPH_OPENSEARCH_SERVICE    optional: ``es`` (domain, default) or ``aoss`` (serverless)

plus the ERAGRAPH_* settings (config.settings_from_env). Clients are created when the engine is
built, and the handlers build it lazily, once per container (``LAMBDA_ENGINE``), never at import.

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
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..config import Settings, settings_from_env
from ..services.engine import Engine
from .preflight import USES, preflight
from .profile import Profile, compose
from .providers import make_tokenizer


def powertools() -> tuple[Any, Any, Any]:
    """(Logger, Metrics, Tracer) of a handler. The template sets POWERTOOLS_METRICS_NAMESPACE;
    without it (a handler called from a terminal or a test) the namespace is ``Eragraph``
    rather than an error at the first flush."""
    from aws_lambda_powertools import Logger, Metrics, Tracer

    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Eragraph"
    return Logger(), Metrics(namespace=namespace), Tracer()


def spend_publisher(metrics: Any, logger: Any = None, environ: Mapping[str, str] | None = None
                    ) -> Callable[[Sequence[Any]], None]:
    """``publish(calls)``: the Bedrock calls among ``calls`` (services.cost.Call, the cost ledger's
    entries) priced with the ledger's price table (config.DEFAULT_PRICES with ERAGRAPH_PRICES) and
    added as the ``BedrockSpendUSD`` metric that the BedrockSpend alarm sums per day. A Bedrock
    model without a price is logged, not counted as free."""
    from ..services import cost

    prices = settings_from_env(dict(os.environ if environ is None else environ)).price_table()

    def publish(calls: Sequence[Any]) -> None:
        usd, unpriced = cost.bedrock_spend(calls, prices)
        if any(c.model.startswith("bedrock:") for c in calls):
            metrics.add_metric("BedrockSpendUSD", "None", round(usd, 8))
        if unpriced and logger is not None:
            logger.warning("Bedrock calls without a price (set ERAGRAPH_PRICES)",
                           extra={"reason": "unpriced-model", "models": unpriced})
    return publish


def priced(metrics: Any, logger: Any = None, environ: Mapping[str, str] | None = None) -> Callable:
    """Handler decorator (inside ``metrics.log_metrics``): the model calls the invocation records
    in the cost ledger (services.cost.track), published by ``spend_publisher``."""
    import functools

    from ..services import cost

    publish = spend_publisher(metrics, logger, environ)

    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            with cost.track() as calls:
                try:
                    return handler(event, context)
                finally:
                    publish(calls)
        return run
    return wrap


DEFAULT_INDEX = "eragraph-nodes"
DEFAULT_ENTITY_INDEX = "eragraph-entities"
REQUIRED = ("ERAGRAPH_TABLE", "ERAGRAPH_BUCKET", "ERAGRAPH_SUMMARIZE_QUEUE_URL", "ERAGRAPH_OPENSEARCH_ENDPOINT")


class MissingConfigError(RuntimeError):
    pass


def _require(env: Mapping[str, str], *names: str) -> None:
    missing = [n for n in names if not env.get(n)]
    if missing:
        raise MissingConfigError(f"the aws profile needs {', '.join(missing)} in the environment")


class AwsProfile(Profile):
    """S3, DynamoDB (one table: graph, entity graph, tenant registry), SQS FIFO and OpenSearch
    (the node index and the entity index), every client built here from ``env``."""

    name = "aws"

    def __init__(self, env: Mapping[str, str], opensearch_client: Any = None, refresh: bool | str = False) -> None:
        import boto3

        _require(env, "ERAGRAPH_TABLE", "ERAGRAPH_BUCKET", "ERAGRAPH_SUMMARIZE_QUEUE_URL")
        self.env = env
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.endpoint = env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None
        session = boto3.session.Session(region_name=self.region)
        self.s3 = session.client("s3", endpoint_url=self.endpoint)
        self.sqs = session.client("sqs", endpoint_url=self.endpoint)
        self.opensearch_client = opensearch_client
        self.refresh = refresh
        self.replicas = int(env["ERAGRAPH_OPENSEARCH_REPLICAS"]) if env.get("ERAGRAPH_OPENSEARCH_REPLICAS") else None

    def graph(self, tenant):
        from ..adapters.aws.graph_dynamodb import DynamoGraphStore

        return DynamoGraphStore(self.env["ERAGRAPH_TABLE"], region=self.region, host=self.endpoint, tenant=tenant)

    def settled(self, graph, settings):
        from ..adapters.aws.graph_dynamodb import DynamoGraphStore

        return DynamoGraphStore(self.env["ERAGRAPH_TABLE"], models=graph.models, code_bits=settings.n_planes)

    def tokenizer(self, settings):
        if settings.embedder == "minilm":
            return make_tokenizer(settings)
        from ..providers.hashing import RegexTokenizer

        return RegexTokenizer()

    def _index(self, name: str, default: str, dim: int, tenant: str):
        from ..adapters.aws.vector_opensearch import OpenSearchVectorIndex, make_client

        if self.opensearch_client is None:
            _require(self.env, "ERAGRAPH_OPENSEARCH_ENDPOINT")
            self.opensearch_client = make_client(self.env["ERAGRAPH_OPENSEARCH_ENDPOINT"], self.region,
                                                 self.env.get("ERAGRAPH_OPENSEARCH_SERVICE") or "es")
        return OpenSearchVectorIndex(self.opensearch_client, self.env.get(name) or default, dim,
                                     refresh=self.refresh, replicas=self.replicas, tenant=tenant)

    def vectors(self, dim, tenant):
        return self._index("ERAGRAPH_OPENSEARCH_INDEX", DEFAULT_INDEX, dim, tenant)

    def queue(self, tenant):
        from ..adapters.aws.queue_sqs import SqsQueue

        return SqsQueue(self.env["ERAGRAPH_SUMMARIZE_QUEUE_URL"], client=self.sqs, tenant=tenant)

    def blobs(self, tenant):
        from ..adapters.aws.blob_s3 import S3BlobStore

        return S3BlobStore(self.env["ERAGRAPH_BUCKET"], client=self.s3)

    def lexical(self, graph, vectors):
        from ..adapters.aws.lexical_opensearch import OpenSearchLexicalIndex

        return OpenSearchLexicalIndex(vectors)

    def entity_store(self, graph, tenant):
        from ..adapters.aws.entity_dynamodb import DynamoEntityStore

        return DynamoEntityStore(self.env["ERAGRAPH_TABLE"], models=graph.models)

    def entity_vectors(self, dim, tenant):
        return self._index("ERAGRAPH_OPENSEARCH_ENTITY_INDEX", DEFAULT_ENTITY_INDEX, dim, tenant)


def build_aws_engine(settings: Settings | None = None, *, environ: Mapping[str, str] | None = None,
                     opensearch_client: Any = None, refresh: bool | str = False, tenant: str = "") -> Engine:
    """``opensearch_client`` replaces the SigV4 client (tests use a recording fake); ``tenant``:
    the namespace every adapter is bound to (DynamoDB key prefix, OpenSearch scope, queue
    groups; domain.tenants)."""
    env = os.environ if environ is None else environ
    settings = settings or settings_from_env(dict(env))
    return compose(AwsProfile(env, opensearch_client, refresh), settings, tenant)


class LazyEngine:
    """The engines of one Lambda container, one per tenant (bootstrap.tenancy), each built on
    its first use. ``cold_start`` runs at a handler's import (Lambda's init phase): it validates
    the settings and imports every provider package the function uses, so a function deployed
    without one fails there, in one line, and never at the first document. The engines
    themselves (clients, the store's recorded settings) are built on first use, so importing a
    handler in tests touches no AWS service. ``set`` installs a prebuilt default engine and
    ``set_builder`` the builder of tenants' engines (tests, local clouds)."""

    def __init__(self, profile: str = "aws") -> None:
        self.profile = profile
        self._tenancy: Any = None
        self._builder: Any = None
        self._lock = threading.Lock()
        self.uses: tuple[str, ...] = USES  # narrowed by cold_start to the function's own

    def cold_start(self, *uses: str, load: bool = True, environ: Mapping[str, str] | None = None) -> Settings:
        """``uses``: the providers this function calls (bootstrap.preflight.USES). ``load``
        imports their packages now (a function that needs them for every event); ``False``
        only finds them (a function where only some requests use them: they load on first use)."""
        settings = settings_from_env(dict(os.environ if environ is None else environ))
        preflight(settings, self.profile, uses, load=load)
        self.uses = uses
        return settings

    @property
    def tenancy(self) -> Any:
        if self._tenancy is None:
            with self._lock:
                if self._tenancy is None:
                    from .tenancy import Tenancy

                    self._tenancy = Tenancy(self.profile, uses=self.uses, build=self._builder or self._build)
        return self._tenancy

    def _build(self, tenant: str) -> Engine:
        """A tenant's engine from the environment the SAM template sets (bootstrap.build_engine's
        aws branch: the settings, their providers checked, the adapters)."""
        settings = settings_from_env()
        preflight(settings, self.profile, self.uses)
        return build_aws_engine(settings, tenant=tenant)

    def get(self, tenant: str = "", register: bool = True) -> Engine:
        """The engine of ``tenant`` ("" the default); ``register``: a write path records a new
        tenant, a read path does not."""
        return self.tenancy.engine(tenant, register=register)

    def set(self, engine: Engine | None) -> None:
        if engine is None:
            self._tenancy = None
            self._builder = None
            return
        self.tenancy.set("", engine)

    def set_builder(self, build: Any) -> None:
        """``build(tenant) -> Engine`` for every tenant's engine (the default one too, unless set)."""
        self._builder = build
        if self._tenancy is not None:
            self._tenancy._build = build or self._build


LAMBDA_ENGINE = LazyEngine("aws")
_REINDEX_QUEUE: list[Any] = []


def reindex_queue(environ: Mapping[str, str] | None = None) -> Any:
    """The reindex function's queue of tenant audits (adapters.aws.reindex_queue), from
    ERAGRAPH_REINDEX_QUEUE_URL; built once per container."""
    env = os.environ if environ is None else environ
    _require(env, "ERAGRAPH_REINDEX_QUEUE_URL")
    url = env["ERAGRAPH_REINDEX_QUEUE_URL"]
    if not _REINDEX_QUEUE or _REINDEX_QUEUE[0].url != url:
        import boto3

        from ..adapters.aws.reindex_queue import ReindexQueue

        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
        client = boto3.session.Session(region_name=region).client(
            "sqs", endpoint_url=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None)
        _REINDEX_QUEUE[:] = [ReindexQueue(url, client)]
    return _REINDEX_QUEUE[0]


@contextmanager
def function_environment(settings: Settings, extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """The process environment a Lambda function reads at its import (the handler's cold start,
    powertools), set while the block runs and restored after: ``settings``' provider choices
    (ERAGRAPH_EMBEDDER, _SUMMARIZER, _NER; the benchmarks run a handler in-process) and ``extra``."""
    values = {"ERAGRAPH_EMBEDDER": settings.embedder, "ERAGRAPH_SUMMARIZER": settings.summarizer,
              "ERAGRAPH_NER": settings.ner, **(extra or {})}
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
