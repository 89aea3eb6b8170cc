"""Counters that services return and the CLI prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

LISTED = 200  # sources or summary ids a report lists (what a change record shows); the rest are counted


def _listed(items: list[str], item: str) -> bool:
    """Add ``item`` to ``items`` unless it is there or they are full (a check over at most
    LISTED); True when it is counted as new (one past the list cannot be told from a repeat)."""
    if item in items:
        return False
    if len(items) < LISTED:
        items.append(item)
    return True


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
    # written or revised and of those removed -- the first LISTED of each, with how many there
    # were in all (``*_total``), so a report holds a constant however many documents an ingest
    # or summaries a drain go through (add them with ``add_source`` and ``add_summaries``)
    sources: list[str] = field(default_factory=list)
    sources_total: int = 0
    summary_ids: dict[int, list[str]] = field(default_factory=dict)
    summaries_total: dict[int, int] = field(default_factory=dict)
    removed_summary_ids: dict[int, list[str]] = field(default_factory=dict)
    removed_total: dict[int, int] = field(default_factory=dict)
    # who may read what a record lists (GET /changes in a caller's view): each listed source's
    # access partition key (domain.access.partition_of) and each listed summary's partition index
    source_partitions: dict[str, str] = field(default_factory=dict)
    summary_partitions: dict[str, int] = field(default_factory=dict)

    def add_source(self, source: str, partition: str) -> None:
        """A document added, replaced, retagged or removed, in access partition ``partition``."""
        self.sources_total += _listed(self.sources, source)
        if source in self.source_partitions or len(self.source_partitions) < LISTED:
            self.source_partitions[source] = partition  # the newest, for a source listed twice

    def add_summaries(self, layer: int, ids, index: int, removed: bool = False) -> None:
        """Summaries of ``layer`` written or revised (``removed``: removed), of access partition
        ``index``."""
        listed, totals = (self.removed_summary_ids, self.removed_total) if removed else \
            (self.summary_ids, self.summaries_total)
        mine = listed.setdefault(layer, [])
        for node_id in ids:
            totals[layer] = totals.get(layer, 0) + _listed(mine, node_id)
            if node_id in mine:
                self.summary_partitions[node_id] = index

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
        for source in other.sources:
            self.add_source(source, other.source_partitions.get(source, ""))
        self.sources_total += other.sources_total - len(other.sources)  # those past its list
        for removed, listed, totals in ((False, other.summary_ids, other.summaries_total),
                                        (True, other.removed_summary_ids, other.removed_total)):
            for layer, ids in listed.items():
                self.add_summaries(layer, (), 0, removed)
                for node_id in ids:
                    self.add_summaries(layer, [node_id], other.summary_partitions.get(node_id, 0), removed)
                mine = self.removed_total if removed else self.summaries_total
                mine[layer] = mine.get(layer, 0) + totals.get(layer, len(ids)) - len(ids)

    def to_dict(self) -> dict:
        out = asdict(self)
        for listed in ("sources", "sources_total", "summary_ids", "summaries_total", "removed_summary_ids",
                       "removed_total", "source_partitions", "summary_partitions"):
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
