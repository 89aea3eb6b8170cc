"""`eragraph export` and `eragraph import`: a store as a portable dump file and back
(services.portable). The file is gzip-compressed JSON, one record a line. Import reads and checks
the whole dump first (services.dump_records), then writes into an empty store, local (``--store``) or a deployed stack's tenant (``--profile aws``, with the
stack's environment), opened with the dump's providers unless a setting chooses them."""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import shutil
import zlib
from contextlib import contextmanager
from itertools import chain
from pathlib import Path

from ..domain import tenants

from .exits import EXIT_OK, EXIT_USAGE, CommandError
from .render import emit
from .store import open_as_built, registered_tenant, settings_of, tenant_of, writing


def cmd_export(args: argparse.Namespace) -> int:
    """A local store (``--store``, under its writer lock: no ingest in flight while it is read)
    or a deployed stack's tenant (``--profile aws``); ``--as``: only what those principals may
    read (services.portable.dump)."""
    from ..bootstrap.profiles import keeps_store
    from ..domain.access import AccessError, parse_principals
    from ..services import portable

    try:
        asking = None if not args.as_principals else parse_principals(args.as_principals)
    except AccessError as exc:
        raise CommandError(f"export: {exc}", EXIT_USAGE) from None
    if keeps_store(args.profile):
        if not args.store:
            raise CommandError(f"--profile {args.profile} needs --store DIR (or ERAGRAPH_STORE)", EXIT_USAGE)
        with writing(args.store):
            count = _write_dump(args, open_as_built(args), asking)
    else:
        tenancy, tenant = registered_tenant(args)
        count = _write_dump(args, tenancy.engine(tenant, register=False), asking)
    view = "" if asking is None else f", what {', '.join(asking)} may read"
    emit(args, {"file": str(args.file), "records": count, "version": portable.DUMP_VERSION,
                "as": None if asking is None else list(asking)},
         f"exported {count} records to {args.file} (dump version {portable.DUMP_VERSION}{view})")
    return EXIT_OK


def _write_dump(args: argparse.Namespace, engine, asking) -> int:
    from ..domain.access import caller
    from ..services import portable

    who = None if asking is None else caller(asking, engine.settings.access_default)
    count = 0
    with gzip.open(Path(args.file), "wt", encoding="utf-8") as out:
        for record in portable.dump(engine, who):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
            count += 1
    return count


def _records(path: Path):
    """The dump's records, a line each; a line over MAX_LINE_BYTES, a dump inflating past
    MAX_DUMP_BYTES, a line that is no JSON (or nests past the parser's depth) is a CommandError
    naming it: memory stays within one capped line."""
    from ..services.dump_records import MAX_DUMP_BYTES, MAX_LINE_BYTES

    total = 0
    try:
        with gzip.open(path, "rb") as lines:
            for number in itertools.count(1):
                line = lines.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                total += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise CommandError(f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes: not a record "
                                       "of an eragraph dump")
                if total > MAX_DUMP_BYTES:
                    raise CommandError(f"{path}: the dump inflates past {MAX_DUMP_BYTES} bytes")
                try:
                    yield json.loads(line)
                except (ValueError, RecursionError) as exc:
                    why = "nests too deep" if isinstance(exc, RecursionError) else "is not JSON"
                    raise CommandError(f"{path}: line {number} {why}: not an eragraph dump") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise CommandError(f"{path}: cannot read it as a gzip-compressed eragraph dump ({exc})") from None


def _target(profile: str, store: Path | None, settings, tenant: str):
    """The engine the dump is written into: the tenant's, registered as every write path
    registers a new tenant (on AWS the read paths see only registered tenants)."""
    from ..bootstrap.tenancy import Tenancy

    return Tenancy(profile, store, settings).engine(tenant)


def _load_staged(profile: str, settings, tenant: str, load):
    """An import into a deployed stack's tenant (services.import_staging): the marker first, the
    records loaded while the tenant is not registered (its readers see it empty), the tenant
    registered once the whole dump is in; on any failure what was written is taken back."""
    from ..bootstrap.tenancy import Tenancy
    from ..services import import_staging
    from ..services.dump_records import DumpError

    tenancy = Tenancy(profile, None, settings)
    if tenant:
        tenants.check_tenant(tenant)
    registered = tenancy.exists(tenant)
    engine = tenancy.build(tenant)  # not registered by opening it: the flip below does
    if not import_staging.stageable(engine):
        return engine, load(engine)
    try:
        import_staging.begin(engine)
    except import_staging.StagingError as exc:
        raise DumpError(str(exc)) from None
    try:
        counts = load(engine)
    except BaseException:
        import_staging.take_back(engine)
        raise
    import_staging.finish(engine)
    if not registered:
        tenancy.backend.register(tenancy, tenant)
    return engine, counts


STAGING = ".import-staging"  # a local import in progress: its marker, beside what it writes


def _take_back(root: Path, tenant: str, before: set[str]) -> None:
    """Remove what a local import wrote: the tenant's directory, or the default tenant's files
    that were not in the root before (``before``)."""
    if tenant:
        shutil.rmtree(root / tenants.KEY_PREFIX / tenant, ignore_errors=True)
        return
    for name in set(os.listdir(root)) - before - {".writer.lock"}:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@contextmanager
def _undone_on_failure(root: Path, tenant: str):
    """A local import that fails part-way (a dump whose records are each well formed but do not
    fit together, a full disk, an interrupt) takes back what it wrote: the tenant's store
    directory when the import made it, or the default tenant's files the import added to the
    root. The target was empty (portable.load refuses any other), so nothing that was there
    before is touched. A marker file (STAGING, in the tenant's directory or the root: the names
    the root held, whether the import made the directory) is written first and removed once the
    whole dump is in: a process killed part-way leaves it, and the next import takes the
    leftovers back before loading, as the staged import of a deployed stack does
    (services.import_staging)."""
    target = root / tenants.KEY_PREFIX / tenant if tenant else root
    marker = target / STAGING
    if marker.is_file():  # leftovers of an import that was killed
        try:
            found = json.loads(marker.read_text(encoding="utf-8"))
            left, made = set(found["before"]), bool(found["made"])
        except (OSError, ValueError, KeyError, TypeError):
            left, made = None, False  # unreadable: nothing is removed on its word
        if left is not None and (made or not tenant):
            _take_back(root, tenant, left)
        marker.unlink(missing_ok=True)
    existed = target.exists()
    before = set(os.listdir(root)) if root.is_dir() else set()
    target.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"before": sorted(before), "made": not existed}), encoding="utf-8")
    try:
        yield
    except BaseException:
        if not tenant or not existed:
            _take_back(root, tenant, before)
        marker.unlink(missing_ok=True)
        raise
    marker.unlink(missing_ok=True)


def cmd_import(args: argparse.Namespace) -> int:
    from ..services import portable
    from ..services.dump_records import check_dump
    from ..services.store_providers import adopt

    path = Path(args.file)
    if not path.is_file():
        raise CommandError(f"no dump file at {path}")
    # the whole dump read and checked first, nothing written: a cut or bad dump leaves no half-built store
    check_dump(_records(path), tenant_of(args))
    records = _records(path)
    header = portable.check_header(next(records, None))
    settings = adopt(header.get("providers"), settings_of(args))
    if args.store:
        with writing(args.store, create=True), _undone_on_failure(Path(args.store), tenant_of(args)):
            engine = _target(args.profile, Path(args.store), settings, tenant_of(args))
            counts = portable.load(engine, chain([header], records))
    else:  # a profile without a store directory (aws: the stack of the environment), staged
        engine, counts = _load_staged(args.profile, settings, tenant_of(args),
                                      lambda target: portable.load(target, chain([header], records)))
    where = args.store or f"the {args.profile} profile's tenant {engine.tenant or '(default)'}"
    emit(args, {"file": str(path), "records": counts},
         f"imported {sum(counts.values())} records into {where}: "
         + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return EXIT_OK
