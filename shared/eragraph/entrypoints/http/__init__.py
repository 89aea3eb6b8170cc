"""The HTTP API: its routes (``api``) and the ASGI server of ``eragraph serve`` and the stream function (``server``)."""
