"""`eragraph smoke` end to end against a stack of the built functions on the loopback cloud
(loopback_stack.py): the command finds the stack through CloudFormation's DescribeStacks (moto,
``--endpoint-url``), uploads to the bucket, waits for done through the status API, asks every door
through the API's URL from the stack's outputs, signed with SigV4 as two IAM users tagged with two
tenants, and deletes the document. The functions run with the template's tenancy defaults
(TenantRequired, the per-tenant rate limit) and its Bedrock generator, answered inside botocore
by the driver's stub.

A run passes every step, with IAM callers and with JWT callers (the same functions behind a JWT-
authorized API, ApiAuthMode=JWT); a stack missing a route fails that door's step and exits 1; a
document that no ingest function reads fails the wait, skips the doors and still deletes it."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from loopback_stack import (EventSources, LoopbackApi, RemovalNotifications, client, create_stack, template_value,
                            tenant_callers)

import deployed as dp
from deployed import SMALL_GRAPH
from eragraph.cli.app import main

pytestmark = [pytest.mark.timeout(300),  # moto keeps the stack's one placeholder resource as a record
              pytest.mark.filterwarnings("ignore:Tried to parse AWS")]

STACK = "eragraph-smoke"
JWT_STACK = "eragraph-smoke-jwt"
# the template's tenancy defaults (TenantRequired, TenantRateLimit/Burst), not the suite's opt-outs
DEFAULTS = {k: v for k, v in SMALL_GRAPH.items() if not k.startswith("ERAGRAPH_TENANT_")}
STEPS = ["callers", "upload", "ingested", "http-query", "kb-retrieve", "kb-generate", "mcp", "openai-chat",
         "tenant-boundary", "delete"]
DOORS = STEPS[3:9]


def parameters() -> dict[str, str]:
    """The stack's parameters the smoke run reads, at the template's defaults."""
    declared = dp.load_template(dp.ROOT / "template.yaml")["Parameters"]
    return {k: str(declared[k].get("Default", "")) for k in
            ("Stage", "DocumentPrefix", "DocumentSuffix", "ApiAuthMode", "TextModelId", "TenantClaim")}


@pytest.fixture(scope="module")
def stack(cloud, launch, tmp_path_factory):
    ingest, summarize = launch("ingest", DEFAULTS, start=False), launch("summarize", DEFAULTS, start=False)
    query = launch("query", {**DEFAULTS, "ERAGRAPH_GENERATOR": "bedrock"}, start=False, stub_bedrock=1024)
    with ThreadPoolExecutor(3) as pool:  # three cold starts at once: most of each is waiting on imports
        ready = list(pool.map(lambda proc: proc.start(), (ingest, summarize, query)))
    assert all(r.get("ready") for r in ready), ready
    params = parameters()
    credentials = tmp_path_factory.mktemp("smoke-profiles") / "credentials"
    principals = tenant_callers(cloud, {"smoke-acme": "acme", "smoke-globex": "globex"}, credentials)
    api = LoopbackApi(query, cloud, template_value("ApiAccessLogGroup", "LogGroupName", params), principals)
    url = api.start()
    create_stack(cloud, STACK, url, params)
    # the same functions behind a JWT-authorized API (ApiAuthMode=JWT), each token's claims naming its tenant
    tokens = {f"token-of-{t}": {"sub": f"user-of-{t}", "tenant": t} for t in ("acme", "globex")}
    jwt_api = LoopbackApi(query, cloud, template_value("ApiAccessLogGroup", "LogGroupName", params), tokens=tokens,
                          stream="access-jwt")
    create_stack(cloud, JWT_STACK, jwt_api.start(), {**params, "ApiAuthMode": "JWT"})
    for token in tokens:
        (credentials.parent / token).write_text(token + "\n")
    events = EventSources(cloud, ingest, summarize).start()
    removals = RemovalNotifications().install()
    saved = os.environ.get("AWS_SHARED_CREDENTIALS_FILE")
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(credentials)
    try:
        yield {"api": api, "jwt_api": jwt_api, "events": events, "params": params, "cloud": cloud,
               "tokens": credentials.parent}
    finally:
        if saved is None:
            os.environ.pop("AWS_SHARED_CREDENTIALS_FILE", None)
        else:
            os.environ["AWS_SHARED_CREDENTIALS_FILE"] = saved
        removals.remove()
        events.stop()
        api.stop()
        jwt_api.stop()


def smoke(stack, capsys, *extra: str, json_out: bool = True, name: str = STACK,
          callers: tuple[str, str] = ("smoke-acme", "profile:smoke-globex")) -> tuple[int, dict | str]:
    capsys.readouterr()
    status = main(["smoke", "--stack", name, "--region", dp.REGION, "--endpoint-url", stack["cloud"].endpoint,
                   "--caller", callers[0], "--caller", callers[1], "--poll", "0.3", *extra]
                  + (["--json"] if json_out else []))
    out = capsys.readouterr().out
    return status, (json.loads(out) if json_out else out)


def by_name(report: dict) -> dict[str, dict]:
    return {s["name"]: s for s in report["steps"]}


def test_every_step_passes_against_the_loopback_stack(stack, capsys):
    status, report = smoke(stack, capsys, "--timeout", "60")
    steps = by_name(report)
    assert [s["name"] for s in report["steps"]] == STEPS
    assert {n: s["status"] for n, s in steps.items()} == dict.fromkeys(STEPS, "pass"), \
        json.dumps(report["steps"], indent=1) + "\n".join(stack["events"].failures)
    assert status == 0 and report["ok"] is True
    assert stack["events"].failures == []
    assert steps["callers"]["detail"] == "profile:smoke-acme is tenant acme, profile:smoke-globex is tenant globex"
    # the document went under the first caller's tenant, and is gone from the bucket
    cloud = stack["cloud"]
    assert steps["upload"]["detail"].startswith(f"put s3://{cloud.bucket}/tenants/acme/eragraph-smoke-")
    key = steps["upload"]["detail"].split(f"s3://{cloud.bucket}/", 1)[1]
    assert "Contents" not in cloud.s3.list_objects_v2(Bucket=cloud.bucket, Prefix=key)
    # every door's request id is the API's, in the access log group the report names, on its route
    params = stack["params"]
    query_log = template_value("QueryLogGroup", "LogGroupName", params)
    access_log = template_value("ApiAccessLogGroup", "LogGroupName", params)
    logged = {line["requestId"]: line for line in stack["api"].access_log()}
    routes = {"http-query": "POST /query", "kb-retrieve": "POST /knowledgebases/{knowledgeBaseId}/retrieve",
              "kb-generate": "POST /retrieveAndGenerate", "mcp": "POST /mcp",
              "openai-chat": "POST /v1/chat/completions", "tenant-boundary": "POST /query"}
    for name, route in routes.items():
        step = steps[name]
        assert step["log_groups"] == [query_log, access_log], step
        assert logged[step["request_id"]]["route"] == route and logged[step["request_id"]]["status"] == "200", step
    assert steps["ingested"]["log_groups"] == [template_value(f"{f}LogGroup", "LogGroupName", params)
                                               for f in ("Ingest", "Summarize")]
    # the boundary: the second tenant's caller asked and was refused, as itself
    assert logged[steps["tenant-boundary"]["request_id"]]["callerArn"].endswith(":user/eragraph/smoke-smoke-globex")
    assert "ResourceNotFoundException" in steps["tenant-boundary"]["detail"]


def test_a_jwt_stack_with_bearer_callers(stack, capsys):
    folder = stack["tokens"]
    status, report = smoke(stack, capsys, "--timeout", "60", name=JWT_STACK,
                           callers=(f"jwt-file:{folder / 'token-of-acme'}", f"jwt-file:{folder / 'token-of-globex'}"))
    steps = by_name(report)
    assert {n: s["status"] for n, s in steps.items()} == dict.fromkeys(STEPS, "pass"), json.dumps(report, indent=1)
    assert status == 0
    assert steps["callers"]["detail"].endswith("token-of-acme is tenant acme, jwt-file:" + str(folder / "token-of-globex")
                                               + " is tenant globex")
    logged = {line["requestId"]: line for line in stack["jwt_api"].access_log()}
    assert logged[steps["kb-retrieve"]["request_id"]]["jwtTenant"] == "acme"  # the KB client sent the bearer token
    assert logged[steps["tenant-boundary"]["request_id"]]["jwtTenant"] == "globex"


def test_a_missing_route_fails_its_door_and_the_exit_status(stack, capsys):
    api = stack["api"]
    routes = api.routes
    api.routes = [r for r in routes if r[0] != "POST /mcp"]  # a stack deployed without the MCP route
    try:
        status, out = smoke(stack, capsys, "--timeout", "60", json_out=False)
    finally:
        api.routes = routes
    assert status == 1
    lines = out.splitlines()
    (mcp,) = [ln for ln in lines if ln.split()[1:2] == ["mcp"]]
    assert mcp.startswith("FAIL") and "HTTP 404, not 200: Not Found" in mcp, out
    assert sum(ln.startswith("PASS") for ln in lines) == len(STEPS) - 1, out
    assert lines[-1] == f"{len(STEPS)} steps: {len(STEPS) - 1} passed, 1 failed, 0 skipped"
    # the failed step's request id is the gateway's refusal, in the access log
    rid = lines[lines.index(mcp) + 1].split("request ", 1)[1].split(";")[0]
    assert {"requestId": rid, "route": "-", "status": "404"}.items() <= next(
        line for line in api.access_log() if line["requestId"] == rid).items()


def test_a_document_never_done_fails_the_wait_and_skips_the_doors(stack, capsys):
    stack["events"].paused.set()  # no ingest function reads the queue
    try:
        status, report = smoke(stack, capsys, "--timeout", "2")
    finally:
        stack["events"].paused.clear()
    steps = by_name(report)
    assert status == 1 and report["ok"] is False
    assert steps["ingested"]["status"] == "fail"
    assert steps["ingested"]["detail"] == "not done within 2 s (status: not seen)"
    assert steps["ingested"]["request_id"]  # the last status read's
    assert {steps[d]["status"] for d in DOORS} == {"skip"}
    assert steps["delete"]["status"] == "pass"  # cleaned up all the same
    key = steps["upload"]["detail"].split(f"s3://{stack['cloud'].bucket}/", 1)[1]
    assert "Contents" not in client(stack["cloud"], "s3").list_objects_v2(Bucket=stack["cloud"].bucket, Prefix=key)
