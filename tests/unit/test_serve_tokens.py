"""`eragraph serve --principals-file` (bootstrap.serve_tokens): the file is validated when the
server starts, each fault in words naming the token's position (never the token); a request's
bearer token gives its principals, the operator's reads everything, any other is refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eragraph.bootstrap.principals import PrincipalsForbidden
from eragraph.bootstrap.serve_tokens import MAX_TOKENS, TokenFileError, TokenPrincipals
from eragraph.entrypoints.http.guard import LocalGuard

A, B = "a" * 20, "b-" * 10


def test_tokens_give_their_principals_and_the_operator_reads_everything():
    callers = TokenPrincipals.parse(json.dumps({A: ["group:finance", "user:alice"], B: "group:board, user:bob"}),
                                    operator="op" * 10, default="deny")
    who = callers.caller({"authorization": f"Bearer {A}"})
    assert who.principals == ("group:finance", "user:alice") and not who.may_read(None)
    assert callers.caller({"authorization": f"bearer  {B} "}).principals == ("group:board", "user:bob")
    assert callers.caller({"authorization": "Bearer " + "op" * 10}) is None
    for headers in ({}, {"authorization": "Bearer " + "z" * 20}, {"authorization": f"Basic {A}"}):
        with pytest.raises(PrincipalsForbidden, match="no token of its principals file"):
            callers.caller(headers)


@pytest.mark.parametrize("text, words", [
    ("{", "not JSON"),
    ("[]", "a JSON object mapping each token"),
    ("{}", "names no token"),
    (json.dumps({"short": ["group:a"]}), "token 1: a token is 16-512 characters"),
    (json.dumps({"a a a a a a a a a a": ["group:a"]}), "visible ASCII"),
    (json.dumps({A: []}), "token 1: its principals are a list"),
    (json.dumps({A: {"group": "a"}}), "token 1: its principals are a list"),
    (json.dumps({A: ["finance"]}), r"token 1\[0\]: 'finance' is not a principal"),
    (json.dumps({A: ["group:a"] * 101}), "101 principals; at most 100"),
    ('{"%s": ["group:a"], "%s": ["group:b"]}' % (A, A), "token 2: the same token as an earlier one"),
    (json.dumps({"op" * 10: ["group:a"]}), "the operator's --token"),
])
def test_a_bad_file_is_refused_in_words_without_its_tokens(text, words):
    with pytest.raises(TokenFileError, match=words) as err:
        TokenPrincipals.parse(text, "p.json", operator="op" * 10)
    assert A not in str(err.value) and "op" * 10 not in str(err.value)


def test_the_size_and_the_count_are_capped(tmp_path):
    many = {f"{i:020d}": "group:a" for i in range(MAX_TOKENS + 1)}
    with pytest.raises(TokenFileError, match=f"{MAX_TOKENS + 1} tokens; at most {MAX_TOKENS}"):
        TokenPrincipals.parse(json.dumps(many))
    big = tmp_path / "big.json"
    big.write_text(json.dumps({A: "group:" + "a" * (1 << 20)}))
    with pytest.raises(TokenFileError, match="larger than"):
        TokenPrincipals.load(big)
    with pytest.raises(TokenFileError, match="cannot be read"):
        TokenPrincipals.load(tmp_path / "missing.json")


def test_the_guard_takes_the_files_tokens_and_the_operators():
    callers = TokenPrincipals.parse(json.dumps({A: "group:a"}))
    for guard in (LocalGuard(True, 80, callers=callers), LocalGuard(True, 80, token="op" * 10, callers=callers)):
        headers = {"host": "127.0.0.1"}
        assert guard.check("GET", "/stats", {**headers, "authorization": f"Bearer {A}"}) is None
        assert guard.check("GET", "/stats", {**headers, "authorization": "Bearer " + "x" * 20})[0] == 401
        assert guard.check("GET", "/stats", headers)[0] == 401
        assert guard.check("GET", "/health", headers) is None
    both = LocalGuard(True, 80, token="op" * 10, callers=callers)
    assert both.check("GET", "/stats", {"host": "127.0.0.1", "authorization": "Bearer " + "op" * 10}) is None


def test_serve_refuses_a_bad_file_before_serving(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"short": "group:a"}))
    out = subprocess.run([sys.executable, "-m", "eragraph", "serve", "--store", str(tmp_path / "none"),
                          "--principals-file", str(bad)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "--principals-file" in out.stderr and "16-512 characters" in out.stderr
