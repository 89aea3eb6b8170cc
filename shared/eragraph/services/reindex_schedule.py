"""The scheduled reindex, in pieces that scale with the tenants (the reindex function):

- ``fan_out``: the schedule's run only lists the tenants (the default one and every registered
  one) and sends one audit message per tenant; it reads every tenant's last completed audit from
  the registry in the same pass and says how many were not audited whole within 24 h (the
  ``TenantsNotAudited24h`` and ``OldestAuditAgeSeconds`` metrics, which an alarm watches).
- ``audit_piece``: a worker runs one tenant's audit (services.reindex.run) until its deadline;
  when the deadline comes first, it sends a continuation that carries where to resume (the next
  step, the vector step's cursor, the metrics so far); when the audit reaches its end, the
  tenant's audit time is recorded in the registry.

The local profile (`eragraph reindex`) runs services.reindex.run whole, with no deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..domain.audit import AuditProgress, audit_staleness
from ..ports.tenants import TenantRegistry
from . import reindex
from .engine import Engine

MARGIN_SECONDS = 120.0  # a worker stops asking for more work this long before its timeout


def deadline(remaining_seconds: float | None, margin: float = MARGIN_SECONDS,
             clock: Callable[[], float] = time.monotonic) -> Callable[[], bool]:
    """``out_of_time()`` for a run that has ``remaining_seconds`` (the Lambda context's remaining
    time; None: no deadline) and must stop ``margin`` seconds before."""
    if remaining_seconds is None:
        return lambda: False
    end = clock() + remaining_seconds - margin
    return lambda: clock() >= end


def fan_out(registry: TenantRegistry, run: str, send: Callable[[Sequence[tuple[str, AuditProgress]]], Any],
            now: float | None = None) -> dict[str, Any]:
    """One audit message per tenant (the default one first); the registry's audit times say
    which tenants are late. A tenant without a time (the default one, never audited) starts
    its clock now."""
    now = time.time() if now is None else now
    tenants = ["", *registry.tenants()]
    since = registry.audit_since()
    for tenant in tenants:
        if tenant not in since:
            registry.watch_audits(tenant, now)
            since[tenant] = now
    send([(tenant, AuditProgress(run=run)) for tenant in tenants])
    late = audit_staleness(since, tenants, now)
    return {"run": run, "tenants_queued": len(tenants), "late_tenants": late["late"][:100],
            "oldest_audit_age_seconds": late["oldest_age_seconds"],
            "metrics": {"TenantAuditsQueued": len(tenants), "TenantsNotAudited24h": late["late_count"],
                        "OldestAuditAgeSeconds": late["oldest_age_seconds"]}}


def audit_piece(engine: Engine, tenant: str, stuck_after: float, progress: AuditProgress,
                out_of_time: Callable[[], bool], record: Callable[[str, float], None],
                send: Callable[[AuditProgress], Any]) -> dict[str, Any]:
    """One piece of ``tenant``'s audit, from ``progress`` until ``out_of_time()``: a continuation
    is sent (``send``) when it stops early, the tenant's audit time recorded (``record``) when
    it ends. The report carries ``tenant``, ``complete`` and, for a continuation, ``resume``."""
    report = reindex.run(engine, stuck_after=stuck_after, drain=False, out_of_time=out_of_time, progress=progress)
    if report["complete"]:
        record(tenant, time.time())
    else:
        send(AuditProgress.from_dict(report["resume"]))
    report["tenant"] = tenant
    report["piece"] = progress.pieces
    return report
