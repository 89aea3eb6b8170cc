"""`eragraph query`: a question answered from a local store (loading only what its mode uses,
and saying so when loading took most of the time), or asked of a running `eragraph serve`."""

from __future__ import annotations

import argparse
import sys
import time

from ..services.modes import MODES
from .client import query_server
from .exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CommandError
from .render import emit, render_query, usd
from .store import open_engine

HINT_LOADING_SECONDS = 1.0  # a query that spent more than this, and most of its time, loading says so


def query_filter(expressions: list[str] | None):
    """The --filter flags as one filter (all must hold), or a usage error naming the bad one."""
    from ..domain.filters import FilterError, combine, parse_expression

    try:
        return combine([parse_expression(e) for e in expressions or ()])
    except FilterError as exc:
        raise CommandError(f"--filter: {exc}", EXIT_USAGE) from None


def cmd_query(args: argparse.Namespace) -> int:
    where = query_filter(args.filter)
    if args.stream and (args.server or args.json):
        raise CommandError("query: --stream prints the answer as it is written from a local --store; it does not "
                           "combine with " + ("--server" if args.server else "--json"), EXIT_USAGE)
    if args.server and getattr(args, "as_principals", None):
        raise CommandError("query: --as is for a local --store; a server takes who is asking from the caller's "
                           "token", EXIT_USAGE)
    if args.server:
        return _ask_server(args, where)
    if not args.store:
        raise CommandError("query: give --store DIR (or ERAGRAPH_STORE), or --server URL of a running "
                           "`eragraph serve` (or ERAGRAPH_SERVER)", EXIT_USAGE)
    from ..domain.access import caller, parse_principals
    from ..domain.rerank import RerankSpec
    from ..services.query import query

    asking = None if not getattr(args, "as_principals", None) else parse_principals(args.as_principals)

    started = time.perf_counter()
    engine = open_engine(args)
    if not engine.graph.list_documents():
        raise CommandError(f"the store {args.store} is empty: run `eragraph ingest PATH --store {args.store}` "
                           f"first")
    preload(engine, args.mode)
    loading = time.perf_counter() - started
    on_piece = None
    if args.stream:
        def on_piece(piece: str) -> None:
            if not streamed:
                sys.stdout.write("answer: ")
            streamed.append(piece)
            sys.stdout.write(piece)
            sys.stdout.flush()
    streamed: list[str] = []
    response = query(engine, args.text, mode=args.mode, k=args.k, budget=args.budget, p=args.p,
                     answer=args.answer or args.stream, where=where, on_piece=on_piece, explain=args.explain,
                     caller=None if asking is None else caller(asking, engine.settings.access_default),
                     rerank=None if args.rerank is None else RerankSpec(candidates=None if args.rerank is True else args.rerank))
    out = response.to_dict()
    if streamed:  # already printed, as it was written
        sys.stdout.write("\n\n")
        text = render_query({**out, "answer": None})
    else:
        text = render_query(out)
    usage = response.usage.get("total", {})
    if usage:
        text += (f"\n(this query: {usage['tokens_in']} tokens in, {usage['tokens_out']} out, "
                 f"{usd(usage['cost_usd'])})")
    emit(args, out, text)
    if not (args.json or args.quiet) and loading >= HINT_LOADING_SECONDS and loading > response.seconds:
        sys.stdout.flush()
        print(f"eragraph: {loading:.1f} s of this query's {loading + response.seconds:.1f} s went to opening the "
              f"store and loading models; `eragraph serve --store {args.store}` keeps them loaded (then "
              f"`eragraph query QUESTION --server http://127.0.0.1:8765`)", file=sys.stderr)
    return EXIT_OK


def _ask_server(args: argparse.Namespace, where) -> int:
    """The question POSTed to the `eragraph serve` at --server, its answer printed as a local one."""
    from ..domain.filters import to_json

    body = {"query": args.text, "mode": args.mode, "answer": args.answer}
    if args.explain:
        body["explain"] = True
    if args.rerank is not None:
        body["rerank"] = True if args.rerank is True else {"candidates": args.rerank}
    body.update({k: v for k, v in (("k", args.k), ("budget", args.budget), ("p", args.p)) if v is not None})
    if where is not None:
        body["filter"] = to_json(where)
    try:
        status, out = query_server(args.server, body)
    except OSError as exc:
        raise CommandError(f"no server at {args.server}: {getattr(exc, 'reason', exc)}") from None
    if status != 200:  # 400: the question or its parameters (a usage error); else the server's
        raise CommandError(f"error: {status} {out.get('message') or out.get('detail') or out}",
                           EXIT_USAGE if status == 400 else EXIT_ERROR)
    emit(args, out, render_query(out))
    return EXIT_OK


def preload(engine, mode: str) -> None:
    """Load now what ``mode`` will use, and only that, so that a query's time splits into
    loading and answering: the embedder for every mode but bm25 (MiniLM embeds any question:
    torch and sentence-transformers are most of a cold query), spaCy for the entity-graph modes
    (the question's entities) and for fusion and auto when the router's weights read a parse (one
    loaded pipeline serves both). A mode the registry does not know is left to query() to refuse."""
    spec = MODES.get(mode)
    if spec is None:
        return
    wanted = []
    if spec.needs_embedding:
        wanted.append(engine.embedder)
    if "entities" in spec.spacy and engine.entities is not None:
        wanted.append(engine.entities.extractor)
    if "parse" in spec.spacy:
        from ..services.routing import router_of

        if router_of(engine).needs_parse:  # weights on text+vector inputs never parse
            wanted.append(engine.question_parser)
    for provider in wanted:
        while provider is not None and not hasattr(provider, "load"):
            provider = getattr(provider, "inner", None)  # through the cache and metering wrappers
        if provider is not None:
            provider.load()
