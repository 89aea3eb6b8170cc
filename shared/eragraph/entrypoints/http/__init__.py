"""The HTTP API, its routes written once:

- ``routes``: the route table, every route once (method, path, handler, who serves it);
- ``handlers``: the resolver's route handlers; ``models``: their request models; ``body``: a
  request body as a JSON object;
- ``admission``: the caller's tenant and rate limit, before any work; ``context``: what a handler
  reads besides its parameters;
- ``errors``: every refusal converted to its HTTP status and body;
- ``api``: ``make_app``, the resolver of the API Gateway function and of ``eragraph serve``;
- ``server``: the ASGI app and server of ``eragraph serve`` and of the stream function;
- ``stream``: POST /retrieveAndGenerateStream, the Bedrock KB event stream as it is made."""
