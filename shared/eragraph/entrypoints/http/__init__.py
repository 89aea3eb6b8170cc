"""The HTTP API, its routes written once:

- ``routes``: the route table, every route once (method, path, its handler, who serves it);
- ``handlers``: the route handlers; ``models``: their request models; ``body``: a request body as
  a JSON object;
- ``admission``: the caller's tenant and rate limit, before any work; ``context``: what a handler
  reads besides its parameters;
- ``errors``: every refusal converted to its HTTP status and body;
- ``api``: ``make_app``, the powertools resolver of the API Gateway function (``lambda_event``:
  the API Gateway event and Lambda context, where something stands in for API Gateway);
- ``request`` and ``pipeline``: ``eragraph serve``'s request and its way to the handler (matched,
  validated once, run in the pool its mode names), no API Gateway event in between;
- ``streaming``: the one stream primitive; ``stream`` (the Bedrock KB event stream),
  ``chat_stream`` (the chat endpoint's events) and ``query_stream`` (POST /query/stream's NDJSON)
  are a ``prepare`` and an encoder each;
- ``asgi``: the app of ``eragraph serve`` and of the stream function (its pools, its pipeline,
  each route's work); ``site``: the Starlette app over it (routing, the request log and the guard
  as middleware, the responses); ``server``: uvicorn serving it."""
