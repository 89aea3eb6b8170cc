"""Tenant isolation on the write and chat doors (issue 45), run by the tenant property tests
(tests/e2e/test_tenants_property.py on memory, tests/aws/test_tenants_property_aws.py on moto)
over tenant_cases' three tenants (``""``, ``t-a`` and its prefix-sharing ``t-ab``):

- ``run_chat_cases``: the official ``openai`` SDK, unchanged (its HTTP transport hands each
  request to api.make_app as an API Gateway event, the caller's tenant from its JWT claim only),
  asks random questions (some baited with another tenant's words), in random models
  (``eragraph-<mode>`` from the caller's GET /v1/models), under random filters, streamed and
  not, the engines' generator tenant_cases.QuotingGenerator: every citation is a node of the
  caller's tenant (its oracle) inside the filter, the reply holds no word only another tenant
  uses, and its answer is exactly the quotes of its citations (so the generator saw nothing
  else). A request whose ``x-eragraph-tenant`` header names another tenant is a 403 in words.
- ``check_agent_routes``: boto3's ``bedrock-agent`` client per tenant through the same app and a
  document pipeline of the profile: each tenant's data source and directly ingested document are
  its own (listed by it only, its upload key under its prefix); another tenant's knowledge base
  id, or its data source id under the caller's knowledge base, is ResourceNotFoundException on
  every operation (data sources, ingestion jobs, Ingest/Get/List/Delete documents), with no
  word of that tenant in the message; a delete removes the caller's document only."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable, Mapping, Sequence

from kb_support import ENDPOINT, kb_client, kb_event
from tenant_cases import (TAGS, VOCAB, TenantOracle, bedrock_filter, random_question, random_tenant_filter,
                          words_of)

from eragraph.domain.filters import to_json
from eragraph.domain.knowledge_base import knowledge_base_id
from eragraph.services.ingest import SourceDoc


def _authorizer(tenant: str) -> dict:
    claims = {"sub": "user-1", **({"tenant": tenant} if tenant else {})}
    return {"jwt": {"claims": claims, "scopes": None}}


def api_app(engines: Mapping[str, object], uploads=None):
    """api.make_app over the tenants' engines, the caller's tenant from its JWT claim only."""
    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.entrypoints.http.api import make_app

    return make_app(lambda tenant: engines[tenant], tenant_of=TenantIdentity(required=False, tag="").tenant,
                    tenants=lambda: [t for t in engines if t], uploads=uploads)


def chat_client(app, tenant: str, headers: dict | None = None):
    """The openai SDK's client, its requests answered by ``app`` as ``tenant``'s caller."""
    import httpx
    import openai

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        ev = kb_event(request.method, request.url.path, body, _authorizer(tenant))
        ev["headers"] = {**ev["headers"], **(headers or {})}
        if body is None:
            ev.pop("body", None)
        out = app.resolve(ev, None)
        raw = out.get("body") or ""
        data = base64.b64decode(raw) if out.get("isBase64Encoded") else raw.encode()
        return httpx.Response(out["statusCode"], headers=out.get("headers") or {}, content=data)

    return openai.OpenAI(base_url=ENDPOINT + "/v1", api_key="unused", max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(handle)))


def _ask(client, model: str, text: str, k: int, where: dict | None, stream: bool) -> tuple[str, list[dict]]:
    extra = {"k": k, **({} if where is None else {"filter": where})}
    messages = [{"role": "system", "content": "Answer from the knowledge base."}, {"role": "user", "content": text}]
    if not stream:
        out = client.chat.completions.create(model=model, messages=messages, extra_body=extra)
        return out.choices[0].message.content, out.model_extra["citations"]
    content, citations = [], None
    for chunk in client.chat.completions.create(model=model, messages=messages, extra_body=extra, stream=True):
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            if choice.finish_reason is not None:
                citations = chunk.model_extra["citations"]
    assert citations is not None, "the stream ended with no finish chunk"
    return "".join(content), citations


def run_chat_cases(engines: Mapping[str, object], n_cases: int, seed: int,
                   checks: Mapping[str, TenantOracle]) -> int:
    """``n_cases`` random chat requests (each tenant in turn, every model in turn, streamed every
    other one); the engines' generator must be a QuotingGenerator. Returns the citations checked."""
    rng = random.Random(seed)
    app = api_app(engines)
    tenants = list(engines)
    clients = {t: chat_client(app, t) for t in tenants}
    models = {t: sorted(m.id for m in clients[t].models.list()) for t in tenants}
    assert all(models[t] == models[tenants[0]] and models[t] for t in tenants), models
    checked = 0
    for i in range(n_cases):
        tenant = tenants[i % len(tenants)]
        model = models[tenant][(i // len(tenants)) % len(models[tenant])]
        f = random_tenant_filter(rng)
        text, k, stream = random_question(rng, tenant), rng.choice((1, 3, 5)), i % 2 == 1
        where = (f"chat case {i}: tenant {tenant!r}, {model}, k {k}, stream {stream}, {text!r}, "
                 f"filter {None if f is None else to_json(f)}")
        content, citations = _ask(clients[tenant], model, text, k, None if f is None else bedrock_filter(to_json(f)),
                                  stream)
        oracle, allowed = checks[tenant], checks[tenant].allowed(f)
        assert not words_of(content) & oracle.foreign, f"{where}: another tenant's words in {content[:300]!r}"
        for c in citations:
            node = oracle.all_nodes.get(c["id"])
            assert node is not None, f"{where}: cited {c['id']}, no node of tenant {tenant!r}"
            oracle.check_node(c["id"], node.text, where)
            assert (c["doc_id"], c["source"]) == (node.doc_id, node.source), where
            assert node.layer > 0 or c["id"] in allowed, f"{where}: {c['id']} is outside the filter"
            assert node.layer == 0 or f is None, f"{where}: a summary under a filter"
        quotes = " ".join(f"{oracle.all_nodes[c['id']].text.strip()} [{j}]" for j, c in enumerate(citations, 1))
        if citations:
            assert content.startswith(quotes + "\n\nSources:\n"), f"{where}: the answer is not its citations' quotes"
        if model == "eragraph-bm25":  # the allowed leaves sharing a word with the question
            allowed = oracle.lexical_matches(text, allowed)
        assert bool(citations) == bool(allowed) or f is None, f"{where}: {len(citations)} cited, {len(allowed)} allowed"
        checked += len(citations)
    # a caller naming another tenant in the header is refused, in words, whatever it asks
    import openai

    for tenant in tenants:
        other = tenants[(tenants.index(tenant) + 1) % len(tenants)] or tenants[(tenants.index(tenant) + 2) % len(tenants)]
        client = chat_client(app, tenant, headers={"x-eragraph-tenant": other})
        try:
            client.chat.completions.create(model=models[tenant][0], messages=[{"role": "user", "content": "comet"}])
        except openai.PermissionDeniedError as exc:
            assert "tenant" in str(exc) and not words_of(str(exc)) & checks[tenant].foreign, str(exc)
        else:
            raise AssertionError(f"tenant {tenant!r} chatted as {other!r}")
    return checked


# --------------------------------------------------------------------------- bedrock-agent routes

def agent_clients(app, tenants: Sequence[str]) -> dict:
    """boto3's bedrock-agent client per tenant, its requests answered by ``app``."""
    def client(tenant: str):
        return kb_client(lambda ev: app.resolve(ev, None),
                         lambda method, path, body: kb_event(method, path, body, _authorizer(tenant)),
                         service="bedrock-agent")

    return {t: client(t) for t in tenants}


def _inline(doc_id: str, text: str, attributes: dict | None = None) -> dict:
    doc = {"content": {"dataSourceType": "CUSTOM", "custom": {
        "customDocumentIdentifier": {"id": doc_id}, "sourceType": "IN_LINE",
        "inlineContent": {"type": "TEXT", "textContent": {"data": text}}}}}
    if attributes:
        doc["metadata"] = {"type": "IN_LINE_ATTRIBUTE", "inlineAttributes": [
            {"key": k, "value": {"type": "STRING", "stringValue": v}} for k, v in attributes.items()]}
    return doc


def _refused(client, call: Callable[[], object], where: str, foreign: set[str]) -> None:
    try:
        call()
    except client.exceptions.ResourceNotFoundException as exc:
        assert not words_of(str(exc)) & foreign, f"{where}: {exc}"
    else:
        raise AssertionError(f"{where}: answered")


def check_agent_routes(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]], pipeline,
                       settle: Callable[[], None], keys: Callable[[str], list[str]] | None = None) -> int:
    """The bedrock-agent routes per tenant through api.make_app and ``pipeline`` (the profile's
    document pipeline; ``settle()`` waits until what was handed to it is ingested, where it
    ingests; ``keys(tenant)``: the tenant's upload keys where the pipeline puts objects).
    Returns the requests checked."""
    app = api_app(engines, uploads=pipeline)
    tenants = list(engines)
    clients = agent_clients(app, tenants)
    foreign = {t: set().union(*(set(VOCAB[o]) for o in tenants if o != t)) for t in tenants}
    sources, checked = {}, 0
    for tenant in tenants:
        kb, client = knowledge_base_id(tenant), clients[tenant]
        ds = client.create_data_source(knowledgeBaseId=kb, name="notes", dataSourceConfiguration={"type": "CUSTOM"})
        sources[tenant] = ds_id = ds["dataSource"]["dataSourceId"]
        text = f"Agent note of {TAGS[tenant]}: " + " ".join(VOCAB[tenant]) * 3
        out = client.ingest_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documents=[
            _inline("note-1", text, {"team": TAGS[tenant]})])
        assert [d["status"] for d in out["documentDetails"]] == ["STARTING"], out
        checked += 2
    settle()
    for tenant in tenants:
        kb, client, ds_id = knowledge_base_id(tenant), clients[tenant], sources[tenant]
        listed = client.list_data_sources(knowledgeBaseId=kb)["dataSourceSummaries"]
        assert [d["dataSourceId"] for d in listed] == [ds_id], (tenant, listed)
        details = client.list_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id)["documentDetails"]
        assert [d["identifier"]["custom"]["id"] for d in details] == ["note-1"], (tenant, details)
        ident = [{"dataSourceType": "CUSTOM", "custom": {"id": "note-1"}}]
        got = client.get_knowledge_base_documents(knowledgeBaseId=kb, dataSourceId=ds_id, documentIdentifiers=ident)
        assert got["documentDetails"][0]["status"] != "NOT_FOUND", got
        if keys is not None:
            assert keys(tenant) and all(k.startswith(f"tenants/{tenant}/") if tenant else not k.startswith("tenants/")
                                        for k in keys(tenant)), keys(tenant)
        checked += 3
        for other in tenants:
            if other == tenant:
                continue
            okb, ods = knowledge_base_id(other), sources[other]
            calls = {
                "ListDataSources": lambda: client.list_data_sources(knowledgeBaseId=okb),
                "GetDataSource": lambda: client.get_data_source(knowledgeBaseId=okb, dataSourceId=ods),
                "GetDataSource (own kb)": lambda: client.get_data_source(knowledgeBaseId=kb, dataSourceId=ods),
                "StartIngestionJob": lambda: client.start_ingestion_job(knowledgeBaseId=okb, dataSourceId=ods),
                "ListIngestionJobs (own kb)": lambda: client.list_ingestion_jobs(knowledgeBaseId=kb, dataSourceId=ods),
                "IngestDocuments": lambda: client.ingest_knowledge_base_documents(
                    knowledgeBaseId=okb, dataSourceId=ods, documents=[_inline("x", "planted")]),
                "IngestDocuments (own kb)": lambda: client.ingest_knowledge_base_documents(
                    knowledgeBaseId=kb, dataSourceId=ods, documents=[_inline("x", "planted")]),
                "ListDocuments": lambda: client.list_knowledge_base_documents(knowledgeBaseId=okb, dataSourceId=ods),
                "GetDocuments": lambda: client.get_knowledge_base_documents(
                    knowledgeBaseId=okb, dataSourceId=ods, documentIdentifiers=ident),
                "DeleteDocuments": lambda: client.delete_knowledge_base_documents(
                    knowledgeBaseId=okb, dataSourceId=ods, documentIdentifiers=ident),
                "DeleteDocuments (own kb)": lambda: client.delete_knowledge_base_documents(
                    knowledgeBaseId=kb, dataSourceId=ods, documentIdentifiers=ident),
            }
            for name, call in calls.items():
                _refused(client, call, f"tenant {tenant!r} on tenant {other!r}'s: {name}", foreign[tenant])
                checked += 1
    settle()
    victim = next(t for t in tenants if t)
    out = clients[victim].delete_knowledge_base_documents(
        knowledgeBaseId=knowledge_base_id(victim), dataSourceId=sources[victim],
        documentIdentifiers=[{"dataSourceType": "CUSTOM", "custom": {"id": "note-1"}}])
    assert out["documentDetails"][0]["status"] == "DELETING", out
    settle()
    for tenant, engine in engines.items():  # the others' documents: theirs, once each, still there
        docs = [d for d in engine.graph.list_documents() if d.source.endswith("note-1")]
        assert len(docs) == (0 if tenant == victim else 1) or keys is not None, (tenant, docs)
        assert not any("planted" in n for n in (d.source for d in engine.graph.list_documents())), tenant
    return checked
