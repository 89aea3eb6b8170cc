"""Counters that services return and the CLI prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CostDelta:
    summarize_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    summarize_seconds: float = 0.0

    def add(self, other: CostDelta) -> None:
        self.summarize_calls += other.summarize_calls
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.summarize_seconds += other.summarize_seconds


@dataclass
class ChangeReport:
    """What an ingest, delete or drain changed."""

    documents_added: int = 0
    documents_unchanged: int = 0
    documents_replaced: int = 0
    documents_removed: int = 0
    documents_stale: int = 0  # events older than what the store holds for their source: no-ops
    documents_retagged: int = 0  # same content, new metadata or title: vectors re-tagged, not re-embedded
    chunks_added: int = 0
    chunks_removed: int = 0
    segments_resummarized: dict[int, int] = field(default_factory=dict)
    summaries_removed: dict[int, int] = field(default_factory=dict)
    summaries_revised: dict[int, int] = field(default_factory=dict)  # of segments_resummarized
    summaries_carried: dict[int, int] = field(default_factory=dict)  # of those, unchanged (no call)
    cost: CostDelta = field(default_factory=CostDelta)
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    # what the change records (services.changes) list, left out of ``to_dict``: the sources of
    # the documents added, replaced, retagged or removed, and per layer the ids of the summaries
    # written or revised and of those removed
    sources: list[str] = field(default_factory=list)
    summary_ids: dict[int, list[str]] = field(default_factory=dict)
    removed_summary_ids: dict[int, list[str]] = field(default_factory=dict)
    # who may read what a record lists (GET /changes in a caller's view): each source's access
    # partition key (domain.access.partition_of) and each summary's partition index
    source_partitions: dict[str, str] = field(default_factory=dict)
    summary_partitions: dict[str, int] = field(default_factory=dict)

    def merge(self, other: ChangeReport) -> None:
        for name in ("documents_added", "documents_unchanged", "documents_replaced",
                     "documents_removed", "documents_stale", "documents_retagged", "chunks_added", "chunks_removed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for layer, n in other.segments_resummarized.items():
            self.segments_resummarized[layer] = self.segments_resummarized.get(layer, 0) + n
        for layer, n in other.summaries_removed.items():
            self.summaries_removed[layer] = self.summaries_removed.get(layer, 0) + n
        for layer, n in other.summaries_revised.items():
            self.summaries_revised[layer] = self.summaries_revised.get(layer, 0) + n
        for layer, n in other.summaries_carried.items():
            self.summaries_carried[layer] = self.summaries_carried.get(layer, 0) + n
        self.cost.add(other.cost)
        self.errors.extend(other.errors)
        self.sources.extend(other.sources)
        self.source_partitions.update(other.source_partitions)
        self.summary_partitions.update(other.summary_partitions)
        for mine, theirs in ((self.summary_ids, other.summary_ids),
                             (self.removed_summary_ids, other.removed_summary_ids)):
            for layer, ids in theirs.items():
                mine.setdefault(layer, []).extend(ids)

    def to_dict(self) -> dict:
        out = asdict(self)
        for listed in ("sources", "summary_ids", "removed_summary_ids", "source_partitions", "summary_partitions"):
            del out[listed]
        cost = out.pop("cost")
        out["summarize_calls"] = cost["summarize_calls"]
        out["tokens_in"] = cost["tokens_in"]
        out["tokens_out"] = cost["tokens_out"]
        out["summarize_seconds"] = round(cost["summarize_seconds"], 4)
        out["segments_resummarized"] = {str(k): v for k, v in sorted(self.segments_resummarized.items())}
        out["summaries_removed"] = {str(k): v for k, v in sorted(self.summaries_removed.items())}
        out["summaries_revised"] = {str(k): v for k, v in sorted(self.summaries_revised.items())}
        out["summaries_carried"] = {str(k): v for k, v in sorted(self.summaries_carried.items())}
        out["seconds"] = round(self.seconds, 4)
        return out
