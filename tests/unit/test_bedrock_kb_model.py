"""RetrieveAndGenerate's ``modelArn`` with the Bedrock generator (the AWS profile's), through
boto3's ``bedrock-agent-runtime`` client against the shared resolver (as test_bedrock_kb_generate),
with the Bedrock runtime answered inside botocore (Stubber): the model the request names is the
one Converse is called with, if the deployment allows it (the configured model, or one of
ERAGRAPH_ANSWER_MODELS); anything else is a ValidationException in words, and Bedrock is not
called. A generator that cannot choose its model (local, OpenAI-compatible) answers whatever
modelArn says (test_bedrock_kb_generate)."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import ANY, Stubber
from test_bedrock_kb_generate import client_of, kb_engine, request  # noqa: F401 (fixture)

from eragraph.config import ProcessSettings
from eragraph.domain.knowledge_base import knowledge_base_id
from eragraph.domain.model import BadInputError
from eragraph.providers.bedrock import BedrockGenerator, bedrock_model_id

CONFIGURED = "anthropic.claude-3-haiku-20240307-v1:0"
ALLOWED = "amazon.nova-lite-v1:0"


def reply(text: str) -> dict:
    return {"output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": "end_turn",
            "usage": {"inputTokens": 30, "outputTokens": 6, "totalTokens": 36}, "metrics": {"latencyMs": 5}}


def converse_of(model_id: str) -> dict:
    return {"modelId": model_id, "messages": ANY, "system": ANY, "inferenceConfig": ANY}


def with_model(kb_id: str, model: str) -> dict:
    body = request(kb_id)
    body["retrieveAndGenerateConfiguration"]["knowledgeBaseConfiguration"]["modelArn"] = model
    return body


@pytest.fixture
def bedrock(kb_engine):
    runtime = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x")
    kb_engine.generator = BedrockGenerator(CONFIGURED, client=runtime, max_attempts=1,  # as the template's ARN list
                                           models=(f"arn:aws:bedrock:us-east-1::foundation-model/{ALLOWED}",))
    with Stubber(runtime) as stub:
        yield kb_engine, stub


@pytest.mark.parametrize("model", [f"arn:aws:bedrock:us-east-1::foundation-model/{ALLOWED}", ALLOWED,
                                   f"arn:aws:bedrock:us-east-1::foundation-model/{CONFIGURED}"])
def test_the_request_names_the_model_that_answers(bedrock, model):
    engine, stub = bedrock
    model_id = model.rsplit("/", 1)[-1]
    stub.add_response("converse", reply(f"{model_id} says: the keeper."), converse_of(model_id))
    out = client_of(engine).retrieve_and_generate(**with_model(knowledge_base_id(""), model))
    assert out["output"]["text"] == f"{model_id} says: the keeper."
    stub.assert_no_pending_responses()
    assert engine.generator.model_id == CONFIGURED  # the request's choice did not stick


@pytest.mark.parametrize("model, words", [
    ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-opus-20240229-v1:0", "does not answer with"),
    ("arn:aws:s3:::bucket/model", "modelArn must match the pattern"),  # the service model's own rule
    ("gpt-4o please", "modelArn must match the pattern"),
])
def test_a_model_outside_the_allow_list_or_no_model_is_a_validation_error(bedrock, model, words):
    engine, stub = bedrock
    client = client_of(engine)
    with pytest.raises(client.exceptions.ValidationException) as info:
        client.retrieve_and_generate(**with_model(knowledge_base_id(""), model))
    assert words in str(info.value)
    stub.assert_no_pending_responses()  # Bedrock was never called


def test_model_ids_from_arns_and_ids():
    assert bedrock_model_id(f"arn:aws:bedrock:eu-west-1::foundation-model/{CONFIGURED}") == CONFIGURED
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"
    assert bedrock_model_id(profile) == "us.anthropic.claude-3-haiku-20240307-v1:0"
    assert bedrock_model_id("cohere.command-r-v1:0") == "cohere.command-r-v1:0"
    for bad in ("", "claude", "arn:aws:bedrock:us-east-1::agent/ABC", "../../etc"):
        with pytest.raises(BadInputError):
            bedrock_model_id(bad)


def test_the_allow_list_setting():
    assert ProcessSettings.from_env({}).answer_models == ()
    assert ProcessSettings.from_env({"ERAGRAPH_ANSWER_MODELS": f" {ALLOWED}, ,{CONFIGURED}"}).answer_models == (
        ALLOWED, CONFIGURED)
