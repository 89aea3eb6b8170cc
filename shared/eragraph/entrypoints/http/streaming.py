"""One way to stream an answer, for every streamed route of the ASGI app (server.ApiApp): the
Bedrock KB event stream (stream.py), the chat endpoint's server-sent events (chat_stream.py) and
POST /query/stream's NDJSON (query_stream.py). A streamed route is one ``prepare`` and one
``Encoder``; ``serve_stream`` keeps the rules once:

1. **Admit first, take the slot last**: ``prepare(app, request, hold)`` runs in the fast pool:
   it admits the caller (its tenant, its rate bucket), reads and validates the request, and calls
   ``hold(tenant)`` last, so that a refused request holds none of the tenant's stream slots.
2. **Refuse before the head**: any failure of ``prepare`` or before the first item is the route's
   error answer with its status (the API's JSON, or the Bedrock KB service's modelled error:
   errors.refused), a fault in words with the request id (request_log.withheld).
3. **Report in band after it**: a failure after the head is the encoder's error item (its words:
   the refusal's message, or withheld's), or, for an encoder without one, the items' own.
4. **Close and release**: the items are closed when the client leaves or the stream ends (the
   model calls so far are counted), then the slot is freed.

The items are a generator pulled one ``next`` at a time in their pool (other requests of that
pool run between two items), or a producer ``produce(emit)`` run in its pool, whose emitted items
are sent as they come (a query whose answer is written through callbacks)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..request_log import withheld
from .errors import refusal, refused

_END = object()


@dataclass(frozen=True)
class Encoder:
    """How a route writes its stream: its content type and other head ``headers``; ``encode``
    (an item's bytes); ``in_band_error`` (the bytes of an error after the head, from its words;
    None: the items report their own, an error ends the response); ``fault``: the words of a
    fault before the head; ``modelled``: refusals in the Bedrock KB service's shape."""

    content_type: str
    encode: Callable[[Any], bytes]
    in_band_error: Callable[[str], bytes] | None = None
    headers: tuple[tuple[str, str], ...] = (("cache-control", "no-cache"),)
    fault: str = "the answer failed"
    modelled: bool = False


@dataclass
class Prepared:
    """What ``prepare`` gives: the ``items`` (a generator, or ``produce(emit)``), the ``pool`` that
    makes them, and head ``headers`` of this request."""

    items: Iterator[Any] | Callable[[Callable[[Any], None]], None]
    pool: str = "slow"
    headers: dict[str, str] = field(default_factory=dict)


def words_of(exc: Exception) -> str:
    """The words of an error after the head: a refusal's message (errors.ANSWERS), else a fault's
    (what failed and the request id, never the exception's text)."""
    found = refusal(exc)
    return found[1].get("message") if found else withheld("the answer broke off", exc)


async def serve_stream(app, scope: dict, send, request, prepare, encoder: Encoder) -> None:
    """Answer ``request`` (request.Request, its whole body read) of ``app`` (server.ApiApp: its
    pools, its stream slots, ``send_whole``) as the stream ``prepare`` makes and ``encoder`` writes."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()  # one context for every step: the cost ledger's track() spans the answer
    release: list[Callable[[], None]] = []
    stream = None
    try:
        try:
            prepared = await loop.run_in_executor(app.pools["fast"], context.run, prepare, app, request,
                                                  lambda tenant: release.append(app.open_stream(tenant)))
            pool = app.pools[prepared.pool]
            stream = (_pulled(loop, pool, context, prepared.items) if isinstance(prepared.items, Iterator)
                      else _pushed(loop, pool, context, prepared.items))
            item = await anext(stream, _END)
        except Exception as exc:  # noqa: BLE001 (before the head: the route's answer, never uvicorn's 500)
            await app.send_whole(send, scope, *refused(exc, request, encoder.modelled, encoder.fault))
            return
        head = [(b"content-type", encoder.content_type.encode())]
        head += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (*encoder.headers, *prepared.headers.items())]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        try:
            while item is not _END:
                await send({"type": "http.response.body", "body": encoder.encode(item), "more_body": True})
                item = await anext(stream, _END)
        except Exception as exc:  # noqa: BLE001 (after the head: the stream's own error item)
            if encoder.in_band_error is None:
                raise
            await send({"type": "http.response.body", "body": encoder.in_band_error(words_of(exc)), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        if stream is not None:
            await stream.aclose()
        for free in release:
            await loop.run_in_executor(app.pools["fast"], free)


async def _pulled(loop, pool, context, items: Iterator[Any]):
    """A generator's items, each ``next`` in ``pool``; closed at the end (the client left: the
    calls so far count)."""
    try:
        while (item := await loop.run_in_executor(pool, context.run, next, items, _END)) is not _END:
            yield item
    finally:
        await loop.run_in_executor(pool, context.run, items.close)


async def _pushed(loop, pool, context, produce: Callable[[Callable[[Any], None]], None]):
    """The items ``produce(emit)`` emits while it runs in ``pool``, as they come; its failure is
    raised where the next item would be."""
    queue: asyncio.Queue = asyncio.Queue()

    def put(item: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, item)

    def run() -> None:
        try:
            produce(lambda item: put((True, item)))
        except Exception as exc:  # noqa: BLE001 (handed to the loop: a refusal before the head, an error after)
            put((False, exc))
        finally:
            put(_END)

    future = loop.run_in_executor(pool, context.run, run)
    try:
        while (got := await queue.get()) is not _END:
            ok, value = got
            if not ok:
                raise value
            yield value
    finally:
        await future
