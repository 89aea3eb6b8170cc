"""Open streams per tenant (the answers a tenant may have streaming at once), as a pure step:
a tenant's leases (lease id -> the time it lapses) and the time in, the decision and the leases
to store out. A lease lapses on its own, so a stream whose process died (a Lambda environment
stopped mid-answer) frees its slot after at most its lease's time; a stream that ends releases it
at once (the adapters remove its id)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlotDecision:
    allowed: bool
    leases: dict[str, float]  # the tenant's leases to store (the lapsed ones dropped; the new one added if allowed)
    retry_after: int  # whole seconds until a slot may free (0 when allowed)


def open_slot(leases: dict[str, float], now: float, limit: int, lease: str, lease_seconds: float) -> SlotDecision:
    """One stream of a tenant holding ``leases`` may open when fewer than ``limit`` of them are
    still live at ``now``; it holds its slot until ``now + lease_seconds`` unless released."""
    if limit < 1:
        raise ValueError("limit must be >= 1 (0 turns the limit off before any lease)")
    live = {k: v for k, v in leases.items() if v > now}
    if len(live) >= limit:
        return SlotDecision(False, live, 1)
    return SlotDecision(True, {**live, lease: now + lease_seconds}, 0)
