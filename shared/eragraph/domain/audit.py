"""A tenant's audit (services.reindex) in pieces: where one run stopped, and how long ago each
tenant was last audited whole.

``AuditProgress`` is what a continuation carries (adapters.aws.reindex_queue): the next step of
the audit, the cursor inside a paged step (the vector audit: the last ref it looked at, as
``[layer, code, node id]``), the run's id and the metrics counted so far. Pure data, JSON-able.

``audit_staleness`` turns the registry's times into the two numbers the fan-out publishes:
the oldest age and how many tenants were not audited within ``limit`` seconds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .model import BadInputError

AUDIT_LIMIT_SECONDS = 24 * 3600.0  # a tenant not audited whole for this long raises the alarm


@dataclass(frozen=True)
class AuditProgress:
    run: str = ""                            # the fan-out that started this audit (dedup, logs)
    step: int = 0                            # the next step of services.reindex.STEPS
    cursor: tuple[int, int, str] | None = None  # inside a paged step: the last ref it audited
    metrics: Mapping[str, int] = field(default_factory=dict)  # counted by the earlier pieces
    pieces: int = 0                          # runs so far (the first is 0)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "step": self.step, "cursor": list(self.cursor) if self.cursor else None,
                "metrics": dict(self.metrics), "pieces": self.pieces}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditProgress:
        cursor = data.get("cursor")
        if cursor is not None:
            if not (isinstance(cursor, Sequence) and len(cursor) == 3):
                raise BadInputError(f"an audit cursor is [layer, code, node id], not {cursor!r}")
            cursor = (int(cursor[0]), int(cursor[1]), str(cursor[2]))
        return cls(run=str(data.get("run") or ""), step=int(data.get("step") or 0), cursor=cursor,
                   metrics={str(k): int(v) for k, v in (data.get("metrics") or {}).items()},
                   pieces=int(data.get("pieces") or 0))


def audit_staleness(since: Mapping[str, float], tenants: Sequence[str], now: float,
                    limit: float = AUDIT_LIMIT_SECONDS) -> dict[str, Any]:
    """``since``: tenant -> its last completed audit (or, never audited, when it became known);
    a tenant of ``tenants`` missing from it counts from ``now``. Returns the oldest age in
    seconds, the tenants older than ``limit`` (sorted) and their count."""
    ages = {t: max(0.0, now - since.get(t, now)) for t in tenants}
    late = sorted(t for t, age in ages.items() if age > limit)
    return {"oldest_age_seconds": round(max(ages.values(), default=0.0), 1), "late": late,
            "late_count": len(late)}
