"""Records that lapse: the meta keys a store forgets this long after their last write, on every
profile (DynamoDB's TTL on ``expires_at``; the local store's ``meta_expiry`` rows, swept a few at
a time as new ones are written, and unseen by reads once past).

- an ingestion job (``kb-job:``, services.kb_jobs): saved at every step, so a running one never
  lapses; gone 90 days after its last step;
- a clientToken's record (``kb-token:``, services.idempotency): a retry comes within minutes, not
  weeks; gone a day after it was written;
- a charge's mark (``charged:``, MetaStore.add_within): one object version charged against a
  day's quota; gone two days after it was written (its day is in its key);
- a RetrieveAndGenerate session (``session:``, services.conversation): gone a day after its last
  turn, as Bedrock's."""

from __future__ import annotations

DAY = 86_400
EXPIRING_META = {"kb-job:": 90 * DAY, "kb-token:": DAY, "charged:": 2 * DAY, "session:": DAY}
SWEEP = 64  # lapsed records a local write deletes at most (a bounded sweep, never the whole table)


def life_of(key: str) -> int | None:
    """The seconds a meta key lives after its last write (None: it does not lapse)."""
    return next((life for prefix, life in EXPIRING_META.items() if key.startswith(prefix)), None)


def mark_key(key: str, period: str, mark: str) -> str:
    """The meta key that records ``mark`` charged to the counter ``key`` in ``period``: a
    fixed-length digest, whatever the mark (an object's bucket, key and version)."""
    import hashlib

    return f"charged:{key}:{period}:{hashlib.sha256(mark.encode()).hexdigest()[:40]}"


def may_lapse(prefix: str) -> bool:
    """Whether some key starting with ``prefix`` lapses."""
    return any(p.startswith(prefix) or prefix.startswith(p) for p in EXPIRING_META)
