"""The Lambda side of the tests: the real event JSON of tests/events, the handlers loaded from
functions/*/app.py, and a Lambda context. No AWS client is touched here: a handler runs on
whatever engine ``eragraph.bootstrap.aws.LAMBDA_ENGINE`` holds (moto's or a local one)."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import iam_judge
from eragraph.entrypoints.http.server import LocalContext

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "tests" / "events"


def event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def load_handler(name: str):
    module_name = f"eragraph_fn_{name}_app"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, ROOT / "functions" / name / "app.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        with iam_judge.running_as(name):  # its cold start is the function's too
            spec.loader.exec_module(module)
        iam_judge.attach(name, module)  # its invocations' AWS calls are judged against its role
    return sys.modules[module_name]


@dataclass
class LambdaContext(LocalContext):
    """The context the handlers read (eragraph serve's), with a Lambda's name and a settable
    remaining time."""

    function_name: str = "eragraph-test"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:eragraph-test"
    aws_request_id: str = "c6af9ac6-7b61-11e6-9a41-93e812345678"
    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
