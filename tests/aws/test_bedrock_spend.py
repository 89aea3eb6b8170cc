"""The Bedrock spend alarm, priced from the ledger: every function's handler publishes the
Bedrock calls its invocation recorded in the cost ledger, priced with the ledger's price table,
as the BedrockSpendUSD metric (powertools EMF on stdout), which the BedrockSpend alarm sums per
day against BedrockDailySpendLimit."""

from __future__ import annotations

import json

import pytest
from aws_helpers import ROOT

from contract.aws_factories import load_template
from eragraph.services import cost

HAIKU = "bedrock:anthropic.claude-3-haiku-20240307-v1:0"
TITAN = "bedrock:amazon.titan-embed-text-v2:0"


def emitted(out: str) -> dict:
    values: dict = {}
    for line in out.splitlines():
        if line.startswith("{") and "_aws" in line:
            blob = json.loads(line)
            for spec in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                value = blob[spec["Name"]]
                value = value[0] if isinstance(value, list) and len(value) == 1 else value
                values[spec["Name"]] = (value, spec.get("Unit"), blob["_aws"]["CloudWatchMetrics"][0])
    return values


def handler_recording(graph, calls, environ=None):
    """A handler whose invocation records ``calls`` in the ledger (as the providers do), wrapped
    as the functions wrap theirs."""
    from eragraph.bootstrap.aws import powertools, priced

    logger, metrics, _ = powertools()

    @metrics.log_metrics
    @priced(metrics, logger, environ=environ)
    def handler(event, context):
        for kind, model, tokens_in, tokens_out in calls:
            cost.record(graph, kind, model, tokens_in, tokens_out, 0.1)
        if event.get("fail"):
            raise RuntimeError("the invocation failed after its calls")
        return "done"

    return handler


def test_the_invocation_s_bedrock_calls_are_published_at_the_ledger_s_price(aws_engine, lambda_context, capsys):
    engine, _, _ = aws_engine
    calls = [("summarize", HAIKU, 4000, 600), ("embed", TITAN, 12000, 0), ("embed", "hash:256", 500, 0)]
    handler = handler_recording(engine.graph, calls)
    capsys.readouterr()
    assert handler({}, lambda_context) == "done"
    value, unit, spec = emitted(capsys.readouterr().out)["BedrockSpendUSD"]
    # the ledger (in DynamoDB) priced by its own report: the Bedrock rows only
    report = cost.ledger_report(engine.graph, engine.settings.price_table())
    bedrock = sum(r["cost_usd"] for r in report["calls"] if r["model"].startswith("bedrock:"))
    assert value == pytest.approx(bedrock) and value == pytest.approx((4000 * 0.25 + 600 * 1.25 + 12000 * 0.02) / 1e6)
    assert unit == "None" and spec["Namespace"] == "EragraphTest"
    # a failed invocation still spent: its calls are published too
    with pytest.raises(RuntimeError):
        handler({"fail": True}, lambda_context)
    assert emitted(capsys.readouterr().out)["BedrockSpendUSD"][0] == pytest.approx(value)


def test_the_price_table_override_prices_the_metric_and_an_unpriced_model_is_logged(aws_engine, lambda_context,
                                                                                   capsys, caplog):
    engine, _, _ = aws_engine
    calls = [("generate", HAIKU, 1_000_000, 0), ("generate", "bedrock:some.new-model-v1:0", 5000, 5000)]
    handler = handler_recording(engine.graph, calls, environ={"ERAGRAPH_PRICES": json.dumps({HAIKU: [2.0, 8.0]})})
    capsys.readouterr()
    handler({}, lambda_context)
    out = capsys.readouterr().out
    assert emitted(out)["BedrockSpendUSD"][0] == pytest.approx(2.0)  # the override, not the default 0.25
    [warning] = [r for r in caplog.records if getattr(r, "reason", None) == "unpriced-model"]
    assert warning.models == ["bedrock:some.new-model-v1:0"]  # not counted as free, and said


def test_no_bedrock_call_publishes_no_spend(aws_engine, lambda_context, capsys):
    engine, _, _ = aws_engine
    handler_recording(engine.graph, [("embed", "hash:256", 500, 0)])({}, lambda_context)
    assert "BedrockSpendUSD" not in emitted(capsys.readouterr().out)


def test_every_function_publishes_its_spend_and_the_alarm_sums_it_per_day():
    template = load_template()
    handlers = {name for name, res in template["Resources"].items()
                if res["Type"] == "AWS::Serverless::Function" and res["Properties"]["Handler"] == "app.handler"}
    assert {"IngestFunction", "SummarizeFunction", "QueryFunction", "ReindexFunction"} <= handlers
    for name in handlers:
        source = (ROOT / template["Resources"][name]["Properties"]["CodeUri"] / "app.py").read_text()
        assert "@metrics.log_metrics\n@priced(metrics, logger)" in source, name
    alarm = template["Resources"]["BedrockSpendAlarm"]["Properties"]
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert alarm["MetricName"] == "BedrockSpendUSD" and alarm["Namespace"] == env["POWERTOOLS_METRICS_NAMESPACE"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}]
    assert alarm["Statistic"] == "Sum" and alarm["Period"] == 86400
    assert alarm["Threshold"] == {"Ref": "BedrockDailySpendLimit"} and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    assert template["Parameters"]["BedrockDailySpendLimit"]["Default"] > 0
