"""The steps of `eragraph smoke`: one document through a deployed stack, and every door asked
about it, as its clients would ask (the doors' steps are smoke_doors').

    callers            GET /tenants and GET /stats as each caller: its tenant, its knowledge base id
    upload             the document put in the documents bucket, under the first caller's tenant
    ingested           GET /documents/{id} until it is done (failed, or not within --timeout: fail)
    http-query         POST /query
    kb-retrieve        Bedrock KB Retrieve (boto3's bedrock-agent-runtime client, the API as endpoint)
    kb-generate        Bedrock KB RetrieveAndGenerate, with the stack's TextModelId
    mcp                POST /mcp: initialize, then tools/call retrieve
    openai-chat        POST /v1/chat/completions
    tenant-boundary    the second caller: its /query does not find the document, GET /documents/{id}
                       is a 404, and Retrieve on the first caller's knowledge base is a
                       ResourceNotFoundException
    delete             the object deleted; GET /documents/{id} until it is a 404

Each step passes or fails on its own, with the request id of its last call and the log groups
to read; a step whose input a failed step should have made is skipped. The document's text names
a ship and an island made up for this run, so an answer that names the ship, or evidence from the
document's source, is this run's and no other's."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .smoke_stack import Caller, Stack

PASS, FAIL, SKIP = "pass", "fail", "skip"
RETRIES_ON_429 = 5


@dataclass
class StepResult:
    name: str
    status: str
    detail: str
    request_id: str = ""
    log_groups: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "request_id": self.request_id,
                "log_groups": self.log_groups, "seconds": round(self.seconds, 2)}


class StepFailed(Exception):
    def __init__(self, detail: str, request_id: str = "") -> None:
        super().__init__(detail)
        self.request_id = request_id


@dataclass
class Answer:
    status: int
    body: Any
    request_id: str
    headers: dict[str, str]


def request_id_of(headers: dict[str, str]) -> str:
    """API Gateway's request id (``apigw-requestid``: the access log's and the function's), else
    the function's own (``x-amzn-requestid``), else S3's."""
    for name in ("apigw-requestid", "x-amzn-requestid", "x-amz-request-id"):
        if headers.get(name):
            return headers[name]
    return ""


def boto_request_id(response_or_error: Any) -> str:
    """The request id of a boto3 response or ClientError: API Gateway's, else the service's."""
    meta = (getattr(response_or_error, "response", None) or response_or_error or {}).get("ResponseMetadata") or {}
    return request_id_of({k.lower(): v for k, v in (meta.get("HTTPHeaders") or {}).items()}) or meta.get(
        "RequestId", "")


def short(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Smoke:
    def __init__(self, stack: Stack, callers: tuple[Caller, Caller], s3: Any, *, timeout: float = 900.0,
                 poll: float = 2.0, run_id: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from ..entrypoints.console.upstream import Upstream

        self.stack, self.callers, self.s3 = stack, callers, s3
        self.timeout, self.poll, self.sleep, self.clock = timeout, poll, sleep, clock
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.island = f"Smokeholm{self.run_id}"
        self.ship = f"Kestrel{self.run_id}"
        self.question = f"Which schooner did the lighthouse keeper of {self.island} log last?"
        self.upstreams = [Upstream(stack.api_url, c.auth) for c in callers]
        self.kb_ids: list[str] = ["", ""]
        self.key = self.source = self.doc_id = ""
        self.results: list[StepResult] = []

    # ----- the document
    def text(self) -> str:
        return (f"# Eragraph smoke run {self.run_id}\n\n"
                f"The lighthouse keeper of {self.island} logged the schooner {self.ship} as the last ship of the "
                f"season. The keeper of {self.island} writes every passing ship in his logbook, and the schooner "
                f"{self.ship} was the last one before the winter storms closed the harbour.\n")

    # ----- calls
    def call(self, who: int, method: str, path: str, body: Any = None, headers: dict | None = None) -> Answer:
        """``METHOD path`` as caller ``who`` (0 or 1), JSON in and out; a 429 is waited out
        (its Retry-After, at most 5 s) up to RETRIES_ON_429 times."""
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        sent = {"accept": "application/json", **({"content-type": "application/json"} if body is not None else {}),
                **(headers or {})}
        for attempt in range(RETRIES_ON_429 + 1):
            reply = self.upstreams[who].send(method, path, sent, data)
            got = {k.lower(): v for k, v in reply.headers}
            if reply.status != 429 or attempt == RETRIES_ON_429:
                break
            try:
                wait = float(got.get("retry-after") or 1)
            except ValueError:
                wait = 1.0
            self.sleep(min(max(wait, 0.2), 5.0))
        text = reply.body.decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(text) if text else None
        except json.JSONDecodeError:
            parsed = text
        return Answer(reply.status, parsed, request_id_of(got), got)

    def expect(self, answer: Answer, status: int, what: str) -> Any:
        if answer.status != status:
            message = answer.body.get("message") if isinstance(answer.body, dict) else answer.body
            raise StepFailed(f"{what}: HTTP {answer.status}, not {status}: {short(message)}", answer.request_id)
        return answer.body

    # ----- the run
    def run(self, doors: list[tuple[str, Callable[[Smoke], tuple[str, str]]]]) -> list[StepResult]:
        """The steps in order, the ``doors`` (name, function of this run: smoke_doors.DOORS) asked
        once the document is done."""
        query_log = [self.stack.log_group("query"), self.stack.access_log_group]
        ingest_log = [self.stack.log_group("ingest"), self.stack.log_group("summarize")]
        plan: list[tuple[str, Callable[[], tuple[str, str]], list[str], tuple[str, ...]]] = [
            ("callers", self.step_callers, query_log, ()),
            ("upload", self.step_upload, [self.stack.log_group("ingest")], ("callers",)),
            ("ingested", self.step_ingested, ingest_log, ("upload",)),
            *[(name, (lambda door=door: door(self)), query_log, ("ingested",)) for name, door in doors],
            ("delete", self.step_delete, [self.stack.log_group("ingest")], ("upload",)),
        ]
        for name, step, logs, needs in plan:
            self.results.append(self._run_step(name, step, [g for g in logs if g], needs))
        for upstream in self.upstreams:
            upstream.close()
        return self.results

    def _run_step(self, name: str, step: Callable[[], tuple[str, str]], logs: list[str],
                  needs: tuple[str, ...]) -> StepResult:
        from botocore.exceptions import BotoCoreError, ClientError

        from ..entrypoints.console.upstream import Unreachable

        done = {r.name: r.status for r in self.results}
        missing = [n for n in needs if done.get(n) != PASS]
        if missing:
            return StepResult(name, SKIP, f"needs {', '.join(missing)}, which did not pass", log_groups=logs)
        started = self.clock()
        try:
            detail, request_id = step()
            status = PASS
        except StepFailed as exc:
            detail, request_id, status = str(exc), exc.request_id, FAIL
        except ClientError as exc:
            detail, request_id, status = short(exc, 300), boto_request_id(exc), FAIL
        except (BotoCoreError, Unreachable) as exc:
            detail, request_id, status = short(exc, 300), "", FAIL
        return StepResult(name, status, detail, request_id, logs, self.clock() - started)

    # ----- the steps
    def step_callers(self) -> tuple[str, str]:
        request_id = ""
        for who, caller in enumerate(self.callers):
            answer = self.call(who, "GET", "/tenants")
            body = self.expect(answer, 200, f"GET /tenants as {caller.label}")
            caller.tenant = body.get("current") if isinstance(body, dict) else None
            if not isinstance(caller.tenant, str):
                raise StepFailed(f"GET /tenants as {caller.label} named no current tenant", answer.request_id)
            answer = self.call(who, "GET", "/stats")
            stats = self.expect(answer, 200, f"GET /stats as {caller.label}")
            self.kb_ids[who] = str((stats or {}).get("knowledge_base_id") or "")
            request_id = answer.request_id
        a, b = self.callers
        if a.tenant == b.tenant:
            raise StepFailed(f"both callers are tenant {a.tenant or '(default)'!r}: the boundary check needs two "
                             f"tenants (tag or claim the second caller with another)", request_id)
        return (f"{a.label} is tenant {a.tenant or '(default)'}, {b.label} is tenant {b.tenant or '(default)'}",
                request_id)

    def step_upload(self) -> tuple[str, str]:
        from ..domain.ids import document_id_for_source
        from ..domain.model import BadInputError
        from ..services.uploads import BucketPipeline

        name = f"eragraph-smoke-{self.run_id}{self.stack.suffix or '.md'}"
        try:
            self.key = BucketPipeline(self.stack.prefix, self.stack.suffix).key_for(self.callers[0].tenant or "", name)
        except BadInputError as exc:
            raise StepFailed(str(exc)) from None
        out = self.s3.put_object(Bucket=self.stack.bucket, Key=self.key, Body=self.text().encode("utf-8"),
                                 ContentType="text/markdown; charset=utf-8")
        self.source = f"s3://{self.stack.bucket}/{self.key}"
        self.doc_id = document_id_for_source(self.source)  # the id the ingest function gives it
        return f"put {self.source}", boto_request_id(out)

    def _status(self) -> tuple[dict | None, str]:
        """The document as the first caller's GET /documents/{id} shows it (None: a 404)."""
        answer = self.call(0, "GET", f"/documents/{quote(self.doc_id, safe='')}")
        if answer.status == 404:
            return None, answer.request_id
        return self.expect(answer, 200, f"GET /documents/{self.doc_id}"), answer.request_id

    def step_ingested(self) -> tuple[str, str]:
        deadline = self.clock() + self.timeout
        state = "not seen"
        while True:
            doc, request_id = self._status()
            if doc is not None:
                state = doc.get("status") or "unknown"
                if state == "done":
                    return f"{self.doc_id} done ({doc.get('chunks', 0)} chunks)", request_id
                if state == "failed":
                    raise StepFailed(f"{self.doc_id} failed: {doc.get('reason') or 'no reason given'}", request_id)
            if self.clock() >= deadline:
                raise StepFailed(f"not done within {self.timeout:g} s (status: {state})", request_id)
            self.sleep(self.poll)

    def step_delete(self) -> tuple[str, str]:
        out = self.s3.delete_object(Bucket=self.stack.bucket, Key=self.key)
        request_id = boto_request_id(out)
        deadline = self.clock() + self.timeout
        while True:
            doc, _ = self._status()
            if doc is None:
                return f"deleted {self.source}; the document is gone", request_id
            if self.clock() >= deadline:
                raise StepFailed(f"deleted {self.source}, but the document is still listed after {self.timeout:g} s "
                                 f"(status: {doc.get('status')})", request_id)
            self.sleep(self.poll)


