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
resolver: POST /mcp (the MCP SDK's streamable HTTP transport reads the request as it comes) and
POST /retrieveAndGenerateStream (its frames are sent as they are made:
eragraph.entrypoints.http.stream).

A new route: a line here, its handler (handlers.py, or an ASGI function), and on the HttpApi its
template.yaml route (tests/aws/test_template.py checks that the two agree) and a test."""

from __future__ import annotations

from dataclasses import dataclass

API = "api"  # the HTTP API: the query function behind template.yaml's HttpApi, and eragraph serve
STREAM = "stream"  # the stream function (a function URL) besides eragraph serve

# the ASGI server's own handlers (see ``Route.asgi``)
ASGI_MCP = "mcp"
ASGI_KB_STREAM = "kb_stream"


@dataclass(frozen=True)
class Route:
    """One route. ``path`` is in the OpenAPI form: ``{name}`` is a path parameter, the handler's
    parameter of that name (template.yaml may name it otherwise). ``handler``: the name of the
    resolver's handler, a function of eragraph.entrypoints.http.handlers (None: the ASGI server
    alone serves it); ``summary``/``description``: its OpenAPI text (None: powertools' default,
    "METHOD path"); ``needs``: the make_app argument without which the resolver does not serve it;
    ``asgi``: the ASGI server's own handler of it, if any."""

    method: str
    path: str
    handler: str | None
    on: frozenset[str] = frozenset({API})
    summary: str | None = None
    description: str | None = None
    needs: str | None = None
    asgi: str | None = None

    @property
    def rule(self) -> str:
        """The path as a powertools rule (``<name>`` for ``{name}``)."""
        return self.path.replace("{", "<").replace("}", ">")

    @property
    def key(self) -> str:
        """API Gateway's route key: ``METHOD path``."""
        return f"{self.method} {self.path}"


ROUTES: tuple[Route, ...] = (
    Route("POST", "/query", "post_query"),
    Route("GET", "/documents/{doc_id}", "get_document"),
    Route("GET", "/documents", "list_statuses"),
    Route("POST", "/documents", "post_documents", needs="uploads",
          summary="Submit 1 to 25 documents (202): each is ingested as an upload to the documents bucket is"),
    Route("DELETE", "/documents/{doc_id}", "delete_document", needs="uploads",
          summary="Remove a document (202): it leaves as a deleted object of the documents bucket does"),
    Route("GET", "/changes", "get_changes",
          summary="The most recent change records and the cost of summarizing the store again"),
    Route("GET", "/stats", "get_stats"),
    Route("POST", "/mcp", "post_mcp", needs="mcp", asgi=ASGI_MCP,
          summary="MCP (Model Context Protocol) tools over stateless streamable HTTP",
          description="JSON-RPC 2.0 messages of MCP: tools retrieve, answer (with a generator), "
                      "get_document, stats; JSON responses, no sessions"),
    Route("POST", "/knowledgebases/{knowledgeBaseId}/retrieve", "post_kb_retrieve",
          summary="Amazon Bedrock Knowledge Bases Retrieve"),
    Route("POST", "/retrieveAndGenerate", "post_kb_retrieve_and_generate",
          summary="Amazon Bedrock Knowledge Bases RetrieveAndGenerate"),
    Route("GET", "/health", "health", on=frozenset({API, STREAM})),
    Route("POST", "/retrieveAndGenerateStream", None, on=frozenset({STREAM}), asgi=ASGI_KB_STREAM),
)


def route(asgi: str) -> Route:
    """The route the ASGI server serves with its own handler ``asgi``."""
    return next(r for r in ROUTES if r.asgi == asgi)
