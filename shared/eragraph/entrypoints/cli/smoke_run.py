"""The steps of `eragraph smoke`: one document through a deployed stack, and every door asked
about it, as its clients would ask.

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
MCP_VERSION = "2025-06-18"


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


def _short(text: Any, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Smoke:
    def __init__(self, stack: Stack, callers: tuple[Caller, Caller], s3: Any, *, timeout: float = 900.0,
                 poll: float = 2.0, run_id: str | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from ..console.upstream import Upstream

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
            raise StepFailed(f"{what}: HTTP {answer.status}, not {status}: {_short(message)}", answer.request_id)
        return answer.body

    def kb_client(self, who: int):
        """boto3's bedrock-agent-runtime client with the API as its endpoint: signed for
        ``execute-api`` (IAM), or unsigned with the caller's bearer token (JWT)."""
        import boto3
        import botocore
        from botocore.config import Config

        caller = self.callers[who]
        config = Config(retries={"max_attempts": 1, "mode": "standard"})
        if caller.session is not None:
            client = caller.session.client("bedrock-agent-runtime", endpoint_url=self.stack.api_url,
                                           region_name=self.stack.region, config=config)

            def sign_for_api(request, **_):
                request.context.setdefault("signing", {})["signing_name"] = "execute-api"

            client.meta.events.register("before-sign.bedrock-agent-runtime", sign_for_api)
            return client
        client = boto3.client("bedrock-agent-runtime", endpoint_url=self.stack.api_url, region_name=self.stack.region,
                              config=config.merge(Config(signature_version=botocore.UNSIGNED)))
        client.meta.events.register("before-send.bedrock-agent-runtime", lambda request, **_: request.headers.__setitem__(
            "Authorization", f"Bearer {caller.token()}"))
        return client

    @staticmethod
    def boto_request_id(response_or_error: Any) -> str:
        meta = (getattr(response_or_error, "response", None) or response_or_error or {}).get("ResponseMetadata") or {}
        return request_id_of({k.lower(): v for k, v in (meta.get("HTTPHeaders") or {}).items()}) or meta.get(
            "RequestId", "")

    # ----- the run
    def run(self) -> list[StepResult]:
        query_log = [self.stack.log_group("query"), self.stack.access_log_group]
        ingest_log = [self.stack.log_group("ingest"), self.stack.log_group("summarize")]
        plan: list[tuple[str, Callable[[], tuple[str, str]], list[str], tuple[str, ...]]] = [
            ("callers", self.step_callers, query_log, ()),
            ("upload", self.step_upload, [self.stack.log_group("ingest")], ("callers",)),
            ("ingested", self.step_ingested, ingest_log, ("upload",)),
            ("http-query", self.step_http, query_log, ("ingested",)),
            ("kb-retrieve", self.step_kb_retrieve, query_log, ("ingested",)),
            ("kb-generate", self.step_kb_generate, query_log, ("ingested",)),
            ("mcp", self.step_mcp, query_log, ("ingested",)),
            ("openai-chat", self.step_chat, query_log, ("ingested",)),
            ("tenant-boundary", self.step_boundary, query_log, ("ingested",)),
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

        from ..console.upstream import Unreachable

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
            detail, request_id, status = _short(exc, 300), self.boto_request_id(exc), FAIL
        except (BotoCoreError, Unreachable) as exc:
            detail, request_id, status = _short(exc, 300), "", FAIL
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
        from ...domain.ids import document_id_for_source
        from ...domain.model import BadInputError
        from ...services.uploads import BucketPipeline

        name = f"eragraph-smoke-{self.run_id}{self.stack.suffix or '.md'}"
        try:
            self.key = BucketPipeline(self.stack.prefix, self.stack.suffix).key_for(self.callers[0].tenant or "", name)
        except BadInputError as exc:
            raise StepFailed(str(exc)) from None
        out = self.s3.put_object(Bucket=self.stack.bucket, Key=self.key, Body=self.text().encode("utf-8"),
                                 ContentType="text/markdown; charset=utf-8")
        self.source = f"s3://{self.stack.bucket}/{self.key}"
        self.doc_id = document_id_for_source(self.source)  # the id the ingest function gives it
        return f"put {self.source}", self.boto_request_id(out)

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

    def _found(self, sources: list[str]) -> str:
        return "found the document" if self.source in sources else ""

    def step_http(self) -> tuple[str, str]:
        answer = self.call(0, "POST", "/query", {"query": self.question, "k": 5, "mode": "hybrid"})
        body = self.expect(answer, 200, "POST /query")
        sources = [r.get("source") for r in body.get("results") or []]
        if self.source not in sources:
            raise StepFailed(f"POST /query answered {len(sources)} results, none from the document", answer.request_id)
        return f"POST /query: the document is result {sources.index(self.source) + 1} of {len(sources)}", \
            answer.request_id

    def _retrieval_configuration(self) -> dict:
        return {"vectorSearchConfiguration": {"numberOfResults": 5, "overrideSearchType": "HYBRID"}}

    def step_kb_retrieve(self) -> tuple[str, str]:
        out = self.kb_client(0).retrieve(knowledgeBaseId=self.kb_ids[0], retrievalQuery={"text": self.question},
                                         retrievalConfiguration=self._retrieval_configuration())
        uris = [(r.get("location") or {}).get("s3Location", {}).get("uri") for r in out.get("retrievalResults") or []]
        if self.source not in uris:
            raise StepFailed(f"Retrieve answered {len(uris)} results, none from the document", self.boto_request_id(out))
        return f"Retrieve on knowledge base {self.kb_ids[0]}: the document is result {uris.index(self.source) + 1}", \
            self.boto_request_id(out)

    def step_kb_generate(self) -> tuple[str, str]:
        if not self.stack.text_model:
            raise StepFailed("the stack has no TextModelId parameter to name as modelArn")
        out = self.kb_client(0).retrieve_and_generate(input={"text": self.question}, retrieveAndGenerateConfiguration={
            "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                "knowledgeBaseId": self.kb_ids[0], "modelArn": self.stack.text_model,
                "retrievalConfiguration": self._retrieval_configuration()}})
        text = (out.get("output") or {}).get("text") or ""
        cited = [(ref.get("location") or {}).get("s3Location", {}).get("uri")
                 for c in out.get("citations") or [] for ref in c.get("retrievedReferences") or []]
        return self._generated("RetrieveAndGenerate", text, cited, self.boto_request_id(out))

    def _generated(self, door: str, text: str, cited: list, request_id: str) -> tuple[str, str]:
        """A generated answer passes when it names this run's ship or cites the document."""
        if not text.strip():
            raise StepFailed(f"{door} answered no text", request_id)
        if self.ship not in text and self.source not in cited:
            raise StepFailed(f"{door} neither names {self.ship} nor cites the document: {_short(text)!r}", request_id)
        how = "cites the document" if self.source in cited else f"names {self.ship}"
        return f"{door} {how}: {_short(text, 100)!r}", request_id

    def step_mcp(self) -> tuple[str, str]:
        headers = {"accept": "application/json, text/event-stream"}
        init = self.call(0, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": MCP_VERSION, "capabilities": {},
            "clientInfo": {"name": "eragraph-smoke", "version": "1"}}}, headers)
        body = _rpc(self.expect(init, 200, "MCP initialize"))
        if "result" not in body:
            raise StepFailed(f"MCP initialize: {_short(body.get('error'))}", init.request_id)
        version = body["result"].get("protocolVersion") or MCP_VERSION
        answer = self.call(0, "POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "retrieve", "arguments": {"query": self.question, "k": 5, "mode": "hybrid"}}},
            {**headers, "mcp-protocol-version": version})
        body = _rpc(self.expect(answer, 200, "MCP tools/call"))
        result = body.get("result") or {}
        if "error" in body or result.get("isError"):
            raise StepFailed(f"MCP tools/call retrieve: {_short(body.get('error') or result.get('content'))}",
                             answer.request_id)
        structured = result.get("structuredContent") or {}
        if not structured:  # the same JSON as the text content
            for part in result.get("content") or []:
                try:
                    structured = json.loads(part.get("text") or "")
                    break
                except (json.JSONDecodeError, AttributeError):
                    continue
        sources = [r.get("source") for r in structured.get("results") or []]
        if self.source not in sources:
            raise StepFailed(f"MCP retrieve answered {len(sources)} results, none from the document", answer.request_id)
        return f"MCP tools/call retrieve: the document is result {sources.index(self.source) + 1}", answer.request_id

    def step_chat(self) -> tuple[str, str]:
        answer = self.call(0, "POST", "/v1/chat/completions", {
            "model": "eragraph-hybrid", "messages": [{"role": "user", "content": self.question}], "k": 5})
        body = self.expect(answer, 200, "POST /v1/chat/completions")
        text = ((body.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        cited = [c.get("source") for c in body.get("citations") or []]
        return self._generated("/v1/chat/completions", text, cited, answer.request_id)

    def step_boundary(self) -> tuple[str, str]:
        from botocore.exceptions import ClientError

        other = self.callers[1].label
        answer = self.call(1, "POST", "/query", {"query": self.question, "k": 10, "mode": "hybrid"})
        body = self.expect(answer, 200, f"POST /query as {other}")
        if self.source in [r.get("source") for r in body.get("results") or []]:
            raise StepFailed(f"{other} (tenant {self.callers[1].tenant or '(default)'}) found the first tenant's "
                             f"document through POST /query", answer.request_id)
        request_id = answer.request_id
        seen = self.call(1, "GET", f"/documents/{quote(self.doc_id, safe='')}")
        if seen.status != 404:
            raise StepFailed(f"GET /documents/{self.doc_id} as {other}: HTTP {seen.status}, not 404", seen.request_id)
        try:
            out = self.kb_client(1).retrieve(knowledgeBaseId=self.kb_ids[0], retrievalQuery={"text": self.question})
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code != "ResourceNotFoundException":
                raise StepFailed(f"Retrieve on the first tenant's knowledge base as {other}: {code}, not "
                                 f"ResourceNotFoundException", self.boto_request_id(exc)) from None
        else:
            raise StepFailed(f"Retrieve on the first tenant's knowledge base as {other} answered "
                             f"{len(out.get('retrievalResults') or [])} results", self.boto_request_id(out))
        return (f"{other}: POST /query finds nothing of it, GET /documents/{{id}} is 404, Retrieve on the first "
                f"tenant's knowledge base is ResourceNotFoundException", request_id)

    def step_delete(self) -> tuple[str, str]:
        out = self.s3.delete_object(Bucket=self.stack.bucket, Key=self.key)
        request_id = self.boto_request_id(out)
        deadline = self.clock() + self.timeout
        while True:
            doc, _ = self._status()
            if doc is None:
                return f"deleted {self.source}; the document is gone", request_id
            if self.clock() >= deadline:
                raise StepFailed(f"deleted {self.source}, but the document is still listed after {self.timeout:g} s "
                                 f"(status: {doc.get('status')})", request_id)
            self.sleep(self.poll)


def _rpc(body: Any) -> dict:
    """A JSON-RPC reply, from JSON or from a server-sent event stream's last ``data:`` line."""
    if isinstance(body, dict):
        return body
    if isinstance(body, str):
        for line in reversed(body.splitlines()):
            if line.startswith("data:"):
                try:
                    found = json.loads(line[5:].strip())
                except json.JSONDecodeError:
                    continue
                if isinstance(found, dict):
                    return found
    raise StepFailed(f"not a JSON-RPC reply: {_short(body)}")
