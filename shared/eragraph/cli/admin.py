"""The commands that look at a store and look after it: stats and status (read only, opened with
the embedder the store was built with), tenants (list, or delete one), and reindex (audit and
repair)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CommandError
from .render import emit, render_reindex, render_stats, render_status
from .store import existing_store, open_as_built, open_engine, registered_tenant, settings_of, writing


def cmd_stats(args: argparse.Namespace) -> int:
    """Stats read the store only: it is opened with the embedder it was built with (its
    vectors' dimension), whatever ERAGRAPH_EMBEDDER says; stats take no provider flags."""
    from ..services.stats import stats

    out = stats(open_as_built(args))
    emit(args, out, render_stats(out))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Document statuses (services.doc_status): one document's (--doc, an id or its source), or the
    counts of each state under --prefix with the documents listed. Read only, like stats."""
    from ..entrypoints.documents import document_json
    from ..domain.doc_status import STATES
    from ..domain.ids import document_id_for_source
    from ..services import doc_status

    engine = open_as_built(args)
    if args.doc is not None:
        body = document_json(engine, args.doc) or document_json(engine, document_id_for_source(args.doc))
        if body is None:
            print(f"eragraph: no document {args.doc!r} (neither an id nor a source with a status)", file=sys.stderr)
            return EXIT_ERROR
        emit(args, body, f"{body['doc_id']}  {body['status']}  {body['source']}"
                         + (f"\n  reason: {body['reason']}" if body.get("reason") else ""))
        return EXIT_OK
    counts, views = doc_status.listing(engine, args.prefix)
    out = {**counts.to_json(), "documents": views}
    emit(args, out, render_status(out, args.prefix, STATES))
    return EXIT_OK


def cmd_tenants(args: argparse.Namespace) -> int:
    """List the store's tenants, or delete one (``--delete ID``) with its counts."""
    from ..bootstrap.store_access import local_tenancy
    from ..domain.tenants import TenantError, check_tenant

    path = existing_store(args.store)
    tenancy = local_tenancy(path, settings_of(args))
    if not args.delete:
        from ..domain.knowledge_base import knowledge_base_id

        names = tenancy.tenants()
        from ..bootstrap.store_access import kb_id_salt

        salt = kb_id_salt(path, settings_of(args))
        ids = {name: knowledge_base_id(name, salt) for name in ["", *names]}  # "" is the default tenant
        emit(args, {"tenants": names, "knowledge_base_ids": ids},
             "\n".join(f"{name or '(default)'}\tknowledge base {kb}" for name, kb in ids.items()))
        return EXIT_OK
    try:
        tenant = check_tenant(args.delete)
    except TenantError as exc:
        raise CommandError(f"--delete: {exc}", EXIT_USAGE) from None
    if tenant not in tenancy.tenants():
        raise CommandError(f"the store {args.store} has no tenant {tenant!r}")
    with writing(path):
        report = tenancy.delete(tenant)
    before = ", ".join(f"{v} {k}" for k, v in report["before"].items())
    emit(args, report, f"deleted tenant {tenant}: {before}; left: "
                       + ", ".join(f"{v} {k}" for k, v in report["after"].items()))
    return EXIT_OK


LOCAL_STUCK_AFTER = 900.0  # a local store's dirty layer older than this is re-queued (no consumer runs meanwhile)


def cmd_reindex(args: argparse.Namespace) -> int:
    """Audit and repair (services.reindex) a local store (``--store``, under its writer lock) or a
    deployed stack's tenant (``--profile aws``, with the stack's environment)."""
    from ..bootstrap.profiles import keeps_store

    if not keeps_store(args.profile):
        return _reindex_deployed(args)
    if not args.store:
        raise CommandError(f"--profile {args.profile} needs --store DIR (or ERAGRAPH_STORE)", EXIT_USAGE)
    if args.stuck_after is None:
        args.stuck_after = LOCAL_STUCK_AFTER
    with writing(args.store):
        return _cmd_reindex(args)


def _reindex_deployed(args: argparse.Namespace) -> int:
    """A registered tenant of a profile without a store directory, audited whole by the
    scheduled reindex's runner (services.reindex_schedule.audit_piece) with no deadline: nothing
    is drained (the stack's summarize consumers take what the audit announces), and the tenant's
    audit time is recorded in the registry when the audit ends, as a scheduled audit's is."""
    from ..config import ProcessSettings
    from ..domain.audit import AuditProgress
    from ..services import reindex_schedule

    tenancy, tenant = registered_tenant(args)
    stuck_after = ProcessSettings.from_env().stuck_after_seconds if args.stuck_after is None else args.stuck_after
    out = reindex_schedule.audit_piece(
        tenancy.engine(tenant, register=False), tenant, stuck_after, AuditProgress(run="cli"),
        reindex_schedule.deadline(None), record=tenancy.registry().record_audit,
        send=lambda progress: None)  # no deadline: the audit runs to its end, never continued
    emit(args, out, render_reindex(f"the {args.profile} profile's tenant {tenant or '(default)'}", out))
    return EXIT_OK if out["invariants"]["ok"] else EXIT_ERROR


def _cmd_reindex(args: argparse.Namespace) -> int:
    from ..services import reindex

    engine = open_engine(args)
    out = reindex.run(engine, stuck_after=args.stuck_after)
    out = out if isinstance(out, dict) else out.to_dict()
    emit(args, out, render_reindex(args.store, out))
    return EXIT_OK if out["invariants"]["ok"] else EXIT_ERROR


def cmd_migrate(args: argparse.Namespace) -> int:
    """``eragraph migrate titles``: re-embed the continuation chunks of titled documents of a
    store built before titles were embedded with every chunk (services.title_migration);
    ``eragraph migrate places``: give the chunks stored before chunk places theirs
    (services.place_migration). Each with a progress bar on stderr; resumable, and a no-op on a store already migrated. Local
    (``--store``) or a deployed stack's tenant (``--profile aws``, with the stack's environment)."""
    from ..bootstrap.profiles import keeps_store

    if keeps_store(args.profile):
        if not args.store:
            raise CommandError(f"--profile {args.profile} needs --store DIR (or ERAGRAPH_STORE)", EXIT_USAGE)
        with writing(args.store):
            return _migrate(args, open_engine(args), args.store)
    tenancy, tenant = registered_tenant(args)
    return _migrate(args, tenancy.engine(tenant, register=False), f"the {args.profile} profile's tenant "
                    f"{tenant or '(default)'}")


@contextmanager
def _page_bar(args: argparse.Namespace, shown: bool, desc: str, unit: str, key: str,
              total: Callable[[], int] | None = None) -> Iterator[Callable[[dict], None]]:
    """A migration's progress bar on stderr (none when ``shown`` is False: nothing to migrate),
    moved by the ``on_page`` callback it yields to ``totals[key]`` (capped at ``total()``)."""
    from tqdm import tqdm

    bar = tqdm(total=total() if total else None, desc=desc, unit=unit, file=sys.stderr,
               dynamic_ncols=True, disable=bool(args.quiet)) if shown else None

    def moved(totals: dict) -> None:
        if bar is not None and totals[key] > bar.n:
            bar.update(min(totals[key], bar.total or totals[key]) - bar.n)

    try:
        yield moved
    finally:
        if bar is not None:
            bar.close()


def _migrate(args: argparse.Namespace, engine, where: str) -> int:
    if args.what == "places":
        return _migrate_places(args, engine, where)
    from ..services.title_migration import migrate_titles, migrated

    with _page_bar(args, not migrated(engine), "migrate titles", " chunks", "seen",
                   total=lambda: engine.graph.layer_sizes().get(0, 0)) as moved:
        out = migrate_titles(engine, on_page=moved)
    run = out["run"]
    if out["already"]:
        human = f"{where}: already migrated (embedding format {out['format']}): nothing to do"
    else:
        human = (f"{where}: re-embedded {run['reembedded']} chunks with their document's title, skipped "
                 f"{run['skipped']} (no title, or it begins the chunk); {run['would_rehash']} of the re-embedded "
                 f"would hash to another LSH code (they keep theirs)")
        if out["totals"] != run:
            done = out["totals"]
            human += f"; with the runs before: {done['reembedded']} re-embedded, {done['skipped']} skipped"
    emit(args, out, human)
    return EXIT_OK


def _migrate_places(args: argparse.Namespace, engine, where: str) -> int:
    """``eragraph migrate places`` (services.place_migration), a page of documents at a time."""
    from ..services.place_migration import migrate_places, migrated

    with _page_bar(args, not migrated(engine), "migrate places", " documents", "documents") as moved:
        out = migrate_places(engine, on_page=moved)
    run = out["run"]
    if out["already"]:
        human = f"{where}: already migrated (chunk places): nothing to do"
    else:
        human = (f"{where}: placed {run['chunks_placed']} chunks of {run['documents']} documents "
                 f"({run['chunks_paged']} with pages); {run['unlocated']} not found in their document's text, "
                 f"{run['no_text']} of documents whose text is not kept (ingest those again)")
    emit(args, out, human)
    return EXIT_OK
