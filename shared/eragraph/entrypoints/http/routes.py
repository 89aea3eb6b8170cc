"""The route table: every HTTP route of Eragraph, once, with its method, path and handler.

Who serves which route (``on``):
- ``API``: the HTTP API. Its routes are template.yaml's HttpApi routes (the query function; a
  test checks that the two lists are the same), and ``make_app`` (eragraph.entrypoints.http.api)
  builds the resolver from them, which ``eragraph serve`` runs too. Their handlers are in
  eragraph.entrypoints.http.handlers.
- ``STREAM``: the stream function (functions/stream: a function URL, not the HttpApi), which
  serves these and answers 404 to anything else.
- ``eragraph serve`` (the ASGI server, eragraph.entrypoints.http.server) serves every route.

A route whose ``asgi`` is set is served by the ASGI server itself rather than through the
resolver: POST /mcp (the MCP SDK's streamable HTTP transport reads the request as it comes),
POST /retrieveAndGenerateStream (its frames are sent as they are made:
eragraph.entrypoints.http.stream), POST /v1/chat/completions with ``stream: true`` (its events
are sent as they are made: eragraph.entrypoints.http.chat_stream; the resolver answers it whole) and
POST /query/stream (NDJSON lines as the answer is written: eragraph.entrypoints.http.query_stream;
``eragraph serve`` only, ``on`` empty).

A route holds its handler itself (a function of eragraph.entrypoints.http.handlers, or of
eragraph.entrypoints.bedrock_agent.handlers): the Lambda resolver (api.make_app) registers it,
and ``eragraph serve`` calls it through the request pipeline (pipeline.Pipeline) with the same
validated parameters, no API Gateway event in between.

A new route: a line here, its handler, and on the HttpApi its template.yaml route
(tests/aws/test_template.py checks that the two agree), its docs page and a test."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..bedrock_agent import handlers as agent
from . import handlers as h

API = "api"  # the HTTP API: the query function behind template.yaml's HttpApi, and eragraph serve
STREAM = "stream"  # the stream function (a function URL) besides eragraph serve

# the ASGI server's own handlers (see ``Route.asgi``): MCP, and each streamed route's module
ASGI_MCP = "mcp"
ASGI_KB_STREAM = "eragraph.entrypoints.http.stream"  # (whole names: layers/core/closure.py ships
ASGI_CHAT_STREAM = "eragraph.entrypoints.http.chat_stream"  # the modules a string constant names)
ASGI_QUERY_STREAM = "eragraph.entrypoints.http.query_stream"
KB = "bedrock-agent-runtime"  # the service model whose errors the Bedrock KB routes answer


@dataclass(frozen=True)
class Route:
    """One route. ``path`` is in the OpenAPI form: ``{name}`` is a path parameter, the handler's
    parameter of that name (template.yaml may name it otherwise). ``handler``: the route's
    handler itself (None: the ASGI server alone serves it); ``summary``/``description``: its OpenAPI text (None: powertools' default,
    "METHOD path"); ``needs``: the make_app argument without which the resolver does not serve it;
    ``asgi``: the ASGI server's own handler of it, if any: ``mcp``, or a streamed route's module
    (its whole name), which holds its ``prepare`` and ``ENCODER`` (streaming.serve_stream)
    and, if it streams only when asked, ``wants_stream`` (asgi.ApiApp.serve_streamed)."""

    method: str
    path: str
    handler: Callable | None
    on: frozenset[str] = frozenset({API})
    summary: str | None = None
    description: str | None = None
    needs: str | None = None
    asgi: str | None = None
    modelled: str | None = None  # errors in this service model's shape (x-amzn-errortype), e.g. bedrock-agent-runtime

    @property
    def pattern(self) -> re.Pattern:
        """The path as a regular expression (a parameter is one non-empty segment)."""
        return re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(self.path)) + "/?$")

    @property
    def rule(self) -> str:
        """The path as a powertools rule (``<name>`` for ``{name}``)."""
        return self.path.replace("{", "<").replace("}", ">")

    @property
    def key(self) -> str:
        """API Gateway's route key: ``METHOD path``."""
        return f"{self.method} {self.path}"


_KB = "/knowledgebases/{knowledgeBaseId}/datasources/"
_DS = _KB + "{dataSourceId}"
# the bedrock-agent knowledge-base operations (eragraph.entrypoints.bedrock_agent.handlers), with
# the service model's http.requestUri and method; those that ingest need the document pipeline
BEDROCK_AGENT: tuple[Route, ...] = tuple(
    Route(method, path, handler, needs=needs, summary=f"Amazon Bedrock Knowledge Bases {operation}",
          modelled="bedrock-agent")
    for operation, method, path, handler, needs in (
        ("CreateDataSource", "PUT", _KB, agent.create_data_source, None),
        ("ListDataSources", "POST", _KB, agent.list_data_sources, None),
        ("GetDataSource", "GET", _DS, agent.get_data_source, None),
        ("StartIngestionJob", "PUT", _DS + "/ingestionjobs/", agent.start_ingestion_job, "uploads"),
        ("ListIngestionJobs", "POST", _DS + "/ingestionjobs/", agent.list_ingestion_jobs, "uploads"),
        ("GetIngestionJob", "GET", _DS + "/ingestionjobs/{ingestionJobId}", agent.get_ingestion_job, "uploads"),
        ("StopIngestionJob", "POST", _DS + "/ingestionjobs/{ingestionJobId}/stop", agent.stop_ingestion_job, None),
        ("IngestKnowledgeBaseDocuments", "PUT", _DS + "/documents", agent.ingest_documents, "uploads"),
        ("ListKnowledgeBaseDocuments", "POST", _DS + "/documents", agent.list_documents, "uploads"),
        ("GetKnowledgeBaseDocuments", "POST", _DS + "/documents/getDocuments", agent.get_documents, "uploads"),
        ("DeleteKnowledgeBaseDocuments", "POST", _DS + "/documents/deleteDocuments", agent.delete_documents, "uploads"),
    ))

ROUTES: tuple[Route, ...] = (
    Route("POST", "/query", h.post_query),
    Route("GET", "/documents/{doc_id}", h.get_document),
    Route("GET", "/documents", h.list_statuses),
    Route("POST", "/documents", h.post_documents, needs="uploads",
          summary="Submit 1 to 25 documents (202): each is ingested as an upload to the documents bucket is"),
    Route("DELETE", "/documents/{doc_id}", h.delete_document, needs="uploads",
          summary="Remove a document (202): it leaves as a deleted object of the documents bucket does"),
    Route("GET", "/changes", h.get_changes,
          summary="The most recent change records and the cost of summarizing the store again"),
    Route("GET", "/stats", h.get_stats),
    Route("GET", "/modes", h.get_modes, summary="The retrieval modes and whether this store can run each"),
    Route("GET", "/tenants", h.get_tenants, summary="The tenants the caller may name, the current one, and whether "
                                                    "it may switch (x-eragraph-tenant)"),
    Route("GET", "/graph/layers/{layer}", h.get_layer, summary="One page of a layer's nodes in code order"),
    Route("GET", "/nodes/{node_id}", h.get_node, summary="A node with its text, document, parent and children"),
    Route("GET", "/ledger", h.get_ledger, summary="The cost ledger in hourly buckets per kind and model, with totals"),
    Route("POST", "/mcp", h.post_mcp, needs="mcp", asgi=ASGI_MCP,
          summary="MCP (Model Context Protocol) tools over stateless streamable HTTP",
          description="JSON-RPC 2.0 messages of MCP: tools retrieve, answer (with a generator), "
                      "get_document, stats; JSON responses, no sessions"),
    Route("POST", "/knowledgebases/{knowledgeBaseId}/retrieve", h.post_kb_retrieve,
          summary="Amazon Bedrock Knowledge Bases Retrieve", modelled=KB),
    Route("POST", "/retrieveAndGenerate", h.post_kb_retrieve_and_generate,
          summary="Amazon Bedrock Knowledge Bases RetrieveAndGenerate", modelled=KB),
    *BEDROCK_AGENT,
    Route("POST", "/v1/chat/completions", h.post_chat_completions, asgi=ASGI_CHAT_STREAM,
          summary="OpenAI-compatible chat completions (a model is a retrieval mode: eragraph-<mode>)",
          description="The last user message is the question, made standalone from the earlier messages; "
                      "the configured generator answers from the evidence; citations in the text and in the citations field; stream: true sends "
                      "server-sent events"),
    Route("GET", "/v1/models", h.get_models, summary="OpenAI-compatible models: one per retrieval mode"),
    Route("GET", "/health", h.health, on=frozenset({API, STREAM})),
    Route("POST", "/retrieveAndGenerateStream", None, on=frozenset({STREAM}), asgi=ASGI_KB_STREAM, modelled=KB),
    Route("POST", "/query/stream", None, on=frozenset(), asgi=ASGI_QUERY_STREAM,
          summary="POST /query's answer as it is written: NDJSON lines results, piece..., done"),
)


def route(asgi: str) -> Route:
    """The route the ASGI server serves with its own handler ``asgi``."""
    return next(r for r in ROUTES if r.asgi == asgi)


def route_of(method: str, path: str) -> Route | None:
    """The route a request of ``method`` to ``path`` is for (None: no route; HEAD is GET's)."""
    method = "GET" if method == "HEAD" else method
    return next((r for r in ROUTES if r.method == method and r.pattern.match(path)), None)


def route_at(path: str) -> Route | None:
    """A route at ``path``, whatever its method (None: none)."""
    return next((r for r in ROUTES if r.pattern.match(path)), None)
