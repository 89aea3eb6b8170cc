"""`eragraph smoke` before any step runs: its arguments, and the stack it is pointed at (moto's
CloudFormation). Each refusal is one line on stderr and the CLI's exit status; the run itself is
tests/deployed/test_deployed_smoke.py."""

from __future__ import annotations

import json

import pytest

from eragraph.cli.app import main

REGION = "us-east-1"


@pytest.fixture
def cloudformation(monkeypatch):
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        import boto3

        yield boto3.client("cloudformation", region_name=REGION)


def stack(client, name: str, outputs: dict[str, str], parameters: dict[str, str]) -> None:
    body = {"Parameters": {k: {"Type": "String"} for k in parameters},
            "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
    client.create_stack(StackName=name, TemplateBody=json.dumps(body),
                        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()])


def run(capsys, *argv: str) -> tuple[int, str]:
    status = main(["smoke", "--region", REGION, *argv])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("callers", [["a"], ["a", "b", "c"]])
def test_it_needs_exactly_two_callers(capsys, callers):
    argv = ["--stack", "eragraph"] + [x for c in callers for x in ("--caller", c)]
    status, err = run(capsys, *argv)
    assert status == 2
    assert f"--caller: give exactly two (got {len(callers)})" in err


def test_an_unknown_stack_is_an_error_naming_it(cloudformation, capsys):
    status, err = run(capsys, "--stack", "nope", "--caller", "a", "--caller", "b")
    assert status == 1
    assert err.startswith("eragraph: the stack nope in us-east-1 cannot be read:") and "does not exist" in err


def test_a_stack_without_the_apis_output_is_refused(cloudformation, capsys):
    stack(cloudformation, "other", {"DocumentsBucketName": "b"}, {"Stage": "dev"})
    status, err = run(capsys, "--stack", "other", "--caller", "a", "--caller", "b")
    assert status == 1
    assert "the stack other has no output ApiUrl: is it an Eragraph stack?" in err


def test_a_plain_http_api_url_off_this_machine_is_refused(cloudformation, capsys):
    stack(cloudformation, "eragraph", {"DocumentsBucketName": "b", "ApiUrl": "http://api.example.com"},
          {"Stage": "dev"})
    status, err = run(capsys, "--stack", "eragraph", "--caller", "a", "--caller", "b")
    assert status == 2
    assert "use https" in err


def test_a_profile_that_does_not_exist_is_a_usage_error(cloudformation, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    stack(cloudformation, "eragraph", {"DocumentsBucketName": "b",
                                       "ApiUrl": "https://abc123.execute-api.us-east-1.amazonaws.com"},
          {"Stage": "dev"})
    status, err = run(capsys, "--stack", "eragraph", "--caller", "ghost", "--caller", "jwt-file:/nonexistent/jwt")
    assert status == 2
    assert "--caller ghost:" in err and "ghost" in err
