"""The doors `eragraph smoke` asks (smoke_run runs them as steps): each a function of the run,
returning (what it found, the request id of its last call) or raising StepFailed."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from .smoke_run import Smoke, StepFailed, boto_request_id, short

MCP_VERSION = "2025-06-18"


def kb_client(run: Smoke, who: int):
    """boto3's bedrock-agent-runtime client with the API as its endpoint: signed for
    ``execute-api`` (IAM), or unsigned with the caller's bearer token (JWT)."""
    import boto3
    import botocore
    from botocore.config import Config

    caller = run.callers[who]
    config = Config(retries={"max_attempts": 3, "mode": "standard"})  # a throttle (the tenant's rate) is retried
    if caller.session is not None:
        client = caller.session.client("bedrock-agent-runtime", endpoint_url=run.stack.api_url,
                                       region_name=run.stack.region, config=config)

        def sign_for_api(request, **_):
            request.context.setdefault("signing", {})["signing_name"] = "execute-api"

        client.meta.events.register("before-sign.bedrock-agent-runtime", sign_for_api)
        return client
    client = boto3.client("bedrock-agent-runtime", endpoint_url=run.stack.api_url, region_name=run.stack.region,
                          config=config.merge(Config(signature_version=botocore.UNSIGNED)))
    client.meta.events.register("before-send.bedrock-agent-runtime", lambda request, **_: request.headers.__setitem__(
        "Authorization", f"Bearer {caller.token()}"))
    return client


def http_query(run: Smoke) -> tuple[str, str]:
    answer = run.call(0, "POST", "/query", {"query": run.question, "k": 5, "mode": "hybrid"})
    body = run.expect(answer, 200, "POST /query")
    sources = [r.get("source") for r in body.get("results") or []]
    if run.source not in sources:
        raise StepFailed(f"POST /query answered {len(sources)} results, none from the document", answer.request_id)
    return f"POST /query: the document is result {sources.index(run.source) + 1} of {len(sources)}", \
        answer.request_id


def retrieval_configuration() -> dict:
    return {"vectorSearchConfiguration": {"numberOfResults": 5, "overrideSearchType": "HYBRID"}}


def kb_retrieve(run: Smoke) -> tuple[str, str]:
    out = kb_client(run, 0).retrieve(knowledgeBaseId=run.kb_ids[0], retrievalQuery={"text": run.question},
                                     retrievalConfiguration=retrieval_configuration())
    uris = [(r.get("location") or {}).get("s3Location", {}).get("uri") for r in out.get("retrievalResults") or []]
    if run.source not in uris:
        raise StepFailed(f"Retrieve answered {len(uris)} results, none from the document", boto_request_id(out))
    return f"Retrieve on knowledge base {run.kb_ids[0]}: the document is result {uris.index(run.source) + 1}", \
        boto_request_id(out)


def kb_generate(run: Smoke) -> tuple[str, str]:
    if not run.stack.text_model:
        raise StepFailed("the stack has no TextModelId parameter to name as modelArn")
    out = kb_client(run, 0).retrieve_and_generate(input={"text": run.question}, retrieveAndGenerateConfiguration={
        "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
            "knowledgeBaseId": run.kb_ids[0], "modelArn": run.stack.text_model,
            "retrievalConfiguration": retrieval_configuration()}})
    text = (out.get("output") or {}).get("text") or ""
    cited = [(ref.get("location") or {}).get("s3Location", {}).get("uri")
             for c in out.get("citations") or [] for ref in c.get("retrievedReferences") or []]
    return generated(run, "RetrieveAndGenerate", text, cited, boto_request_id(out))


def generated(run: Smoke, door: str, text: str, cited: list, request_id: str) -> tuple[str, str]:
    """A generated answer passes when it names this run's ship or cites the document."""
    if not text.strip():
        raise StepFailed(f"{door} answered no text", request_id)
    if run.ship not in text and run.source not in cited:
        raise StepFailed(f"{door} neither names {run.ship} nor cites the document: {short(text)!r}", request_id)
    how = "cites the document" if run.source in cited else f"names {run.ship}"
    return f"{door} {how}: {short(text, 100)!r}", request_id


def mcp(run: Smoke) -> tuple[str, str]:
    headers = {"accept": "application/json, text/event-stream"}
    init = run.call(0, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": MCP_VERSION, "capabilities": {},
        "clientInfo": {"name": "eragraph-smoke", "version": "1"}}}, headers)
    body = _rpc(run.expect(init, 200, "MCP initialize"))
    if "result" not in body:
        raise StepFailed(f"MCP initialize: {short(body.get('error'))}", init.request_id)
    version = body["result"].get("protocolVersion") or MCP_VERSION
    answer = run.call(0, "POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "retrieve", "arguments": {"query": run.question, "k": 5, "mode": "hybrid"}}},
        {**headers, "mcp-protocol-version": version})
    body = _rpc(run.expect(answer, 200, "MCP tools/call"))
    result = body.get("result") or {}
    if "error" in body or result.get("isError"):
        raise StepFailed(f"MCP tools/call retrieve: {short(body.get('error') or result.get('content'))}",
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
    if run.source not in sources:
        raise StepFailed(f"MCP retrieve answered {len(sources)} results, none from the document", answer.request_id)
    return f"MCP tools/call retrieve: the document is result {sources.index(run.source) + 1}", answer.request_id


def openai_chat(run: Smoke) -> tuple[str, str]:
    answer = run.call(0, "POST", "/v1/chat/completions", {
        "model": "eragraph-hybrid", "messages": [{"role": "user", "content": run.question}], "k": 5})
    body = run.expect(answer, 200, "POST /v1/chat/completions")
    text = ((body.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
    cited = [c.get("source") for c in body.get("citations") or []]
    return generated(run, "/v1/chat/completions", text, cited, answer.request_id)


def tenant_boundary(run: Smoke) -> tuple[str, str]:
    from botocore.exceptions import ClientError

    other = run.callers[1].label
    answer = run.call(1, "POST", "/query", {"query": run.question, "k": 10, "mode": "hybrid"})
    body = run.expect(answer, 200, f"POST /query as {other}")
    if run.source in [r.get("source") for r in body.get("results") or []]:
        raise StepFailed(f"{other} (tenant {run.callers[1].tenant or '(default)'}) found the first tenant's "
                         f"document through POST /query", answer.request_id)
    request_id = answer.request_id
    seen = run.call(1, "GET", f"/documents/{quote(run.doc_id, safe='')}")
    if seen.status != 404:
        raise StepFailed(f"GET /documents/{run.doc_id} as {other}: HTTP {seen.status}, not 404", seen.request_id)
    try:
        out = kb_client(run, 1).retrieve(knowledgeBaseId=run.kb_ids[0], retrievalQuery={"text": run.question})
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code != "ResourceNotFoundException":
            raise StepFailed(f"Retrieve on the first tenant's knowledge base as {other}: {code}, not "
                             f"ResourceNotFoundException", boto_request_id(exc)) from None
    else:
        raise StepFailed(f"Retrieve on the first tenant's knowledge base as {other} answered "
                         f"{len(out.get('retrievalResults') or [])} results", boto_request_id(out))
    return (f"{other}: POST /query finds nothing of it, GET /documents/{{id}} is 404, Retrieve on the first "
            f"tenant's knowledge base is ResourceNotFoundException", request_id)


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
    raise StepFailed(f"not a JSON-RPC reply: {short(body)}")


DOORS = [("http-query", http_query), ("kb-retrieve", kb_retrieve), ("kb-generate", kb_generate), ("mcp", mcp),
         ("openai-chat", openai_chat), ("tenant-boundary", tenant_boundary)]
