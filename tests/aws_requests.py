"""What IAM authorizes for one botocore call: the (action, resource, condition keys) requests an
operation makes, as the service authorization reference lists them, for the services the
functions and the operator CLI call. Used by the IAM judge (tests/iam_judge.py).

* DynamoDB: each item of TransactWriteItems (Put/Update/Delete/ConditionCheck: PutItem,
  UpdateItem, DeleteItem, ConditionCheckItem), of TransactGetItems (GetItem), of BatchWriteItem
  and of BatchGetItem is one request, with its partition key as ``dynamodb:LeadingKeys``; a
  Query or Scan naming an index is on the index's ARN; a Query's leading key is read from its
  key condition.
* S3: HeadObject is s3:GetObject (a VersionId: s3:GetObjectVersion), ListObjectsV2 and
  HeadBucket are s3:ListBucket (``s3:prefix`` when a Prefix is given), ListObjectVersions is
  s3:ListBucketVersions, DeleteObjects is one s3:DeleteObject(Version) per key, CopyObject
  reads its source and writes its target, a multipart upload is s3:PutObject.
* SQS: a batch is its single action (SendMessageBatch: sqs:SendMessage).
* Bedrock: Converse is bedrock:InvokeModel, ConverseStream bedrock:InvokeModelWithResponseStream,
  Rerank is bedrock:Rerank on ``*`` plus bedrock:InvokeModel on its model.
* IAM tag reads are on the principal's ARN, its path included (``path_of`` finds it).

An operation not listed here is ``<service prefix>:<Operation>`` on the resource its
parameters name (a table, a bucket, a queue), or on ``*``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Request:
    """One authorization: ``what`` says which part of the call it is (for the refusal message)."""

    action: str
    resource: str
    context: tuple[tuple[str, Any], ...] = ()
    what: str = ""

    def context_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.context}


@dataclass
class Names:
    """Physical names (the test's table, bucket, queues) -> the template's ARNs, and the key
    attributes of the tables and indexes."""

    arns: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, physical name) -> ARN
    hash_keys: dict[str, str] = field(default_factory=dict)  # table or "table/index/NAME" -> HASH attribute
    path_of: Callable[[str, str], str] = lambda kind, name: "/"  # IAM principal (role/user) -> its path

    def table(self, region: str, name: str, index: str | None = None) -> str:
        base = self.arns.get(("table", name)) or f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{name}"
        return f"{base}/index/{index}" if index else base

    def bucket(self, name: str) -> str:
        return self.arns.get(("bucket", name)) or f"arn:aws:s3:::{name}"

    def queue(self, region: str, url_or_name: str) -> str:
        name = url_or_name.rstrip("/").rsplit("/", 1)[-1]
        return self.arns.get(("queue", name)) or f"arn:aws:sqs:{region}:{ACCOUNT}:{name}"

    def hash_key(self, table: str, index: str | None = None) -> str:
        return self.hash_keys.get(f"{table}/index/{index}" if index else table, "PK")


PREFIX = {"dynamodb": "dynamodb", "s3": "s3", "sqs": "sqs", "iam": "iam", "cognito-idp": "cognito-idp",
          "bedrock-runtime": "bedrock", "bedrock-agent-runtime": "bedrock", "bedrock-agent": "bedrock",
          "sts": "sts", "cloudwatch": "cloudwatch", "logs": "logs", "lambda": "lambda", "es": "es",
          "opensearch": "es", "cloudformation": "cloudformation"}
FREE = {("sts", "GetCallerIdentity")}  # no permission needed


def _scalar(value: Mapping[str, Any]) -> str:
    """A DynamoDB attribute value ({"S": ...}, {"N": ...}, {"B": ...}) as IAM compares it."""
    for kind in ("S", "N", "B"):
        if kind in value:
            return str(value[kind])
    return str(value)


def _leading(key: Mapping[str, Any] | None, attribute: str) -> tuple:
    if not key or attribute not in key:
        return ()
    return (_scalar(key[attribute]),)


def _ddb(operation: str, params: Mapping[str, Any], region: str, names: Names) -> list[Request]:
    def one(action: str, table: str, key: Mapping | None, what: str, index: str | None = None,
            leading: tuple | None = None) -> Request:
        keys = leading if leading is not None else _leading(key, names.hash_key(table, index))
        context = (("dynamodb:LeadingKeys", keys),) if keys else ()
        return Request(f"dynamodb:{action}", names.table(region, table, index), context, what)

    if operation == "TransactWriteItems":
        kinds = {"Put": ("PutItem", "Item"), "Update": ("UpdateItem", "Key"), "Delete": ("DeleteItem", "Key"),
                 "ConditionCheck": ("ConditionCheckItem", "Key")}
        out = []
        for i, entry in enumerate(params.get("TransactItems", [])):
            (kind, body), = entry.items()
            action, part = kinds[kind]
            out.append(one(action, body["TableName"], body.get(part), f"item {i} ({kind})"))
        return out
    if operation == "TransactGetItems":
        return [one("GetItem", e["Get"]["TableName"], e["Get"].get("Key"), f"item {i} (Get)")
                for i, e in enumerate(params.get("TransactItems", []))]
    if operation == "BatchWriteItem":
        out = []
        for table, entries in params.get("RequestItems", {}).items():
            for i, entry in enumerate(entries):
                (kind, body), = entry.items()
                out.append(one("BatchWriteItem", table, body.get("Item") or body.get("Key"), f"{table} item {i} ({kind})"))
        return out
    if operation == "BatchGetItem":
        return [one("BatchGetItem", table, key, f"{table} key {i}")
                for table, spec in params.get("RequestItems", {}).items() for i, key in enumerate(spec.get("Keys", []))]
    table = params.get("TableName", "")
    index = params.get("IndexName")
    if operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem"):
        return [one(operation, table, params.get("Item") if operation == "PutItem" else params.get("Key"), "")]
    if operation == "Query":
        return [one("Query", table, None, "", index, _query_leading(params, names.hash_key(table, index)))]
    if operation == "Scan":
        return [Request("dynamodb:Scan", names.table(region, table, index), (), "")]
    return [Request(f"dynamodb:{operation}", names.table(region, table) if table else "*", (), "")]


def _query_leading(params: Mapping[str, Any], attribute: str) -> tuple:
    """The partition key value of a Query (KeyConditionExpression or the legacy KeyConditions)."""
    if "KeyConditions" in params:
        cond = params["KeyConditions"].get(attribute, {})
        return tuple(_scalar(v) for v in cond.get("AttributeValueList", []))
    expression = params.get("KeyConditionExpression", "")
    names = params.get("ExpressionAttributeNames", {})
    values = params.get("ExpressionAttributeValues", {})
    for name, value in re.findall(r"(#?[\w.]+)\s*=\s*(:[\w]+)", expression):
        if names.get(name, name) == attribute and value in values:
            return (_scalar(values[value]),)
    return ()


def _s3(operation: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    bucket = params.get("Bucket", "")
    arn = names.bucket(bucket)

    def obj(action: str, key: str, what: str = "") -> Request:
        return Request(action, f"{arn}/{key}", (), what)

    versioned = "VersionId" in params
    if operation in ("GetObject", "HeadObject"):
        return [obj("s3:GetObjectVersion" if versioned else "s3:GetObject", params["Key"])]
    if operation in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        return [obj("s3:PutObject", params["Key"])]
    if operation == "DeleteObject":
        return [obj("s3:DeleteObjectVersion" if versioned else "s3:DeleteObject", params["Key"])]
    if operation == "DeleteObjects":
        return [obj("s3:DeleteObjectVersion" if "VersionId" in o else "s3:DeleteObject", o["Key"], f"object {i}")
                for i, o in enumerate(params.get("Delete", {}).get("Objects", []))]
    if operation == "CopyObject":
        source = params["CopySource"]
        if isinstance(source, str):
            src_bucket, _, src_key = unquote(source).lstrip("/").partition("/")
            src_key = src_key.split("?versionId=")[0]
        else:
            src_bucket, src_key = source["Bucket"], source["Key"]
        return [Request("s3:GetObject", f"{names.bucket(src_bucket)}/{src_key}", (), "source"), obj("s3:PutObject", params["Key"])]
    if operation in ("ListObjectsV2", "ListObjects", "HeadBucket", "ListObjectVersions"):
        action = "s3:ListBucketVersions" if operation == "ListObjectVersions" else "s3:ListBucket"
        context = (("s3:prefix", params["Prefix"]),) if "Prefix" in params else ()
        return [Request(action, arn, context, "")]
    renamed = {"GetBucketNotificationConfiguration": "s3:GetBucketNotification",
               "PutBucketNotificationConfiguration": "s3:PutBucketNotification",
               "GetObjectTagging": "s3:GetObjectTagging", "AbortMultipartUpload": "s3:AbortMultipartUpload"}
    action = renamed.get(operation, f"s3:{operation}")
    return [Request(action, f"{arn}/{params['Key']}" if "Key" in params else arn, (), "")]


def _sqs(operation: str, params: Mapping[str, Any], region: str, names: Names) -> list[Request]:
    single = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
              "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}
    queue = params.get("QueueUrl") or params.get("QueueName") or "*"
    return [Request(f"sqs:{single.get(operation, operation)}", names.queue(region, queue), (), "")]


def _model_arn(region: str, model: str) -> str:
    model = unquote(model)
    return model if model.startswith("arn:") else f"arn:aws:bedrock:{region}::foundation-model/{model}"


def _bedrock(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    if operation in ("InvokeModel", "Converse"):
        return [Request("bedrock:InvokeModel", _model_arn(region, params["modelId"]), (), "")]
    if operation in ("InvokeModelWithResponseStream", "ConverseStream"):
        return [Request("bedrock:InvokeModelWithResponseStream", _model_arn(region, params["modelId"]), (), "")]
    if operation == "Rerank":
        config = params.get("rerankingConfiguration", {}).get("bedrockRerankingConfiguration", {})
        model = config.get("modelConfiguration", {}).get("modelArn", "")
        return [Request("bedrock:Rerank", "*", (), ""), Request("bedrock:InvokeModel", _model_arn(region, model), (), "model")]
    return [Request(f"bedrock:{operation}", "*", (), "")]


def requests_of(service: str, operation: str, params: Mapping[str, Any], region: str, names: Names) -> list[Request]:
    """The authorizations IAM makes for one call (empty: the call needs none)."""
    if (service, operation) in FREE:
        return []
    if service == "dynamodb":
        return _ddb(operation, params, region, names)
    if service == "s3":
        return _s3(operation, params, names)
    if service == "sqs":
        return _sqs(operation, params, region, names)
    if service.startswith("bedrock"):
        return _bedrock(operation, params, region)
    if service == "iam" and operation in ("ListRoleTags", "ListUserTags", "GetRole", "GetUser"):
        kind = "role" if "Role" in operation else "user"
        name = params.get("RoleName") or params.get("UserName", "")
        return [Request(f"iam:{operation}", f"arn:aws:iam::{ACCOUNT}:{kind}{names.path_of(kind, name)}{name}", (), "")]
    if service == "cognito-idp" and "UserPoolId" in params:
        return [Request(f"cognito-idp:{operation}",
                        f"arn:aws:cognito-idp:{region}:{ACCOUNT}:userpool/{params['UserPoolId']}", (), "")]
    return [Request(f"{PREFIX.get(service, service)}:{operation}", "*", (), "")]
