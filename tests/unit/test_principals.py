"""The API caller's principals from its identity (bootstrap.principals): a JWT's subject and
groups claim (a list, or API Gateway's "[a b]" text), a Lambda authorizer's context; off by
default (the operator); on, a caller without an identity, a subject or a valid name is refused."""

from __future__ import annotations

import pytest

from eragraph.bootstrap.principals import PrincipalIdentity, PrincipalsForbidden


def jwt(claims: dict) -> dict:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims}}}}


ON = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity"})


def test_off_by_default_the_caller_is_the_operator():
    assert PrincipalIdentity.from_env({}).caller(jwt({"sub": "alice"})) is None


@pytest.mark.parametrize("groups", [["finance", "board"], "[finance board]", "finance,board"])
def test_jwt_subject_and_groups(groups):
    who = ON.caller(jwt({"sub": "alice", "cognito:groups": groups}))
    assert who.principals == ("group:board", "group:finance", "user:alice")
    assert who.may_read(["group:board"]) and not who.may_read(["user:bob"]) and who.may_read(None)


def test_a_configured_groups_claim_and_a_lambda_authorizer():
    identity = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity", "ERAGRAPH_GROUPS_CLAIM": "roles",
                                           "ERAGRAPH_ACCESS_DEFAULT": "deny"})
    who = identity.caller({"requestContext": {"authorizer": {"lambda": {"sub": "bob", "roles": ["legal"]}}}})
    assert who.principals == ("group:legal", "user:bob") and not who.may_read(None)


@pytest.mark.parametrize("event, words", [
    ({"requestContext": {}}, "carries none"),
    ({"requestContext": {"authorizer": {"iam": {"userArn": "arn:aws:iam::1:user/x"}}}}, "does not read IAM"),
    (jwt({"cognito:groups": ["finance"]}), "no subject"),
    (jwt({"sub": "alice", "cognito:groups": ["fin ance"]}), "no valid principal"),
])
def test_fail_closed(event, words):
    with pytest.raises(PrincipalsForbidden, match=words):
        ON.caller(event)


class Tags:
    """ports.identity.PrincipalTags in memory: each principal's tags, and the reads made."""

    def __init__(self, tags: dict) -> None:
        self.by_name, self.reads = tags, []

    def tags(self, kind: str, name: str):
        self.reads.append((kind, name))
        found = self.by_name.get((kind, name))
        if found == "denied":
            from eragraph.ports.identity import LookupFailed

            raise LookupFailed("AccessDenied")
        return found


def iam(arn: str, account: str = "123456789012") -> dict:
    return {"requestContext": {"accountId": account, "authorizer": {"iam": {"userArn": arn, "accountId": account}}}}


def test_an_iam_callers_principals_are_its_tag_read_once_with_its_tenant_tag():
    from eragraph.bootstrap.identity import TenantIdentity

    tags = Tags({("role", "analyst"): {"eragraph-tenant": "t-a", "eragraph-principals": "group:finance  user:alice"},
                 ("role", "intern"): {"eragraph-tenant": "t-a"},
                 ("role", "odd"): {"eragraph-principals": "group:fin,group:ance"},
                 ("role", "bad"): {"eragraph-principals": "finance"},
                 ("role", "locked"): "denied"})
    tenants = TenantIdentity(tag="eragraph-tenant", principal_tags=tags)
    who = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity"}, iam_tags=tenants.iam_tags)
    event = iam("arn:aws:sts::123456789012:assumed-role/analyst/session-1")
    assert tenants.tenant(event) == "t-a"
    assert who.caller(event).principals == ("group:finance", "user:alice")
    assert tags.reads == [("role", "analyst")]  # one read serves the tenant and the principals
    assert who.caller(iam("arn:aws:sts::123456789012:assumed-role/odd/s")).principals == ("group:ance", "group:fin")
    for arn, words in (("arn:aws:sts::123456789012:assumed-role/intern/s", "no tag 'eragraph-principals'"),
                       ("arn:aws:sts::123456789012:assumed-role/bad/s", "no valid principal"),
                       ("arn:aws:sts::123456789012:assumed-role/locked/s", "could not be read"),
                       ("arn:aws:iam::123456789012:root", "no tag"),
                       ("arn:aws:sts::999999999999:assumed-role/analyst/s", "no tag")):  # another account's
        with pytest.raises(PrincipalsForbidden, match=words):
            who.caller(iam(arn))
    long = Tags({("user", "u"): {"eragraph-principals": "group:a " * 40}})
    reader = TenantIdentity(principal_tags=long)
    with pytest.raises(PrincipalsForbidden, match="longer than 256"):
        PrincipalIdentity(True, iam_tags=reader.iam_tags).caller(iam("arn:aws:iam::123456789012:user/u"))


def test_a_configured_principals_tag():
    from eragraph.bootstrap.identity import TenantIdentity

    tags = Tags({("user", "bob"): {"team": "group:legal", "eragraph-principals": "group:board"}})
    who = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity", "ERAGRAPH_PRINCIPALS_TAG": "team"},
                                     iam_tags=TenantIdentity(principal_tags=tags).iam_tags)
    assert who.caller(iam("arn:aws:iam::123456789012:user/bob")).principals == ("group:legal",)


def test_behind_the_web_adapter_the_request_context_header_only_where_trusted():
    import json

    tags = {("role", "analyst"): {"eragraph-principals": "group:finance"}}
    from eragraph.bootstrap.identity import TenantIdentity

    reader = TenantIdentity(principal_tags=Tags(tags))
    context = json.dumps(iam("arn:aws:sts::123456789012:assumed-role/analyst/s")["requestContext"])
    trusted = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity", "ERAGRAPH_TRUST_REQUEST_CONTEXT": "true"},
                                         iam_tags=reader.iam_tags)
    assert trusted.caller_from_headers({"x-amzn-request-context": context}).principals == ("group:finance",)
    with pytest.raises(PrincipalsForbidden, match="not a JSON object"):
        trusted.caller_from_headers({"x-amzn-request-context": "[1]"})
    with pytest.raises(PrincipalsForbidden, match="carries none"):
        trusted.caller_from_headers({})
    untrusted = PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "identity"}, iam_tags=reader.iam_tags)
    with pytest.raises(PrincipalsForbidden, match="not trusted"):
        untrusted.caller_from_headers({"x-amzn-request-context": context})
    assert PrincipalIdentity.from_env({}).caller_from_headers({"x-amzn-request-context": context}) is None


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError):
        PrincipalIdentity.from_env({"ERAGRAPH_PRINCIPALS": "yes"})


def test_post_query_answers_inside_the_jwt_callers_view_and_refuses_one_without_a_subject():
    """The real API Gateway event of POST /query (tests/events), with a JWT authorizer's claims."""
    import json
    from dataclasses import replace
    from pathlib import Path

    pytest.importorskip("aws_lambda_powertools")
    from support import make_engine, synthetic_docs

    from eragraph.entrypoints.http.api import make_app
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain

    engine = make_engine()
    docs = synthetic_docs(12)
    secret = {d.doc_id for d in docs[::2]}
    ingest(engine, [replace(d, metadata={"access": ["group:board"]}) if d.doc_id in secret else d for d in docs])
    drain(engine)
    app = make_app(lambda _t: engine, tenant_of=lambda _e: "", principals=ON.caller)
    event = json.loads((Path(__file__).parents[1] / "events" / "api_query_valid.json").read_text())
    event["body"] = json.dumps({"query": "telescope comet recipe league", "k": 10, "mode": "collapsed"})

    def ask(claims):
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
        out = app.resolve(event, None)
        return out["statusCode"], json.loads(out["body"])

    status, body = ask({"sub": "alice"})
    assert status == 200 and body["results"]
    assert not {r["doc_id"] for r in body["results"]} & secret
    status, body = ask({"sub": "carol", "cognito:groups": "[board]"})
    assert status == 200 and {r["doc_id"] for r in body["results"]} & secret
    status, body = ask({"cognito:groups": "[board]"})
    assert status == 403 and "no subject" in body["message"]

    def get(path, claims):
        got = dict(event, rawPath=path, body=None, routeKey="$default",
                   requestContext={**event["requestContext"], "http": {**event["requestContext"]["http"],
                                                                       "method": "GET", "path": path},
                                   "authorizer": {"jwt": {"claims": claims, "scopes": None}}})
        out = app.resolve(got, None)
        return out["statusCode"], json.loads(out["body"])

    hidden = next(iter(engine.graph.get_document(next(iter(secret))).chunk_ids))
    assert get(f"/nodes/{hidden}", {"sub": "alice"})[0] == 404
    assert get(f"/nodes/{hidden}", {"sub": "carol", "cognito:groups": "[board]"})[0] == 200
    for claims, shown in (({"sub": "alice"}, False), ({"sub": "carol", "cognito:groups": "[board]"}, True)):
        status, page = get("/graph/layers/0", claims)
        ids = {n["id"] for n in page["nodes"]}
        assert status == 200 and ids and (hidden in ids) is shown
