"""Diff of a layer's old segments against its new partition (EraRAG Alg. 3, lines 3-11)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .ids import segment_id, summary_id
from .text import sentence_key, split_sentences
from .model import Segment


@dataclass(frozen=True)
class SegmentDiff:
    kept: tuple[Segment, ...]
    added: tuple[Segment, ...]
    removed: tuple[Segment, ...]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def segments_for(layer: int, groups: Sequence[tuple[str, ...]]) -> list[Segment]:
    return [
        Segment(
            segment_id=segment_id(layer, members),
            layer=layer,
            members=tuple(sorted(members)),
            summary_id=summary_id(layer + 1, members),
        )
        for members in groups
    ]


def diff_segments(old: Sequence[Segment], new: Sequence[Segment]) -> SegmentDiff:
    """Segments with identical member sets are kept (same id, same summary); the rest are
    removed or added. A segment that gained or lost one member is one removed + one added."""
    old_by_id = {s.segment_id: s for s in old}
    new_by_id = {s.segment_id: s for s in new}
    kept = tuple(s for sid, s in old_by_id.items() if sid in new_by_id)
    added = tuple(s for sid, s in sorted(new_by_id.items()) if sid not in old_by_id)
    removed = tuple(s for sid, s in sorted(old_by_id.items()) if sid not in new_by_id)
    return SegmentDiff(kept=kept, added=added, removed=removed)


def predecessors(new: Sequence[Segment], removed: Sequence[Segment]) -> dict[str, Segment]:
    """For each new segment, the removed segment that held most of its members (ties: the
    smaller segment id); segments made only of new nodes have none."""
    owner = {m: seg for seg in removed for m in seg.members}
    by_id = {seg.segment_id: seg for seg in removed}
    out: dict[str, Segment] = {}
    for seg in new:
        shared = Counter(owner[m].segment_id for m in seg.members if m in owner)
        if shared:
            best = min(shared, key=lambda sid: (-shared[sid], sid))
            out[seg.segment_id] = by_id[best]
    return out


def sentence_delta(joined: Sequence[str], left: Sequence[str]) -> tuple[list[str], list[str]]:
    """What the children that joined a segment say that the ones that left did not, and the
    reverse, sentence by sentence: a new version of a child summary that keeps most of its
    sentences then costs a revision only the sentences that changed."""
    split_joined = [split_sentences(t) for t in joined]
    split_left = [split_sentences(t) for t in left]
    said_joined = {sentence_key(s) for ss in split_joined for s in ss}
    said_left = {sentence_key(s) for ss in split_left for s in ss}
    # one sentence a line: joined with spaces, a title line would read as the start of the
    # sentence after it ("Ethan of Athos The Winter Olympics ...")
    added = ["\n".join(s for s in ss if sentence_key(s) not in said_left) for ss in split_joined]
    removed = ["\n".join(s for s in ss if sentence_key(s) not in said_joined) for ss in split_left]
    return [t for t in added if t], [t for t in removed if t]
