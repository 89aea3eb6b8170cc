"""The IAM judge: every botocore call made while a function's code runs is judged as IAM would
judge it for that function's role in template.yaml, and a refused call fails the test that made
it. moto evaluates no IAM policy, so without this a call the deployed role would refuse passes.

* Which function runs: ``FUNCTION`` (a context variable), set around a handler's invocation by
  ``attach`` (tests/lambda_support.load_handler: the module's ``handler``, or the stream
  function's ASGI app) and around the CLI's ``--profile aws`` commands (the operator). Worker
  threads of a ThreadPoolExecutor inherit it (``submit`` runs the task in a copy of the
  caller's context). A call made outside any function (a test's own setup) is not judged.
* What a call asks: tests/aws_requests.py (each item of a transaction or batch, HeadObject as
  s3:GetObject, an index's ARN...).
* The policy: the role's inline policies (tests/policy_eval.py resolves the template's
  intrinsics), for the parameters the test deploys: a parameter the function reads from an
  environment variable (``ERAGRAPH_SOURCE_BUCKETS: !Join [",", !Ref DataSourceBuckets]``) takes
  the test's value, and the template's Conditions are evaluated from them. The test's table,
  bucket and queues (named in the same variables) stand for the template's. The documents
  bucket's policy adds its Deny statements to calls on that bucket. Deny wins; a condition the
  evaluator does not know never grants (and a Deny with one denies).
* The operator (the CLI's ``--profile aws``): infra/operator-policy.yaml, the managed policy
  docs/deploy.md tells operators to attach.

pytest hooks (registered by tests/conftest.py): after each test phase, the calls it made that the
roles refuse fail it, each named with its function, operation, keys and the grant it lacks."""

from __future__ import annotations

import collections
import contextvars
import functools
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aws_requests import Names, Request, requests_of
from policy_eval import STACK, _matches as matches, allowed, resolve, resource_arns

ROOT = Path(__file__).resolve().parents[1]
FUNCTION: contextvars.ContextVar[str | None] = contextvars.ContextVar("eragraph_iam_function", default=None)
OPERATOR = "operator"
OPERATOR_POLICY = ROOT / "infra" / "operator-policy.yaml"
REFUSED: list[str] = []  # refusals since the current test phase began
# the environment the test's engines were built from (tests/aws/aws_helpers.aws_engine), over the
# process's: a test that sets a deployment variable there (ERAGRAPH_SOURCE_BUCKETS) deploys it
DEPLOYED: dict[str, str] = {}
JUDGED: collections.Counter = collections.Counter()  # calls judged per function (the run's summary)
SPENT = [0.0]  # seconds spent judging (the run's summary: what the judge costs)
_LOCK = threading.Lock()
# the resources the functions name in their environment (the test's physical names stand for them)
RESOURCE_VARIABLES = {"ERAGRAPH_TABLE": ("table", "GraphTable"), "ERAGRAPH_BUCKET": ("bucket", "DocumentsBucket"),
                      "ERAGRAPH_SUMMARIZE_QUEUE_URL": ("queue", "SummarizeQueue"),
                      "ERAGRAPH_REINDEX_QUEUE_URL": ("queue", "ReindexQueue"),
                      "ERAGRAPH_SNAPSHOT_BUCKET": ("bucket", "EntitySnapshotBucket")}


@functools.cache
def _template() -> dict:
    from contract.aws_factories import load_template

    return load_template()


@functools.cache
def _operator_template() -> dict:
    from contract.aws_factories import load_template

    return load_template(OPERATOR_POLICY)


def functions() -> dict[str, dict]:
    """Function name (its folder under functions/) -> its template resource."""
    return {res["Properties"]["CodeUri"].strip("/").rsplit("/", 1)[-1]: res
            for res in _template()["Resources"].values() if res["Type"] == "AWS::Serverless::Function"}


# ------------------------------------------------------------------ parameters and conditions
def _condition(node: Any, params: Mapping[str, Any], conditions: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        (op, arg), = node.items()
        if op == "Ref":
            return params.get(arg, "")
        if op in ("Condition", "Fn::Condition"):
            return _condition(conditions[arg], params, conditions)
        if op == "Fn::Equals":
            a, b = (_condition(x, params, conditions) for x in arg)
            return str(a) == str(b)
        if op == "Fn::Not":
            return not _condition(arg[0], params, conditions)
        if op == "Fn::And":
            return all(_condition(x, params, conditions) for x in arg)
        if op == "Fn::Or":
            return any(_condition(x, params, conditions) for x in arg)
        if op == "Fn::Join":
            sep, items = arg
            items = _condition(items, params, conditions)
            return sep.join(items.split(",") if isinstance(items, str) else items)
        raise ValueError(f"the judge cannot evaluate {op} in a condition")
    return node


def deployed_parameters(function: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The template parameters ``environ`` implies for ``function``: each variable set from a
    parameter (``!Ref P``, ``!Join [",", !Ref P]``, ``!If [C, !Ref P, ""]``) gives P its value."""
    template = _template()
    variables = {**template["Globals"]["Function"]["Environment"]["Variables"],
                 **(functions()[function]["Properties"].get("Environment", {}).get("Variables", {})
                    if function in functions() else {})}
    out: dict[str, str] = {}
    for name, value in variables.items():
        if name not in environ or not isinstance(value, dict):
            continue
        if "Fn::Join" in value and isinstance(value["Fn::Join"][1], dict):
            value = value["Fn::Join"][1]
        if "Fn::If" in value:  # set: the condition holds (ERAGRAPH_JWT_ISSUER: !If [UseJwt, !Ref JwtIssuer, ""])
            condition, yes, _ = value["Fn::If"]
            rule = template["Conditions"][condition]
            if environ[name] and "Fn::Equals" in rule and isinstance(rule["Fn::Equals"][0], dict):
                out[rule["Fn::Equals"][0]["Ref"]] = str(rule["Fn::Equals"][1])
            value = yes if environ[name] else {}
        if set(value) == {"Ref"} and value["Ref"] in template["Parameters"]:
            out[value["Ref"]] = environ[name]
    return out


def conditions_for(parameters: Mapping[str, str]) -> dict[str, bool]:
    template = _template()
    params = {**{k: str(v.get("Default", "")) for k, v in template["Parameters"].items()}, **parameters}
    return {name: bool(_condition(rule, params, template["Conditions"])) for name, rule in template["Conditions"].items()}


# ------------------------------------------------------------------ policies
@functools.lru_cache(maxsize=64)
def _statements(function: str, parameters: tuple[tuple[str, str], ...]) -> tuple[list[dict], list[dict]]:
    """(the principal's statements, the documents bucket policy's Deny statements)."""
    template = _template()
    params = dict(parameters)
    conditions = conditions_for(params)
    bucket_policy = resolve(template["Resources"]["DocumentsBucketPolicy"]["Properties"]["PolicyDocument"], template,
                            conditions, params)["Statement"]
    denies = [s for s in bucket_policy if s["Effect"] == "Deny"]
    if function == OPERATOR:
        policy = _operator_template()["Resources"]["OperatorPolicy"]["Properties"]["PolicyDocument"]
        return resolve(policy, template, conditions, params)["Statement"], denies
    role = functions()[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    props = template["Resources"][role]["Properties"]
    statements = [s for p in props["Policies"] for s in resolve(p, template, conditions, params)["PolicyDocument"]["Statement"]]
    return statements, denies


def _names(environ: Mapping[str, str]) -> Names:
    template = _template()
    arns = resource_arns(template)
    names = Names(path_of=_principal_path)
    for variable, (kind, logical) in RESOURCE_VARIABLES.items():
        value = environ.get(variable)
        if value:
            names.arns[(kind, value.rstrip("/").rsplit("/", 1)[-1])] = arns[f"{logical}.Arn"]
    table = environ.get("ERAGRAPH_TABLE")
    if table:
        props = template["Resources"]["GraphTable"]["Properties"]
        hash_of = lambda schema: next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")  # noqa: E731
        names.hash_keys[table] = hash_of(props["KeySchema"])
        for index in props.get("GlobalSecondaryIndexes", []):
            names.hash_keys[f"{table}/index/{index['IndexName']}"] = hash_of(index["KeySchema"])
    return names


def _principal_path(kind: str, name: str) -> str:
    """A moto role's or user's path (its ARN holds it; the tag read's resource does too)."""
    try:
        from moto.iam.models import iam_backends

        backend = iam_backends[STACK["AWS::AccountId"]]["global"]
        found = backend.roles.values() if kind == "role" else backend.users.values()
        for principal in found:
            if getattr(principal, "name", None) == name:
                return principal.path or "/"
    except Exception:  # noqa: BLE001  (no moto backend: the path is unknown, the default one)
        pass
    return "/"


@functools.cache
def _principal_tags(function: str) -> dict[str, str]:
    """``aws:PrincipalTag/<key>`` of the function's role (its Tags in the template)."""
    if function not in functions():
        return {}
    role = functions()[function]["Properties"]["Role"]["Fn::GetAtt"][0]
    tags = _template()["Resources"][role]["Properties"].get("Tags") or []
    return {f"aws:PrincipalTag/{t['Key']}": str(t["Value"]) for t in tags if isinstance(t.get("Value"), str)}


_VERDICTS: dict[tuple, str | None] = {}


def verdict(function: str, request: Request, parameters: tuple, statements: list[dict], denies: list[dict]) -> str | None:
    """None when allowed; else why not (the Deny statement, or the grant that is missing)."""
    key = (function, parameters, request.action, request.resource, request.context)
    if key in _VERDICTS:
        return _VERDICTS[key]
    context = {"aws:SecureTransport": "true", **_principal_tags(function), **request.context_dict()}
    why = None
    for deny in [s for s in statements if s["Effect"] == "Deny"] + (denies if request.action.startswith("s3:") else []):
        if matches(deny, request.action, request.resource, context):
            why = f"denied by statement {deny.get('Sid', '(no Sid)')}"
            break
    if why is None and not allowed(statements, request.action, request.resource, context):
        why = f"no statement allows {request.action} on {request.resource}" + (
            f" with {request.context_dict()}" if request.context else "")
    if len(_VERDICTS) > 200_000:  # keys (LeadingKeys) vary without bound: memory stays bounded
        _VERDICTS.clear()
    _VERDICTS[key] = why
    return why


_DEPLOYMENTS: dict[tuple, tuple] = {}


@functools.cache
def _variables(function: str) -> tuple[str, ...]:
    """The environment variables that decide ``function``'s policy and resource names."""
    mine = functions()[function]["Properties"].get("Environment", {}).get("Variables", {}) if function in functions() else {}
    return tuple(sorted({*_template()["Globals"]["Function"]["Environment"]["Variables"], *mine, *RESOURCE_VARIABLES}))


def _deployment(function: str, environ: Mapping[str, str]) -> tuple:
    """(parameters, statements, bucket denies, names) of ``function`` in ``environ``, cached on
    the values of the variables that decide them."""
    key = (function, tuple(environ.get(v) for v in _variables(function)))
    found = _DEPLOYMENTS.get(key)
    if found is None:
        parameters = tuple(sorted(deployed_parameters(function, environ).items()))
        found = _DEPLOYMENTS[key] = (parameters, *_statements(function, parameters), _names(environ))
    return found


def judge_call(function: str, service: str, operation: str, params: Mapping[str, Any], region: str,
               environ: Mapping[str, str]) -> list[str]:
    """The refusals of one call made as ``function`` (empty: IAM allows all of it)."""
    parameters, statements, denies, names = _deployment(function, environ)
    out = []
    for request in requests_of(service, operation, params, region, names):
        why = verdict(function, request, parameters, statements, denies)
        if why is not None:
            part = f" {request.what}" if request.what else ""
            keys = f" keys {request.context_dict()}" if request.context else ""
            out.append(f"IAM would refuse the {function} function's {service} {operation}{part}: "
                       f"{request.action} on {request.resource}{keys} ({why})")
    return out


# ------------------------------------------------------------------ recording
def _record(service: str, operation: str, params: Mapping[str, Any], region: str) -> None:
    function = FUNCTION.get()
    if function is None:
        return
    began = time.perf_counter()
    try:
        environ = collections.ChainMap(DEPLOYED, os.environ) if DEPLOYED else os.environ
        refusals = judge_call(function, service, operation, params, region or STACK["AWS::Region"], environ)
        JUDGED[function] += 1
    except Exception as exc:  # noqa: BLE001  (never raised into the code under test: the test fails)
        refusals = [f"the IAM judge could not judge the {function} function's {service} {operation}: {exc!r}"]
    SPENT[0] += time.perf_counter() - began
    if refusals:
        with _LOCK:
            REFUSED.extend(refusals)


def function_named(logical_id: str) -> str:
    """A function's name (its folder) from its logical id (QueryFunction -> query)."""
    uri = _template()["Resources"][logical_id]["Properties"]["CodeUri"]
    return uri.strip("/").rsplit("/", 1)[-1]


def judge_recorded(function: str, calls: list[dict], environ: Mapping[str, str]) -> None:
    """Judge calls recorded elsewhere (the deployed package's driver: tests/deployed) as ``function``."""
    refusals = []
    JUDGED[function] += len(calls)
    began = time.perf_counter()
    for call in calls:
        refusals += judge_call(function, call["service"], call["operation"], call["params"],
                               call.get("region") or STACK["AWS::Region"], environ)
    SPENT[0] += time.perf_counter() - began
    if refusals:
        with _LOCK:
            REFUSED.extend(refusals)


def install() -> None:
    """Record every botocore call (every client of every session: pynamodb's and boto3's), and
    carry the function's context into executor threads."""
    from botocore.client import BaseClient

    if getattr(BaseClient._make_api_call, "_iam_judged", False):
        return
    call = BaseClient._make_api_call

    def _make_api_call(self, operation_name, api_params):
        if FUNCTION.get() is not None:
            _record(self.meta.service_model.service_name, operation_name, api_params, self.meta.region_name)
        return call(self, operation_name, api_params)

    _make_api_call._iam_judged = True
    BaseClient._make_api_call = _make_api_call

    submit = ThreadPoolExecutor.submit

    def submit_in_context(self, fn, /, *args, **kwargs):
        if FUNCTION.get() is not None:
            return submit(self, contextvars.copy_context().run, fn, *args, **kwargs)
        return submit(self, fn, *args, **kwargs)

    ThreadPoolExecutor.submit = submit_in_context


@contextmanager
def deployed(env: dict[str, str]):
    """Within the block, ``env`` (kept by reference: later changes count) is the functions'
    environment over the process's."""
    global DEPLOYED
    previous, DEPLOYED = DEPLOYED, env
    try:
        yield
    finally:
        DEPLOYED = previous


@contextmanager
def running_as(function: str):
    token = FUNCTION.set(function)
    try:
        yield
    finally:
        FUNCTION.reset(token)


@contextmanager
def captured():
    """The refusals recorded within the block, taken out of the test's (a test of the judge)."""
    with _LOCK:
        start = len(REFUSED)
    out: list[str] = []
    try:
        yield out
    finally:
        with _LOCK:
            out.extend(REFUSED[start:])
            del REFUSED[start:]


def attach(function: str, module) -> None:
    """Invocations of a loaded function module run as ``function``: its ``handler``, or (the
    stream function) its ASGI ``app``, whose class is replaced by a subclass that sets it."""
    handler = getattr(module, "handler", None)
    if callable(handler) and not getattr(handler, "_iam_function", None):
        @functools.wraps(handler)
        def judged(*args, **kwargs):
            with running_as(function):
                return handler(*args, **kwargs)

        judged._iam_function = function
        module.handler = judged
    app = getattr(module, "app", None)
    if function == "stream" and app is not None and not getattr(type(app), "_iam_function", None):
        base = type(app)

        async def __call__(self, scope, receive, send):
            with running_as(function):
                return await base.__call__(self, scope, receive, send)

        app.__class__ = type(base.__name__, (base,), {"__call__": __call__, "_iam_function": function})


def attach_cli() -> None:
    """The CLI's ``--profile aws`` commands run as the operator (tests import ``main`` from
    eragraph.cli.app after this ran: conftest loads the plugin first)."""
    from eragraph.cli import app as cli

    main = cli.main
    if getattr(main, "_iam_function", None):
        return

    @functools.wraps(main)
    def judged(argv=None, *args, **kwargs):
        words = list(argv or [])
        aws = any(w == "--profile=aws" for w in words) or any(
            a == "--profile" and b == "aws" for a, b in zip(words, words[1:]))
        if not aws:
            return main(argv, *args, **kwargs)
        with running_as(OPERATOR):
            return main(argv, *args, **kwargs)

    judged._iam_function = OPERATOR
    cli.main = judged


# ------------------------------------------------------------------ pytest hooks
def pytest_configure(config) -> None:
    if os.environ.get("ERAGRAPH_IAM_JUDGE") == "off":  # to measure what the judge costs, nothing else
        return
    install()
    attach_cli()


def pytest_terminal_summary(terminalreporter) -> None:
    if JUDGED:  # this process's (an xdist worker's are its own)
        terminalreporter.write_line("IAM judge: " + ", ".join(f"{n} {f}" for f, n in sorted(JUDGED.items()))
                                    + f" call(s) judged in {SPENT[0]:.2f} s")


def _phase(item):
    with _LOCK:
        REFUSED.clear()
    result = yield
    with _LOCK:
        refused, REFUSED[:] = list(REFUSED), []
    if refused:
        shown = "\n".join(dict.fromkeys(refused))  # each distinct refusal once
        log = os.environ.get("ERAGRAPH_IAM_JUDGE_LOG")  # a file that gathers every refusal of a run
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write("".join(f"{item.nodeid}\t{r}\n" for r in dict.fromkeys(refused)))
        pytest.fail(f"{len(refused)} AWS call(s) the deployed roles would refuse:\n{shown}", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _phase(item))
