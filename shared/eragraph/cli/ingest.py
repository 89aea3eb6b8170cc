"""The commands that write documents: ingest (files, folders, corpora), delete, and rebuild (the
same documents into a fresh store); each drains the summary bus before it returns."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from .exits import EXIT_ERROR, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, CommandError
from .progress import CountingSummarizer, IngestProgress, SlicedEmbedder, count_inputs, input_bytes, staged
from .render import emit, render_delete, render_ingest
from .store import open_engine, writing


def _text_key(doc_id: str) -> str:
    from ..services.sources import text_key

    return text_key(doc_id)


def ingest_docs(engine, docs: Iterable, args, total: int | None = None,
                errors: list[dict[str, str]] | None = None, total_bytes: int | None = None) -> dict:
    """Ingest SourceDocs (any iterable, consumed in batches of ``--batch-docs``), keep their text
    in the blob store (for rebuilds) as they pass, then drain the bus, showing IngestProgress
    (``total`` documents, ``total_bytes`` of input; ``errors``: the reader's skip list, counted
    as done). ``documents_read`` counts the documents the iterable gave. Layers an earlier run
    left dirty (it died before its drain ended) are announced again first, so the same command
    run again recovers."""
    from ..services import ingest as ingest_service
    from ..services import resummarize

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
        engine.ingest_hooks = [staged(hook, progress) for hook in hooks]
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
    with writing(args.store, create=True):
        return _cmd_ingest(args)


def _cmd_ingest(args: argparse.Namespace) -> int:
    from ..providers.extractors import ReadLimits
    from ..services.sources import CsvMapping, iter_sources

    engine = open_engine(args, create=True)
    errors: list[dict[str, str]] = []
    reasons: dict[str, str] = {}  # source -> a refused file's status reason (domain.refusals)
    mapping = CsvMapping.from_settings(engine.settings)
    total = None if args.quiet else count_inputs(args.paths, csv_rows=mapping is not None)
    size = None if args.quiet else input_bytes(args.paths)
    docs = iter_sources(args.paths, errors, ReadLimits.from_settings(engine.settings), csv_mapping=mapping,
                        reasons=reasons)
    if getattr(args, "access", None):
        docs = with_access(docs, args.access)
    others: dict[str, list] = {}  # documents whose metadata names another tenant: ingested after, in theirs
    out = ingest_docs(engine, route_tenants(docs, engine.tenant, others, errors), args, total=total,
                      errors=errors, total_bytes=size)
    for tenant, tenant_docs in sorted(others.items()):
        args.tenant = tenant
        merge_counts(out, ingest_docs(open_engine(args, create=True), tenant_docs, args))
    from ..services import doc_status
    doc_status.record_failures(engine, errors, reasons=reasons)  # the readers' refusals (the ingest records its own)
    out["errors"] = errors + out["errors"]
    for err in out["errors"]:
        print(f"skipped {err['source']}: {err['error']}", file=sys.stderr)
    emit(args, out, render_ingest(out))
    return ingest_status(out)


def with_access(docs: Iterable, given: str) -> Iterable:
    """``docs``, each without an access list of its own given ``--access``'s principals (a
    malformed one is refused here, before a document is read)."""
    from dataclasses import replace

    from ..domain.access import ATTRIBUTE, parse_principals

    access = list(parse_principals(given, "--access"))
    return (doc if ATTRIBUTE in (doc.metadata or {}) else replace(doc, metadata={**(doc.metadata or {}), ATTRIBUTE: access})
            for doc in docs)


def route_tenants(docs: Iterable, tenant: str, others: dict[str, list], errors: list[dict[str, str]]):
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


def merge_counts(out: dict, more: dict) -> None:
    """Add the counts of ``more`` (another tenant's ingest report) into ``out``."""
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


def ingest_status(out: dict) -> int:
    """0: every input ingested; 3 (partial): some skipped, the rest ingested; 1: inputs named,
    none could be read."""
    if not out["errors"]:
        return EXIT_OK
    return EXIT_PARTIAL if out["documents_read"] else EXIT_ERROR


def cmd_delete(args: argparse.Namespace) -> int:
    with writing(args.store):
        return _cmd_delete(args)


def _cmd_delete(args: argparse.Namespace) -> int:
    from ..services import remove, resummarize

    engine = open_engine(args)
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
    emit(args, out, render_delete(out))
    if not out["documents_removed"]:
        return EXIT_ERROR
    return EXIT_PARTIAL if out["errors"] else EXIT_OK


def stored_sources(engine, skipped: list[str] | None = None):
    """The store's documents as SourceDocs, their texts read from the blob store one at a time
    (a document without stored text is skipped and its id appended to ``skipped``)."""
    from ..services.ingest import SourceDoc

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

    from ..config import settings_from_env

    # the store is read with its own providers; the rebuilt one is made with them, or the flags'
    engine = open_engine(args, settings_from_env())
    target = Path(args.into) if args.into else Path(tempfile.mkdtemp(prefix="eragraph-rebuild-"))
    if target.exists() and any(target.iterdir()):
        raise CommandError(f"{target} is not empty; choose an empty --into folder", EXIT_USAGE)
    from ..bootstrap import build_engine

    fresh = build_engine("local", target, engine.settings.with_overrides(
        embedder=args.embedder, summarizer=args.summarizer, embed_cache=False))
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
    emit(args, out, f"rebuilt {out['documents_read']} documents into {target}: {out['summarize_calls']} summarize calls, "
                    f"{out['tokens_in']} tokens in, {out['seconds']:.1f}s"
                    + (f"; {len(skipped)} skipped (no stored text)" if skipped else ""))
    return EXIT_PARTIAL if skipped else EXIT_OK
