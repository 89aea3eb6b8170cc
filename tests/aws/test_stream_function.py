"""The stream function (functions/stream) as the Lambda Web Adapter fronts it: its ASGI app under
uvicorn on a local port, each request carrying the adapter's ``x-amzn-request-context`` header
(the function URL's requestContext, from a real function URL event with IAM auth), read by
boto3's ``bedrock-agent-runtime`` client unchanged. The caller's tenant is its IAM role's tag
(moto's IAM), never the body; a caller without one is refused; another tenant's knowledge base
id is ResourceNotFoundException, as an unknown one; the first ``output`` event leaves before a slow generator ends."""

from __future__ import annotations

import copy
import json
import threading
import time

import boto3
import pytest
from botocore.config import Config
from test_tenants_api import A_WORDS, B_WORDS, tenant_env, two_tenants  # noqa: F401 (fixtures)

from aws_helpers import event, load_handler
from eragraph.bootstrap.identity import REQUEST_CONTEXT_HEADER, TenantIdentity
from eragraph.bootstrap.limits import stream_slots
from eragraph.config import ApiLimits
from eragraph.domain.knowledge_base import knowledge_base_id
from eragraph.ports.records import Answer

# how long a gated generator waits for its reader (a bound for a broken stream, never reached)
GATE_SECONDS = 60


class SlowStreamingGenerator:
    """Streams its first piece, then (given a ``gate``) waits until the reader opens it: a reader
    that opens it on seeing the first event proves the event left before the generator ended,
    whatever the machine's load (a buffered stream would end the generator first)."""

    identity = "slow-stand-in"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.ended = threading.Event()

    def answer(self, question, evidence, **_):
        return Answer(text="From the log.", cited_ids=(evidence[0][0],), tokens_in=1, tokens_out=1, model="slow")

    def stream(self, question, evidence, **_):
        yield "Starglass "
        if self.gate is not None:
            self.gate.wait(GATE_SECONDS)
        self.ended.set()
        yield "followed it."
        yield Answer(text="Starglass followed it.", cited_ids=(evidence[0][0],), tokens_in=1, tokens_out=2,
                     model="slow")


def request_context(role: str | None) -> dict:
    """The requestContext of a function URL request signed by ``role`` (None: no IAM caller)."""
    context = copy.deepcopy(event("function_url_iam_stream.json")["requestContext"])
    if role is None:
        context.pop("authorizer")
    else:
        context["authorizer"]["iam"]["userArn"] = f"arn:aws:sts::123456789012:assumed-role/{role}/reader-1"
    return context


def client_as(url: str, role: str | None, header: bool = True):
    """A bedrock-agent-runtime client on ``url`` whose requests carry the adapter's header."""
    client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=url,
                          config=Config(retries={"max_attempts": 1}))

    def add_context(request, **_):
        if header:
            request.headers[REQUEST_CONTEXT_HEADER] = json.dumps(request_context(role))

    client.meta.events.register_first("before-send.bedrock-agent-runtime.*", add_context)
    return client


def ask(kb_id: str) -> dict:
    return {"input": {"text": "Which comet did Starglass follow?"}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": kb_id, "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/stand-in",
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 2,
                                                                     "overrideSearchType": "SEMANTIC"}}}}}


@pytest.fixture
def stream_url(two_tenants, monkeypatch):
    """The stream function's app served as the adapter would run it (run.sh: uvicorn), its
    identity that of the template (TenantRequired true, the request context trusted), tenants a
    and b tagged on the roles kb-reader-a and kb-reader-b."""
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.entrypoints.http.server import ApiServer

    iam = boto3.client("iam", region_name="us-east-1")
    for tenant in ("a", "b"):
        iam.create_role(Path="/eragraph/", RoleName=f"kb-reader-{tenant}", AssumeRolePolicyDocument="{}",
                        Tags=[{"Key": "eragraph-tenant", "Value": tenant}])
    iam.create_role(Path="/eragraph/", RoleName="kb-reader-untagged", AssumeRolePolicyDocument="{}")
    module = load_handler("stream")
    monkeypatch.setattr(module.app, "identity", TenantIdentity(required=True, trust_request_context=True))
    # one answer streaming per tenant (TenantStreamLimit), counted in this test's graph table
    monkeypatch.setattr(module.app, "streams", stream_slots(ApiLimits(tenant_streams=1, stream_capacity=10)))
    for tenant in ("a", "b"):
        LAMBDA_ENGINE.get(tenant, register=False).generator = SlowStreamingGenerator()
    server = ApiServer(None, port=0, app=module.app)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server._server.should_exit = True  # the app's pools belong to the module: not closed here
        server.socket.close()


def test_the_stream_leaves_event_by_event_for_the_callers_tenant(stream_url):
    from eragraph.bootstrap.aws import LAMBDA_ENGINE

    LAMBDA_ENGINE.get("a", register=False).generator = generator = SlowStreamingGenerator(gate=threading.Event())
    client = client_as(stream_url, "kb-reader-a")
    out = client.retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
    assert out["sessionId"]  # a new session, kept in the graph table under the stream role's grant
    events = iter(out["stream"])
    first = next(events)
    ended_before_first = generator.ended.is_set()
    generator.gate.set()
    seen = [first, *events]
    assert seen[0] == {"output": {"text": "Starglass "}}
    assert not ended_before_first  # the first event came while the generator still waited for its reader
    assert seen[1] == {"output": {"text": "followed it."}}
    refs = json.dumps(seen[-1]["citation"]["retrievedReferences"])
    assert any(w in refs for w in A_WORDS) and not any(w in refs for w in B_WORDS)
    again = client.retrieve_and_generate_stream(**ask(knowledge_base_id("a")), sessionId=out["sessionId"])
    assert again["sessionId"] == out["sessionId"] and list(again["stream"])  # the session's next turn


def test_another_tenants_knowledge_base_is_not_found_as_an_unknown_one(stream_url):
    client = client_as(stream_url, "kb-reader-a")
    with pytest.raises(client.exceptions.ResourceNotFoundException) as info:
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("b")))
    assert not any(w in str(info.value) for w in B_WORDS)
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("nobody")))


@pytest.mark.parametrize("role, header", [(None, True), ("kb-reader-untagged", True), ("kb-reader-a", False)])
def test_a_caller_without_a_tenant_is_refused(stream_url, role, header):
    """No IAM caller, a role without the tag, or no request context at all: 403, nothing streamed."""
    client = client_as(stream_url, role, header=header)
    with pytest.raises(client.exceptions.AccessDeniedException) as info:
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("")))
    assert "tenant" in str(info.value)


def test_the_header_is_not_trusted_unless_the_setting_says_so(stream_url, monkeypatch):
    module = load_handler("stream")
    monkeypatch.setattr(module.app, "identity", TenantIdentity(required=True))  # ERAGRAPH_TRUST_REQUEST_CONTEXT off
    client = client_as(stream_url, "kb-reader-a")
    with pytest.raises(client.exceptions.AccessDeniedException) as info:
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
    assert "ERAGRAPH_TRUST_REQUEST_CONTEXT" in str(info.value)


def test_only_the_stream_route_and_health_are_served(stream_url):
    import urllib.error
    import urllib.request

    with urllib.request.urlopen(f"{stream_url}/health") as response:
        assert json.loads(response.read()) == {"status": "ok"}
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(urllib.request.Request(f"{stream_url}/query", data=b'{"query": "x"}', method="POST"))
    assert info.value.code == 404


def test_a_slow_tenant_lookup_holds_only_its_own_request(stream_url, monkeypatch):
    """The caller's tenant is an IAM call (and a rate-bucket write): it is made off the event
    loop, so while one caller's lookup hangs the app still answers others."""
    import urllib.request

    identity = load_handler("stream").app.identity
    lookup, entered, release = identity.tenant_from_headers, threading.Event(), threading.Event()

    def slow_lookup(headers):
        entered.set()
        release.wait(120)  # a bound for a broken test, never reached: the test releases it
        return lookup(headers)

    monkeypatch.setattr(identity, "tenant_from_headers", slow_lookup)
    result: dict = {}

    def stream():
        out = client_as(stream_url, "kb-reader-a").retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
        result["events"] = list(out["stream"])

    caller = threading.Thread(target=stream)
    caller.start()
    try:
        assert entered.wait(60)
        # while the lookup hangs: an app that waited for it would answer only after release.wait's
        # 120 s, so the 60 s limit fails it whatever the machine's load
        with urllib.request.urlopen(f"{stream_url}/health", timeout=60) as response:
            assert json.loads(response.read()) == {"status": "ok"}
        assert not result  # the slow caller is still waiting
    finally:
        release.set()
        caller.join(30)
    assert result["events"][0] == {"output": {"text": "Starglass "}}


def test_trust_comes_from_the_environment():
    assert TenantIdentity.from_env({}).trust_request_context is False
    assert TenantIdentity.from_env({"ERAGRAPH_TRUST_REQUEST_CONTEXT": "true"}).trust_request_context is True
    assert TenantIdentity.from_env({"ERAGRAPH_TRUST_REQUEST_CONTEXT": "false"}).trust_request_context is False


def test_the_docs_recipe_signs_for_the_function_url():
    """The client for the function URL on the Bedrock KB page (docs/bedrock-kb.md): SigV4 with the
    service name ``lambda``."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "bedrock-kb.md").read_text(encoding="utf-8")
    recipe = re.search(r"def sign_as_lambda\(request, \*\*_\):.*\n.*\n", page).group(0)
    scope: dict = {}
    exec(recipe, scope)  # noqa: S102 (the page's own lines)
    client = boto3.client("bedrock-agent-runtime", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE",
                          aws_secret_access_key="secret", endpoint_url="https://abc.lambda-url.us-east-1.on.aws")
    client.meta.events.register("before-sign.bedrock-agent-runtime", scope["sign_as_lambda"])
    seen = []

    class Signed(Exception):
        pass

    def capture(request, **_):
        seen.append(request.headers["Authorization"].decode())
        raise Signed  # sent nowhere

    client.meta.events.register_first("before-send.bedrock-agent-runtime.*", capture)
    with pytest.raises(Signed):
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
    assert "/us-east-1/lambda/aws4_request" in seen[0]


class BedrockNamedGenerator(SlowStreamingGenerator):
    """Streams as the Bedrock generator reports: its Answer names the Bedrock model it called."""

    def stream(self, question, evidence, **_):
        yield "Starglass followed it."
        yield Answer(text="Starglass followed it.", cited_ids=(evidence[0][0],), tokens_in=1000, tokens_out=500,
                     model="bedrock:anthropic.claude-3-haiku-20240307-v1:0")


def test_a_streamed_answer_publishes_its_bedrock_spend(stream_url, capsys):
    """No handler wraps the stream function: each streamed answer's Bedrock calls are priced from
    the ledger's table and flushed as BedrockSpendUSD, the metric the BedrockSpend alarm sums."""
    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.config import DEFAULT_PRICES
    from test_bedrock_spend import emitted

    LAMBDA_ENGINE.get("a", register=False).generator = BedrockNamedGenerator()
    capsys.readouterr()
    out = client_as(stream_url, "kb-reader-a").retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
    assert "citation" in list(out["stream"])[-1]
    price_in, price_out = DEFAULT_PRICES["bedrock:anthropic.claude-3-haiku-20240307-v1:0"]
    deadline = time.monotonic() + 60  # a bound for a metric never flushed: the loop ends when it is
    while "BedrockSpendUSD" not in (metrics := emitted(capsys.readouterr().out)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the metric is flushed as the stream closes, just after its last frame
    value, _, _ = metrics["BedrockSpendUSD"]
    assert value == pytest.approx((1000 * price_in + 500 * price_out) / 1e6)


def test_a_tenant_streaming_its_share_is_throttled_in_every_environment(stream_url):
    """The open streams are counted in the graph table, so a lease taken by another environment
    of the function (here: taken directly) holds this one's slot; another tenant is served."""
    slots = load_handler("stream").app.streams
    assert type(slots).__name__ == "DynamoStreamSlots" and slots.limit == 1
    held, lease = slots.acquire("a")
    assert held.allowed
    try:
        with pytest.raises(client_as(stream_url, "kb-reader-a").exceptions.ThrottlingException) as info:
            client_as(stream_url, "kb-reader-a").retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
        assert "streaming already" in str(info.value)
        out = client_as(stream_url, "kb-reader-b").retrieve_and_generate_stream(**ask(knowledge_base_id("b")))
        assert any("citation" in ev for ev in out["stream"])
    finally:
        slots.release("a", lease)
    out = client_as(stream_url, "kb-reader-a").retrieve_and_generate_stream(**ask(knowledge_base_id("a")))
    assert any("citation" in ev for ev in out["stream"])
    deadline = time.monotonic() + 10  # the stream's own lease is released as it ends (just after its last byte)
    while not slots.acquire("a")[0].allowed:
        assert time.monotonic() < deadline, "the finished stream still holds its slot"
        time.sleep(0.05)
