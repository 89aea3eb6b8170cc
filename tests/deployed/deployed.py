"""The development-side harness of the deployed suite: what ``sam build`` made, the Lambda
runtime's own packages, the loopback cloud (moto + the HTTP OpenSearch fake), and function
processes run by ``lambda_driver.py`` under Python 3.12.

Nothing here is imported by the functions: they run in their own interpreter with their own
sys.path (see lambda_driver.py). This module runs in the development venv (pytest, and
scripts/cold_start.py)."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRIVER = HERE / "lambda_driver.py"
RUNTIME_REQUIREMENTS = HERE / "lambda-runtime.txt"
REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK_UUID = "4b0e3c52-6f1d-11f1-9a4e-0a1b2c3d4e5f"  # the loopback stack's id (its knowledge-base id salt)
STACK_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/eragraph-test/{STACK_UUID}"
# settings every deployed test runs with on top of the template's environment: no Bedrock
# (hash embeddings, extractive summaries, no generated answers), the real spaCy NER and parser,
# small segments so that a few documents make several layers
SMALL_GRAPH = {"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_SUMMARIZER": "extractive", "ERAGRAPH_GENERATOR": "none",
               "ERAGRAPH_NER": "spacy", "ERAGRAPH_PARSER": "spacy", "ERAGRAPH_EMBED_CACHE": "false",
               "ERAGRAPH_S_MIN": "3", "ERAGRAPH_S_MAX": "5", "ERAGRAPH_N_PLANES": "4", "ERAGRAPH_CHUNK_TOKENS": "60",
               "ERAGRAPH_CHUNK_OVERLAP": "8", "ERAGRAPH_SUMMARY_TOKENS": "40", "ERAGRAPH_GRAPH_EXACT": "false",
               "POWERTOOLS_METRICS_NAMESPACE": "EragraphTest",
               # these suites query the default tenant as an untagged caller: the explicit opt-in
               # (the template's default, TenantRequired=true, refuses one: test_deployed_tenancy)
               "ERAGRAPH_TENANT_REQUIRED": "false",
               # they ask many questions a second of one tenant: the template's per-tenant rate
               # limit (TenantRateLimit) would answer 429 (tests/aws/test_api_limits.py covers it)
               "ERAGRAPH_TENANT_RATE": "0"}
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_SESSION_TOKEN": "testing"}


def build_dir() -> Path:
    return Path(os.environ.get("ERAGRAPH_SAM_BUILD_DIR") or ROOT / ".aws-sam" / "build")


def runtime_dir() -> Path:
    return Path(os.environ.get("ERAGRAPH_LAMBDA_RUNTIME_DIR") or ROOT / ".lambda-runtime")


# ------------------------------------------------------------------ Python 3.12


def _runs_312(candidate: str) -> bool:
    try:
        out = subprocess.run([candidate, "-I", "-S", "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "True"


def find_python312() -> str | None:
    """The Lambda runtime's Python: $ERAGRAPH_PYTHON312, else a python3.12 on PATH that runs
    (pyenv's shim may not), else pyenv's own 3.12 installs. None when there is none."""
    candidates: list[str] = []
    if os.environ.get("ERAGRAPH_PYTHON312"):
        candidates.append(os.environ["ERAGRAPH_PYTHON312"])
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder, "python3.12")
        if os.access(path, os.X_OK):
            candidates.append(path)
    pyenv = shutil.which("pyenv")
    roots = [os.environ.get("PYENV_ROOT", "")]
    if pyenv:
        try:
            roots.append(subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30).stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    for root in filter(None, roots):
        candidates += sorted(glob.glob(os.path.join(root, "versions", "3.12*", "bin", "python3.12")), reverse=True)
    for candidate in dict.fromkeys(candidates):
        if _runs_312(candidate):
            return candidate
    return None


# ------------------------------------------------------------------ the runtime's packages


def ensure_runtime(python: str, folder: Path | None = None) -> Path:
    """A folder with what the python3.12 runtime provides beyond the standard library (boto3,
    botocore and their dependencies, pinned in lambda-runtime.txt), installed once for Python
    3.12 and reused while the pins are unchanged."""
    folder = folder or runtime_dir()
    wanted = hashlib.sha256(RUNTIME_REQUIREMENTS.read_bytes() + python.encode()).hexdigest()
    stamp = folder / ".installed"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(str(folder) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted:
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
                        "--root-user-action", "ignore", "--target", str(folder), "-r", str(RUNTIME_REQUIREMENTS)], check=True)
        shutil.rmtree(folder / "bin", ignore_errors=True)
        stamp.write_text(wanted)
    return folder


# ------------------------------------------------------------------ the build


def load_template(path: Path) -> dict:
    from contract.aws_factories import load_template as load

    return load(path)


@dataclass
class BuiltFunction:
    logical_id: str
    code_dir: Path
    layers: list[tuple[str, list[Path]]]  # (layer logical id, its python dirs), template order
    handler: str
    timeout: int
    memory: int
    environment: dict[str, Any]  # as the template writes it (intrinsics unresolved)
    events: dict[str, Any] = field(default_factory=dict)

    @property
    def layer_paths(self) -> list[Path]:
        return [p for _, paths in self.layers for p in paths]

    def batch_size(self, default: int = 10) -> int:
        for ev in self.events.values():
            if ev.get("Type") == "SQS":
                return int(ev.get("Properties", {}).get("BatchSize", default))
        return default


def layer_python_dirs(folder: Path) -> list[Path]:
    """Where Lambda looks in an extracted layer: /opt/python/lib/python3.12/site-packages, then
    /opt/python."""
    out = [folder / "python" / "lib" / "python3.12" / "site-packages", folder / "python"]
    return [p for p in out if p.is_dir()]


def _parameter_value(template: dict, value):
    """A property's value, a ``Ref`` to a template parameter read as its default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return template["Parameters"][value["Ref"]]["Default"]
    return value


def load_build(folder: Path | None = None) -> dict[str, BuiltFunction]:
    """Functions of the built template by logical id: code dir (CodeUri), layers (Globals then
    the function's own, each a Ref to a layer of this build), handler, timeout, memory, env."""
    folder = folder or build_dir()
    template = load_template(folder / "template.yaml")
    glob_fn = (template.get("Globals") or {}).get("Function") or {}
    resources = template["Resources"]
    out = {}
    for logical_id, res in resources.items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        props = res.get("Properties") or {}
        runtime = props.get("Runtime") or glob_fn.get("Runtime")
        if runtime != "python3.12":
            raise ValueError(f"{logical_id}: runtime {runtime}, the harness emulates python3.12")
        layers = []
        for ref in list(glob_fn.get("Layers") or []) + list(props.get("Layers") or []):
            if isinstance(ref, dict) and set(ref) == {"Fn::If"} and ref["Fn::If"][0] == "PublicWebAdapter":
                continue  # the Lambda Web Adapter's layer: published outside the stack, a binary, not Python
            if not (isinstance(ref, dict) and set(ref) == {"Ref"} and
                    resources.get(ref["Ref"], {}).get("Type") == "AWS::Serverless::LayerVersion"):
                raise ValueError(f"{logical_id}: layer {ref!r} is not a layer of this build")
            layer_folder = folder / resources[ref["Ref"]]["Properties"]["ContentUri"]
            layers.append((ref["Ref"], layer_python_dirs(layer_folder)))
        env = dict(((glob_fn.get("Environment") or {}).get("Variables") or {}))
        env.update(((props.get("Environment") or {}).get("Variables") or {}))
        out[logical_id] = BuiltFunction(
            logical_id=logical_id, code_dir=folder / props["CodeUri"], layers=layers,
            handler=props.get("Handler") or glob_fn.get("Handler"),
            timeout=int(props.get("Timeout") or glob_fn.get("Timeout") or 3),
            memory=int(_parameter_value(template, props.get("MemorySize") or glob_fn.get("MemorySize") or 128)),
            environment=env, events=props.get("Events") or {})
    return out


def function_for(functions: Mapping[str, BuiltFunction], name: str) -> BuiltFunction:
    """The built function whose source folder is functions/<name> (CodeUri functions/<name>/ in
    template.yaml), whatever its logical id."""
    template = load_template(ROOT / "template.yaml")
    for logical_id, res in template["Resources"].items():
        if (res.get("Type") == "AWS::Serverless::Function"
                and str(res["Properties"].get("CodeUri", "")).rstrip("/") == f"functions/{name}"):
            return functions[logical_id]
    raise KeyError(f"no function with CodeUri functions/{name}/ in template.yaml")


CODE_SUFFIXES = (".py", ".json", ".txt", ".jsonl")


def stale_files(functions: Mapping[str, BuiltFunction]) -> list[str]:
    """Sources that differ from what the build holds: each function's code files against
    functions/<name>/, and every file of the ``eragraph`` package the function imports (from its
    code folder or the first layer that carries it) against shared/eragraph. Code and data files
    only: a Makefile or requirements.txt of the source folder need not be in the build."""
    template = load_template(ROOT / "template.yaml")["Resources"]
    package = ROOT / "shared" / "eragraph"
    out = []

    def compare(src: Path, built_root: Path, skip_top: tuple[str, ...] = ()) -> None:
        for path in sorted(src.rglob("*")):
            rel = path.relative_to(src)
            if (not path.is_file() or "__pycache__" in path.parts or path.suffix not in CODE_SUFFIXES
                    or rel.parts[0] in skip_top or path.name == "requirements.txt"):
                continue
            built = built_root / rel
            if not built.is_file() or built.read_bytes() != path.read_bytes():
                out.append(str(path.relative_to(ROOT)))

    for logical_id, fn in functions.items():
        src = ROOT / str(template.get(logical_id, {}).get("Properties", {}).get("CodeUri", ""))
        if src.is_dir() and src != ROOT:
            compare(src, fn.code_dir)
        cores = [p / "eragraph" for p in [fn.code_dir, *fn.layer_paths] if (p / "eragraph" / "__init__.py").is_file()]
        if not cores:
            out.append(f"{logical_id}: neither its code nor a layer carries the eragraph package")
            continue
        # CoreLayer holds only the handlers' import closure (layers/core/closure.py; the size
        # test checks that it equals the closure): every file it holds must match its source
        for built in sorted(cores[0].rglob("*")):
            if not built.is_file() or "__pycache__" in built.parts or built.suffix not in CODE_SUFFIXES:
                continue
            source = package / built.relative_to(cores[0])
            if not source.is_file() or source.read_bytes() != built.read_bytes():
                out.append(str(source.relative_to(ROOT)))
    return sorted(set(out))


def top_level_names(path: Path) -> set[str]:
    """Importable top-level names in a sys.path folder."""
    names = set()
    for entry in path.iterdir():
        if entry.name.startswith((".", "_")) or entry.name.endswith((".dist-info", ".egg-info", ".data", ".libs")):
            continue
        if entry.is_dir() and entry.name not in ("bin", "lib", "share", "include"):
            names.add(entry.name)
        elif entry.suffix in (".py", ".so", ".pyd"):
            names.add(entry.name.split(".")[0])
    return names


# ------------------------------------------------------------------ template values


def resolve(value: Any, template: dict, resources: Mapping[str, str]) -> str:
    """A template value as a string, intrinsics resolved: parameters take their defaults, Refs
    and GetAtts of resources come from ``resources`` ("Logical" / "Logical.Attr")."""
    params = template.get("Parameters") or {}
    pseudo = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
              "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "eragraph-test", "AWS::StackId": STACK_ID}
    conditions = template.get("Conditions") or {}

    def ref(name: str) -> str:
        if name in pseudo:
            return pseudo[name]
        if name in params:
            return str(params[name].get("Default", ""))
        if name in resources:
            return resources[name]
        raise KeyError(f"the harness has no value for Ref {name}")

    def holds(c: Any) -> bool:
        """A condition of the template, parameters at their defaults."""
        (kind, arg), = c.items()
        if kind == "Condition":
            return holds(conditions[arg])
        if kind == "Fn::Equals":
            return go(arg[0]) == go(arg[1])
        if kind == "Fn::Not":
            return not holds(arg[0])
        if kind == "Fn::And":
            return all(holds(x) for x in arg)
        if kind == "Fn::Or":
            return any(holds(x) for x in arg)
        raise ValueError(f"the harness cannot evaluate the condition {c!r}")

    def go(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float, str)):
            return str(v)
        if isinstance(v, dict) and len(v) == 1:
            (kind, arg), = v.items()
            if kind == "Ref":
                return ref(arg)
            if kind == "Fn::GetAtt":
                key = ".".join(arg) if isinstance(arg, list) else arg
                if key not in resources:
                    raise KeyError(f"the harness has no value for GetAtt {key}")
                return resources[key]
            if kind == "Fn::FindInMap":
                name, k1, k2 = (go(x) for x in arg)
                return str(template["Mappings"][name][k1][k2])
            if kind == "Fn::Sub":
                text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], {k: go(x) for k, x in arg[1].items()})
                return re.sub(r"\$\{([^}!]+)\}",
                              lambda m: extra.get(m[1]) or (resources[m[1]] if "." in m[1] else ref(m[1])), text)
            if kind == "Fn::If":
                name, then, otherwise = arg
                return go(then if holds(conditions[name]) else otherwise)
            if kind == "Fn::Select":
                index, items = arg
                listed = go(items).split("\x00") if isinstance(items, dict) else [go(x) for x in items]
                return listed[int(go(index))]
            if kind == "Fn::Split":  # its parts joined by NUL, for the Fn::Select around it
                delimiter, text = arg
                return "\x00".join(go(text).split(delimiter))
            if kind == "Fn::Join":  # a list, or a Ref to a CommaDelimitedList (its default: joined by ",")
                delimiter, items = arg
                if isinstance(items, dict):
                    return go(items).replace(",", delimiter)
                return delimiter.join(go(x) for x in items)
        raise ValueError(f"the harness cannot resolve {v!r}")

    return go(value)


# ------------------------------------------------------------------ function processes


class FunctionFailed(AssertionError):
    pass


class LambdaProcess:
    """One warm container of a built function: the driver under Python 3.12, fed events."""

    def __init__(self, fn: BuiltFunction, env: Mapping[str, str], python: str, runtime: Path, log_dir: Path, *,
                 drop_layers: Iterable[str] = (), add_layers: Iterable[Path] = (), build_engine: bool = False,
                 stub_bedrock: int = 0) -> None:
        """``drop_layers``: logical ids of the function's layers left out; ``add_layers``: other
        layer folders put in their place (a function deployed with the wrong layer)."""
        self.fn = fn
        drop = set(drop_layers)
        layers = [p for lid, paths in fn.layers if lid not in drop for p in paths] + list(add_layers)
        self.cmd = [python, "-I", "-S", "-B", str(DRIVER), "--function", str(fn.code_dir), "--runtime", str(runtime),
                    "--handler", fn.handler, "--name", fn.logical_id, "--timeout", str(fn.timeout),
                    "--memory", str(fn.memory)]
        for p in layers:
            self.cmd += ["--layer", str(p)]
        if build_engine:
            self.cmd.append("--build-engine")
        if stub_bedrock:
            self.cmd += ["--stub-bedrock", str(stub_bedrock)]
        self.env = dict(env)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{fn.logical_id}-{time.time_ns()}.log"
        self.proc: subprocess.Popen | None = None
        self.ready: dict = {}
        self._lines: queue.Queue = queue.Queue()
        self.invocations = 0

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next(self, timeout: float) -> dict:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise FunctionFailed(f"{self.fn.logical_id}: no answer in {timeout:.0f} s\n{self.log_tail()}") from None
        if line is None:
            rc = self.proc.wait() if self.proc else None
            raise FunctionFailed(f"{self.fn.logical_id}: the process ended (exit {rc})\n{self.log_tail()}")
        return json.loads(line)

    def start(self, timeout: float = 180.0) -> dict:
        """Start the container and import the handler module (the cold start). Returns the
        driver's ready line, also when the import failed ({"ready": false, "error": ...})."""
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=self.env, text=True, bufsize=1, cwd=str(self.fn.code_dir))
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self._next(timeout)
        self._judge(self.ready)
        return self.ready

    def _judge(self, reply: dict) -> None:
        """The IAM judge (tests/iam_judge.py) on the calls the driver recorded: a call this
        function's role would refuse fails the test."""
        import iam_judge

        iam_judge.judge_recorded(iam_judge.function_named(self.fn.logical_id), reply.pop("aws_calls", []), self.env)

    def invoke(self, event: Any, timeout: float | None = None) -> dict:
        """Run the handler on ``event``; the driver's reply {"ok", "result" | "error", "ms"}."""
        if not self.ready.get("ready"):
            raise FunctionFailed(f"{self.fn.logical_id} did not start: {json.dumps(self.ready.get('error'))[:3000]}")
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(event) + "\n")
        self.proc.stdin.flush()
        self.invocations += 1
        reply = self._next(timeout or self.fn.timeout + 30)
        self._judge(reply)
        return reply

    def result(self, event: Any, timeout: float | None = None) -> Any:
        """The handler's return value; a handler that raised fails the test with its traceback."""
        reply = self.invoke(event, timeout)
        if not reply["ok"]:
            err = reply["error"]
            raise FunctionFailed(f"{self.fn.logical_id} raised {err['type']}: {err['message']}\n{err['traceback']}")
        return reply["result"]

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self._log.close()


# ------------------------------------------------------------------ the loopback cloud


class SerialMotoServer:
    """moto's server on 127.0.0.1 and a free port, one request at a time: moto's backends are
    not thread-safe (a TransactWriteItems saves and restores items while other threads would
    write), and the services apply each request atomically."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        class Serial(ThreadedMotoServer):
            def _server_entry(inner) -> None:  # noqa: N805
                from werkzeug.serving import make_server

                from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                                           create_backend_app)

                app = DomainDispatcherApplication(create_backend_app)
                lock = threading.Lock()

                class Quiet(MotoRequestHandler):
                    def log_request(self, *args, **kwargs) -> None:
                        pass


                def serial(environ, start_response):
                    with lock:
                        t0 = time.perf_counter()
                        try:
                            return list(app(environ, start_response))
                        finally:
                            owner.requests += 1
                            owner.busy_s += time.perf_counter() - t0

                inner._server = make_server(inner._ip_address, inner._port, serial, True,
                                            request_handler=Quiet)
                inner._server_ready_event.set()
                inner._server.serve_forever()

        owner = self
        self.requests = 0  # served, and the time moto spent on them (the suite's own cost)
        self.busy_s = 0.0
        self.server = Serial(ip_address="127.0.0.1", port=0, verbose=False)

    def start(self) -> str:
        self.server.start()
        host, port = self.server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # moto's backends live in the process: start from none (an earlier server's tables, queues
        # and buckets would otherwise still be there)
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(endpoint + "/moto-api/reset", method="POST"), timeout=30).read()
        return endpoint

    def stop(self) -> None:
        self.server.stop()


def _sqs_attributes(props: Mapping[str, Any]) -> dict[str, str]:
    keep = ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
            "VisibilityTimeout", "MessageRetentionPeriod")
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in props.items() if k in keep}


class LoopbackCloud:
    """S3 + SQS + DynamoDB (moto) and OpenSearch (the HTTP fake) on loopback, with the
    resources the template declares: the graph table (its key schema and GSIs), the documents
    bucket notifying the ingest queue, and the summarize FIFO queue (the template's attributes)."""

    def __init__(self, prefix: str = "eragraph-test") -> None:
        self.prefix = prefix
        self.bucket = f"{prefix}-docs"
        self.snapshot_bucket = f"{prefix}-snapshots"  # EntitySnapshotBucket: each tenant's entity graph snapshot
        self.table = f"{prefix}-graph"
        self.moto = SerialMotoServer()
        self.search = None
        self.endpoint = ""
        self._xray: socket.socket | None = None

    def start(self) -> LoopbackCloud:
        import boto3

        from contract.aws_factories import bucket_notifications, create_graph_table
        from opensearch_http import OpenSearchHttpFake

        for k, v in FAKE_CREDENTIALS.items():
            os.environ.setdefault(k, v)
        self.endpoint = self.moto.start()
        self.search = OpenSearchHttpFake(region=REGION).start()
        self._xray = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # X-Ray daemon address: a sink
        self._xray.bind(("127.0.0.1", 0))
        session = boto3.session.Session(region_name=REGION, **{k.lower(): v for k, v in FAKE_CREDENTIALS.items()})
        self.s3 = session.client("s3", endpoint_url=self.endpoint)
        self.sqs = session.client("sqs", endpoint_url=self.endpoint)
        self.ddb = session.client("dynamodb", endpoint_url=self.endpoint)
        template = load_template(ROOT / "template.yaml")["Resources"]
        self.ingest_url = self.sqs.create_queue(QueueName=f"{self.prefix}-ingest", Attributes=_sqs_attributes(
            template["IngestQueue"]["Properties"]))["QueueUrl"]
        self.summarize_url = self.sqs.create_queue(QueueName=f"{self.prefix}-summarize.fifo", Attributes=_sqs_attributes(
            template["SummarizeQueue"]["Properties"]))["QueueUrl"]
        self.reindex_url = self.sqs.create_queue(QueueName=f"{self.prefix}-reindex.fifo", Attributes=_sqs_attributes(
            template["ReindexQueue"]["Properties"]))["QueueUrl"]
        self.ingest_arn = self.queue_arn(self.ingest_url)
        self.summarize_arn = self.queue_arn(self.summarize_url)
        self.reindex_arn = self.queue_arn(self.reindex_url)
        self.s3.create_bucket(Bucket=self.bucket)
        self.s3.create_bucket(Bucket=self.snapshot_bucket)
        # the caller tests/events/api_*.json name (assumed-role/reader): untagged, under the
        # TenantPrincipalPath whose principals' tags the query role may read (tests/iam_judge.py)
        session.client("iam", endpoint_url=self.endpoint).create_role(
            Path="/eragraph/", RoleName="reader", AssumeRolePolicyDocument="{}")
        self.s3.put_bucket_versioning(Bucket=self.bucket, VersioningConfiguration={"Status": "Enabled"})
        # the template's own notification filter, at its default parameters
        self.s3.put_bucket_notification_configuration(Bucket=self.bucket, NotificationConfiguration=bucket_notifications(
            load_template(ROOT / "template.yaml"), self.ingest_arn))
        create_graph_table(self.ddb, self.table)
        return self

    def stop(self) -> None:
        if self.search is not None:
            self.search.stop()
        self.moto.stop()
        if self._xray is not None:
            self._xray.close()

    def queue_arn(self, url: str) -> str:
        return self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    @property
    def resources(self) -> dict[str, str]:
        """Values of the template's Refs/GetAtts in this cloud."""
        return {"GraphTable": self.table, "DocumentsBucket": self.bucket, "EntitySnapshotBucket": self.snapshot_bucket,
                "SummarizeQueue": self.summarize_url,
                "IngestQueue": self.ingest_url, "SearchDomain.DomainEndpoint": self.search.endpoint,
                "SummarizeQueue.Arn": self.summarize_arn, "IngestQueue.Arn": self.ingest_arn,
                "ReindexQueue": self.reindex_url, "ReindexQueue.Arn": self.reindex_arn}

    def environment(self, fn: BuiltFunction, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The function's environment as Lambda would set it: the template's variables (resolved
        against this cloud), Lambda's own variables, the fake credentials, the endpoints of
        this cloud; then ``overrides`` (the test's settings)."""
        template = load_template(build_dir() / "template.yaml")
        env = {k: resolve(v, template, self.resources) for k, v in fn.environment.items()}
        xray = self._xray.getsockname() if self._xray else ("127.0.0.1", 2000)
        lam = {
            "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_LAMBDA_FUNCTION_NAME": fn.logical_id,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory), "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{fn.logical_id}", "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12", "_HANDLER": fn.handler,
            "LAMBDA_TASK_ROOT": str(fn.code_dir), "LAMBDA_RUNTIME_DIR": str(runtime_dir()),
            "AWS_XRAY_DAEMON_ADDRESS": f"{xray[0]}:{xray[1]}", "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
            "LANG": "en_US.UTF-8", "TZ": ":UTC", "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(Path(os.environ.get("TMPDIR", "/tmp"))), **FAKE_CREDENTIALS,
        }
        env.update(lam)
        env["ERAGRAPH_AWS_ENDPOINT_URL"] = self.endpoint
        env["ERAGRAPH_OPENSEARCH_ENDPOINT"] = self.search.endpoint
        env.update(overrides or {})
        return env

    # ----- S3 -> SQS -> Lambda, the way the event source mappings do it -----
    def receive(self, url: str, limit: int, wait_for: int = 1, attempts: int = 20) -> list[dict]:
        got: list[dict] = []
        for _ in range(attempts):
            got += self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, limit - len(got)),
                                            AttributeNames=["All"], MessageAttributeNames=["All"],
                                            WaitTimeSeconds=0).get("Messages", [])
            if len(got) >= min(wait_for, limit):
                break
            time.sleep(0.05)
        return got

    @staticmethod
    def sqs_event(messages: list[dict], arn: str) -> dict:
        """An SQS event source mapping's event (the Lambda record shape, as tests/events/sqs_*.json)."""
        return {"Records": [{
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {k: {"stringValue": v.get("StringValue"), "dataType": v["DataType"]}
                                  for k, v in (m.get("MessageAttributes") or {}).items()},
            "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": REGION,
        } for m in messages]}

    def deliver(self, fn: LambdaProcess, url: str, arn: str, batch: int, wait_for: int = 1) -> tuple[int, list]:
        """One batch from the queue through the function; deletes what succeeded (a batch item
        failure stays on the queue). Returns (messages delivered, failed message ids)."""
        messages = self.receive(url, batch, wait_for=wait_for)
        if not messages:
            return 0, []
        out = fn.result(self.sqs_event(messages, arn))
        failed = {f["itemIdentifier"] for f in (out or {}).get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self.sqs.delete_message_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start:start + 10])])
        return len(messages), sorted(failed)

    def queue_depth(self, url: str) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


# ------------------------------------------------------------------ flows


def failure_lines(proc) -> str:
    """The exceptions a function logged (powertools logs a failed batch record, it does not raise)."""
    lines = [ln for ln in proc.log_tail(200_000).splitlines() if ln.startswith("DRIVER-DIAG")
             or re.search(r"Error|Exception|Traceback", ln)]
    return "\n".join(dict.fromkeys(lines[-8:]))


def upload_and_ingest(cloud, ingest, documents: dict[str, str | bytes]) -> int:
    """Put the documents, then do what the ingest event source mapping does: batches of the
    template's BatchSize from the ingest queue, failures left on the queue."""
    for key, text in documents.items():
        cloud.s3.put_object(Bucket=cloud.bucket, Key=key, Body=text if isinstance(text, bytes) else text.encode())
    batch = ingest.fn.batch_size()
    delivered = 0
    for _ in range(4 * len(documents) + 10):
        n, failed = cloud.deliver(ingest, cloud.ingest_url, cloud.ingest_arn, batch)
        assert not failed, (f"the ingest function failed {len(failed)} of {n} records:\n{failure_lines(ingest)}")
        delivered += n
        if n == 0 and cloud.queue_depth(cloud.ingest_url) == 0:
            break
    return delivered


def drain_summarize(cloud, summarize, limit: int = 400) -> list[int]:
    """The summarize event source mapping until the FIFO queue is empty; the layers announced."""
    layers = []
    batch = summarize.fn.batch_size()
    for _ in range(limit):
        messages = cloud.receive(cloud.summarize_url, batch)
        if not messages:
            if cloud.queue_depth(cloud.summarize_url) == 0:
                return layers
            continue
        for m in messages:
            # "layer-<l>-<shard>", a tenant's prefixed with "<tenant>:"
            assert m["Attributes"]["MessageGroupId"].rsplit(":", 1)[-1].startswith("layer-"), m["Attributes"]
        layers += [json.loads(m["Body"])["layer"] for m in messages]
        out = summarize.result(cloud.sqs_event(messages, cloud.summarize_arn))
        failed = {f["itemIdentifier"] for f in out["batchItemFailures"]}
        assert not failed, f"summarize failed {len(failed)} records:\n{failure_lines(summarize)}"
        cloud.sqs.delete_message_batch(QueueUrl=cloud.summarize_url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
    raise AssertionError("the summarize queue did not drain")
