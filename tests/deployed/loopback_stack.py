"""A deployed stack on loopback, as an operator who has just run ``sam deploy`` finds it: the built
functions (deployed.LambdaProcess) on the loopback cloud (moto + the HTTP OpenSearch fake), with

- ``LoopbackApi``: the HTTP API in front of the query function, on 127.0.0.1: the template's
  routes only (another is API Gateway's 404), each request authorized as API Gateway's IAM
  authorizer does (tests/aws/fake_gateway.py: SigV4 recomputed with botocore, the caller's
  principal ARN in the event), given a request id (the event's ``requestContext.requestId`` and
  the ``apigw-requestid`` response header) and written to the access log group in moto's
  CloudWatch Logs, one JSON line per request in the template's access log format;
- ``EventSources``: the event source mappings, in a thread: the ingest queue (which the bucket's
  notification feeds) through the ingest function, the summarize FIFO queue through the
  summarize function; ``paused`` stops them (an ingest function that no event reaches);
- ``create_stack``: the CloudFormation stack in moto, its outputs and parameters named as
  template.yaml names them, so that ``DescribeStacks`` finds this cloud's resources;
- ``tenant_callers``: IAM users under the template's TenantPrincipalPath, tagged with their
  tenant, with access keys the gateway knows, as named profiles of a credentials file."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote_plus

import deployed as dp
import moto_s3_events

AWS_TESTS = Path(__file__).resolve().parents[1] / "aws"


def _fake_gateway():
    """tests/aws/fake_gateway.py (the gateway the console proxy's tests run against), imported once."""
    if "fake_gateway" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fake_gateway", AWS_TESTS / "fake_gateway.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fake_gateway"] = module
        spec.loader.exec_module(module)
    return sys.modules["fake_gateway"]


def client(cloud: dp.LoopbackCloud, service: str):
    """A boto3 client of ``service`` in the loopback cloud, as the operator (moto takes any key)."""
    import boto3

    return boto3.client(service, endpoint_url=cloud.endpoint, region_name=dp.REGION,
                        **{k.lower(): v for k, v in dp.FAKE_CREDENTIALS.items()})


def template_routes() -> list[tuple[str, re.Pattern]]:
    """(route key, its pattern) of every AWS::ApiGatewayV2::Route of template.yaml."""
    resources = dp.load_template(dp.ROOT / "template.yaml")["Resources"]
    out = []
    for res in resources.values():
        if res.get("Type") != "AWS::ApiGatewayV2::Route":
            continue
        key = res["Properties"]["RouteKey"]
        method, path = key.split(" ", 1)
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path))
        out.append((key, re.compile(f"{re.escape(method)} {pattern}")))
    return out


def template_value(resource: str, prop: str, parameters: dict[str, str]) -> str:
    """A ``!Sub`` string property of a template resource (a log group's name) with the stack's parameters."""
    value = dp.load_template(dp.ROOT / "template.yaml")["Resources"][resource]["Properties"][prop]
    text = value["Fn::Sub"] if isinstance(value, dict) else value
    return re.sub(r"\$\{([^}]+)\}", lambda m: parameters[m[1]], text)


class LoopbackApi:
    """The HTTP API (IAM authorization) in front of the built query function."""

    def __init__(self, query: dp.LambdaProcess, cloud: dp.LoopbackCloud, access_log_group: str,
                 principals: dict[str, tuple[str, str | None, str]] | None = None,
                 tokens: dict[str, dict] | None = None, stream: str = "access") -> None:
        """IAM authorization with ``principals`` (access key -> secret, token, ARN), or JWT with
        ``tokens`` (bearer token -> its claims); the access log in ``stream`` of the group."""
        self.query = query
        self.routes = template_routes()
        self.broken: dict[str, tuple[int, dict]] = {}  # route key -> what the gateway answers instead
        self.log_group = access_log_group
        self.logs = client(cloud, "logs")
        self.stream = stream
        if not self.logs.describe_log_groups(logGroupNamePrefix=access_log_group)["logGroups"]:
            self.logs.create_log_group(logGroupName=access_log_group)
        self.logs.create_log_stream(logGroupName=access_log_group, logStreamName=stream)
        # one warm container: its driver takes one event at a time, whichever gateway sends it
        self._lock = query.__dict__.setdefault("gateway_lock", threading.Lock())
        self._request: tuple[str, str] = ("", "")  # (request id, route key) of the request being served
        self.gateway = _fake_gateway().FakeHttpApi(self._invoke, mode="jwt" if tokens else "iam", region=dp.REGION,
                                                   principals=principals, tokens=tokens)
        self.gateway.answer = self._answer

    def route_of(self, method: str, target: str) -> str | None:
        path = target.partition("?")[0]
        return next((key for key, pattern in self.routes if pattern.fullmatch(f"{method} {path}")), None)

    def _invoke(self, event: dict, context) -> dict:  # noqa: ARG002 (the function's own context)
        request_id, route = self._request
        event["requestContext"]["requestId"] = request_id
        event["routeKey"] = event["requestContext"]["routeKey"] = route
        return self.query.result(event)

    def _answer(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        request_id = uuid.uuid4().hex[:16]
        route = self.route_of(method, target)
        with self._lock:
            if route is None:
                status, out_headers, payload = 404, {"content-type": "application/json"}, b'{"message":"Not Found"}'
            elif route in self.broken:
                status, answer = self.broken[route]
                out_headers, payload = {"content-type": "application/json"}, json.dumps(answer).encode()
            else:
                self._request = (request_id, route)
                status, out_headers, payload = type(self.gateway).answer(self.gateway, method, target, headers, body)
            self._access_log(request_id, route or "-", status, headers)
        return status, {**out_headers, "apigw-requestid": request_id}, payload

    def _access_log(self, request_id: str, route: str, status: int, headers: dict[str, str]) -> None:
        authorization = headers.get("authorization", "")
        key = authorization.split("Credential=", 1)[-1].split("/", 1)[0]
        claims = self.gateway.tokens.get(authorization.removeprefix("Bearer "), {})
        line = {"requestId": request_id, "route": route, "status": str(status),
                "callerArn": self.gateway.principals.get(key, ("", None, "-"))[2], "jwtSub": claims.get("sub", "-"),
                "jwtTenant": claims.get("tenant", "-")}
        self.logs.put_log_events(logGroupName=self.log_group, logStreamName=self.stream, logEvents=[
            {"timestamp": int(time.time() * 1000), "message": json.dumps(line)}])

    def access_log(self) -> list[dict]:
        events = self.logs.get_log_events(logGroupName=self.log_group, logStreamName=self.stream,
                                          startFromHead=True)["events"]
        return [json.loads(e["message"]) for e in events]

    def start(self) -> str:
        return self.gateway.start()

    def stop(self) -> None:
        self.gateway.stop()


class EventSources:
    """The ingest and summarize event source mappings, polled in a thread until stopped."""

    def __init__(self, cloud: dp.LoopbackCloud, ingest: dp.LambdaProcess, summarize: dp.LambdaProcess) -> None:
        self.cloud, self.ingest, self.summarize = cloud, ingest, summarize
        self.paused = threading.Event()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> EventSources:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _deliver(self, fn: dp.LambdaProcess, url: str, arn: str) -> int:
        c = self.cloud
        messages = c.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, fn.fn.batch_size()),
                                         AttributeNames=["All"], MessageAttributeNames=["All"],
                                         WaitTimeSeconds=0).get("Messages", [])
        if not messages:
            return 0
        out = fn.result(c.sqs_event(messages, arn)) or {}
        failed = {f["itemIdentifier"] for f in out.get("batchItemFailures", [])}
        if failed:
            self.failures.append(f"{fn.fn.logical_id}: {len(failed)} records failed\n{dp.failure_lines(fn)}")
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            c.sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        return len(messages)

    def _loop(self) -> None:
        c = self.cloud
        while not self._stop.is_set():
            if self.paused.is_set():
                time.sleep(0.1)
                continue
            try:
                n = self._deliver(self.ingest, c.ingest_url, c.ingest_arn)
                n += self._deliver(self.summarize, c.summarize_url, c.summarize_arn)
            except Exception as exc:  # noqa: BLE001 (reported by the test, as a DLQ alarm would)
                self.failures.append(repr(exc))
                n = 0
            if not n:
                time.sleep(0.1)


class RemovalNotifications:
    """The ``s3:ObjectRemoved:DeleteMarkerCreated`` notification S3 sends when an object of a
    versioned bucket is deleted, which moto's S3 does not send (it notifies a delete on an
    unversioned bucket only): while installed, a DeleteObject that makes a delete marker sends it
    to the bucket's matching queue configurations (the template's filter), with the marker's
    version id and a sequencer after every earlier one."""

    def __init__(self) -> None:
        from moto.s3 import models

        self.backend = models.S3Backend
        self.real = models.S3Backend.delete_object

    def install(self) -> RemovalNotifications:
        from moto.s3 import notifications

        real = self.real

        def delete_object(backend, bucket_name, key_name, version_id=None, bypass=False):
            out = real(backend, bucket_name, key_name, version_id, bypass)
            meta = out[1] if isinstance(out, tuple) else {}
            bucket = backend.get_bucket(bucket_name)
            if meta.get("delete-marker") == "true" and bucket.notification_configuration is not None:
                event = notifications.S3NotificationEvent.OBJECT_REMOVED_DELETE_MARKER_CREATED_EVENT
                for config in bucket.notification_configuration.queue:
                    if config.matches(event, key_name):
                        # the sequencer in the same order as the notifications moto sends (S3 compares
                        # sequencers right-padded: one zero-padded on the left would read as older)
                        body = {"Records": [moto_s3_events.as_s3_sends({
                            "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": bucket.region_name,
                            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                            "eventName": event[3:], "s3": {
                                "s3SchemaVersion": "1.0", "configurationId": config.id,
                                "bucket": {"name": bucket.name, "arn": bucket.arn},
                                "object": {"key": quote_plus(key_name, safe="/"), "versionId": meta["version-id"],
                                           "sequencer": moto_s3_events.sequencer()}}})]}
                        notifications._send_sqs_message(backend.account_id, body, config.arn.split(":")[-1],
                                                        config.arn.split(":")[3])
            return out

        self.backend.delete_object = delete_object
        return self

    def remove(self) -> None:
        self.backend.delete_object = self.real


def create_stack(cloud: dp.LoopbackCloud, name: str, api_url: str, parameters: dict[str, str]) -> None:
    """The stack in moto's CloudFormation: the template's output names, this cloud's values."""
    outputs = {"ApiUrl": api_url, "DocumentsBucketName": cloud.bucket, "GraphTableName": cloud.table,
               "SearchDomainEndpoint": cloud.search.endpoint, "SummarizeQueueUrl": cloud.summarize_url,
               "ApiAccessLogGroupName": template_value("ApiAccessLogGroup", "LogGroupName", parameters)}
    declared = dp.load_template(dp.ROOT / "template.yaml")["Outputs"]
    assert set(outputs) <= set(declared), f"not outputs of template.yaml: {set(outputs) - set(declared)}"
    body = {"Parameters": {k: {"Type": "String"} for k in parameters},
            # moto keeps a stack of resources it does not model as a record with its outputs
            "Resources": {"Loopback": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
            "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
    client(cloud, "cloudformation").create_stack(
        StackName=name, TemplateBody=json.dumps(body),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()])


def tenant_callers(cloud: dp.LoopbackCloud, tenants: dict[str, str], credentials_file: Path,
                   tag: str = "eragraph-tenant", path: str = "/eragraph/") -> dict[str, tuple[str, None, str]]:
    """For each profile name -> tenant: an IAM user under ``path`` tagged ``tag`` = tenant, its
    access key written as that profile in ``credentials_file``. Returns the gateway's principals."""
    iam = client(cloud, "iam")
    principals, lines = {}, []
    for profile, tenant in tenants.items():
        user = iam.create_user(UserName=f"smoke-{profile}", Path=path, Tags=[{"Key": tag, "Value": tenant}])["User"]
        key = iam.create_access_key(UserName=user["UserName"])["AccessKey"]
        principals[key["AccessKeyId"]] = (key["SecretAccessKey"], None, user["Arn"])
        lines += [f"[{profile}]", f"aws_access_key_id = {key['AccessKeyId']}",
                  f"aws_secret_access_key = {key['SecretAccessKey']}", f"region = {dp.REGION}", ""]
    credentials_file.write_text("\n".join(lines))
    return principals
