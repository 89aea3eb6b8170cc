"""A small evaluator of IAM policy documents as template.yaml writes them, for tests: the
template's intrinsics resolved to one concrete stack (Stage dev, account 123456789012,
us-east-1), then IAM's rules: a request is allowed when some Allow statement matches it and no
Deny does. A statement matches when its Action and Resource patterns match (``*`` any run of
characters, ``?`` one, case-insensitive actions) and its Condition holds; conditions this
evaluator does not know never hold (so an Allow it cannot judge is not granted)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

STACK = {"Stage": "dev", "AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
         "AWS::URLSuffix": "amazonaws.com"}


def resource_arns(template: dict, parameters: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values of ``Logical.Arn`` and ``Ref`` for the resources the policies name."""
    p = {**{k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}, **STACK, **(parameters or {})}
    account, region, stage = p["AWS::AccountId"], p["AWS::Region"], p["Stage"]
    out = {}
    for name, res in template["Resources"].items():
        kind = res["Type"]
        if kind == "AWS::DynamoDB::Table":
            out[f"{name}.Arn"] = f"arn:aws:dynamodb:{region}:{account}:table/eragraph-{stage}-graph"
        elif kind == "AWS::S3::Bucket":  # its own name: a grant on one bucket is not a grant on another
            bucket = res["Properties"].get("BucketName")
            bucket = _sub(bucket["Fn::Sub"], p, {}) if isinstance(bucket, dict) else (bucket or name.lower())
            out[f"{name}.Arn"] = f"arn:aws:s3:::{bucket}"
        elif kind == "AWS::SQS::Queue":
            queue = res["Properties"].get("QueueName")
            queue = _sub(queue["Fn::Sub"], p, {}) if isinstance(queue, dict) else (queue or name)
            out[f"{name}.Arn"] = f"arn:aws:sqs:{region}:{account}:{queue}"
        elif kind == "AWS::Logs::LogGroup":
            group = _sub(res["Properties"]["LogGroupName"]["Fn::Sub"], p, {})
            out[f"{name}.Arn"] = f"arn:aws:logs:{region}:{account}:log-group:{group}:*"
        elif kind == "AWS::IAM::Role":
            out[f"{name}.Arn"] = f"arn:aws:iam::{account}:role/{name}"
    return out


def _sub(text: str, params: Mapping[str, str], arns: Mapping[str, str]) -> str:
    def value(m: re.Match) -> str:
        key = m.group(1)
        if key in params:
            return str(params[key])
        if key in arns:
            return arns[key]
        raise KeyError(f"no value for ${{{key}}}")
    return re.sub(r"\$\{([^}!]+)\}", value, text)


def resolve(node: Any, template: dict, conditions: Mapping[str, bool], parameters: Mapping[str, str] | None = None,
            arns: Mapping[str, str] | None = None) -> Any:
    """``node`` with Fn::If, Fn::Sub, Fn::GetAtt and Ref resolved for the concrete stack."""
    params = {**{k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}, **STACK, **(parameters or {})}
    arns = arns if arns is not None else resource_arns(template, parameters)

    def go(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"Fn::If"}:
                name, yes, no = v["Fn::If"]
                return go(yes if conditions[name] else no)
            if set(v) == {"Fn::Sub"}:
                if isinstance(v["Fn::Sub"], list):  # [text, {name: value}]
                    text, names = v["Fn::Sub"]
                    return _sub(text, {**params, **{k: go(x) for k, x in names.items()}}, arns)
                return _sub(v["Fn::Sub"], params, arns)
            if set(v) == {"Fn::Select"}:
                index, items = v["Fn::Select"]
                return go(items)[int(index)]
            if set(v) == {"Fn::Split"}:
                separator, text = v["Fn::Split"]
                return go(text).split(separator)
            if set(v) == {"Fn::Join"}:
                separator, items = v["Fn::Join"]
                items = go(items)
                return separator.join(items.split(",") if isinstance(items, str) else items)
            if set(v) == {"Fn::GetAtt"}:
                return arns[".".join(v["Fn::GetAtt"])]
            if set(v) == {"Ref"}:
                if v["Ref"] == "AWS::NoValue":
                    return None
                value = params.get(v["Ref"], v["Ref"])
                kind = template["Parameters"].get(v["Ref"], {}).get("Type", "")
                if kind == "CommaDelimitedList" or kind.startswith("List<"):  # a list, as CloudFormation gives it
                    return [x for x in str(value).split(",") if x] if isinstance(value, str) else value
                return value
            return {k: r for k, r in ((k, go(x)) for k, x in v.items()) if r is not None}
        if isinstance(v, list):
            return [r for r in (go(x) for x in v) if r is not None]
        return v

    return go(node)


def _list(v: Any) -> list:
    return v if isinstance(v, list) else [v]


def _condition_holds(condition: Mapping[str, Any], context: Mapping[str, Any], unknown: bool = False) -> bool:
    """Whether ``condition`` holds in ``context``; an operator this evaluator does not know
    holds as ``unknown`` says (False for an Allow: never granted; True for a Deny: it denies)."""
    for operator, tests in condition.items():
        for key, wanted in tests.items():
            wanted = _list(wanted)
            given = context.get(key)
            if operator == "ForAllValues:StringLike":
                values = _list(given) if given is not None else []
                if not all(any(fnmatchcase(v, w) for w in wanted) for v in values):
                    return False
            elif operator == "ForAnyValue:StringLike":
                values = _list(given) if given is not None else []
                if not any(any(fnmatchcase(v, w) for w in wanted) for v in values):
                    return False
            elif operator == "StringLike":
                if given is None or not any(fnmatchcase(str(given), w) for w in wanted):
                    return False
            elif operator == "StringEquals":
                if given is None or str(given) not in wanted:
                    return False
            elif operator == "ArnEquals":
                if given is None or str(given) not in wanted:
                    return False
            elif operator == "Bool":
                if given is None or str(given).lower() not in [str(w).lower() for w in wanted]:
                    return False
            elif not unknown:
                return False  # unknown to this evaluator: never holds
    return True


def _matches(statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
    if not any(fnmatchcase(action.lower(), a.lower()) for a in _list(statement.get("Action", []))):
        return False
    if not any(fnmatchcase(resource, r) for r in _list(statement.get("Resource", []))):
        return False
    return _condition_holds(statement.get("Condition") or {}, context, unknown=statement["Effect"] == "Deny")


def allowed(statements: Iterable[Mapping[str, Any]], action: str, resource: str,
            context: Mapping[str, Any] | None = None) -> bool:
    """Whether ``statements`` (one principal's, all its policies) allow ``action`` on
    ``resource``: an Allow matches and no Deny does."""
    context = context or {}
    statements = list(statements)
    if any(s["Effect"] == "Deny" and _matches(s, action, resource, context) for s in statements):
        return False
    return any(s["Effect"] == "Allow" and _matches(s, action, resource, context) for s in statements)


def role_statements(template: dict, role: str, conditions: Mapping[str, bool],
                    parameters: Mapping[str, str] | None = None) -> list[dict]:
    """Every statement of the role's inline policies, resolved (``parameters``: other than the defaults)."""
    props = template["Resources"][role]["Properties"]
    return [s for p in props["Policies"]
            for s in resolve(p, template, conditions, parameters)["PolicyDocument"]["Statement"]]


def domain_statements_for(template: dict, role: str, conditions: Mapping[str, bool]) -> list[dict]:
    """The OpenSearch domain access policy's statements whose principal is ``role``."""
    arns = resource_arns(template)
    policy = resolve(template["Resources"]["SearchDomain"]["Properties"]["AccessPolicies"], template, conditions)
    return [s for s in policy["Statement"] if arns[f"{role}.Arn"] in _list(s["Principal"]["AWS"])]
