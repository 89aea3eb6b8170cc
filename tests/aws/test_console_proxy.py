"""``eragraph console --api URL`` (eragraph.entrypoints.console.proxy) against a gateway that
authorizes as API Gateway does (fake_gateway: SigV4 recomputed with botocore from the
credentials it holds, or a JWT's claims) in front of the real query handler, on moto: the
proxy's signature is one API Gateway accepts, the signer's identity (its IAM principal tag, its
JWT claim) is the only thing that picks the tenant, what the browser sends as identity is never
forwarded, and what the API answers reaches the page as it was."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest
from fake_gateway import FakeHttpApi

from aws_helpers import BUCKET, load_handler

A_TEXT = ("Comet observers at the mountain observatory used the great telescope to follow the comet. "
          "The telescope is called Starglass and the comet is named Vellichor. ") * 3
B_TEXT = ("Harbor pilots guided the freighter past the rocky lighthouse at dawn. "
          "The lighthouse is called Quillorn and the freighter is named Marrowind. ") * 3
A_WORDS, B_WORDS = ("Starglass", "Vellichor"), ("Quillorn", "Marrowind")
QUESTION = "Which telescope observed the comet, and which lighthouse guided the freighter?"
KEYS = {"a": ("AKIACONSOLEREADERA", "secret-of-a", "session-of-a"),
        "b": ("AKIACONSOLEREADERB", "secret-of-b", None)}


def credentials(tenant: str, secret: str | None = None):
    from botocore.credentials import Credentials

    key, real, token = KEYS[tenant]
    return Credentials(key, secret or real, token)


@pytest.fixture
def two_tenants(aws_engine):
    """Tenants a and b with one document each; IAM roles tagged a and b (moto's IAM, which the
    query handler reads the caller's tag from)."""
    import boto3

    from eragraph.bootstrap.aws import LAMBDA_ENGINE
    from eragraph.services import ingest, resummarize

    _, env, _ = aws_engine
    env["ERAGRAPH_N_PLANES"] = "6"  # the tenants' engines: fewer ref shards, faster moto reconciles
    for tenant, text in (("a", A_TEXT), ("b", B_TEXT)):
        engine = LAMBDA_ENGINE.get(tenant)
        report = ingest.ingest(engine, [ingest.SourceDoc(source=f"s3://{BUCKET}/tenants/{tenant}/doc.txt",
                                                         text=text, title=tenant)])
        assert report.documents_added == 1
        resummarize.drain(engine)
    iam = boto3.client("iam", region_name="us-east-1")
    for tenant in ("a", "b"):
        iam.create_role(Path="/eragraph/", RoleName=f"console-reader-{tenant}", AssumeRolePolicyDocument="{}",
                        Tags=[{"Key": "eragraph-tenant", "Value": tenant}])
    return aws_engine


@pytest.fixture
def gateway(two_tenants):
    principals = {KEYS[t][0]: (KEYS[t][1], KEYS[t][2], f"arn:aws:sts::123456789012:assumed-role/console-reader-{t}/me")
                  for t in ("a", "b")}
    api = FakeHttpApi(load_handler("query").handler, principals=principals,
                      tokens={"jwt-of-a": {"sub": "user-a", "tenant": "a"}, "jwt-of-b": {"sub": "user-b", "tenant": "b"}})
    url = api.start()
    try:
        yield api, url
    finally:
        api.stop()


@contextmanager
def console(url: str, auth):
    """The console's server (the CLI's) on a free loopback port, forwarding to ``url``."""
    from eragraph.entrypoints.console.proxy import console_server
    from eragraph.entrypoints.console.upstream import Upstream

    server = console_server(Upstream(url, auth), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def signed(tenant: str, secret: str | None = None):
    from eragraph.entrypoints.console.upstream import SigV4

    return SigV4(credentials(tenant, secret), "us-east-1")


def call(url: str, method: str, path: str, body=None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


def shown(raw: bytes, words) -> bool:
    return any(w.encode() in raw for w in words)


# --------------------------------------------------------------------------- (a), (b)

def test_a_signed_caller_reads_its_own_tenant_and_the_gateway_verified_the_signature(gateway):
    api, url = gateway
    with console(url, signed("a")) as a_url, console(url, signed("b")) as b_url:
        status, _, raw = call(a_url, "POST", "/query", {"query": QUESTION, "k": 5})
        assert status == 200, raw
        assert shown(raw, A_WORDS) and not shown(raw, B_WORDS)
        status, _, raw = call(b_url, "POST", "/query", {"query": QUESTION, "k": 5})
        assert status == 200, raw
        assert shown(raw, B_WORDS) and not shown(raw, A_WORDS)
        for proxy in (a_url, b_url):  # GET with the stats of the signer's tenant only
            status, _, raw = call(proxy, "GET", "/stats")
            assert status == 200 and json.loads(raw)["documents"] == 1
        status, _, raw = call(a_url, "GET", "/documents?prefix=s3%3A%2F%2F&limit=5")  # a query string, signed too
        assert status == 200 and b"tenants/a/doc.txt" in raw and b"tenants/b/" not in raw
    arrived = api.seen[0]
    assert arrived["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEYS['a'][0]}/")
    assert "/us-east-1/execute-api/aws4_request" in arrived["authorization"]
    assert arrived["x-amz-security-token"] == "session-of-a"
    assert [s for s, _ in api.answers] == [200] * 5


def test_a_signature_made_with_another_secret_is_refused_by_the_gateway(gateway):
    """The gateway's check is a real one: the same key signed with a wrong secret is a 403,
    whose body reaches the page unchanged."""
    api, url = gateway
    with console(url, signed("a", secret="not-the-secret")) as proxy:
        status, _, raw = call(proxy, "POST", "/query", {"query": QUESTION})
    assert status == 403
    assert raw == api.answers[-1][1] and b"signature we calculated does not match" in raw
    assert not shown(raw, A_WORDS + B_WORDS)


# --------------------------------------------------------------------------- (c)

def test_the_browsers_tenant_header_authorization_and_cookies_are_not_forwarded(gateway):
    api, url = gateway
    with console(url, signed("a")) as proxy:
        status, _, raw = call(proxy, "POST", "/query", {"query": QUESTION, "k": 5},
                              headers={"x-eragraph-tenant": "b", "authorization": "Bearer local-console-token",
                                       "cookie": "session=browser", "x-amz-security-token": "browser-token"})
    assert status == 200, raw
    assert shown(raw, A_WORDS) and not shown(raw, B_WORDS)  # still the signer's tenant
    arrived = api.seen[-1]
    assert "x-eragraph-tenant" not in arrived and "cookie" not in arrived
    assert arrived["authorization"].startswith("AWS4-HMAC-SHA256 ") and "local-console-token" not in arrived["authorization"]
    assert arrived["x-amz-security-token"] == "session-of-a"


# --------------------------------------------------------------------------- (d)

def test_jwt_mode_sends_the_bearer_and_its_claim_picks_the_tenant(gateway, tmp_path):
    from eragraph.entrypoints.console.upstream import Bearer

    api, url = gateway
    api.mode = "jwt"
    token_file = tmp_path / "token.jwt"
    token_file.write_text("jwt-of-b\n", encoding="utf-8")
    with console(url, Bearer(lambda: "jwt-of-a")) as a_proxy, console(url, Bearer.from_file(str(token_file))) as b_proxy:
        status, _, raw = call(a_proxy, "POST", "/query", {"query": QUESTION, "k": 5},
                              headers={"authorization": "Bearer jwt-of-b", "x-eragraph-tenant": "b"})
        assert status == 200 and shown(raw, A_WORDS) and not shown(raw, B_WORDS)
        assert api.seen[-1]["authorization"] == "Bearer jwt-of-a" and "x-eragraph-tenant" not in api.seen[-1]
        status, _, raw = call(b_proxy, "POST", "/query", {"query": QUESTION, "k": 5})
        assert status == 200 and shown(raw, B_WORDS) and not shown(raw, A_WORDS)
        token_file.write_text("jwt-of-a", encoding="utf-8")  # a renewed token is read on the next request
        status, _, raw = call(b_proxy, "POST", "/query", {"query": QUESTION, "k": 5})
        assert status == 200 and shown(raw, A_WORDS) and api.seen[-1]["authorization"] == "Bearer jwt-of-a"
        token_file.write_text("expired-token", encoding="utf-8")
        status, _, raw = call(b_proxy, "GET", "/stats")
        assert status == 401 and json.loads(raw) == {"message": "Unauthorized"}


# --------------------------------------------------------------------------- (e)

def test_the_apis_errors_reach_the_page_unchanged(gateway):
    api, url = gateway
    with console(url, signed("a")) as proxy:
        for body in ({"query": "comet", "mode": "no-such-mode"}, {"query": ""}, b"{not json"):
            status, headers, raw = call(proxy, "POST", "/query", body)
            assert 400 <= status < 500 and status == api.answers[-1][0], raw
            assert raw == api.answers[-1][1] and json.loads(raw)["message"]
            assert headers["content-type"].startswith("application/json")
        status, _, raw = call(proxy, "GET", "/documents/no-such-document")
        assert status == 404 and raw == api.answers[-1][1]
        api.fail_with = (429, {"message": "Too Many Requests"}, {"retry-after": "7"})
        status, headers, raw = call(proxy, "POST", "/query", {"query": "comet"})
        assert status == 429 and json.loads(raw) == {"message": "Too Many Requests"} and headers["retry-after"] == "7"
        api.fail_with = (503, {"message": "Service Unavailable"}, {})
        status, _, raw = call(proxy, "GET", "/stats")
        assert status == 503 and json.loads(raw) == {"message": "Service Unavailable"}


def test_a_dead_api_is_a_502_in_words():
    from eragraph.entrypoints.console.upstream import Bearer

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with console(dead, Bearer(lambda: "t")) as proxy:
        status, headers, raw = call(proxy, "POST", "/query", {"query": "comet"})
        assert status == 502 and headers["content-type"] == "application/json"
        message = json.loads(raw)["message"]
        assert f"the API at {dead} could not be reached" in message and "refused" in message.lower()
        status, _, raw = call(proxy, "GET", "/")  # the console itself is still served
        assert status == 200 and b"<html" in raw.lower()


def test_only_the_apis_routes_are_signed_and_forwarded(gateway):
    """A method and path that is not a route of the API (an admin path, another method on a
    route's path) is a 404 of the proxy: never signed, never sent; the API's routes go through."""
    api, url = gateway
    with console(url, signed("a")) as proxy:
        sent = len(api.answers)
        for method, path in (("GET", "/admin/users"), ("DELETE", "/stats"), ("PUT", "/query"),
                             ("GET", "/documents/a/b"), ("POST", "/2015-03-31/functions/x/invocations")):
            status, _, raw = call(proxy, method, path, {} if method in ("PUT", "POST") else None)
            assert status == 404 and "is not a route of the API" in json.loads(raw)["message"], (method, path)
        assert len(api.answers) == sent  # nothing reached the API
        status, _, _ = call(proxy, "GET", "/stats")
        assert status == 200 and len(api.answers) == sent + 1


# --------------------------------------------------------------------------- the streamed answer

def test_query_stream_is_the_apis_whole_answer_as_ndjson(gateway):
    api, url = gateway
    with console(url, signed("a")) as proxy:
        status, headers, raw = call(proxy, "POST", "/query/stream", {"query": QUESTION, "k": 3})
        assert status == 200 and headers["content-type"] == "application/x-ndjson", raw
        lines = [json.loads(line) for line in raw.decode().splitlines()]
        assert [line["type"] for line in lines] == ["results", "done"]  # no generator deployed: no piece
        assert lines[0]["results"] and shown(json.dumps(lines[0]).encode(), A_WORDS)
        assert "answer" not in lines[0] and lines[1]["answer"] is None and lines[1]["note"]
        method, target, sent = api.requests[-1]
        assert (method, target) == ("POST", "/query") and json.loads(sent) == {"query": QUESTION, "k": 3, "answer": True}
        status, _, raw = call(proxy, "POST", "/query/stream", {"query": "comet", "mode": "no-such-mode"})
        assert status == api.answers[-1][0] and 400 <= status < 500 and raw == api.answers[-1][1]


# --------------------------------------------------------------------------- the command

def test_the_command_serves_the_console_and_signs_with_the_credential_chain(gateway):
    """`eragraph console` in its own process: botocore's chain finds the environment's keys (a's),
    the region is --region's (a loopback URL names none), stderr says the URL to open."""
    import os
    import re
    import subprocess
    import sys

    from aws_helpers import ROOT

    api, url = gateway
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ERAGRAPH_"))}
    key, secret, token = KEYS["a"]
    env.update({"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token,
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(ROOT / "shared")})
    proc = subprocess.Popen([sys.executable, "-m", "eragraph", "console", "--api", url, "--region", "us-east-1",
                             "--port", "0", "--quiet"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+)/#token=([\w-]+) : open it in a browser", line)
        assert found, line + (proc.stderr.read() if proc.poll() is not None else "")
        assert f"console of {url}" in line and "SigV4" in line and "us-east-1" in line
        proxy, run_token = found.group(1), found.group(2)
        status, headers, raw = call(proxy, "GET", "/")  # the page itself needs no token
        assert status == 200 and headers["content-type"].startswith("text/html")
        sent = len(api.answers)
        status, _, raw = call(proxy, "POST", "/query", {"query": QUESTION, "k": 5})  # another local process
        assert status == 401 and len(api.answers) == sent  # refused, nothing signed
        status, _, raw = call(proxy, "POST", "/query", {"query": QUESTION, "k": 5},
                              headers={"x-eragraph-tenant": "b", "authorization": f"Bearer {run_token}"})
        assert status == 200 and shown(raw, A_WORDS) and not shown(raw, B_WORDS)
        assert api.seen[-1]["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={key}/")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("argv,words", [
    (["--api", "http://example.com"], "use https"),
    (["--api", "https://abc.execute-api.us-east-1.amazonaws.com", "--auth", "jwt"], "needs --token-env"),
    (["--api", "https://abc.execute-api.us-east-1.amazonaws.com", "--auth", "iam", "--jwt-file", "t"],
     "go with --auth jwt"),
    (["--api", "https://abc.execute-api.us-east-1.amazonaws.com", "--token-env", "NO_SUCH_VARIABLE_SET"],
     "not set"),
    (["--api", "https://abc.execute-api.us-east-1.amazonaws.com", "--jwt-file", "/no/such/token.jwt"],
     "cannot be read"),
    (["--api", "https://abc.execute-api.us-east-1.amazonaws.com", "--host", "0.0.0.0"], "this machine only"),
])
def test_bad_console_arguments_are_usage_errors_in_words(argv, words, capsys):
    from eragraph.cli.app import main

    assert main(["console", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_another_sites_requests_are_refused_before_anything_is_signed(gateway):
    """A page of another site (its Origin), or one reaching the port by DNS rebinding (its Host),
    gets a 403 and the API is not called: the console signs as its user."""
    api, url = gateway
    with console(url, signed("a")) as proxy:
        port = proxy.rsplit(":", 1)[1]
        before = len(api.seen)
        for headers in ({"origin": "http://evil.example"}, {"host": f"evil.example:{port}"},
                        {"origin": "http://127.0.0.1:1"}, {"host": "evil.example"}):
            for method, path in (("POST", "/query"), ("GET", "/stats"), ("GET", "/")):
                status, _, raw = call(proxy, method, path, {"query": QUESTION} if method == "POST" else None,
                                      headers=headers)
                assert status == 403 and json.loads(raw)["message"], (headers, path)
                assert not shown(raw, A_WORDS + B_WORDS)
        assert len(api.seen) == before
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):  # the console's own pages
            status, _, raw = call(proxy, "POST", "/query", {"query": QUESTION}, headers={"origin": origin})
            assert status == 200 and shown(raw, A_WORDS)
