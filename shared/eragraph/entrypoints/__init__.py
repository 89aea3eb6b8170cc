"""The entry points: everything a caller reaches Eragraph through. ``http`` (the HTTP API's routes,
the ASGI server of ``eragraph serve`` and the stream function), ``bedrock_kb`` (Amazon Bedrock
Knowledge Bases' runtime API and its event stream), ``mcp`` (the MCP server), ``cli`` (the
``eragraph`` command) and ``documents`` (a document's JSON, shared by the API, MCP and the CLI).
They sit above bootstrap and the services, and nothing below imports them."""
