"""The stream function as ``sam build`` made it: its run.sh started the way the Lambda Web Adapter
starts it (LAMBDA_TASK_ROOT, AWS_LWA_PORT, the template's environment), under Python 3.12 with
only its code folder, its built layers and the runtime's packages on the path, against the
loopback cloud. The adapter's readiness check answers; boto3's ``bedrock-agent-runtime`` client,
with the adapter's request-context header, is refused without a tenant and reaches the tagged
caller's own knowledge base (whose engine, here without a generator, says so in words)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request

import boto3
import pytest
from botocore.config import Config
from lambda_support import event

import deployed as dp
from deployed import SMALL_GRAPH
from eragraph.bootstrap.identity import REQUEST_CONTEXT_HEADER
from eragraph.domain.knowledge_base import knowledge_base_id as salted_id


def knowledge_base_id(tenant: str) -> str:
    """The id the deployed stream function answers for ``tenant`` (salted with the stack's id)."""
    return salted_id(tenant, dp.STACK_UUID)

DEFAULTS = {k: v for k, v in SMALL_GRAPH.items() if not k.startswith("ERAGRAPH_TENANT_")}  # TenantRequired: "true"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def roles(cloud):
    iam = boto3.client("iam", endpoint_url=cloud.endpoint, region_name=dp.REGION,
                       **{k.lower(): v for k, v in dp.FAKE_CREDENTIALS.items()})
    iam.create_role(Path="/eragraph/", RoleName="stream-reader", AssumeRolePolicyDocument="{}",
                    Tags=[{"Key": "eragraph-tenant", "Value": "acme"}])
    iam.create_role(Path="/eragraph/", RoleName="stream-untagged", AssumeRolePolicyDocument="{}")


@contextlib.contextmanager
def started(sam_build, python312, lambda_runtime, cloud, tmp_path_factory, settings: dict[str, str]):
    """The built run.sh started as the adapter starts it, with ``settings`` over the template's
    environment; yields its URL once the readiness check answers."""
    fn = dp.function_for(sam_build, "stream")
    assert fn.handler == "run.sh"
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "python").symlink_to(python312)  # run.sh runs `python`: the runtime's 3.12
    port = free_port()
    env = cloud.environment(fn, settings)
    env.update({"PATH": f"{bin_dir}:{env['PATH']}", "AWS_LWA_PORT": str(port),
                "PYTHONPATH": os.pathsep.join(str(p) for p in [*fn.layer_paths, lambda_runtime])})
    log = tmp_path_factory.mktemp("stream-log") / "stream.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["sh", str(fn.code_dir / "run.sh")], env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # the adapter's readiness check
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    assert json.loads(response.read()) == {"status": "ok"}
                    break
            except OSError:
                assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
                time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def stream_url(sam_build, python312, lambda_runtime, cloud, tmp_path_factory, roles):
    with started(sam_build, python312, lambda_runtime, cloud, tmp_path_factory, DEFAULTS) as url:
        yield url


def client_as(url: str, role: str | None):
    client = boto3.client("bedrock-agent-runtime", region_name=dp.REGION, endpoint_url=url,
                          aws_access_key_id="testing", aws_secret_access_key="testing",
                          config=Config(retries={"max_attempts": 1}))
    context = event("function_url_iam_stream.json")["requestContext"]
    if role is None:
        context.pop("authorizer")
    else:
        context["authorizer"]["iam"]["userArn"] = f"arn:aws:sts::{dp.ACCOUNT}:assumed-role/{role}/s"

    def add_context(request, **_):
        request.headers[REQUEST_CONTEXT_HEADER] = json.dumps(context)

    client.meta.events.register_first("before-send.bedrock-agent-runtime.*", add_context)
    return client


def ask(kb_id: str) -> dict:
    return {"input": {"text": "Who keeps the lighthouse?"}, "retrieveAndGenerateConfiguration": {
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": kb_id, "modelArn": "anthropic.claude-3-haiku-20240307-v1:0"}}}


@pytest.mark.parametrize("role", [None, "stream-untagged", "no-such-role"])
def test_the_built_stream_function_refuses_a_caller_without_a_tenant(stream_url, role):
    client = client_as(stream_url, role)
    with pytest.raises(client.exceptions.AccessDeniedException) as info:
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("acme")))
    assert "tenant" in str(info.value)


def test_the_built_stream_function_reaches_the_callers_knowledge_base(stream_url):
    client = client_as(stream_url, "stream-reader")
    with pytest.raises(client.exceptions.ValidationException) as info:  # SMALL_GRAPH: no generator
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("acme")))
    assert "needs a generator" in str(info.value)
    with pytest.raises(client.exceptions.ResourceNotFoundException):  # an id of no tenant
        client.retrieve_and_generate_stream(**ask(knowledge_base_id("nobody")))


LIGHTHOUSE = ("The keeper of the Skarvik lighthouse is Ingrid Dahl. She lights the lamp at dusk and "
              "writes the ship log every night before the morning watch.")


@pytest.fixture(scope="module")
def answering_url(sam_build, python312, lambda_runtime, cloud, tmp_path_factory, roles, launch):
    """The stream function over tenant acme's one document, its generator an OpenAI-compatible
    stand-in that streams (ERAGRAPH_GENERATOR=openai) and holds its last pieces back until the
    test has read the first event."""
    from sse_support import SSEServer, delta

    dp.upload_and_ingest(cloud, launch("ingest"), {"tenants/acme/lighthouse.txt": LIGHTHOUSE})
    pieces = [delta("Ingrid Dahl "), delta("keeps the "), delta("lighthouse.")]
    server = SSEServer([*pieces, {"id": "c1", "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
                        "data: [DONE]"], hold_before=1, hold_seconds=120)
    settings = {**DEFAULTS, "ERAGRAPH_GENERATOR": "openai", "ERAGRAPH_OPENAI_BASE_URL": server.base_url,
                "ERAGRAPH_OPENAI_MODEL": "stand-in"}
    try:
        with started(sam_build, python312, lambda_runtime, cloud, tmp_path_factory, settings) as url:
            yield url, server
    finally:
        server.close()


def test_the_built_stream_function_streams_the_answer_event_by_event(answering_url):
    """boto3 reads the built function's event stream one event at a time: the first output event
    arrives while the model still holds back the rest, and the citation rests on acme's document."""
    url, server = answering_url
    client = client_as(url, "stream-reader")
    out = client.retrieve_and_generate_stream(**ask(knowledge_base_id("acme")))
    events = iter(out["stream"])
    assert next(events) == {"output": {"text": "Ingrid Dahl "}}
    assert server.sent == 1  # the model has sent one piece: the event left before the answer was written
    server.release.set()
    rest = list(events)
    assert "".join(e["output"]["text"] for e in rest if "output" in e) == "keeps the lighthouse."
    citation = rest[-1]["citation"]
    assert citation["generatedResponsePart"]["textResponsePart"]["text"] == "Ingrid Dahl keeps the lighthouse."
    [uri] = {r["location"]["s3Location"]["uri"] for r in citation["retrievedReferences"]}
    assert uri.endswith("/tenants/acme/lighthouse.txt")
