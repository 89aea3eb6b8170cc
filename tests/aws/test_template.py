"""template.yaml checks: cfn-lint clean, handlers importable, environment complete, queues,
DLQs, alarms, authenticated API, least-privilege roles, OpenAPI schema and index mapping in sync."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from aws_helpers import ROOT, load_handler, production_template

from contract.aws_factories import load_template

TEMPLATE = load_template()
RES = TEMPLATE["Resources"]


def of_type(kind):
    return {k: v for k, v in RES.items() if v["Type"] == kind}


def test_cfn_lint_clean():
    if shutil.which("cfn-lint") is None:
        pytest.skip("cfn-lint not installed")
    out = subprocess.run(["cfn-lint", str(ROOT / "template.yaml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


# the functions whose code is an ASGI app the Lambda Web Adapter runs (run.sh), not a handler
WEB_ADAPTER_FUNCTIONS = {"StreamFunction"}


def test_every_handler_is_importable():
    functions = of_type("AWS::Serverless::Function")
    assert set(functions) == {"IngestFunction", "SummarizeFunction", "QueryFunction", "ReindexFunction",
                              "StreamFunction"}
    for name in WEB_ADAPTER_FUNCTIONS:
        properties = functions.pop(name)["Properties"]
        folder = ROOT / properties["CodeUri"]
        assert properties["Handler"] == "run.sh" and (folder / "run.sh").stat().st_mode & 0o111, name
        assert "app:app" in (folder / "run.sh").read_text()
        assert callable(load_handler(folder.name).app)  # the ASGI app uvicorn serves
    for fn in functions.values():
        folder = Path(fn["Properties"]["CodeUri"]).name
        module_name, attr = fn["Properties"]["Handler"].split(".")
        assert (ROOT / fn["Properties"]["CodeUri"] / f"{module_name}.py").exists()
        assert callable(getattr(load_handler(folder), attr))


def _env_reads(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("ERAGRAPH_") \
                and node.value.isupper() and " " not in node.value:
            names.add(node.value)
    return names


def test_every_environment_variable_read_is_set_by_the_template():
    env = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    for name, fn in of_type("AWS::Serverless::Function").items():
        own = set(fn["Properties"].get("Environment", {}).get("Variables", {}))
        reads = _env_reads(ROOT / fn["Properties"]["CodeUri"] / "app.py")
        assert reads <= env | own, (name, reads - env - own)
    from eragraph.config import AWS_ENV  # the aws profile's variables, declared where they are read
    bootstrap = {name for name in AWS_ENV if name.startswith("ERAGRAPH_")}
    optional = {"ERAGRAPH_AWS_ENDPOINT_URL", "ERAGRAPH_OPENSEARCH_SERVICE",  # local clouds / serverless only
                "ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS"}  # an override: by default the function's MemorySize bounds it
    one_function = {"ERAGRAPH_REINDEX_QUEUE_URL": "ReindexFunction",  # read by that function's wiring only
                    "ERAGRAPH_DOCUMENT_PREFIX": "QueryFunction", "ERAGRAPH_DOCUMENT_SUFFIX": "QueryFunction"}  # uploads
    for name, fn in one_function.items():
        assert name in RES[fn]["Properties"]["Environment"]["Variables"], (fn, name)
    # walks from memory: the functions that answer questions; the entity graph's snapshot: those
    # read it, the reindex writes it
    for fn in ("QueryFunction", "StreamFunction"):
        assert RES[fn]["Properties"]["Environment"]["Variables"]["ERAGRAPH_ENTITY_GRAPH_WARM"] == "true", fn
    for fn in ("QueryFunction", "StreamFunction", "ReindexFunction"):
        assert RES[fn]["Properties"]["Environment"]["Variables"]["ERAGRAPH_SNAPSHOT_BUCKET"] == {"Ref": "EntitySnapshotBucket"}
    two_functions = {"ERAGRAPH_SNAPSHOT_BUCKET", "ERAGRAPH_ENTITY_GRAPH_WARM"}
    assert bootstrap - optional - set(one_function) - two_functions <= env, \
        bootstrap - optional - set(one_function) - two_functions - env
    from eragraph.bootstrap.aws import REQUIRED
    assert set(REQUIRED) <= env


def test_queues_have_dlqs_timeouts_and_alarms():
    queues = of_type("AWS::SQS::Queue")
    functions = of_type("AWS::Serverless::Function")
    dlqs = set()
    for fn in functions.values():
        for ev in fn["Properties"].get("Events", {}).values():
            if ev["Type"] != "SQS":
                continue
            assert ev["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            queue = queues[ev["Properties"]["Queue"]["Fn::GetAtt"][0]]["Properties"]
            assert queue["VisibilityTimeout"] >= 6 * fn["Properties"]["Timeout"]
            redrive = queue["RedrivePolicy"]
            assert 1 <= redrive["maxReceiveCount"] <= 10
            dlqs.add(redrive["deadLetterTargetArn"]["Fn::GetAtt"][0])
    assert dlqs == {"IngestDeadLetterQueue", "SummarizeDeadLetterQueue", "ReindexDeadLetterQueue"}
    assert RES["SummarizeQueue"]["Properties"]["FifoQueue"] is True
    alarmed = {a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in of_type("AWS::CloudWatch::Alarm").values()
               if a["Properties"]["Namespace"] == "AWS/SQS"}
    assert dlqs <= alarmed


def _route_shape(key: str) -> str:
    """A route key with its path parameters unnamed: ``GET /documents/{}``."""
    return re.sub(r"\{[^}]*\}", "{}", key)


def test_the_http_api_routes_are_the_route_tables():
    """template.yaml's HttpApi routes, and the query function's, are exactly the route table's API
    routes (method and path; the template's names of path parameters aside): a new route is a
    line of the table, its handler and a route of the template."""
    from eragraph.entrypoints.http.routes import API, ROUTES

    routes = of_type("AWS::ApiGatewayV2::Route")
    keys = [r["Properties"]["RouteKey"] for r in routes.values()]
    table = [route.key for route in ROUTES if API in route.on]
    assert len(keys) == len(set(keys)) and len(table) == len(set(table))
    assert sorted(map(_route_shape, keys)) == sorted(map(_route_shape, table))
    assert {r["Properties"]["Target"]["Fn::Sub"] for r in routes.values()} == {"integrations/${QueryIntegration}"}
    schema = json.loads(load_handler("query").app.get_openapi_json_schema())  # the query function's resolver
    assert sorted(f"{m.upper()} {p}" for p, ops in schema["paths"].items() for m in ops) == sorted(table)


def test_api_is_authenticated_and_throttled():
    routes = of_type("AWS::ApiGatewayV2::Route")
    for r in routes.values():
        auth = r["Properties"]["AuthorizationType"]
        assert auth == {"Fn::If": ["UseJwt", "JWT", "AWS_IAM"]}  # never NONE
    settings = RES["ApiStage"]["Properties"]["DefaultRouteSettings"]
    assert settings["ThrottlingRateLimit"] and settings["ThrottlingBurstLimit"]


def test_roles_are_least_privilege():
    modes = [{"UseJwt": jwt, "HasAlarmEmail": False, "UseEventBridge": False, "UseBedrockReranker": rerank}
             for jwt in (False, True) for rerank in (False, True)]
    for name, role in of_type("AWS::IAM::Role").items():
        for policy, mode in ((p, m) for p in role["Properties"]["Policies"] for m in modes):
            for st in resolve_conditions(policy, mode)["PolicyDocument"]["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                assert all("*" not in a for a in actions), (name, actions)
                resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
                # bedrock:Rerank has no resource type (its model is scoped by the RerankModel statement)
                assert "*" not in resources or actions == ["bedrock:Rerank"], (name, st)
    query = json.dumps(RES["QueryRole"]["Properties"]["Policies"])
    assert "DeleteItem" not in query and "BatchWriteItem" not in query and "ESHttpDelete" not in query
    assert "sqs:" not in query
    # POST/DELETE /documents: the object put in (or deleted from) the documents bucket; and the
    # entity graph snapshots read (a cold start's first walk); nothing else of S3
    s3 = [st for p in RES["QueryRole"]["Properties"]["Policies"]
          for st in resolve_conditions(p, {})["PolicyDocument"]["Statement"]
          if any(a.startswith("s3:") for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))]
    [submit] = [st for st in s3 if "DocumentsBucket" in json.dumps(st["Resource"])]
    assert sorted(submit["Action"]) == ["s3:DeleteObject", "s3:PutObject"]
    assert submit["Resource"] == {"Fn::Sub": "${DocumentsBucket.Arn}/*"} and "Condition" not in submit
    snapshots = sorted((st["Action"], json.dumps(st["Resource"])) for st in s3 if st is not submit)
    assert snapshots == [("s3:GetObject", json.dumps({"Fn::Sub": "${EntitySnapshotBucket.Arn}/entity-graph/*"})),
                         ("s3:ListBucket", json.dumps({"Fn::GetAtt": ["EntitySnapshotBucket", "Arn"]}))], snapshots
    ingest = json.dumps(RES["IngestRole"]["Properties"]["Policies"])
    assert "s3:PutObject" not in ingest and "s3:DeleteObject" not in ingest


# the template's conditions at its parameters' defaults (a test names those it sets otherwise)
DEFAULT_CONDITIONS = {"UseJwt": False, "HasAlarmEmail": False, "NoAlarmEmail": True, "UseEventBridge": False,
                      "MultiAz": False, "FineGrainedAccess": False, "UseVpc": False, "ReserveQuery": True,
                      "ReserveReindex": True, "CreateVpcEndpoints": False, "CreateGatewayEndpoints": False,
                      "UseBedrockReranker": False, "HasAnswerModels": False, "HasDataSourceBuckets": False, "PublicWebAdapter": True, "ReserveStream": True,
                      "CreateRerankEndpoint": False}


def resolve_conditions(node, conditions: dict):
    """``node`` with every Fn::If decided by ``conditions`` (over DEFAULT_CONDITIONS) and
    AWS::NoValue dropped (for resources: those whose Condition is false removed)."""
    if set(conditions) != set(DEFAULT_CONDITIONS):
        conditions = {**DEFAULT_CONDITIONS, **conditions}
    if isinstance(node, dict):
        if set(node) == {"Fn::If"}:
            name, yes, no = node["Fn::If"]
            return resolve_conditions(yes if conditions[name] else no, conditions)
        out = {}
        for key, value in node.items():
            if isinstance(value, dict) and value.get("Condition") in conditions and not conditions[value["Condition"]]:
                continue
            value = resolve_conditions(value, conditions)
            if value != {"Ref": "AWS::NoValue"}:
                out[key] = value
        return out
    if isinstance(node, list):
        items = [resolve_conditions(v, conditions) for v in node]
        return [v for v in items if v != {"Ref": "AWS::NoValue"}]
    return node


def _bucket_arn() -> str:
    return "arn:${AWS::Partition}:s3:::eragraph-${Stage}-docs-${AWS::AccountId}-${AWS::Region}"


def test_storage_settings():
    bucket = RES["DocumentsBucket"]["Properties"]
    assert bucket["VersioningConfiguration"]["Status"] == "Enabled"
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    table = RES["GraphTable"]["Properties"]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_notification_mode_direct_s3_to_sqs():
    assert TEMPLATE["Parameters"]["NotificationMode"]["AllowedValues"] == ["direct", "eventbridge"]
    assert TEMPLATE["Parameters"]["NotificationMode"]["Default"] == "direct"
    assert TEMPLATE["Conditions"]["UseEventBridge"] == {"Fn::Equals": [{"Ref": "NotificationMode"}, "eventbridge"]}
    res = resolve_conditions(RES, {"UseEventBridge": False, "UseJwt": False, "HasAlarmEmail": False})
    notification = res["DocumentsBucket"]["Properties"]["NotificationConfiguration"]
    assert "EventBridgeConfiguration" not in notification
    queues = notification["QueueConfigurations"]
    assert {q["Event"] for q in queues} == {"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}
    for q in queues:
        assert q["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
        assert q["Filter"]["S3Key"]["Rules"] == [{"Name": "prefix", "Value": {"Ref": "DocumentPrefix"}},
                                                 {"Name": "suffix", "Value": {"Ref": "DocumentSuffix"}}]
    assert "DocumentEventsRule" not in res
    [st] = res["IngestQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert st["Principal"] == {"Service": "s3.amazonaws.com"} and st["Action"] == "sqs:SendMessage"
    assert st["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::Sub": _bucket_arn()}


def test_notification_mode_eventbridge_rule_to_sqs():
    res = resolve_conditions(RES, {"UseEventBridge": True, "UseJwt": False, "HasAlarmEmail": False})
    notification = res["DocumentsBucket"]["Properties"]["NotificationConfiguration"]
    assert notification == {"EventBridgeConfiguration": {"EventBridgeEnabled": True}}
    rule = res["DocumentEventsRule"]["Properties"]
    assert rule["State"] == "ENABLED"
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.s3"] and pattern["detail-type"] == ["Object Created", "Object Deleted"]
    handled = load_handler("ingest").EVENTBRIDGE_TYPES
    assert set(pattern["detail-type"]) == set(handled)  # what the rule sends is what the handler takes
    assert pattern["detail"]["bucket"]["name"] == [{"Fn::Sub": "eragraph-${Stage}-docs-${AWS::AccountId}-${AWS::Region}"}]
    assert pattern["detail"]["object"]["key"] == [{"wildcard": {"Fn::Sub": "${DocumentPrefix}*${DocumentSuffix}"}}]
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]} and "InputTransformer" not in target
    [st] = res["IngestQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert st["Principal"] == {"Service": "events.amazonaws.com"} and st["Action"] == "sqs:SendMessage"
    assert st["Resource"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
    rule_arn = st["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::Sub"]
    assert rule_arn.endswith(":rule/" + rule["Name"]["Fn::Sub"])


def test_ingest_role_may_list_the_bucket_so_a_deleted_key_is_a_404():
    [st] = [st for p in RES["IngestRole"]["Properties"]["Policies"] for st in p["PolicyDocument"]["Statement"]
            if "s3:ListBucket" in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])]
    assert st["Resource"] == {"Fn::Sub": _bucket_arn()} and "Condition" not in st


def test_openapi_schema_printed_is_the_query_functions():
    """``python -m eragraph.entrypoints.http.api`` prints the schema the query function's resolver
    generates (no stored copy to regenerate)."""
    from eragraph.entrypoints.http.api import TITLE, VERSION, openapi_schema

    app = load_handler("query").app
    current = json.loads(app.get_openapi_json_schema(title=TITLE, version=VERSION))
    assert json.loads(openapi_schema()) == current
    assert {"/query", "/documents/{doc_id}", "/stats", "/health", "/mcp"} <= set(current["paths"])
    assert current["paths"]["/query"]["post"]["requestBody"]["content"]["application/json"]["schema"]


def test_packaged_index_mapping_is_the_infra_file():
    infra = json.loads((ROOT / "infra/opensearch-index.json").read_text())
    packaged = json.loads((ROOT / "shared/eragraph/adapters/aws/index_mapping.json").read_text())
    assert infra == packaged
    vector = infra["mappings"]["properties"]["vector"]
    assert infra["settings"]["index"]["knn"] is True and vector["type"] == "knn_vector"
    assert vector["method"]["name"] == "hnsw" and vector["method"]["space_type"] == "innerproduct"


# template parameter -> the Settings field its ERAGRAPH_* variable sets
PARAMETER_SETTINGS = {"SegmentMin": "s_min", "SegmentMax": "s_max", "HyperplaneCount": "n_planes",
                      "ChunkTokens": "chunk_tokens", "EmbedModelId": "bedrock_embed_model",
                      "EmbedDimension": "bedrock_embed_dim", "TextModelId": "bedrock_text_model", "ModelPrices": "prices"}


def test_template_defaults_are_the_config_defaults():
    from eragraph.config import Settings

    params, env = TEMPLATE["Parameters"], TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    defaults = Settings()
    for param, field in PARAMETER_SETTINGS.items():
        assert env["ERAGRAPH_" + field.upper()] == {"Ref": param}, (param, field)
        assert str(params[param]["Default"]) == str(getattr(defaults, field)), (param, field)
    # the parameters that set a Settings field are exactly the ones listed above, except the
    # deliberate profile choices of PROVIDER_PARAMETERS
    set_by_param = {name.removeprefix("ERAGRAPH_").lower() for name, v in env.items()
                    if isinstance(v, dict) and v.get("Ref") in params}
    assert set_by_param - set(PARAMETER_SETTINGS.values()) == {
        env_name.removeprefix("ERAGRAPH_").lower() for env_name, _, _ in PROVIDER_PARAMETERS.values()}


# Provider choices the AWS profile makes on purpose (the config's defaults suit a laptop):
# parameter -> (variable, default, allowed values)
PROVIDER_PARAMETERS = {
    "Summarizer": ("ERAGRAPH_SUMMARIZER", "bedrock", ["bedrock", "extractive"]),  # config: extractive
    "EntityExtractor": ("ERAGRAPH_NER", "spacy", ["spacy", "spacy+nouns", "capitalized"]),
    "QuestionParser": ("ERAGRAPH_PARSER", "spacy", ["spacy", "none"]),
}


def test_every_provider_choice_is_explicit_in_the_environment():
    params, env = TEMPLATE["Parameters"], TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    for param, (name, default, allowed) in PROVIDER_PARAMETERS.items():
        assert env[name] == {"Ref": param}, name
        assert params[param]["Default"] == default and params[param]["AllowedValues"] == allowed, param
    # fixed on AWS: no sentence vectors; "" = the router weights shipped in the package
    assert env["ERAGRAPH_SENTENCE_VECTORS"] == "false"
    assert env["ERAGRAPH_ROUTER_WEIGHTS"] == ""
    assert env["ERAGRAPH_EMBEDDER"] == "bedrock" and env["ERAGRAPH_GENERATOR"] == "bedrock"


def _layer_ids(fn: dict) -> list[str]:
    return [ref["Ref"] if "Ref" in ref else "WebAdapterLayer" for ref in fn["Properties"].get("Layers", [])]


def test_each_function_gets_exactly_the_layers_it_needs():
    assert "Layers" not in TEMPLATE["Globals"]["Function"]  # per function, never for all
    layers = of_type("AWS::Serverless::LayerVersion")
    assert set(layers) == {"BaseLayer", "NlpLayer", "DocsLayer", "CoreLayer"}
    expected = {"IngestFunction": ["NlpLayer", "DocsLayer", "CoreLayer"],  # NER of new chunks; PDF/DOCX/HTML
                "QueryFunction": ["NlpLayer", "CoreLayer"],      # NER of the question, question parser
                "ReindexFunction": ["NlpLayer", "CoreLayer"],    # re-extracts missing entities
                "SummarizeFunction": ["BaseLayer", "CoreLayer"],  # neither
                "StreamFunction": ["WebAdapterLayer", "NlpLayer", "CoreLayer"]}  # the query's, and the adapter
    assert {name: _layer_ids(fn) for name, fn in of_type("AWS::Serverless::Function").items()} == expected
    used = {layer for ids in expected.values() for layer in ids} - {"WebAdapterLayer"}
    assert used == set(layers)


def test_layers_are_built_by_their_makefiles():
    for name, layer in of_type("AWS::Serverless::LayerVersion").items():
        assert layer["Metadata"]["BuildMethod"] == "makefile", name
        assert layer["Metadata"]["BuildArchitecture"] == "x86_64", name
        assert layer["Properties"]["CompatibleRuntimes"] == [TEMPLATE["Globals"]["Function"]["Runtime"]]
        makefile = ROOT / layer["Properties"]["ContentUri"] / "Makefile"
        text = makefile.read_text()
        assert f"\nbuild-{name}:" in text, f"{makefile} has no build-{name} target"
        assert "$(ARTIFACTS_DIR)/python" in text, makefile
    for req in ROOT.glob("layers/*/requirements.txt"):
        lines = [ln.split("#")[0].strip().lower() for ln in req.read_text().splitlines()]
        names = {ln.split(">")[0].split("<")[0].split("=")[0].split("[")[0] for ln in lines if ln and ln[0] != "-"}
        assert not names & {"scipy", "boto3", "botocore", "torch"}, (req, names)
        assert all(not ln.startswith("opensearch-py") or "<3" in ln for ln in lines), req


def test_the_aws_extra_and_the_layers_pin_the_same_opensearch_major():
    import tomllib

    aws = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["aws"]
    [pin] = [d for d in aws if d.startswith("opensearch-py")]
    [layer] = [ln for ln in (ROOT / "layers/base/requirements.txt").read_text().splitlines()
               if ln.startswith("opensearch-py")]
    assert pin == layer == "opensearch-py>=2.4,<3"


def test_handlers_call_services_never_the_cli():
    for fn in of_type("AWS::Serverless::Function").values():
        path = ROOT / fn["Properties"]["CodeUri"] / "app.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "eragraph.cli" and not (node.module or "").startswith("eragraph.cli."), path
            if isinstance(node, ast.Import):
                assert all(a.name != "eragraph.cli" for a in node.names), path


def test_opensearch_replicas_follow_the_domain_node_count():
    param = TEMPLATE["Parameters"]["OpenSearchInstanceCount"]
    assert RES["SearchDomain"]["Properties"]["ClusterConfig"]["InstanceCount"] == {"Ref": "OpenSearchInstanceCount"}
    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["ERAGRAPH_OPENSEARCH_REPLICAS"]
    table, _, key = env["Fn::FindInMap"]
    assert env["Fn::FindInMap"][1] == {"Ref": "OpenSearchInstanceCount"}
    mapping = TEMPLATE["Mappings"][table]
    for nodes in param["AllowedValues"]:
        assert int(mapping[str(nodes)][key]) == int(nodes) - 1  # no replica ever shares a node
    assert param["Default"] == "1" and mapping["1"][key] == "0"
    infra = json.loads((ROOT / "infra/opensearch-index.json").read_text())
    assert infra["settings"]["index"]["number_of_replicas"] == 0  # the default one-node domain


def _decorators(path: Path, name: str = "handler") -> set[str]:
    fn = next(n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef) and n.name == name)
    return {ast.unparse(d) for d in fn.decorator_list}


def test_every_handler_is_traced_and_x_ray_is_on():
    assert TEMPLATE["Globals"]["Function"]["Tracing"] == "Active"
    for name, fn in of_type("AWS::Serverless::Function").items():
        if name in WEB_ADAPTER_FUNCTIONS:  # no handler to decorate: Lambda traces the invocation
            continue
        path = ROOT / fn["Properties"]["CodeUri"] / "app.py"
        decorators = _decorators(path)
        assert "tracer.capture_lambda_handler" in decorators, name
        assert "metrics.log_metrics" in decorators, name  # the query handler too
        from aws_lambda_powertools import Tracer
        assert isinstance(load_handler(Path(fn["Properties"]["CodeUri"]).name).tracer, Tracer)
    for role in of_type("AWS::IAM::Role").values():
        assert any("AWSXRayDaemonWriteAccess" in json.dumps(arn) for arn in role["Properties"]["ManagedPolicyArns"])


def _alarms(namespace, metric):
    return [a["Properties"] for a in of_type("AWS::CloudWatch::Alarm").values()
            if a["Properties"]["Namespace"] == namespace and a["Properties"]["MetricName"] == metric]


def test_every_function_alarms_on_errors_and_throttles():
    functions = set(of_type("AWS::Serverless::Function"))
    for metric in ("Errors", "Throttles"):
        alarms = _alarms("AWS/Lambda", metric)
        assert {a["Dimensions"][0]["Value"]["Ref"] for a in alarms} == functions, metric
        for a in alarms:
            assert a["Dimensions"][0]["Name"] == "FunctionName" and a["Statistic"] == "Sum"
            assert a["Threshold"] == 0 and a["ComparisonOperator"] == "GreaterThanThreshold"
            assert a["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_invariant_violations_alarm_watches_the_metric_reindex_emits():
    from eragraph.services import reindex
    from support import make_engine, synthetic_docs

    engine = make_engine()
    from eragraph.services.ingest import ingest
    from eragraph.services.resummarize import drain
    ingest(engine, synthetic_docs(12))
    drain(engine)
    emitted = reindex.run(engine, stuck_after=0)["metrics"]
    assert "InvariantViolations" in emitted  # the reindex handler publishes every one of these
    [alarm] = _alarms(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"],
                      "InvariantViolations")
    service = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]  # powertools' default dimension
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_every_function_logs_to_a_log_group_with_retention():
    groups = of_type("AWS::Logs::LogGroup")
    for name, fn in of_type("AWS::Serverless::Function").items():
        ref = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        group = groups[ref]["Properties"]
        assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        # the group Lambda would create by itself, so logs never land in one without retention
        assert group["LogGroupName"]["Fn::Sub"] == "/aws/lambda/" + fn["Properties"]["FunctionName"]["Fn::Sub"]
    assert TEMPLATE["Parameters"]["LogRetentionDays"]["Default"] in TEMPLATE["Parameters"]["LogRetentionDays"]["AllowedValues"]


def _transformed():
    """The template after the SAM transform (what CloudFormation deploys)."""
    import copy
    import os

    from samtranslator.translator.transform import transform

    class NoManagedPolicies:
        def load(self):
            return {}

    template = copy.deepcopy(TEMPLATE)
    for res in template["Resources"].values():
        for key in ("CodeUri", "ContentUri"):
            if key in res.get("Properties", {}):
                res["Properties"][key] = "s3://bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, {}, NoManagedPolicies())["Resources"]


def test_failed_scheduled_reindex_lands_in_a_queue_with_an_alarm():
    resources = _transformed()
    invoke = resources["ReindexFunctionEventInvokeConfig"]["Properties"]
    assert invoke["FunctionName"] == {"Ref": "ReindexFunction"}
    queue = invoke["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    assert resources[queue]["Type"] == "AWS::SQS::Queue"
    [rule] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Events::Rule"
              and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["ReindexFunction", "Arn"]}]
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["ReindexFunction", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [queue, "Arn"]} and target["RetryPolicy"]
    # EventBridge may send to the queue only for this rule; the function's role may send to it
    [policy] = [p["Properties"] for p in resources.values() if p["Type"] == "AWS::SQS::QueuePolicy"
                and p["Properties"]["Queues"] == [{"Ref": queue}]]
    [st] = policy["PolicyDocument"]["Statement"]
    assert st["Principal"] == {"Service": "events.amazonaws.com"} and st["Action"] == "sqs:SendMessage"
    rule_arn = st["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::Sub"]
    assert rule_arn.endswith(":rule/" + rule["Name"]["Fn::Sub"])
    role = json.dumps(RES["ReindexRole"]["Properties"]["Policies"])
    assert json.dumps({"Fn::GetAtt": [queue, "Arn"]}) in role
    alarmed = {a["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in _alarms("AWS/SQS", "ApproximateNumberOfMessagesVisible")}
    assert queue in alarmed


def test_the_ingest_extraction_budget_fits_a_batch_in_the_timeout():
    """Every record of a batch may spend the whole extraction budget (ERAGRAPH_EXTRACT_SECONDS)
    reading its file: a batch's budgets must leave time inside the function's timeout, or a slow
    PDF times the batch out and retries it into the DLQ instead of being one logged rejection."""
    fn = of_type("AWS::Serverless::Function")["IngestFunction"]["Properties"]
    budget = float(fn["Environment"]["Variables"]["ERAGRAPH_EXTRACT_SECONDS"])
    batch = fn["Events"]["DocumentEvents"]["Properties"]["BatchSize"]
    assert batch * budget <= 0.75 * fn["Timeout"], (batch, budget, fn["Timeout"])


# ----- issue: the deployed stack, safe by default


def checkov_executable() -> str | None:
    import os

    given = os.environ.get("ERAGRAPH_CHECKOV")
    local = ROOT / ".venv-checkov" / "bin" / "checkov"
    return given or (str(local) if local.exists() else shutil.which("checkov"))


def test_checkov_finds_nothing_unexplained():
    """The policy scanner over template.yaml: no failed check; every suppression (checkov skip
    in a resource's Metadata) gives its reason."""
    import os

    checkov = checkov_executable()
    if checkov is None:
        if os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1":
            pytest.fail("checkov is not installed: run scripts/install_checkov.sh")
        pytest.skip("checkov not installed (scripts/install_checkov.sh)")
    out = subprocess.run([checkov, "-f", str(ROOT / "template.yaml"), "--framework", "cloudformation", "--quiet",
                          "--compact", "--skip-download", "-o", "json"], capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [(c["check_id"], c["resource"]) for r in reports for c in r["results"]["failed_checks"]]
    assert not failed, failed
    assert all(r["summary"]["parsing_errors"] == 0 for r in reports)
    for name, res in RES.items():
        for skip in (res.get("Metadata") or {}).get("checkov", {}).get("skip", []):
            assert len(str(skip.get("comment", "")).strip()) > 20, (name, skip)


def test_cfn_lint_clean_in_the_production_settings(tmp_path):
    """The template with the production options on (multi-AZ with a replica, fine-grained access
    control, a VPC with its endpoints, JWT, an alarm subscriber) is as clean as with the defaults."""
    if shutil.which("cfn-lint") is None:
        pytest.skip("cfn-lint not installed")
    copy = production_template(tmp_path)
    out = subprocess.run(["cfn-lint", str(copy)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_tenancy_fails_closed_by_default():
    params = TEMPLATE["Parameters"]
    assert params["TenantRequired"]["Default"] == "true"
    env = RES["QueryFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ERAGRAPH_TENANT_REQUIRED"] == {"Ref": "TenantRequired"}


def test_concurrency_is_bounded_by_parameters():
    ingest = RES["IngestFunction"]["Properties"]["Events"]["DocumentEvents"]["Properties"]
    summarize = RES["SummarizeFunction"]["Properties"]["Events"]["SegmentsAffected"]["Properties"]
    assert ingest["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "IngestMaxConcurrency"}
    assert summarize["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "SummarizeMaxConcurrency"}
    for fn, param in (("QueryFunction", "QueryReservedConcurrency"), ("ReindexFunction", "ReindexReservedConcurrency")):
        reserved = resolve_conditions(RES[fn]["Properties"], {})["ReservedConcurrentExecutions"]
        assert reserved == {"Ref": param}
        assert TEMPLATE["Parameters"][param]["Default"] > 0
    for param in ("IngestMaxConcurrency", "SummarizeMaxConcurrency", "ReindexMaxConcurrency"):
        assert TEMPLATE["Parameters"][param]["MinValue"] >= 2  # Lambda's minimum


def test_the_reindex_audits_tenants_from_a_fifo_queue_with_a_dlq():
    """One message per tenant on a FIFO queue (a group per tenant), one record per invocation,
    at most ReindexMaxConcurrency at once, below the reserved concurrency so the schedule's
    fan-out still finds room; a message failing 3 times lands in an alarmed DLQ."""
    queue = RES["ReindexQueue"]["Properties"]
    assert queue["FifoQueue"] is True and queue["ContentBasedDeduplication"] is False
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["ReindexDeadLetterQueue", "Arn"]}
    assert RES["ReindexDeadLetterQueue"]["Properties"]["FifoQueue"] is True
    fn = RES["ReindexFunction"]["Properties"]
    source = fn["Events"]["TenantAudits"]["Properties"]
    assert source["Queue"] == {"Fn::GetAtt": ["ReindexQueue", "Arn"]} and source["BatchSize"] == 1
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "ReindexMaxConcurrency"}
    params = TEMPLATE["Parameters"]
    assert params["ReindexMaxConcurrency"]["Default"] < params["ReindexReservedConcurrency"]["Default"]
    assert fn["Environment"]["Variables"]["ERAGRAPH_REINDEX_QUEUE_URL"] == {"Ref": "ReindexQueue"}
    role = json.dumps(RES["ReindexRole"]["Properties"]["Policies"])
    assert json.dumps({"Fn::GetAtt": ["ReindexQueue", "Arn"]}) in role
    dlq = RES["ReindexDeadLetterAlarm"]["Properties"]
    assert dlq["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["ReindexDeadLetterQueue", "QueueName"]}
    assert dlq["AlarmActions"] == [{"Ref": "AlarmTopic"}]
    late = RES["TenantsNotAuditedAlarm"]["Properties"]
    assert late["MetricName"] == "TenantsNotAudited24h" and late["TreatMissingData"] == "breaching"


ALARMED = {("AWS/SQS", "ApproximateAgeOfOldestMessage"), ("AWS/ApiGateway", "5xx"), ("AWS/ApiGateway", "Latency"),
           ("AWS/ES", "ClusterStatus.red"), ("AWS/ES", "FreeStorageSpace"), ("AWS/ES", "JVMMemoryPressure"),
           ("AWS/ES", "ClusterIndexWritesBlocked"), ("AWS/DynamoDB", "ReadThrottleEvents"),
           ("AWS/DynamoDB", "WriteThrottleEvents"), ("Eragraph", "DocumentsRejected")}


def test_the_alarms_an_operator_needs():
    alarms = of_type("AWS::CloudWatch::Alarm").values()
    have = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"]) for a in alarms}
    assert ALARMED <= have, ALARMED - have
    ages = {a["Properties"]["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for a in alarms
            if a["Properties"]["MetricName"] == "ApproximateAgeOfOldestMessage"}
    assert ages == {"IngestQueue", "SummarizeQueue"}
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms)
    # the rejected-documents alarm watches the metric the ingest function emits
    from eragraph.services.object_events import METRICS

    assert METRICS["rejected"] == "DocumentsRejected"
    assert "for name, metric in METRICS.items()" in (ROOT / "functions/ingest/app.py").read_text()
    # no subscriber: said loudly
    warning = TEMPLATE["Outputs"]["AlarmsHaveNoSubscriber"]
    assert warning["Condition"] == "NoAlarmEmail" and "WARNING" in warning["Description"]
    assert TEMPLATE["Conditions"]["NoAlarmEmail"] == {"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}


def test_api_access_log_names_caller_tenant_and_request():
    settings = RES["ApiStage"]["Properties"]["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    line = json.loads(settings["Format"]["Fn::Sub"].replace("${TenantClaim}", "tenant"))
    assert line["requestId"] == "$context.requestId"
    assert line["callerArn"] == "$context.identity.userArn" and line["jwtSub"] == "$context.authorizer.claims.sub"
    assert line["jwtTenant"] == "$context.authorizer.claims.tenant"
    assert RES["ApiAccessLogGroup"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_deletion_protection_and_backups():
    table = RES["GraphTable"]
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["Properties"]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_production_options_are_parameters():
    res = resolve_conditions(RES, {"MultiAz": True, "FineGrainedAccess": True, "UseVpc": True})
    domain = res["SearchDomain"]["Properties"]
    assert domain["ClusterConfig"]["ZoneAwarenessEnabled"] is True and domain["ClusterConfig"]["DedicatedMasterCount"] == 3
    assert domain["AdvancedSecurityOptions"]["Enabled"] is True
    assert domain["VPCOptions"]["SubnetIds"] == {"Ref": "OpenSearchSubnetIds"}
    for fn in ("IngestFunction", "SummarizeFunction", "QueryFunction", "ReindexFunction"):
        assert res[fn]["Properties"]["VpcConfig"]["SubnetIds"] == {"Ref": "OpenSearchSubnetIds"}
    dev = resolve_conditions(RES, {})["SearchDomain"]["Properties"]
    assert dev["ClusterConfig"]["ZoneAwarenessEnabled"] is False
    assert "VPCOptions" not in dev and "AdvancedSecurityOptions" not in dev


ENDPOINTS = {"SqsEndpoint": ("sqs", "Interface"), "BedrockRuntimeEndpoint": ("bedrock-runtime", "Interface"),
             "LogsEndpoint": ("logs", "Interface"), "MonitoringEndpoint": ("monitoring", "Interface"),
             "S3GatewayEndpoint": ("s3", "Gateway"), "DynamoDbGatewayEndpoint": ("dynamodb", "Gateway"),
             "BedrockAgentRuntimeEndpoint": ("bedrock-agent-runtime", "Interface")}
# an endpoint made only when a function calls its service: Rerank, with Reranker=bedrock
ENDPOINT_CONDITIONS = {"BedrockAgentRuntimeEndpoint": "CreateRerankEndpoint"}


def test_vpc_endpoints_exist_only_when_the_vpc_is_given():
    """With VpcId (and OpenSearchSubnetIds) the functions reach S3, DynamoDB, SQS, Bedrock and
    CloudWatch without a NAT; with the defaults no endpoint is created."""
    conditions = TEMPLATE["Conditions"]
    vpc, given = conditions["CreateVpcEndpoints"]["Fn::And"]  # (the loader spells !Condition Fn::Condition)
    assert list(vpc.values()) == ["UseVpc"] and given == {"Fn::Not": [{"Fn::Equals": [{"Ref": "VpcId"}, ""]}]}
    assert list(conditions["CreateGatewayEndpoints"]["Fn::And"][0].values()) == ["CreateVpcEndpoints"]
    endpoints = of_type("AWS::EC2::VPCEndpoint")
    assert set(endpoints) == set(ENDPOINTS)
    for name, (service, kind) in ENDPOINTS.items():
        props = endpoints[name]["Properties"]
        assert props["ServiceName"] == {"Fn::Sub": f"com.amazonaws.${{AWS::Region}}.{service}"}
        assert props["VpcEndpointType"] == kind and props["VpcId"] == {"Ref": "VpcId"}
        if kind == "Interface":
            assert endpoints[name]["Condition"] == ENDPOINT_CONDITIONS.get(name, "CreateVpcEndpoints")
            assert props["PrivateDnsEnabled"] is True
            assert props["SubnetIds"] == {"Ref": "OpenSearchSubnetIds"}  # where the functions run
            assert props["SecurityGroupIds"] == {"Ref": "OpenSearchSecurityGroupIds"}
        else:
            assert endpoints[name]["Condition"] == "CreateGatewayEndpoints"
            assert props["RouteTableIds"] == {"Ref": "VpcRouteTableIds"}
    assert not set(ENDPOINTS) & set(resolve_conditions(RES, {}))
    on = resolve_conditions(RES, {"UseVpc": True, "CreateVpcEndpoints": True, "CreateGatewayEndpoints": True,
                                  "CreateRerankEndpoint": True})
    assert set(ENDPOINTS) <= set(on)
    rerank = TEMPLATE["Conditions"]["CreateRerankEndpoint"]["Fn::And"]
    assert [list(c.values())[0] for c in rerank] == ["CreateVpcEndpoints", "UseBedrockReranker"]
    params = TEMPLATE["Parameters"]
    assert params["VpcId"]["Default"] == "" and params["VpcRouteTableIds"]["Default"] == ""


def test_every_parameter_is_on_the_deploy_page():
    """The deploy page (docs/deploy.md) names every parameter (with its default and why)."""
    page = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    missing = [p for p in TEMPLATE["Parameters"] if f"`{p}`" not in page]
    assert not missing, f"add to docs/deploy.md: {missing}"
def test_the_stream_function_streams_behind_the_web_adapter_on_an_iam_function_url():
    fn = RES["StreamFunction"]["Properties"]
    assert fn["FunctionUrlConfig"] == {"AuthType": "AWS_IAM", "InvokeMode": "RESPONSE_STREAM"}
    env = fn["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap" and env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert f'${{AWS_LWA_PORT:-{env["AWS_LWA_PORT"]}}}' in (ROOT / "functions/stream/run.sh").read_text()
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/health"
    # the request context is trusted on this function only, and the tenant rules are the query's
    assert env["ERAGRAPH_TRUST_REQUEST_CONTEXT"] == "true"
    for name, fn_other in of_type("AWS::Serverless::Function").items():
        if name != "StreamFunction":
            assert "ERAGRAPH_TRUST_REQUEST_CONTEXT" not in fn_other["Properties"].get("Environment", {}).get(
                "Variables", {}), name
    assert "ERAGRAPH_TRUST_REQUEST_CONTEXT" not in TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    query = RES["QueryFunction"]["Properties"]["Environment"]["Variables"]
    for name in ("ERAGRAPH_TENANT_TAG", "ERAGRAPH_TENANT_REQUIRED", "ERAGRAPH_TENANT_RATE", "ERAGRAPH_TENANT_BURST"):
        assert env[name] == query[name], name
    # the adapter's layer: a parameter, empty = the public layer of this Region
    layer = fn["Layers"][0]["Fn::If"]
    assert layer[0] == "PublicWebAdapter" and layer[2] == {"Ref": "WebAdapterLayerArn"}
    assert ":753240598075:layer:LambdaAdapterLayerX86:" in layer[1]["Fn::Sub"]
    assert TEMPLATE["Parameters"]["WebAdapterLayerArn"]["Default"] == ""
    assert TEMPLATE["Conditions"]["PublicWebAdapter"] == {"Fn::Equals": [{"Ref": "WebAdapterLayerArn"}, ""]}
    assert fn["ReservedConcurrentExecutions"] == {"Fn::If": ["ReserveStream", {"Ref": "StreamReservedConcurrency"},
                                                             {"Ref": "AWS::NoValue"}]}
    assert TEMPLATE["Parameters"]["StreamReservedConcurrency"]["Default"] == 10
    assert TEMPLATE["Outputs"]["StreamUrl"]["Value"] == {"Fn::GetAtt": ["StreamFunctionUrl", "FunctionUrl"]}


def test_rerank_and_answer_model_settings_are_parameters_of_the_query_and_stream_functions():
    params = TEMPLATE["Parameters"]
    assert params["Reranker"]["Default"] == "none" and params["Reranker"]["AllowedValues"] == ["none", "bedrock"]
    assert params["RerankModelId"]["Default"] == "amazon.rerank-v1:0"
    assert params["RerankCandidates"]["Default"] == 20 and params["AnswerModelArns"]["Default"] == ""
    from eragraph.config import Settings

    Settings(reranker="bedrock", rerank_model=params["RerankModelId"]["Default"],
             rerank_candidates=params["RerankCandidates"]["Default"])  # values the settings accept
    for name in ("QueryFunction", "StreamFunction"):
        env = RES[name]["Properties"]["Environment"]["Variables"]
        assert env["ERAGRAPH_RERANKER"] == {"Ref": "Reranker"}, name
        assert env["ERAGRAPH_RERANK_MODEL"] == {"Ref": "RerankModelId"}, name
        assert env["ERAGRAPH_RERANK_CANDIDATES"] == {"Ref": "RerankCandidates"}, name
        assert env["ERAGRAPH_ANSWER_MODELS"] == {"Fn::Join": [",", {"Ref": "AnswerModelArns"}]}, name


def test_stream_5xx_raise_an_alarm():
    """Behind the Lambda Web Adapter an app 5xx is a successful invocation: the adapter counts
    5xx as errors, and the app's own request lines feed a metric with its own alarm."""
    env = TEMPLATE["Resources"]["StreamFunction"]["Properties"]["Environment"]["Variables"]
    assert env["AWS_LWA_ERROR_STATUS_CODES"] == "500-599"
    metric = TEMPLATE["Resources"]["StreamServerErrorsMetric"]["Properties"]
    assert metric["LogGroupName"] == {"Ref": "StreamLogGroup"}
    assert '$.event = "request"' in metric["FilterPattern"] and "$.status >= 500" in metric["FilterPattern"]
    alarm = TEMPLATE["Resources"]["StreamServerErrorsAlarm"]["Properties"]
    assert alarm["MetricName"] == metric["MetricTransformations"][0]["MetricName"]
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


def test_a_tenant_cannot_fill_the_stream_function():
    """The rate limit counts requests; the open streams per tenant count what holds an execution,
    below what the function holds; every generating function caps the answer budget."""
    from eragraph.adapters.aws.stream_slots_dynamodb import LEASE_SECONDS
    from eragraph.config import ApiLimits

    params = TEMPLATE["Parameters"]
    env = RES["StreamFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ERAGRAPH_TENANT_STREAMS"] == {"Ref": "TenantStreamLimit"}
    assert env["ERAGRAPH_STREAM_CAPACITY"] == {"Ref": "StreamReservedConcurrency"}
    ApiLimits(tenant_streams=params["TenantStreamLimit"]["Default"],
              stream_capacity=params["StreamReservedConcurrency"]["Default"])  # the defaults agree
    assert RES["StreamFunction"]["Properties"]["Timeout"] < LEASE_SECONDS  # a lease outlives its stream
    for name in ("QueryFunction", "StreamFunction"):
        assert RES[name]["Properties"]["Environment"]["Variables"]["ERAGRAPH_ANSWER_MAX_BUDGET"] == {
            "Ref": "AnswerMaxBudget"}, name
    assert TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["ERAGRAPH_PRICES"] == {"Ref": "ModelPrices"}


def test_knowledge_base_ids_are_salted_by_a_secret_of_the_stack():
    """Every function gets ERAGRAPH_KB_ID_SALT (domain.knowledge_base): the NoEcho parameter, or
    the stack's own id; never empty, so a tenant's id cannot be computed from its name."""
    param = TEMPLATE["Parameters"]["KnowledgeBaseIdSalt"]
    assert param["NoEcho"] in (True, "true") and param["Default"] == ""
    salt = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]["ERAGRAPH_KB_ID_SALT"]
    assert salt == {"Fn::If": ["HasKbIdSalt", {"Ref": "KnowledgeBaseIdSalt"},
                               {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}]}
    for name, fn in of_type("AWS::Serverless::Function").items():
        own = ((fn["Properties"].get("Environment") or {}).get("Variables") or {})
        assert "ERAGRAPH_KB_ID_SALT" not in own, name  # the global one, never overridden


def test_the_search_domain_publishes_its_error_and_slow_logs():
    """CKV_AWS_84 done, not suppressed: the domain's application (error) logs and its search and
    indexing slow logs go to a log group with retention, which a resource policy lets only this
    account's domain write to (streams of that group only); the domain is created after it."""
    domain = RES["SearchDomain"]
    skips = [s["id"] for s in (domain.get("Metadata") or {}).get("checkov", {}).get("skip", [])]
    assert "CKV_AWS_84" not in skips
    group = RES["SearchLogGroup"]["Properties"]
    assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    target = {"Fn::Sub": "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:${SearchLogGroup}"}
    options = domain["Properties"]["LogPublishingOptions"]
    assert set(options) == {"ES_APPLICATION_LOGS", "SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS"}
    assert all(o == {"Enabled": True, "CloudWatchLogsLogGroupArn": target} for o in options.values())
    assert domain["DependsOn"] in ("SearchLogPolicy", ["SearchLogPolicy"])
    raw = RES["SearchLogPolicy"]["Properties"]["PolicyDocument"]["Fn::Sub"]
    policy = json.loads(re.sub(r"\$\{[^}]+\}", "X", raw))  # its substitutions as plain strings
    [statement] = policy["Statement"]
    assert statement["Principal"] == {"Service": "es.amazonaws.com"} and statement["Effect"] == "Allow"
    assert sorted(statement["Action"]) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert "${SearchLogGroup}:*" in raw and set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert "domain/eragraph-${Stage}" in raw and "aws:SourceAccount" in raw


def test_the_functions_that_hold_an_entity_graph_get_the_memory_it_needs():
    from eragraph.adapters.aws.entity_warm import held_chunk_cap

    param = TEMPLATE["Parameters"]["GraphWalkMemorySize"]
    assert (param["MinValue"], param["MaxValue"]) == (1024, 10240)
    assert held_chunk_cap(param["Default"]) >= 100_000  # a 100k-chunk tenant is held with the defaults
    for name, fn in of_type("AWS::Serverless::Function").items():
        memory = fn["Properties"].get("MemorySize")
        if name in ("QueryFunction", "StreamFunction", "ReindexFunction"):  # they hold it; the reindex writes its snapshot
            assert memory == {"Ref": "GraphWalkMemorySize"}, name
        else:
            assert memory is None, name  # the Globals' 1024
