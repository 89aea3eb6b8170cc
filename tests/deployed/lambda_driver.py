"""Runs one function of ``sam build`` the way the Lambda python3.12 runtime does, with nothing on
sys.path but the function's code, its layers and the runtime's own packages.

    python3.12 -I -S -B lambda_driver.py --function DIR [--layer DIR ...] --runtime DIR
                                      [--handler app.handler] [--timeout S] [--memory MB]
                                      [--build-engine] [--stub-bedrock DIM]

``-I`` keeps this script's folder, PYTHON* variables and the user site off sys.path, ``-S`` the
site-packages of the interpreter: sys.path starts as the standard library alone. ``-B``: Lambda's
code and layers are read-only, so no .pyc is written there (what the build ships is all there is). The driver puts
[function dir, layer dirs..., runtime dir] in front of it (Lambda's order: /var/task, /opt/python,
the runtime's packages), checks that nothing else is there, and imports the handler's module:
that import is the cold start, and its time is reported. ``--build-engine`` also times the first
``eragraph.bootstrap.aws.LAMBDA_ENGINE.get()`` (the rest of a first invocation's setup).

Protocol: one JSON line on stdout once the module is imported, {"ready": true, "init_s", ...}
or {"ready": false, "error": {...}} (then exit 1); then, for every JSON line (an event) read
from stdin, one JSON line {"ok": true, "result", "ms"} or {"ok": false, "error"}. Whatever the
handler prints (powertools logs and metrics) goes to stderr, so stdout carries only results.

``--stub-bedrock DIM`` answers bedrock-runtime InvokeModel (Titan Text Embeddings V2) inside
botocore, without a network, with vectors that depend on the input text (hashed words), and
Converse with an answer taken from the prompt's first evidence; see ``BedrockStub`` for why this
uses the before-call event rather than botocore's Stubber.

This file imports nothing but the standard library before sys.path is set, and afterwards only
what the deployed function has (botocore from a layer or the runtime, the function's own code).
"""

import argparse
import hashlib
import importlib
import io
import json
import math
import os
import re
import sys
import time
import traceback
import uuid


def _stdlib_only(paths):
    """The entries -I -S leaves: the interpreter's own library, no site-packages."""
    bad = [p for p in paths if "site-packages" in p or "dist-packages" in p
           or not os.path.realpath(p or ".").startswith(os.path.realpath(sys.base_prefix))]
    return bad


class Context:
    """The LambdaContext fields the handlers and powertools read."""

    def __init__(self, name, memory, timeout_s):
        self.function_name = name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = int(memory)
        self.invoked_function_arn = f"arn:aws:lambda:{os.environ.get('AWS_REGION', 'us-east-1')}:123456789012:function:{name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "2026/01/01/[$LATEST]" + uuid.uuid4().hex
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + float(timeout_s)

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class BedrockStub:
    """Titan Text Embeddings V2 answered inside botocore.

    Why not ``botocore.stub.Stubber``: a Stubber serves a fixed queue of responses, each queued
    in advance with the exact parameters it expects, in call order. Here the texts sent (chunks,
    entity names, questions) are decided by the code under test, and the embedder sends them
    from a thread pool, so neither the inputs nor their order are known in advance, and the
    vector must depend on the text. So this registers on the same hook Stubber uses, the
    client's ``before-call.bedrock-runtime`` event: a handler that returns (http response,
    parsed response) short-circuits the HTTP call, after botocore has validated and serialized
    the request. The request body is checked as Titan V2 checks it (a ValidationException
    otherwise). Converse (the generator) answers with the first sentence of the prompt's first
    evidence block and cites it as ``[1]``, so an answer depends on what was retrieved; any
    other bedrock-runtime operation is refused, so nothing leaves the machine."""

    MODEL = "amazon.titan-embed-text-v2:0"

    def __init__(self, dim):
        self.dim = int(dim)
        self.calls = 0
        self.refused = []
        self.conversations = []

    def install(self):
        import botocore.session

        original = botocore.session.Session.create_client
        stub = self

        def create_client(session, service_name, *args, **kwargs):
            client = original(session, service_name, *args, **kwargs)
            if service_name == "bedrock-runtime":
                client.meta.events.register("before-call.bedrock-runtime", stub.answer)
            return client

        botocore.session.Session.create_client = create_client

    def vector(self, text):
        vec = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            h = hashlib.blake2b(word.encode(), digest_size=8).digest()
            vec[int.from_bytes(h[:4], "big") % self.dim] += 1.0 if h[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        return [x / norm for x in vec]

    def _response(self, status, payload, request_id, parsed=False):
        from botocore.awsrequest import AWSResponse
        from botocore.response import StreamingBody

        data = json.dumps(payload).encode()
        headers = {"content-type": "application/json", "x-amzn-requestid": request_id}
        meta = {"RequestId": request_id, "HTTPStatusCode": status, "HTTPHeaders": headers, "RetryAttempts": 0}
        if status != 200:
            return AWSResponse(None, status, headers, None), {"Error": {"Code": payload["__type"], "Message":
                                                                         payload["message"]},
                                                               "ResponseMetadata": meta}
        if parsed:  # a JSON operation: the parsed response is the payload itself
            return AWSResponse(None, status, headers, None), {**payload, "ResponseMetadata": meta}
        return AWSResponse(None, status, headers, None), {"ResponseMetadata": meta, "contentType": "application/json",
                                                         "body": StreamingBody(io.BytesIO(data), len(data))}

    def converse(self, params, request_id):
        body = json.loads(params["body"])
        prompt = " ".join(part.get("text", "") for message in body.get("messages", [])
                          for part in message.get("content", []))
        match = re.search(r"Evidence 1 \[[^\]]*\]:\n(.+?)(?:\n\n(?:Evidence|Question)|$)", prompt, re.S)
        block = " ".join(match.group(1).split()) if match else ""
        text = (re.split(r"(?<=[.!?])\s", block)[0] + " [1]") if block else "I do not know."
        from urllib.parse import unquote

        self.calls += 1
        self.conversations.append({"model": unquote(params["url_path"].split("/")[2]), "text": text})
        words = len(re.findall(r"\w+", prompt))
        return self._response(200, {"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                                    "stopReason": "end_turn", "metrics": {"latencyMs": 1},
                                    "usage": {"inputTokens": words, "outputTokens": len(text.split()),
                                              "totalTokens": words + len(text.split())}}, request_id, parsed=True)

    def answer(self, model, params, **kwargs):
        request_id = str(uuid.uuid4())
        if model.name == "Converse":
            return self.converse(params, request_id)
        if model.name != "InvokeModel":
            self.refused.append(model.name)
            return self._response(400, {"__type": "AccessDeniedException",
                                        "message": f"the test stub answers InvokeModel only, not {model.name}"},
                                  request_id)
        from urllib.parse import unquote

        model_id = unquote(params["url_path"].split("/")[2])
        try:
            body = json.loads(params["body"])
            text, dims = body["inputText"], body.get("dimensions", 1024)
            if model_id != self.MODEL:
                raise ValueError(f"model {model_id} is not {self.MODEL}")
            if set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}:
                raise ValueError(f"extraneous keys {sorted(set(body))}")
            if not isinstance(text, str) or not text or len(text) > 50_000:
                raise ValueError("inputText must be 1..50000 characters")
            if dims not in (256, 512, 1024) or dims != self.dim:
                raise ValueError(f"dimensions {dims} (stub serves {self.dim})")
        except (ValueError, KeyError, TypeError) as exc:
            return self._response(400, {"__type": "ValidationException", "message": str(exc)}, request_id)
        self.calls += 1
        vec = self.vector(text)
        return self._response(200, {"embedding": vec, "inputTextTokenCount": len(re.findall(r"\w+", text)),
                                    "embeddingsByType": {"float": vec}}, request_id)


class CallRecorder:
    """Every botocore call the function makes (service, operation, parameters, region), for the
    IAM judge of the test process (tests/iam_judge.py): the cold start's go in the ready line,
    each invocation's in its reply (``aws_calls``). Payload bodies are left out (IAM does not
    read them)."""

    BODIES = ("Body", "body", "MessageBody", "Entries", "inputText")

    def __init__(self):
        self.calls = []

    def install(self):
        from botocore.client import BaseClient

        call = BaseClient._make_api_call
        recorder = self

        def _make_api_call(client, operation_name, api_params):
            params = recorder.keys_only({k: v for k, v in api_params.items() if k not in recorder.BODIES})
            recorder.calls.append({"service": client.meta.service_model.service_name, "operation": operation_name,
                                   "params": params, "region": client.meta.region_name})
            return call(client, operation_name, api_params)

        BaseClient._make_api_call = _make_api_call

    KEYS = ("PK", "SK", "GSI2PK", "GSI2SK")  # the graph table's key attributes (template.yaml)

    def keys_only(self, value):
        """``value`` with each DynamoDB item cut to its key attributes (IAM reads the keys only)."""
        if isinstance(value, dict):
            return {k: ({a: v[a] for a in self.KEYS if a in v} if k == "Item" and isinstance(v, dict)
                        else self.keys_only(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.keys_only(v) for v in value]
        return value

    def take(self):
        out, self.calls = self.calls, []
        return out


def _error(exc):
    return {"type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--function", required=True)
    ap.add_argument("--layer", action="append", default=[])
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--handler", default="app.handler")
    ap.add_argument("--name", default="function")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--memory", type=int, default=1024)
    ap.add_argument("--build-engine", action="store_true")
    ap.add_argument("--stub-bedrock", type=int, default=0)
    args = ap.parse_args()

    out = os.fdopen(os.dup(1), "w", buffering=1)  # results; fd 1 (print, logging) now goes to stderr
    os.dup2(2, 1)

    def emit(obj):
        out.write(json.dumps(obj, default=str) + "\n")
        out.flush()

    stdlib = list(sys.path)
    deployed = [os.path.realpath(p) for p in [args.function, *args.layer, args.runtime]]
    problems = []
    if sys.flags.isolated != 1 or sys.flags.no_site != 1:
        problems.append("run me as python3.12 -I -S")
    if "site" in sys.modules:
        problems.append("the site module was imported")
    problems += [f"not the standard library: {p}" for p in _stdlib_only(stdlib)]
    missing = [p for p in deployed if not os.path.isdir(p)]
    problems += [f"no such folder: {p}" for p in missing]
    sys.path[:0] = deployed
    if sys.path != deployed + stdlib:
        problems.append(f"sys.path is {sys.path}")
    if problems:
        emit({"ready": False, "error": {"type": "DriverError", "message": "; ".join(problems)}, "sys_path": sys.path})
        return 1

    # diagnostics only: powertools' batch processors swallow a failed record's exception (a
    # failure item is all Lambda sees); its debug line goes to stderr so a test can say why
    import logging

    batch_log = logging.getLogger("aws_lambda_powertools.utilities.batch")
    batch_log.setLevel(logging.DEBUG)
    diag = logging.StreamHandler(sys.stderr)
    diag.setFormatter(logging.Formatter("DRIVER-DIAG %(message)s"))
    diag.addFilter(lambda rec: "exception" in rec.getMessage().lower())
    batch_log.addHandler(diag)

    recorder = CallRecorder()
    recorder.install()
    stub = None
    if args.stub_bedrock:
        stub = BedrockStub(args.stub_bedrock)
        stub.install()

    module_name, func_name = args.handler.rsplit(".", 1)
    t0 = time.perf_counter()
    try:
        module = importlib.import_module(module_name)
        handler = getattr(module, func_name)
    except BaseException as exc:  # the cold start failed: Runtime.ImportModuleError on Lambda
        emit({"ready": False, "init_s": time.perf_counter() - t0, "error": _error(exc), "sys_path": sys.path})
        return 1
    init_s = time.perf_counter() - t0
    engine_s = None
    if args.build_engine:
        t1 = time.perf_counter()
        try:
            from eragraph.bootstrap.aws import LAMBDA_ENGINE

            LAMBDA_ENGINE.get()
        except BaseException as exc:
            emit({"ready": False, "init_s": init_s, "error": _error(exc), "sys_path": sys.path})
            return 1
        engine_s = time.perf_counter() - t1

    # the driver itself is outside, under __main__ and its aliases (multiprocessing's __mp_main__)
    roots = tuple(deployed) + tuple(os.path.realpath(p) for p in stdlib if p)
    foreign = sorted(name for name, mod in list(sys.modules.items())
                     if mod is not sys.modules["__main__"] and getattr(mod, "__file__", None)
                     and not os.path.realpath(mod.__file__).startswith(roots))
    emit({"ready": True, "init_s": init_s, "engine_s": engine_s, "sys_path": sys.path, "foreign_modules": foreign,
          "python": sys.version, "modules": len(sys.modules), "aws_calls": recorder.take()})

    for line in sys.stdin:
        if not line.strip():
            continue
        event = json.loads(line)
        context = Context(args.name, args.memory, args.timeout)
        os.environ["_X_AMZN_TRACE_ID"] = (f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};"
                                          f"Parent={uuid.uuid4().hex[:16]};Sampled=1")
        t = time.perf_counter()
        try:
            result = handler(event, context)
            reply = {"ok": True, "result": result}
        except BaseException as exc:
            reply = {"ok": False, "error": _error(exc)}
        reply["ms"] = (time.perf_counter() - t) * 1000.0
        reply["aws_calls"] = recorder.take()
        if stub is not None:
            reply["bedrock_calls"] = stub.calls
            reply["bedrock_refused"] = list(stub.refused)
            reply["bedrock_answers"] = list(stub.conversations)
        emit(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
