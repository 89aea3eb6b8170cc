"""Who is asking, on every door (issue 59; tests/access_doors.py): the query function's routes
(API Gateway events of the real sample, a JWT authorizer's claims or an IAM caller's principals
tag), `eragraph serve` with a principals file (a real server, its bearer tokens) and the stream
function's app (the Lambda Web Adapter's request-context header of an IAM caller). On each door
a caller without group:board gets none of its documents' text, titles, document or node ids,
summaries included; one with it gets them; one without principals is refused."""

from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("aws_lambda_powertools")
pytest.importorskip("mcp")

from access_doors import STREAMED, check_door, http_ask, lambda_doors, requests, store, streamed_requests  # noqa: E402

from eragraph.bootstrap.principals import PrincipalIdentity  # noqa: E402

ON = {"ERAGRAPH_PRINCIPALS": "identity"}
OUTSIDER, INSIDER, NOBODY = "outsider", "insider", "nobody"


@pytest.fixture(scope="module")
def data():
    return store()


def _secret_doc(data) -> str:
    return sorted(data.secret)[0]


def _mcp(engine_of):
    from eragraph.entrypoints.mcp import build_server, event_response

    server = build_server(engine_of)
    return lambda event, body, tenant, caller=None: event_response(server, event, body, tenant, caller)


def test_every_door_of_the_query_function_answers_inside_the_jwt_callers_principals(data):
    from eragraph.entrypoints.http.api import make_app

    engine_of = lambda _t: data.engine  # noqa: E731
    app = make_app(engine_of, tenant_of=lambda _e: "", principals=PrincipalIdentity.from_env(ON).caller,
                   mcp=_mcp(engine_of))
    claims = {OUTSIDER: {"sub": "alice", "cognito:groups": "[finance]"},
              INSIDER: {"sub": "carol", "cognito:groups": "[board]"},
              NOBODY: {"cognito:groups": "[board]"}}  # no subject: refused, never the tenant
    doors = lambda_doors(app, lambda who: {"jwt": {"claims": claims[who], "scopes": None}}, data.engine,
                         _secret_doc(data))
    assert set(doors) == set(requests(data.engine, "")), "a door of the query function is not checked"
    for name, ask in doors.items():
        check_door(name, ask, OUTSIDER, INSIDER, data, refused=NOBODY)


def test_the_query_function_reads_an_iam_callers_principals_from_its_tag(data):
    from test_principals import Tags

    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.entrypoints.http.api import make_app

    tags = Tags({("role", "analyst"): {"eragraph-principals": "group:finance"},
                 ("role", "director"): {"eragraph-principals": "group:board user:carol"},
                 ("role", "untagged"): {}})
    identity = TenantIdentity(tag="eragraph-tenant", required=False, principal_tags=tags)
    engine_of = lambda _t: data.engine  # noqa: E731
    app = make_app(engine_of, tenant_of=identity.tenant, mcp=_mcp(engine_of),
                   principals=PrincipalIdentity.from_env(ON, iam_tags=identity.iam_tags).caller)
    roles = {OUTSIDER: "analyst", INSIDER: "director", NOBODY: "untagged"}

    def authorizer(who):
        return {"iam": {"userArn": f"arn:aws:sts::123456789012:assumed-role/{roles[who]}/s",
                        "accountId": "123456789012"}}
    doors = lambda_doors(app, authorizer, data.engine, _secret_doc(data))
    for name in ("query", "kb_retrieve", "chat", "mcp_retrieve"):
        check_door(name, doors[name], OUTSIDER, INSIDER, data, refused=NOBODY)
    assert sorted(set(tags.reads)) == [("role", "analyst"), ("role", "director"), ("role", "untagged")]


def _serving(server):
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def test_eragraph_serve_answers_each_token_inside_its_principals_on_every_door(data, tmp_path):
    pytest.importorskip("uvicorn")
    from eragraph.bootstrap.serve_tokens import TokenPrincipals
    from eragraph.entrypoints.http.server import make_server

    tokens = {OUTSIDER: "o" * 24, INSIDER: "i" * 24}
    path = tmp_path / "principals.json"
    path.write_text(json.dumps({tokens[OUTSIDER]: ["group:finance"], tokens[INSIDER]: "group:board,user:carol"}))
    server = _serving(make_server(data.engine, port=0, token="op" * 12,
                                  callers=TokenPrincipals.load(path, operator="op" * 12)))
    try:
        def door(method, path_, body):
            def ask(who):
                token = tokens.get(who, "not-a-token-of-the-file")
                return http_ask(server.url, method, path_, body, {"authorization": f"Bearer {token}"})
            return ask
        every = {**requests(data.engine, _secret_doc(data)), **streamed_requests(data.engine)}
        for name, request in every.items():
            check_door(name, door(*request), OUTSIDER, INSIDER, data, refused=NOBODY)
        # the operator's token reads everything; none at all is a 401
        status, text = http_ask(server.url, "POST", "/query", {"query": "telescope", "k": 20, "mode": "dense"},
                                {"authorization": "Bearer " + "op" * 12})
        assert status == 200 and {r["doc_id"] for r in json.loads(text)["results"]} & data.secret
        assert http_ask(server.url, "POST", "/query", {"query": "telescope"}, {})[0] == 401
    finally:
        server.shutdown()
        server.server_close()


def test_the_stream_function_answers_inside_the_iam_callers_principals_tag(data):
    pytest.importorskip("uvicorn")
    from test_principals import Tags

    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.entrypoints.http.server import ApiApp, ApiServer

    tags = Tags({("role", "analyst"): {"eragraph-principals": "group:finance"},
                 ("role", "director"): {"eragraph-principals": "group:board"}})
    identity = TenantIdentity(tag="eragraph-tenant", required=False, trust_request_context=True,
                              principal_tags=tags)
    principals = PrincipalIdentity.from_env({**ON, "ERAGRAPH_TRUST_REQUEST_CONTEXT": "true"},
                                            iam_tags=identity.iam_tags)
    app = ApiApp(None, identity=identity, engines=lambda _t: data.engine, stream_only=True,
                 principals=principals.caller_from_headers)
    server = _serving(ApiServer(None, port=0, app=app))
    roles = {OUTSIDER: "analyst", INSIDER: "director", NOBODY: "intern"}

    def ask(who):
        context = {"accountId": "123456789012", "requestId": "r-1", "authorizer": {"iam": {
            "userArn": f"arn:aws:sts::123456789012:assumed-role/{roles[who]}/s", "accountId": "123456789012"}}}
        method, path, body = streamed_requests(data.engine)["kb_stream"]
        return http_ask(server.url, method, path, body, {"x-amzn-request-context": json.dumps(context)})
    try:
        check_door("kb_stream (stream function)", ask, OUTSIDER, INSIDER, data, refused=NOBODY)
    finally:
        server.shutdown()
        server.server_close()


def test_every_streamed_door_is_checked():
    from eragraph.entrypoints.http.routes import ROUTES

    streamed = {r.path for r in ROUTES if r.asgi and r.path != "/mcp"}
    assert streamed == {"/query/stream", "/retrieveAndGenerateStream", "/v1/chat/completions"}, streamed
    assert len(STREAMED) == len(streamed)


def test_a_retrieve_and_generate_session_is_continued_by_its_own_principals_only(data):
    from eragraph.entrypoints.http.api import make_app

    engine_of = lambda _t: data.engine  # noqa: E731
    app = make_app(engine_of, tenant_of=lambda _e: "", principals=PrincipalIdentity.from_env(ON).caller)
    claims = {INSIDER: {"sub": "carol", "cognito:groups": "[board]"},
              "colleague": {"sub": "dave", "cognito:groups": "[board]"},
              OUTSIDER: {"sub": "alice", "cognito:groups": "[finance]"}}
    method, path, body = requests(data.engine, "")["kb_retrieve_and_generate"]
    from kb_support import kb_event

    def ask(who, extra=None):
        out = app.resolve(kb_event(method, path, {**body, **(extra or {})},
                                   {"jwt": {"claims": claims[who], "scopes": None}}), None)
        return out["statusCode"], json.loads(out["body"])

    status, first = ask(INSIDER)
    assert status == 200 and first["sessionId"]
    session = {"sessionId": first["sessionId"]}
    assert ask(INSIDER, session)[0] == 200
    for other in (OUTSIDER, "colleague"):  # the earlier answer came from carol's view
        status, refused = ask(other, session)
        assert status == 400 and "is not valid" in refused["message"], (other, refused)
