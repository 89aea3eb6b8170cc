"""The `eragraph` command line: ingest, query, serve, mcp (the MCP tools over stdio), delete, stats,
rebuild, reindex, demo, bench, router (train the auto retrieval router)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterable
from typing import Any

from ...config import ProcessSettings, Settings, settings_from_env
from ...domain.model import EragraphError
from ...services.modes import MODES, mode_names

BENCH_MODULES = ("retrieval", "growth", "ingest", "query", "scale", "vectors", "deadline", "filters", "load")
DEFAULT_STORE = "eragraph-store"

# Exit statuses (EXIT_HELP says them in --help; README's CLI section too).
EXIT_OK = 0
EXIT_ERROR = 1    # nothing (or not what was asked) was done: no such store, no input readable, ...
EXIT_USAGE = 2    # bad arguments or settings: argparse's own status
EXIT_PARTIAL = 3  # done, but some inputs were skipped (each one named on stderr)
EXIT_PIPE = 128 + 13  # stdout closed early (| head): what a shell reports for a tool SIGPIPE ends

EXIT_HELP = """exit status:
  0    success
  1    error: the command failed (no such store, no input could be read, no such document,
       a model call failed, reindex left invariant violations, ...)
  2    usage: bad arguments or settings (as argparse)
  3    partial: some inputs were skipped (each named on stderr), the rest was done
  141  stdout was closed early (e.g. | head): the command stops quietly, as on SIGPIPE"""


class CommandError(Exception):
    """A command cannot go on: main prints ``eragraph: <message>`` and exits with ``status``."""

    def __init__(self, message: str, status: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.status = status


def _emit(args: argparse.Namespace, payload: dict[str, Any], human: str) -> None:
    if getattr(args, "json", False):
        json.dump(payload, sys.stdout, indent=2, sort_keys=False, default=str)
        sys.stdout.write("\n")
    else:
        print(human)


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {name: getattr(args, name, None) for name in ("embedder", "summarizer", "generator", "csv_text_column",
                                                              "csv_id_column", "csv_title_column")}
    return settings_from_env(**overrides)


STORE_MARK = "graph.sqlite"  # what every local store holds (bootstrap.local)


def existing_store(store: str | Path) -> Path:
    """The store directory of a command that reads or changes a store (query, stats, delete,
    reindex, serve, rebuild): it must exist; such a command never creates one (a mistyped
    --store is one line naming the path, not an empty store)."""
    path = Path(store)
    how = f"create one with `eragraph ingest PATH... --store {path}`"
    if not path.exists():
        raise CommandError(f"no store at {path}: {how}")
    if not path.is_dir():
        raise CommandError(f"{path} is a file, not a store directory: {how}")
    if not (path / STORE_MARK).is_file() and not (path / "tenants").is_dir():  # a root holding only tenants is one
        raise CommandError(f"{path} is not an eragraph store (it has no {STORE_MARK}): {how}")
    return path


def new_or_existing_store(store: str | Path) -> Path:
    """The store directory of a command that may create it (ingest, demo)."""
    path = Path(store)
    if path.exists() and not path.is_dir():
        raise CommandError(f"{path} is a file, not a store directory: give --store a folder (new or a store)")
    return path


def _engine(args: argparse.Namespace, settings: Settings | None = None, create: bool = False):
    """The local engine over ``args.store``; only ``create`` (ingest, demo) may make the store."""
    from ...bootstrap import build_engine

    path = new_or_existing_store(args.store) if create else existing_store(args.store)
    tenant = _tenant(args)
    if tenant and not create and not (path / "tenants" / tenant).is_dir():
        raise CommandError(f"the store {args.store} has no tenant {tenant!r} (`eragraph tenants --store "
                           f"{args.store}` lists them)")
    if not tenant and not create and not (path / STORE_MARK).is_file():
        # a root whose only content is tenants: its default tenant is not created by a read
        names = sorted(p.name for p in (path / "tenants").iterdir() if p.is_dir())
        raise CommandError(f"the store {args.store} holds only tenants ({', '.join(names) or 'none left'}): "
                           f"name one with --tenant ID")
    return build_engine("local", path, settings or _settings(args), tenant=tenant)


def _tenant(args: argparse.Namespace) -> str:
    """``--tenant`` validated ("" the default tenant)."""
    from ...domain.tenants import TenantError, check_tenant

    tenant = getattr(args, "tenant", None) or ""
    if not tenant:
        return ""
    try:
        return check_tenant(tenant)
    except TenantError as exc:
        raise CommandError(f"--tenant: {exc}", EXIT_USAGE) from None


@contextmanager
def _writing(store: str | Path, create: bool = False):
    """Hold the store's inter-process writer lock (``STORE/.writer.lock``) for a whole write
    command: concurrent ``ingest``/``delete``/``reindex`` processes on one store take turns
    (queries take no lock and keep working). Only ``create`` (ingest, demo) may make the store."""
    from filelock import Timeout

    from ...adapters.local.files import writer_lock

    path = new_or_existing_store(store) if create else existing_store(store)
    path.mkdir(parents=True, exist_ok=True)
    lock = writer_lock(path / ".writer.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"waiting for another eragraph process writing to {store}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _text_key(doc_id: str) -> str:
    from ...services.sources import text_key

    return text_key(doc_id)


EMBED_SLICE = 1024  # chunk texts per embedder call in a CLI ingest: the chunk bar moves per slice


def count_inputs(paths: Iterable[str | Path], csv_rows: bool = False) -> int:
    """How many documents (or skip messages) ``paths`` will give: a .jsonl file's non-blank
    lines (with ``csv_rows``, a .csv/.tsv file's non-blank lines but its header), one for any
    other file or missing path; folders walked as ingest walks them. One quick read of each
    JSONL (and CSV) file, for the progress bar's total (a CSV field spanning lines counts
    each line: the total is corrected at the end)."""
    from ...services.sources import iter_files

    n = 0
    for path in iter_files(paths):
        suffix = path.suffix.lower()
        rows = suffix == ".jsonl" or (csv_rows and suffix in (".csv", ".tsv"))
        if rows and path.is_file():
            try:
                with open(path, "rb") as fh:
                    lines = sum(1 for line in fh if line.strip()) - (suffix != ".jsonl")
            except OSError:
                lines = 1
            n += max(lines, 1)
        else:
            n += 1
    return n


def input_bytes(paths: Iterable[str | Path]) -> int:
    """The bytes of every file under ``paths`` (stat only), for the progress bar's byte total."""
    from ...services.sources import iter_files

    total = 0
    for path in iter_files(paths):
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


class IngestProgress:
    """An ingest's progress on stderr (nothing with --quiet). With a byte total (the input
    files' sizes) the bar counts bytes of input, with documents ("docs" done/total) and chunks
    written beside it, and an ETA; a batch's bytes count half as its chunks are embedded (the
    embedding is most of a batch's time) and in full once it is written, so one huge document
    moves the bar too. Without one it counts documents. Under it, the chunks of the batch at
    hand as they are embedded (slices of EMBED_SLICE) and its stage (embedding, entities,
    writing); then, while the bus drains, a stage line counting the summaries written on each
    layer."""

    def __init__(self, args: argparse.Namespace, total: int | None, errors: list | None = None,
                 documents: bool = True, total_bytes: int | None = None) -> None:
        from tqdm import tqdm

        self.tqdm = tqdm
        self.off = bool(getattr(args, "quiet", False))
        self.errors = errors if errors is not None else []
        self.counted_errors = 0
        self.total_docs = total
        self.docs_done = 0
        self.chunks_done = 0  # of written batches
        self.chunks_now = 0  # embedded so far in the batch at hand
        self.bytes_done = 0  # of written batches
        self.bytes_pending = 0  # of the batch at hand
        self.by_bytes = bool(total_bytes)
        if self.by_bytes:
            self.docs = tqdm(total=total_bytes, desc="ingest", unit="B", unit_scale=True, unit_divisor=1024,
                             file=sys.stderr, disable=self.off or not documents, dynamic_ncols=True)
        else:
            self.docs = tqdm(total=total, desc="ingest", unit=" docs", file=sys.stderr,
                             disable=self.off or not documents, dynamic_ncols=True)
        self.chunks = None
        self.summaries = None
        self.layer_counts: dict[int, int] = {}
        self.layer = 0
        self._show_counts()

    # documents and chunks
    def drawn(self, doc) -> None:
        """A document was read into the batch at hand."""
        self.bytes_pending += getattr(doc, "input_bytes", 0) or len(doc.text.encode("utf-8"))

    def documents(self, n: int) -> None:
        """A batch of ``n`` documents is written (the ingest service's progress callback); the
        inputs skipped meanwhile count as done too."""
        skipped = len(self.errors) - self.counted_errors
        self.counted_errors = len(self.errors)
        self.docs_done += n + skipped
        self.bytes_done += self.bytes_pending
        self.bytes_pending = 0
        self.chunks_done += self.chunks_now
        self.chunks_now = 0
        if self.docs is not None:
            self._advance(self.bytes_done if self.by_bytes else self.docs_done)
        self._end_chunks()

    def _advance(self, to: float) -> None:
        if self.docs is None:
            return
        if self.docs.total is not None:
            to = min(to, self.docs.total)
        if to > self.docs.n:
            self.docs.update(to - self.docs.n)
        self._show_counts()

    def _show_counts(self) -> None:
        if self.docs is not None and self.by_bytes:
            total = f"/{self.total_docs}" if self.total_docs is not None else ""
            self.docs.set_postfix_str(f"docs {self.docs_done}{total}, chunks {self.chunks_done + self.chunks_now}",
                                      refresh=False)

    def embedding(self, done: int, total: int) -> None:
        if self.off:
            return
        if self.chunks is None or self.chunks.total != total or done == 0:
            self._end_chunks()
            self.chunks = self.tqdm(total=total, desc="  embedding", unit=" chunks", file=sys.stderr, leave=False,
                                    dynamic_ncols=True)
        self.chunks.update(done - self.chunks.n)
        self.chunks_now = done
        if self.by_bytes and total:
            self._advance(self.bytes_done + self.bytes_pending * done / total / 2)

    def stage(self, name: str) -> None:
        if self.chunks is not None:
            self.chunks.set_description(f"  {name}")

    def _end_chunks(self) -> None:
        if self.chunks is not None:
            self.chunks.close()
            self.chunks = None

    # the drain
    def draining(self, message) -> None:
        """A reconcile of ``message.layer`` starts: summaries go to the layer above."""
        self.layer = message.layer + 1
        if self.summaries is None and not self.off:
            self.end_documents()
            self.summaries = self.tqdm(desc="summarize", unit=" summaries", file=sys.stderr, dynamic_ncols=True)
        self._show_layers()

    def summarized(self) -> None:
        self.layer_counts[self.layer] = self.layer_counts.get(self.layer, 0) + 1
        if self.summaries is not None:
            self.summaries.update(1)
            self._show_layers()

    def _show_layers(self) -> None:
        if self.summaries is not None:
            self.summaries.set_postfix_str(", ".join(f"layer {k}: {v}" for k, v in sorted(self.layer_counts.items()))
                                           + f" (now layer {self.layer})", refresh=False)

    def end_documents(self) -> None:
        """Every document is read and written (before the drain): the bars of that part end."""
        self._end_chunks()
        if self.docs is None:
            return
        skipped = len(self.errors) - self.counted_errors
        self.counted_errors = len(self.errors)
        self.docs_done += skipped
        if self.by_bytes:  # the bytes of skipped files and lines were never drawn: all are read now
            self._advance(self.docs.total or self.docs.n)
        else:
            self._advance(self.docs_done)
        if self.total_docs is not None and self.docs_done != self.total_docs:
            self.total_docs = self.docs_done  # a corpus line was counted that held no document
        if not self.by_bytes and self.docs.total is not None and self.docs.n != self.docs.total:
            self.docs.total = self.docs.n
        self._show_counts()
        self.docs.close()
        self.docs = None

    def close(self) -> None:
        self.end_documents()
        if self.summaries is not None:
            self.summaries.set_postfix_str(", ".join(f"layer {k}: {v}" for k, v in sorted(self.layer_counts.items())),
                                           refresh=False)
            self.summaries.close()


class SlicedEmbedder:
    """The engine's embedder, called with at most EMBED_SLICE texts at a time, telling the
    progress how many chunk texts of the call are done."""

    def __init__(self, inner, progress: IngestProgress) -> None:
        self.inner = inner
        self.progress = progress
        self.identity = inner.identity
        self.dim = inner.dim

    def embed(self, texts):
        import numpy as np

        texts = list(texts)
        self.progress.embedding(0, len(texts))
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            parts.append(self.inner.embed(texts[start:start + EMBED_SLICE]))
            self.progress.embedding(min(start + EMBED_SLICE, len(texts)), len(texts))
        self.progress.stage("writing")
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class CountingSummarizer:
    """The engine's summarizer, telling the progress of each summary it writes (every other
    attribute is the summarizer's own, so it revises only if the summarizer can)."""

    def __init__(self, inner, progress: IngestProgress) -> None:
        self.inner = inner
        self.progress = progress

    def __getattr__(self, name: str):
        value = getattr(self.inner, name)
        if name in ("summarize", "revise") and callable(value):
            def counted(*a, **kw):
                result = value(*a, **kw)
                self.progress.summarized()
                return result
            return counted
        return value


def _staged(hook, progress: IngestProgress):
    def run(engine, nodes):
        progress.stage("entities")
        hook(engine, nodes)
        progress.stage("writing")
    return run


def ingest_docs(engine, docs: Iterable, args, total: int | None = None,
                errors: list[dict[str, str]] | None = None, total_bytes: int | None = None) -> dict:
    """Ingest SourceDocs (any iterable, consumed in batches of ``--batch-docs``), keep their text
    in the blob store (for rebuilds) as they pass, then drain the bus, showing IngestProgress
    (``total`` documents, ``total_bytes`` of input; ``errors``: the reader's skip list, counted
    as done). ``documents_read`` counts the documents the iterable gave. Layers an earlier run
    left dirty (it died before its drain ended) are announced again first, so the same command
    run again recovers."""
    from ...services import ingest as ingest_service
    from ...services import resummarize

    seen = 0

    def keep_text(stream):
        nonlocal seen
        for doc in stream:
            seen += 1
            progress.drawn(doc)
            if engine.blobs is not None:
                engine.blobs.put(_text_key(doc.resolved_id), doc.text.encode("utf-8"))
            yield doc

    started = time.perf_counter()
    # under the writer lock, a dirty marker is what an earlier run left when it died with its
    # messages (the local bus lives in the process): announce those layers again, drained below
    resummarize.requeue_dirty(engine)
    progress = IngestProgress(args, total, errors, total_bytes=total_bytes)
    embedder, hooks, summarizer = engine.embedder, engine.ingest_hooks, engine.summarizer
    try:
        engine.embedder = SlicedEmbedder(embedder, progress)
        engine.ingest_hooks = [_staged(hook, progress) for hook in hooks]
        try:
            report = ingest_service.ingest(engine, keep_text(docs), progress=progress.documents,
                                           batch_docs=getattr(args, "batch_docs", None) or 256)
        finally:
            engine.embedder, engine.ingest_hooks = embedder, hooks
        progress.end_documents()
        engine.summarizer = CountingSummarizer(summarizer, progress)
        try:
            report.merge(resummarize.drain(engine, on_message=progress.draining))
        finally:
            engine.summarizer = summarizer
    finally:
        progress.close()
    report.seconds = time.perf_counter() - started
    out = report.to_dict()
    out["documents_read"] = seen
    return out


def cmd_ingest(args: argparse.Namespace) -> int:
    with _writing(args.store, create=True):
        return _cmd_ingest(args)


def _cmd_ingest(args: argparse.Namespace) -> int:
    from ...providers.extractors import ReadLimits
    from ...services.sources import CsvMapping, iter_sources

    engine = _engine(args, create=True)
    errors: list[dict[str, str]] = []
    mapping = CsvMapping.from_settings(engine.settings)
    total = None if args.quiet else count_inputs(args.paths, csv_rows=mapping is not None)
    size = None if args.quiet else input_bytes(args.paths)
    docs = iter_sources(args.paths, errors, ReadLimits.from_settings(engine.settings), csv_mapping=mapping)
    others: dict[str, list] = {}  # documents whose metadata names another tenant: ingested after, in theirs
    out = ingest_docs(engine, _route_tenants(docs, engine.tenant, others, errors), args, total=total,
                      errors=errors, total_bytes=size)
    for tenant, tenant_docs in sorted(others.items()):
        args.tenant = tenant
        _merge_counts(out, ingest_docs(_engine(args, create=True), tenant_docs, args))
    from ...services import doc_status
    doc_status.record_failures(engine, errors)  # the readers' refusals (the ingest records its own)
    out["errors"] = errors + out["errors"]
    for err in out["errors"]:
        print(f"skipped {err['source']}: {err['error']}", file=sys.stderr)
    layers = ", ".join(f"layer {k}: {v}" for k, v in out["segments_resummarized"].items()) or "none"
    _emit(args, out, (f"{out['documents_added']} added, {out['documents_replaced']} replaced, "
                      f"{out['documents_unchanged']} unchanged, "
                      + (f"{out['documents_retagged']} re-tagged (metadata only), " if out["documents_retagged"] else "")
                      + f"{out['chunks_added']} chunks, "
                      f"segments re-summarized: {layers}; {out['summarize_calls']} summarize calls, "
                      f"{out['tokens_in']} tokens in, {out['tokens_out']} out, {out['seconds']:.1f}s"
                      + (f"; {len(out['errors'])} skipped" if out["errors"] else "")))
    return _ingest_status(out)


def _route_tenants(docs: Iterable, tenant: str, others: dict[str, list], errors: list[dict[str, str]]):
    """The documents of ``tenant``; a document whose metadata names another tenant goes to
    ``others`` (without --tenant: it is ingested in that tenant's store after the stream) or,
    with --tenant, is skipped with an error (the flag names the one tenant of the command)."""
    for doc in docs:
        named = (doc.metadata or {}).get("tenant")
        if named is None or named == tenant:
            yield doc
        elif tenant:
            errors.append({"source": doc.source, "error": f"its metadata names tenant {named!r}, but --tenant is "
                                                          f"{tenant!r}"})
        else:
            others.setdefault(named, []).append(doc)


def _merge_counts(out: dict, more: dict) -> None:
    for key, value in more.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and isinstance(out.get(key), (int, float)):
            out[key] += value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            for k, v in value.items():
                if isinstance(v, (int, float)):
                    out[key][k] = out[key].get(k, 0) + v
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] += value


def cmd_tenants(args: argparse.Namespace) -> int:
    """List the store's tenants, or delete one (``--delete ID``) with its counts."""
    from ...bootstrap.tenancy import Tenancy
    from ...domain.tenants import TenantError, check_tenant

    path = existing_store(args.store)
    tenancy = Tenancy("local", store=path, settings=_settings(args))
    if not args.delete:
        from ...domain.knowledge_base import knowledge_base_id

        names = tenancy.tenants()
        ids = {name: knowledge_base_id(name) for name in ["", *names]}  # "" is the default tenant
        _emit(args, {"tenants": names, "knowledge_base_ids": ids},
              "\n".join(f"{name or '(default)'}\tknowledge base {kb}" for name, kb in ids.items()))
        return EXIT_OK
    try:
        tenant = check_tenant(args.delete)
    except TenantError as exc:
        raise CommandError(f"--delete: {exc}", EXIT_USAGE) from None
    if tenant not in tenancy.tenants():
        raise CommandError(f"the store {args.store} has no tenant {tenant!r}")
    with _writing(path):
        report = tenancy.delete(tenant)
    before = ", ".join(f"{v} {k}" for k, v in report["before"].items())
    _emit(args, report, f"deleted tenant {tenant}: {before}; left: "
                        + ", ".join(f"{v} {k}" for k, v in report["after"].items()))
    return EXIT_OK


def _ingest_status(out: dict) -> int:
    """0: every input ingested; 3 (partial): some skipped, the rest ingested; 1: inputs named,
    none could be read."""
    if not out["errors"]:
        return EXIT_OK
    return EXIT_PARTIAL if out["documents_read"] else EXIT_ERROR


def render_query(out: dict) -> str:
    """The human-readable form of a query response (QueryResponse.to_dict, or the API's JSON)."""
    lines = []
    if out.get("answer") is not None:
        lines += [f"answer: {out['answer']}", ""]
    for i, r in enumerate(out.get("results") or [], 1):
        label = f"L{r['layer']}" + (f" {r['title'] or r['doc_id']}" if r["layer"] == 0
                                     else f" summary of {len(r['children'])}")
        snippet = " ".join(r["text"].split())[:300]
        lines.append(f"{i}. [{r['score']:.3f}] {label} ({r['id']})\n   {snippet}")
    if out.get("rerank"):
        rr = out["rerank"]
        lines.append(f"(reranked by {rr['model']} from {rr['candidates']} candidates in {rr['ms']:.0f} ms)")
    route = out.get("route") or out.get("mode")
    if out.get("router_score") is not None:
        lines.append(f"(route: {route}, s(q) = {out['router_score']:.3f})")
    elif route:
        lines.append(f"(route: {route})")
    if out.get("note"):
        lines.append(f"({out['note']})")
    return "\n".join(lines) or "no results"


def query_server(url: str, body: dict, timeout: float = 120.0) -> tuple[int, dict]:
    """POST ``body`` to a running `eragraph serve` at ``url``; returns (status, JSON body)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url.rstrip("/") + "/query", data=json.dumps(body).encode("utf-8"),
                                     headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except json.JSONDecodeError:
            return exc.code, {"message": exc.reason}


def query_filter(expressions: list[str] | None):
    """The --filter flags as one filter (all must hold), or a usage error naming the bad one."""
    from ...domain.filters import FilterError, combine, parse_expression

    try:
        return combine([parse_expression(e) for e in expressions or ()])
    except FilterError as exc:
        raise CommandError(f"--filter: {exc}", EXIT_USAGE) from None


def cmd_query(args: argparse.Namespace) -> int:
    where = query_filter(args.filter)
    if args.stream and (args.server or args.json):
        raise CommandError("query: --stream prints the answer as it is written from a local --store; it does not "
                           "combine with " + ("--server" if args.server else "--json"), EXIT_USAGE)
    if args.server:
        from ...domain.filters import to_json

        body = {"query": args.text, "mode": args.mode, "answer": args.answer}
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
        _emit(args, out, render_query(out))
        return EXIT_OK
    if not args.store:
        raise CommandError("query: give --store DIR (or ERAGRAPH_STORE), or --server URL of a running "
                           "`eragraph serve` (or ERAGRAPH_SERVER)", EXIT_USAGE)
    from ...domain.rerank import RerankSpec
    from ...services.query import query

    started = time.perf_counter()
    engine = _engine(args)
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
                     answer=args.answer or args.stream, where=where, on_piece=on_piece,
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
                 f"{_usd(usage['cost_usd'])})")
    _emit(args, out, text)
    if not (args.json or args.quiet) and loading >= HINT_LOADING_SECONDS and loading > response.seconds:
        sys.stdout.flush()
        print(f"eragraph: {loading:.1f} s of this query's {loading + response.seconds:.1f} s went to opening the "
              f"store and loading models; `eragraph serve --store {args.store}` keeps them loaded (then "
              f"`eragraph query QUESTION --server http://127.0.0.1:8765`)", file=sys.stderr)
    return EXIT_OK


HINT_LOADING_SECONDS = 1.0  # a query that spent more than this, and most of its time, loading says so


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
        from ...services.routing import router_of

        if router_of(engine).needs_parse:  # weights on text+vector inputs never parse
            wanted.append(engine.question_parser)
    for provider in wanted:
        while provider is not None and not hasattr(provider, "load"):
            provider = getattr(provider, "inner", None)  # through the cache and metering wrappers
        if provider is not None:
            provider.load()


def cmd_serve(args: argparse.Namespace) -> int:
    existing_store(args.store)
    try:
        import uvicorn  # noqa: F401 (the server's)

        from ..http.server import make_server
    except ImportError as exc:
        raise CommandError(f"serve needs the aws extra (powertools, pydantic) and the local extra (uvicorn): "
                           f"{exc}") from None
    engine = _engine(args)
    server = make_server(engine, args.host, args.port, log=not args.quiet)
    tenant = f" (tenant {engine.tenant})" if engine.tenant else ""
    print(f"eragraph: serving {args.store}{tenant} on {server.url} (POST /query, GET /documents/ID, GET /stats, "
          f"GET /health, MCP at /mcp); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the store's tools over MCP on stdin/stdout (eragraph.entrypoints.mcp), bound to --tenant."""
    existing_store(args.store)
    try:
        from ..mcp import build_server, run_stdio
    except ImportError as exc:
        raise CommandError(f"mcp needs the mcp extra (pip install 'eragraph[mcp]'): {exc}") from None
    engine = _engine(args)
    print(f"eragraph: MCP over stdio for {args.store}" + (f" (tenant {engine.tenant})" if engine.tenant else "")
          + "; the client closes it", file=sys.stderr, flush=True)
    run_stdio(build_server(lambda _tenant: engine, tenant=engine.tenant))
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    with _writing(args.store):
        return _cmd_delete(args)


def _cmd_delete(args: argparse.Namespace) -> int:
    from ...services import remove, resummarize

    engine = _engine(args)
    started = time.perf_counter()
    resummarize.requeue_dirty(engine)  # what a run that died before its drain ended left (see ingest_docs)
    refs = [str(Path(r).resolve()) if Path(r).exists() else r for r in args.refs]
    docs = [d for ref in refs for d in remove.resolve(engine, ref)]
    report = remove.remove(engine, refs)
    if engine.blobs is not None:
        for doc in docs:
            engine.blobs.delete(_text_key(doc.doc_id))
    progress = IngestProgress(args, None, documents=False)  # the drain's stage line only
    summarizer, engine.summarizer = engine.summarizer, CountingSummarizer(engine.summarizer, progress)
    try:
        report.merge(resummarize.drain(engine, on_message=progress.draining))
    finally:
        engine.summarizer = summarizer
        progress.close()
    report.seconds = time.perf_counter() - started
    out = report.to_dict()
    _emit(args, out, f"{out['documents_removed']} documents removed ({out['chunks_removed']} chunks); "
                     f"{out['summarize_calls']} summarize calls"
                     + "".join(f"\n  {e['source']}: {e['error']}" for e in out["errors"]))
    if not out["documents_removed"]:
        return EXIT_ERROR
    return EXIT_PARTIAL if out["errors"] else EXIT_OK


def _usd(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.6f}"


def recorded_embedder(store: Path) -> str | None:
    """The ERAGRAPH_EMBEDDER choice a local store was built with (from the embedder id its
    hyperplanes record), or None when it records none or one this cannot name (or has no graph:
    it is not created here)."""
    from ...adapters.local.graph_sqlite import SqliteGraphStore

    if not (store / STORE_MARK).is_file():
        return None
    graph = SqliteGraphStore(store / STORE_MARK)
    try:
        lsh = graph.get_lsh()
    finally:
        graph.close()
    ident = lsh.embedder_id if lsh is not None else ""
    for prefix, name in (("hashing-bow-", "hash"), ("bedrock:", "bedrock"),
                         ("sentence-transformers/all-MiniLM-L6-v2", "minilm")):
        if ident.startswith(prefix):
            return name
    return None


def cmd_stats(args: argparse.Namespace) -> int:
    """Stats read the store only: it is opened with the embedder it was built with (its
    vectors' dimension), whatever ERAGRAPH_EMBEDDER says; stats take no provider flags."""
    from dataclasses import replace

    from ...services.stats import stats

    settings = _settings(args)
    from ...bootstrap.local import tenant_store

    built_with = recorded_embedder(tenant_store(existing_store(args.store), _tenant(args)))
    engine = _engine(args, replace(settings, embedder=built_with) if built_with else settings)
    out = stats(engine)
    rows = [f"documents: {out['documents']}   S_min/S_max: {out['s_min']}/{out['s_max']}   "
            f"hyperplanes: {out['n_planes']}   embedder: {out['embedder']}"]
    for row in out["layers"]:
        seg = (f"{row['segments']} segments of {row['smallest_segment']}..{row['largest_segment']}"
               if row["segments"] else "top layer")
        rows.append(f"  layer {row['layer']}: {row['nodes']} nodes, {seg}")
    for row in out["ledger"]["calls"]:
        rows.append(f"  {row['kind']} ({row['model'] or 'model not recorded'}): {row['calls']} calls, "
                    f"{row['tokens_in']} tokens in, {row['tokens_out']} out, {row['seconds']:.1f}s, "
                    f"{_usd(row['cost_usd'])}")
    total = out["ledger"]["total"]
    rows.append(f"  total: {total['tokens_in']} tokens in, {total['tokens_out']} out, {_usd(total['cost_usd'])}"
                + (f" (unpriced: {', '.join(out['ledger']['unpriced'])})" if out["ledger"]["unpriced"] else ""))
    _emit(args, out, "\n".join(rows))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Document statuses (services.doc_status): one document's (--doc, an id or its source), or the
    counts of each state under --prefix with the documents listed. Read only, like stats."""
    from dataclasses import replace

    from ..documents import document_json
    from ...bootstrap.local import tenant_store
    from ...domain.doc_status import STATES
    from ...domain.ids import document_id_for_source
    from ...services import doc_status

    settings = _settings(args)
    built_with = recorded_embedder(tenant_store(existing_store(args.store), _tenant(args)))
    engine = _engine(args, replace(settings, embedder=built_with) if built_with else settings)
    if args.doc is not None:
        body = document_json(engine, args.doc) or document_json(engine, document_id_for_source(args.doc))
        if body is None:
            print(f"eragraph: no document {args.doc!r} (neither an id nor a source with a status)", file=sys.stderr)
            return EXIT_ERROR
        _emit(args, body, f"{body['doc_id']}  {body['status']}  {body['source']}"
                          + (f"\n  reason: {body['reason']}" if body.get("reason") else ""))
        return EXIT_OK
    counts, views = doc_status.listing(engine, args.prefix)
    out = {**counts.to_json(), "documents": views}
    rows = [f"{out['total']} documents under {args.prefix or '(all)'}: "
            + ", ".join(f"{out[s]} {s.replace('_', ' ')}" for s in STATES)]
    rows += [f"  {v['state']:<18} {v['source']}" + (f"  ({v['reason']})" if v.get("reason") else "") for v in views]
    _emit(args, out, "\n".join(rows))
    return EXIT_OK


def stored_sources(engine, skipped: list[str] | None = None):
    """The store's documents as SourceDocs, their texts read from the blob store one at a time
    (a document without stored text is skipped and its id appended to ``skipped``)."""
    from ...services.ingest import SourceDoc

    for doc in engine.graph.list_documents():
        try:
            text = engine.blobs.get(_text_key(doc.doc_id)).decode("utf-8")
        except KeyError:
            print(f"no stored text for {doc.doc_id}; skipped", file=sys.stderr)
            if skipped is not None:
                skipped.append(doc.doc_id)
            continue
        yield SourceDoc(source=doc.source, text=text, title=doc.title, doc_id=doc.doc_id, meta=doc.meta,
                        metadata=doc.metadata)


def cmd_rebuild(args: argparse.Namespace) -> int:
    """Build the same documents from scratch in a fresh store (no cache, no old summaries)."""
    from dataclasses import replace

    engine = _engine(args)
    target = Path(args.into) if args.into else Path(tempfile.mkdtemp(prefix="eragraph-rebuild-"))
    if target.exists() and any(target.iterdir()):
        raise CommandError(f"{target} is not empty; choose an empty --into folder", EXIT_USAGE)
    from ...bootstrap import build_engine

    fresh = build_engine("local", target, replace(engine.settings, embed_cache=False))
    skipped: list[str] = []
    out = ingest_docs(fresh, stored_sources(engine, skipped), args, total=len(engine.graph.list_documents()))
    out["store"] = str(target)
    out["skipped"] = skipped
    if args.replace:
        backup = Path(str(args.store).rstrip("/") + ".old")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(args.store, backup)
        shutil.copytree(target, args.store)
        shutil.rmtree(backup, ignore_errors=True)
        out["replaced"] = True
    _emit(args, out, f"rebuilt {out['documents_read']} documents into {target}: {out['summarize_calls']} summarize calls, "
                     f"{out['tokens_in']} tokens in, {out['seconds']:.1f}s"
                     + (f"; {len(skipped)} skipped (no stored text)" if skipped else ""))
    return EXIT_PARTIAL if skipped else EXIT_OK


def cmd_reindex(args: argparse.Namespace) -> int:
    with _writing(args.store):
        return _cmd_reindex(args)


def _cmd_reindex(args: argparse.Namespace) -> int:
    from ...services import reindex

    engine = _engine(args)
    out = reindex.run(engine, stuck_after=args.stuck_after)
    out = out if isinstance(out, dict) else out.to_dict()
    _emit(args, out, render_reindex(args.store, out))
    return EXIT_OK if out["invariants"]["ok"] else EXIT_ERROR


# what each of reindex's metrics counts, in its report's order
REINDEX_FINDINGS = (
    ("LayerCountsRepaired", "layer counters rewritten"),
    ("OrphanChunksRemoved", "chunks of no document removed"),
    ("IncompleteDocumentsRemoved", "documents missing chunks removed (ingest them again)"),
    ("EntityChunksReextracted", "chunks given their entities again"),
    ("EntityChunksOrphanedRemoved", "entity records of gone chunks removed"),
    ("EntityCountsRepaired", "entity counts rewritten"),
    ("EntityVectorsReembedded", "entity vectors re-embedded"),
    ("EntityVectorsOrphanedDeleted", "entity vectors of gone entities deleted"),
    ("OutboxesFinished", "unfinished summary writes completed"),
    ("FollowupsExpired", "stale ingest follow-ups dropped"),
    ("LayersRequeued", "stuck layers re-queued"),
    ("LayersRepaired", "layers re-partitioned and re-summarized"),
    ("VectorsReembedded", "missing vectors re-embedded"),
    ("VectorsOrphanedDeleted", "vectors of no node deleted"),
    ("LexicalIndexBuilt", "leaves added to the lexical (BM25) index"),
    ("LeafAttributesAdded", "leaves given their metadata attributes (a store built before filters)"),
)


def render_reindex(store: str, out: dict) -> str:
    """The human-readable form of a reindex report (services.reindex.run)."""
    metrics = out.get("metrics", {})
    found = [(metrics[key], label) for key, label in REINDEX_FINDINGS if metrics.get(key)]
    lines = [f"reindex of {store} ({out.get('seconds', 0.0):.1f}s): "
             + (f"repaired {sum(n for n, _ in found)} things" if found else "nothing to repair")]
    lines += [f"  {n} {label}" for n, label in found]
    if out.get("incomplete_documents_removed"):
        lines.append(f"    documents: {', '.join(map(str, out['incomplete_documents_removed']))}")
    inv = out.get("invariants", {})
    checked = f"{inv.get('checked_nodes', 0)} nodes, {inv.get('checked_segments', 0)} segments checked"
    if inv.get("ok", True):
        lines.append(f"  invariants hold ({checked})")
    else:
        lines.append(f"  invariants: {inv.get('violation_count')} violations ({checked}):")
        lines += [f"    {v}" for v in inv.get("violations", [])[:10]]
    return "\n".join(lines)


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the bundled sample corpus and answer a few questions."""
    args.store = args.store or DEFAULT_STORE
    with _writing(args.store, create=True):
        return _cmd_demo(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ...services.query import query
    from ...services.sources import iter_sources

    sample = Path(__file__).parent / "samples"
    args.store = args.store or DEFAULT_STORE
    engine = _engine(args, create=True)
    errors: list[dict[str, str]] = []
    corpus = sample / "corpus.jsonl"
    out = ingest_docs(engine, iter_sources([corpus], errors), args, total=count_inputs([corpus]), errors=errors,
                      total_bytes=input_bytes([corpus]))
    print(f"ingested {out['documents_added']} new documents ({out['chunks_added']} chunks) into {args.store}; "
          f"{out['summarize_calls']} summaries written")
    questions = json.loads((sample / "questions.json").read_text(encoding="utf-8"))
    for question in questions:
        response = query(engine, question, mode="collapsed", k=3)
        print(f"\nQ: {question}")
        for r in response.results:
            label = f"L{r.layer} {r.title}" if r.layer == 0 else f"L{r.layer} summary"
            print(f"  [{r.score:.3f}] {label}: {' '.join(r.text.split())[:160]}")
    print(f"\n(evidence only: configure a generator for answers; see README)\n"
          f"stats: eragraph stats --store {args.store}")
    for err in errors:
        print(f"skipped {err['source']}: {err['error']}", file=sys.stderr)
    return EXIT_PARTIAL if errors else EXIT_OK


def package_version() -> str:
    """The installed distribution's version, else the package's own ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eragraph")
    except PackageNotFoundError:
        from ... import __version__

        return __version__


PROVIDER_FLAGS = {
    "embedder": ("minilm", "bedrock", "hash",
                 "the embedder (default ERAGRAPH_EMBEDDER, else minilm); a store answers only with the one "
                 "it was built with"),
    "summarizer": ("extractive", "bedrock", "openai",
                   "who writes the summaries: extractive (no LLM), bedrock or openai (default ERAGRAPH_SUMMARIZER, "
                   "else extractive)"),
    "generator": ("none", "bedrock", "openai",
                  "who writes answers for --answer: none, bedrock or openai (default ERAGRAPH_GENERATOR, else none)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eragraph", description=__doc__, epilog=EXIT_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, func, *, providers: tuple[str, ...] = (), json_out: bool = True,
                quiet: str | None = None, store: str = "required", tenant: bool = True) -> argparse.ArgumentParser:
        """A subcommand with the flags it uses: --store (``required``; ``optional``: a default or
        --server), --json when it reports, --quiet when it writes anything to stderr besides
        errors, and the provider flags of the models it calls."""
        p = sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", epilog=EXIT_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        env_store = ProcessSettings.from_env().store or None
        if store == "required":
            p.add_argument("--store", default=env_store, required=not env_store, metavar="DIR",
                           help="the store directory (or ERAGRAPH_STORE)")
        elif store == "demo":
            p.add_argument("--store", default=env_store or DEFAULT_STORE, metavar="DIR",
                           help=f"the store directory (or ERAGRAPH_STORE; default {DEFAULT_STORE}); made if missing")
        else:
            p.add_argument("--store", default=env_store, metavar="DIR",
                           help="the store directory (or ERAGRAPH_STORE)")
        if tenant and store != "demo":
            p.add_argument("--tenant", default=ProcessSettings.from_env().tenant or None, metavar="ID",
                           help="the tenant whose store to use (or ERAGRAPH_TENANT; default: the default tenant); "
                                "its store is STORE/tenants/ID")
        if json_out:
            p.add_argument("--json", action="store_true", help="machine-readable output (JSON on stdout)")
        if quiet:
            p.add_argument("--quiet", action="store_true", help=quiet)
        for flag in providers:
            *choices, text = PROVIDER_FLAGS[flag]
            p.add_argument(f"--{flag}", choices=choices, help=text)
        return p

    p = command("ingest", "ingest files, folders and .jsonl corpora (makes the store if missing)", cmd_ingest,
                providers=("embedder", "summarizer"), quiet="no progress bars")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a file (PDF, DOCX, HTML, CSV, Markdown or plain text, told apart by content), a folder "
                        "(walked recursively) or a .jsonl corpus (one {\"id\", \"title\", \"text\", \"metadata\"} "
                        "document per line, metadata optional); a file's metadata goes in a sidecar FILE.metadata.json "
                        "beside it ({\"metadataAttributes\": {\"year\": 2020}}, as Bedrock Knowledge Bases)")
    p.add_argument("--csv-text", dest="csv_text_column", metavar="COLUMN",
                   help="read CSV files' rows as documents, this column being the text (default "
                        "ERAGRAPH_CSV_TEXT_COLUMN; unset: a CSV file is one text document)")
    p.add_argument("--csv-id", dest="csv_id_column", metavar="COLUMN",
                   help="with --csv-text: the column of each row's document id (default ERAGRAPH_CSV_ID_COLUMN)")
    p.add_argument("--csv-title", dest="csv_title_column", metavar="COLUMN",
                   help="with --csv-text: the column of each row's title (default ERAGRAPH_CSV_TITLE_COLUMN)")
    p.add_argument("--batch-docs", type=int, default=256,
                   help="documents read, embedded and written per batch (memory holds one batch)")

    p = command("query", "retrieve evidence (and an answer with --answer)", cmd_query,
                providers=("embedder", "generator"), store="optional",
                quiet="no hints on stderr (e.g. that `eragraph serve` keeps the models loaded)")
    p.add_argument("text", metavar="QUESTION", help="the question (quote it)")
    p.add_argument("--mode", default="collapsed",
                   help="retrieval mode: " + ", ".join(mode_names()) + " (default collapsed; auto: the complexity "
                        "router picks the dense side, fusion or tri_graph)")
    p.add_argument("--k", type=int, default=None,
                   help="how many results (1..100; default ERAGRAPH_TOP_K, else 5)")
    p.add_argument("--budget", type=int, default=None, help="token budget for the evidence (default ERAGRAPH_TOKEN_BUDGET)")
    p.add_argument("--p", type=float, default=None, help="proportion for detailed/summarized")
    p.add_argument("--answer", action="store_true", help="generate an answer (needs a generator)")
    p.add_argument("--rerank", type=int, nargs="?", const=True, default=None, metavar="N",
                   help="re-order the results with the configured reranker (ERAGRAPH_RERANKER), from N "
                        "candidates (default ERAGRAPH_RERANK_CANDIDATES)")
    p.add_argument("--stream", action="store_true",
                   help="with a local --store: print the answer as the generator writes it (implies --answer)")
    p.add_argument("--filter", action="append", metavar="EXPR",
                   help="only chunks of documents whose metadata match: KEY OP VALUE with OP one of = != > >= < "
                        "<= ^= (starts with), 'KEY in [a,b]', 'KEY not in [a,b]', or a Bedrock KB JSON filter; "
                        "repeat to require all (built-in keys: source, doc_id, title)")
    p.add_argument("--server", default=ProcessSettings.from_env().server or None, metavar="URL",
                   help="ask a running `eragraph serve` at URL instead of opening the store "
                        "(or ERAGRAPH_SERVER); --store is then not needed")

    p = command("serve", "serve the query API (as deployed) over one warm engine on 127.0.0.1", cmd_serve,
                providers=("embedder", "generator"), json_out=False, quiet="no request log on stderr")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (0 picks a free one; default 8765)")

    command("mcp", "serve the store's tools (retrieve, answer, get_document, stats) to an MCP client over stdio",
            cmd_mcp, providers=("embedder", "generator"), json_out=False)

    p = command("delete", "remove documents by id or source", cmd_delete, providers=("embedder", "summarizer"),
                quiet="no progress on stderr")
    p.add_argument("refs", nargs="+", metavar="DOC_ID_OR_SOURCE",
                   help="a document id (a JSONL line's \"id\"; `eragraph query --json` shows doc_id) or the "
                        "source it came from: a file's path, or CORPUS.jsonl#ID")

    command("stats", "documents, layers, segments, cost ledger", cmd_stats)

    p = command("status", "documents' ingestion status: received, indexed, summaries pending, done, failed (why)",
                cmd_status)
    p.add_argument("--prefix", default="", help="count and list the documents whose source starts with this")
    p.add_argument("--doc", metavar="DOC_ID_OR_SOURCE", help="one document's status (with the reason of a failure)")

    p = command("rebuild", "build the same corpus from scratch for comparison", cmd_rebuild,
                providers=("embedder", "summarizer"), quiet="no progress bars", tenant=False)
    p.add_argument("--into", help="empty folder for the rebuilt store (default: a temp folder)")
    p.add_argument("--replace", action="store_true", help="replace the store with the rebuilt one")
    p.add_argument("--batch-docs", type=int, default=256, help="documents per batch")

    p = command("reindex", "audit and repair the store; report what was found", cmd_reindex,
                providers=("embedder", "summarizer"))
    p.add_argument("--stuck-after", type=float, default=900.0, help="seconds after which a dirty layer is re-queued")

    p = command("tenants", "list the store's tenants, or delete one and everything it owns", cmd_tenants,
                tenant=False)
    p.add_argument("--delete", metavar="ID", help="delete this tenant: its documents, vectors, entity graph and files")

    command("demo", "ingest the bundled sample corpus and answer a few questions", cmd_demo,
            providers=("embedder", "summarizer"), json_out=False, quiet="no progress bars", store="demo")

    bench = sub.add_parser("bench", help="benchmarks (growth, retrieval, ingest, query, scale, vectors, load)")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for name in BENCH_MODULES:
        try:
            module = importlib.import_module(f"eragraph.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"eragraph.bench.{name}" or exc.name == "eragraph.bench":
                continue
            raise
        module.add_parser(bench_sub)
    bench.set_defaults(func=cmd_bench)

    router = sub.add_parser("router", help="the auto retrieval router (train)")
    router_sub = router.add_subparsers(dest="router_command", required=True)
    from ...training import router as router_training

    router_training.add_parser(router_sub).set_defaults(func=cmd_router_train)
    return parser


def cmd_router_train(args: argparse.Namespace) -> int:
    from ...training import router as router_training

    router_training.run(args)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(f"eragraph.bench.{args.bench_command}")
    out = module.run(args)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    _emit(args, out, json.dumps(out, indent=2, default=str))
    return 0


def _stdout_closed() -> int:
    """The reader of stdout went away (``eragraph query ... | head -n 1``): stop quietly, as a
    Unix tool that SIGPIPE ends. Python's recipe: point stdout (and stderr, often the same
    pipe) at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # not a real file (a test's capture)
            pass
    os.close(devnull)
    return EXIT_PIPE


def _fail(message: str, status: int) -> int:
    try:
        print(f"eragraph: {message}", file=sys.stderr)
    except BrokenPipeError:
        return _stdout_closed()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (EXIT_HELP lists them)."""
    from ...services.summary_search import BadQueryError

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except CommandError as exc:
        return _fail(str(exc), exc.status)
    except BadQueryError as exc:  # the question or its parameters (empty, unknown mode, k out of range)
        return _fail(f"error: {exc}", EXIT_USAGE)
    except ValueError as exc:  # a setting (ERAGRAPH_*) or argument value that cannot be used
        return _fail(f"error: {exc}", EXIT_USAGE)
    except EragraphError as exc:
        return _fail(f"error: {exc}", EXIT_ERROR)
    except RuntimeError as exc:  # a model provider gave up (providers.prompts.ModelCallError)
        return _fail(f"model call failed: {exc}", EXIT_ERROR)


if __name__ == "__main__":
    sys.exit(main())
