"""The Lambda side of the AWS profile (bootstrap.aws_profile): the engines of one container
(``LAMBDA_ENGINE``, one per tenant, each built on first use), the handlers' powertools and the
Bedrock spend they publish, and the reindex function's queue of tenant audits. The profile's
names are imported here too, so a handler imports this module only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import ProcessSettings, Settings, aws_environment, aws_region, function_environment, settings_from_env
from ..services.engine import Engine
from .aws_profile import (DEFAULT_ENTITY_INDEX, DEFAULT_INDEX, REQUIRED, AwsProfile, MissingConfigError,
                          build_aws_engine, require)
from .preflight import USES, check_prices, preflight

__all__ = ["DEFAULT_ENTITY_INDEX", "DEFAULT_INDEX", "LAMBDA_ENGINE", "REQUIRED", "AwsProfile", "LazyEngine",
           "MissingConfigError", "build_aws_engine", "function_environment", "powertools", "priced",
           "reindex_queue", "spend_publisher"]


def powertools() -> tuple[Any, Any, Any]:
    """(Logger, Metrics, Tracer) of a handler. The template sets POWERTOOLS_METRICS_NAMESPACE;
    without it (a handler called from a terminal or a test) the namespace is ``Eragraph``
    rather than an error at the first flush."""
    from aws_lambda_powertools import Logger, Metrics, Tracer

    namespace = aws_environment().get("POWERTOOLS_METRICS_NAMESPACE") or "Eragraph"
    return Logger(), Metrics(namespace=namespace), Tracer()


def spend_publisher(metrics: Any, logger: Any = None, environ: Mapping[str, str] | None = None
                    ) -> Callable[[Sequence[Any]], None]:
    """``publish(calls)``: the Bedrock calls among ``calls`` (services.cost.Call, the cost ledger's
    entries) priced with the ledger's price table (config.DEFAULT_PRICES with ERAGRAPH_PRICES) and
    added as the ``BedrockSpendUSD`` metric that the BedrockSpend alarm sums per day. A Bedrock
    model without a price is logged, not counted as free."""
    from ..services import cost

    prices = settings_from_env(None if environ is None else dict(environ)).price_table()

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


class LazyEngine:
    """The engines of one Lambda container, one per tenant (bootstrap.tenancy), each built on
    its first use. ``cold_start`` runs at a handler's import (Lambda's init phase): it validates
    the settings and imports every provider package the function uses, so a function deployed
    without one fails there, in one line, and never at the first document. The engines
    themselves (clients, the store's recorded settings) are built on first use, so importing a
    handler in tests touches no AWS service. ``set`` installs a prebuilt default engine and
    ``set_builder`` the builder of tenants' engines (tests, local clouds)."""

    def __init__(self, profile: str = AwsProfile.name) -> None:
        self.profile = profile
        self._tenancy: Any = None
        self._builder: Any = None
        self._writers: dict[str, Engine] = {}  # writer(): engines of tenants not registered yet
        self._lock = threading.Lock()
        self.uses: tuple[str, ...] = USES  # narrowed by cold_start to the function's own

    def cold_start(self, *uses: str, load: bool = True, environ: Mapping[str, str] | None = None) -> Settings:
        """``uses``: the providers this function calls (bootstrap.preflight.USES). ``load``
        imports their packages now (a function that needs them for every event); ``False``
        only finds them (a function where only some requests use them: they load on first use)."""
        settings = settings_from_env(None if environ is None else dict(environ))
        preflight(settings, self.profile, uses, load=load)
        if {"generator", "embedder"} & set(uses):  # a model without a price escapes the spend alarm
            check_prices(settings, ProcessSettings.from_env(environ).answer_models, uses)
        self.uses = uses
        return settings

    @property
    def tenancy(self) -> Any:
        if self._tenancy is None:
            with self._lock:
                if self._tenancy is None:
                    from .tenancy import Tenancy

                    self._tenancy = Tenancy(AwsProfile(), uses=self.uses, build=self._builder or self._build)
        return self._tenancy

    def _build(self, tenant: str) -> Engine:
        """A tenant's engine from the environment the SAM template sets as it is now (the
        settings, their providers checked, the aws profile's adapters)."""
        settings = settings_from_env()
        preflight(settings, self.profile, self.uses)
        return build_aws_engine(settings, tenant=tenant)

    def uploads(self) -> Any:
        """The pipeline of the documents the query function is given (POST /documents): the bucket."""
        return AwsProfile().uploads(self.get, settings_from_env())

    def writer(self, tenant: str = "") -> Engine:
        """The engine of an API write (POST /documents) of ``tenant``, which registers no tenant:
        the query function may not (its role writes no registry item); the ingest function
        registers it when the object's event comes. A tenant not registered yet gets an engine of
        its own namespace, built once and kept apart from the tenancy's (whose kept engine would
        stand for a registered tenant): until its first object is ingested, reads of the tenant
        find nothing, as for any unregistered tenant."""
        if not tenant or self.tenancy.exists(tenant):
            return self.get(tenant, register=False)
        with self._lock:
            if tenant not in self._writers:
                self._writers[tenant] = self.tenancy.build(tenant)
            return self._writers[tenant]

    def get(self, tenant: str = "", register: bool = True) -> Engine:
        """The engine of ``tenant`` ("" the default); ``register``: a write path records a new
        tenant, a read path does not."""
        return self.tenancy.engine(tenant, register=register)

    def set(self, engine: Engine | None) -> None:
        if engine is None:
            self._tenancy = None
            self._builder = None
            self._writers.clear()
            return
        self.tenancy.set("", engine)

    def set_builder(self, build: Any) -> None:
        """``build(tenant) -> Engine`` for every tenant's engine (the default one too, unless set)."""
        self._builder = build
        if self._tenancy is not None:
            self._tenancy._build = build or self._build


LAMBDA_ENGINE = LazyEngine()
_REINDEX_QUEUE: list[Any] = []


def reindex_queue(environ: Mapping[str, str] | None = None) -> Any:
    """The reindex function's queue of tenant audits (adapters.aws.reindex_queue), from
    ERAGRAPH_REINDEX_QUEUE_URL; built once per container."""
    env = aws_environment(environ)
    require(env, "ERAGRAPH_REINDEX_QUEUE_URL")
    url = env["ERAGRAPH_REINDEX_QUEUE_URL"]
    if not _REINDEX_QUEUE or _REINDEX_QUEUE[0].url != url:
        import boto3

        from ..adapters.aws.reindex_queue import ReindexQueue

        client = boto3.session.Session(region_name=aws_region(env)).client(
            "sqs", endpoint_url=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None)
        _REINDEX_QUEUE[:] = [ReindexQueue(url, client)]
    return _REINDEX_QUEUE[0]
