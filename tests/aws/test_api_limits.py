"""The query API's cost bounds: the answer budget cap (422), and the per-tenant token bucket in
DynamoDB (moto) behind a 429 with Retry-After; the tenant and request id on the request's logs."""

from __future__ import annotations

import copy
import json

import pytest
from lambda_support import event

from contract.aws_factories import REGION, create_graph_table, fake_credentials
from eragraph.config import ApiLimits, Settings
from eragraph.domain.rate_limit import Bucket, LimitStoreUnavailable, take

TABLE = "graph-limits"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ddb():
    fake_credentials()
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_graph_table(client, TABLE)
        yield client


def test_take_refills_at_the_rate_up_to_the_burst():
    d = take(None, 10.0, rate=2.0, burst=3)
    assert d.allowed and d.bucket == Bucket(2.0, 10.0)
    d = take(Bucket(0.0, 10.0), 10.25, rate=2.0, burst=3)  # half a token back
    assert not d.allowed and d.retry_after == 1
    assert take(Bucket(0.0, 10.0), 10.5, rate=2.0, burst=3).allowed
    assert take(Bucket(0.0, 0.0), 1e6, rate=2.0, burst=3).bucket.tokens == 2.0  # capped at the burst
    assert take(Bucket(0.0, 10.0), 10.0, rate=0.1, burst=3).retry_after == 10
    assert not take(Bucket(0.5, 10.0), 5.0, rate=1.0, burst=3).allowed  # a clock that went back


def test_the_bucket_in_dynamodb_limits_each_tenant(ddb):
    from eragraph.adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    clock = Clock()
    limiter = DynamoRateLimiter(TABLE, ddb, rate=1.0, burst=3, clock=clock)
    assert [limiter.acquire("acme").allowed for _ in range(4)] == [True, True, True, False]
    assert limiter.acquire("acme").retry_after == 1
    assert limiter.acquire("").allowed and limiter.acquire("globex").allowed  # buckets of their own
    clock.now += 1.0
    assert limiter.acquire("acme").allowed and not limiter.acquire("acme").allowed
    item = ddb.get_item(TableName=TABLE, Key=DynamoRateLimiter.key("acme"))["Item"]
    assert item["PK"]["S"] == "RATE#acme"  # the key the query role may write (dynamodb:LeadingKeys)


def test_a_concurrent_request_never_spends_the_same_token(ddb):
    """Between this request's read and write another one takes the last token: the conditional
    write fails, the bucket is read again, and this request is refused."""
    from eragraph.adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    clock = Clock()
    other = DynamoRateLimiter(TABLE, ddb, rate=0.001, burst=1, clock=clock)

    class Racing:
        """The DynamoDB client; the other request takes its token right after our first read."""

        def __init__(self) -> None:
            self.exceptions = ddb.exceptions
            self.raced = False

        def get_item(self, **kw):
            out = ddb.get_item(**kw)
            if not self.raced:
                self.raced = True
                clock.now += 0.5
                assert other.acquire("acme").allowed
            return out

        def put_item(self, **kw):
            return ddb.put_item(**kw)

    mine = DynamoRateLimiter(TABLE, Racing(), rate=0.001, burst=1, clock=clock)
    decision = mine.acquire("acme")
    assert not decision.allowed and decision.retry_after > 1


def test_a_throttled_bucket_table_answers_429_not_500(ddb):
    """DynamoDB throttling the bucket's read is "too many requests": a 429 with Retry-After, not
    an error of the server; any other DynamoDB error still surfaces."""
    from botocore.stub import Stubber

    from eragraph.adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    limiter = DynamoRateLimiter(TABLE, ddb, rate=1.0, burst=3, clock=Clock())
    app = _app(ApiLimits(), limiter.acquire)
    with Stubber(ddb) as stub:
        stub.add_client_error("get_item", service_error_code="ProvisionedThroughputExceededException",
                              http_status_code=400)
        out = app.resolve(jwt_request("/stats"), None)
        assert out["statusCode"] == 429 and out["headers"]["Retry-After"] == "1"
        stub.add_client_error("get_item", service_error_code="ResourceNotFoundException", http_status_code=400)
        with pytest.raises(LimitStoreUnavailable):
            limiter.acquire("acme")
    assert app.resolve(jwt_request("/stats"), None)["statusCode"] == 200  # the table answers again


@pytest.mark.parametrize("code", ["ResourceNotFoundException", "AccessDeniedException", "InternalServerError"])
def test_any_other_bucket_table_error_is_a_503_with_retry_after_not_a_500(ddb, code):
    """The limit cannot be checked: refused for now in words (never served unlimited, never a 500)."""
    from botocore.stub import Stubber

    from eragraph.adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    limiter = DynamoRateLimiter(TABLE, ddb, rate=1.0, burst=3, clock=Clock())
    app = _app(ApiLimits(), limiter.acquire)
    with Stubber(ddb) as stub:
        stub.add_client_error("get_item", service_error_code=code, http_status_code=400,
                              service_message="arn:aws:dynamodb:us-east-1:123456789012:table/x is not there")
        out = app.resolve(jwt_request("/stats"), None)
    assert out["statusCode"] == 503 and out["headers"]["Retry-After"] == "5"
    body = json.loads(out["body"])
    assert "cannot be checked just now" in body["message"] and "123456789012" not in out["body"]


def _app(limits, admit, logger=None):
    from eragraph.entrypoints.http.api import make_app
    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.bootstrap.memory import build_memory_engine

    engine = build_memory_engine(Settings(embedder="hash", summarizer="extractive", generator="none"))
    return make_app(lambda tenant: engine, tenant_of=TenantIdentity(required=True).tenant, limits=limits,
                    admit=admit, logger=logger)


def jwt_request(path: str, body: dict | None = None, tenant: str = "acme") -> dict:
    ev = copy.deepcopy(event("api_query_valid.json"))
    ev["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": "user-1", "tenant": tenant}, "scopes": None}}
    if body is None:
        ev.update(routeKey=f"GET {path}", rawPath=path, body=None)
        ev["requestContext"]["http"].update(method="GET", path=path)
    else:
        ev["body"] = json.dumps(body)
    return ev


def test_a_tenant_over_its_rate_gets_429_with_retry_after(ddb):
    from eragraph.adapters.aws.rate_limit_dynamodb import DynamoRateLimiter

    clock = Clock()
    limiter = DynamoRateLimiter(TABLE, ddb, rate=0.5, burst=2, clock=clock)
    app = _app(ApiLimits(), limiter.acquire)
    statuses = [app.resolve(jwt_request("/stats"), None)["statusCode"] for _ in range(3)]
    assert statuses == [200, 200, 429]
    out = app.resolve(jwt_request("/stats"), None)
    assert out["statusCode"] == 429 and out["headers"]["Retry-After"] == "2"
    assert json.loads(out["body"])["retry_after"] == 2
    assert app.resolve(jwt_request("/stats", tenant="globex"), None)["statusCode"] == 200
    clock.now += 2.0
    assert app.resolve(jwt_request("/stats"), None)["statusCode"] == 200


def test_the_answer_budget_is_capped():
    app = _app(ApiLimits(answer_max_budget=4000), None)
    out = app.resolve(jwt_request("/query", {"query": "q", "answer": True, "budget": 4001}), None)
    assert out["statusCode"] == 422
    assert "at most 4000 when answer is true" in json.loads(out["body"])["message"]
    ok = app.resolve(jwt_request("/query", {"query": "q", "answer": True, "budget": 4000}), None)
    assert ok["statusCode"] == 200
    no_answer = app.resolve(jwt_request("/query", {"query": "q", "budget": 50000}), None)
    assert no_answer["statusCode"] == 200  # retrieval only: no model reads the evidence


def test_the_default_budget_is_capped_too_when_answering():
    """A request without a budget uses the default (ERAGRAPH_TOKEN_BUDGET); with answer=true it
    is held to the cap as well, so a large default cannot bypass it."""
    from eragraph.entrypoints.http.api import make_app
    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.bootstrap.memory import build_memory_engine
    from eragraph.services.ingest import SourceDoc, ingest

    engine = build_memory_engine(Settings(embedder="hash", summarizer="extractive", generator="none",
                                          token_budget=50000))
    words = " ".join(f"word{i}" for i in range(120))
    ingest(engine, [SourceDoc(source=f"docs/{i}.txt", text=f"Document {i}. {words}.", doc_id=f"d{i}") for i in range(12)])
    app = make_app(lambda tenant: engine, tenant_of=TenantIdentity(required=True).tenant,
                   limits=ApiLimits(answer_max_budget=300))

    def evidence_tokens(body: dict) -> int:
        out = app.resolve(jwt_request("/query", body), None)
        assert out["statusCode"] == 200, out["body"]
        return sum(engine.tokenizer.count(r["text"]) for r in json.loads(out["body"])["results"])

    retrieval = evidence_tokens({"query": "word7 word9", "mode": "dense", "k": 12})
    answered = evidence_tokens({"query": "word7 word9", "mode": "dense", "k": 12, "answer": True})
    assert retrieval > 300  # without an answer the default budget holds: nothing caps it
    assert 0 < answered <= 300


def test_the_request_logs_carry_tenant_request_id_and_caller():
    from aws_lambda_powertools import Logger

    logger = Logger(service="eragraph-test")
    app = _app(ApiLimits(), None, logger=logger)
    assert app.resolve(jwt_request("/stats"), None)["statusCode"] == 200
    keys = logger.get_current_keys()
    assert (keys["tenant"], keys["caller"], keys["api_request_id"]) == ("acme", "user-1", "JKJaXmPLvHcESHA=")


def test_limits_from_the_environment():
    assert ApiLimits.from_env({}) == ApiLimits()
    assert ApiLimits.from_env({"ERAGRAPH_ANSWER_MAX_BUDGET": "8000", "ERAGRAPH_TENANT_RATE": "5",
                               "ERAGRAPH_TENANT_BURST": "20"}) == ApiLimits(8000, 5.0, 20)
    with pytest.raises(ValueError):
        ApiLimits.from_env({"ERAGRAPH_TENANT_BURST": "0"})
    with pytest.raises(ValueError, match="tenant_rate"):
        ApiLimits.from_env({"ERAGRAPH_TENANT_RATE": "fast"})


def test_the_open_streams_in_dynamodb_are_per_tenant_released_and_lapse(ddb):
    from eragraph.adapters.aws.stream_slots_dynamodb import DynamoStreamSlots

    clock = Clock()
    slots = DynamoStreamSlots(TABLE, ddb, limit=2, clock=clock, lease_seconds=100)
    (first, a), (second, _), (third, _) = (slots.acquire("acme") for _ in range(3))
    assert (first.allowed, second.allowed, third.allowed, third.retry_after) == (True, True, False, 1)
    assert slots.acquire("globex")[0].allowed  # a tenant's own slots
    slots.release("acme", a)
    assert slots.acquire("acme")[0].allowed and not slots.acquire("acme")[0].allowed
    clock.now += 101  # an environment that died mid-answer: its leases lapse
    assert slots.acquire("acme")[0].allowed
    item = ddb.get_item(TableName=TABLE, Key=DynamoStreamSlots.key("acme"))["Item"]
    assert len(item["leases"]["M"]) == 1  # the lapsed ones were dropped as the new one was written


def test_concurrent_streams_never_take_more_slots_than_the_limit(ddb):
    from concurrent.futures import ThreadPoolExecutor

    from eragraph.adapters.aws.stream_slots_dynamodb import DynamoStreamSlots

    slots = DynamoStreamSlots(TABLE, ddb, limit=3)
    with ThreadPoolExecutor(8) as pool:
        decisions = list(pool.map(lambda _: slots.acquire("acme")[0].allowed, range(16)))
    assert sum(decisions) <= 3
    item = ddb.get_item(TableName=TABLE, Key=DynamoStreamSlots.key("acme"), ConsistentRead=True)["Item"]
    assert len(item["leases"]["M"]) == sum(decisions)


def test_a_throttled_slot_table_is_a_refusal_to_retry():
    from botocore.stub import Stubber

    fake_credentials()
    import boto3

    from eragraph.adapters.aws.stream_slots_dynamodb import DynamoStreamSlots

    client = boto3.client("dynamodb", region_name=REGION)
    slots = DynamoStreamSlots(TABLE, client, limit=2)
    with Stubber(client) as stub:
        stub.add_client_error("get_item", service_error_code="ThrottlingException", http_status_code=400)
        decision, _ = slots.acquire("acme")
    assert not decision.allowed and decision.retry_after == 1


def test_an_answer_model_without_a_price_stops_the_cold_start():
    from eragraph.bootstrap.preflight import ProviderUnavailable, check_prices

    settings = Settings(generator="bedrock")
    check_prices(settings, ["arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0"])
    with pytest.raises(ProviderUnavailable, match="no price for the answer model.*amazon.nova-pro-v1:0"):
        check_prices(settings, ["arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0"])
    priced = Settings(generator="bedrock", prices='{"bedrock:amazon.nova-pro-v1:0": [0.8, 3.2]}')
    check_prices(priced, ["arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0"])
    with pytest.raises(ProviderUnavailable, match="mistral.unpriced-v1:0"):  # the text model as well
        check_prices(Settings(generator="bedrock", bedrock_text_model="mistral.unpriced-v1:0"), [])
    check_prices(Settings(generator="none"), ["amazon.nova-pro-v1:0"])  # no Bedrock answers: nothing to price


def test_an_embed_model_without_a_price_stops_the_cold_start():
    from eragraph.bootstrap.preflight import ProviderUnavailable, check_prices

    check_prices(Settings(embedder="bedrock"), [], uses=("embedder",))  # Titan v2: priced
    unpriced = Settings(embedder="bedrock", bedrock_embed_model="cohere.embed-unpriced-v9")
    with pytest.raises(ProviderUnavailable, match="no price for the embed model cohere.embed-unpriced-v9"):
        check_prices(unpriced, [], uses=("embedder",))
    check_prices(unpriced, [], uses=("generator",))  # a function that does not embed
    priced = Settings(embedder="bedrock", bedrock_embed_model="cohere.embed-unpriced-v9",
                      prices='{"bedrock:cohere.embed-unpriced-v9": [0.1, 0]}')
    check_prices(priced, [], uses=("embedder", "generator"))


def test_the_lambda_cold_start_refuses_an_unpriced_answer_model():
    from eragraph.bootstrap.aws import LazyEngine
    from eragraph.bootstrap.preflight import ProviderUnavailable

    env = {"ERAGRAPH_GENERATOR": "bedrock", "ERAGRAPH_EMBEDDER": "hash",
           "ERAGRAPH_ANSWER_MODELS": "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0"}
    with pytest.raises(ProviderUnavailable, match="amazon.nova-pro-v1:0"):
        LazyEngine().cold_start("embedder", "generator", load=False, environ=env)
    LazyEngine().cold_start("embedder", load=False, environ=env)  # a function that answers nothing
