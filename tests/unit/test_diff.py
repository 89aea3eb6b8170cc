"""diff_segments: identical member sets are kept, everything else is removed + added."""

from __future__ import annotations

from eragraph.domain.diff import diff_segments, segments_for
from eragraph.domain.ids import segment_id, summary_id


def test_segments_for_derives_ids_from_sorted_members():
    (seg,) = segments_for(2, [("c", "a", "b")])
    assert seg.layer == 2
    assert seg.members == ("a", "b", "c")
    assert seg.segment_id == segment_id(2, ["a", "b", "c"])
    assert seg.summary_id == summary_id(3, ["a", "b", "c"])


def test_diff_kept_added_removed():
    old = segments_for(0, [("a", "b"), ("c", "d"), ("e", "f")])
    new = segments_for(0, [("a", "b"), ("c", "d", "x"), ("f", "e")])
    diff = diff_segments(old, new)
    assert {s.members for s in diff.kept} == {("a", "b"), ("e", "f")}
    assert [s.members for s in diff.added] == [("c", "d", "x")]
    assert [s.members for s in diff.removed] == [("c", "d")]
    assert diff.changed


def test_diff_of_identical_partitions_is_unchanged():
    segs = segments_for(1, [("a", "b"), ("c",)])
    diff = diff_segments(segs, list(reversed(segs)))
    assert not diff.changed
    assert len(diff.kept) == 2 and diff.added == () and diff.removed == ()


def test_diff_from_and_to_empty():
    segs = segments_for(0, [("a", "b"), ("c", "d")])
    grow = diff_segments([], segs)
    assert len(grow.added) == 2 and not grow.removed and not grow.kept
    shrink = diff_segments(segs, [])
    assert len(shrink.removed) == 2 and not shrink.added and not shrink.kept


def test_same_members_on_another_layer_is_a_different_segment():
    diff = diff_segments(segments_for(0, [("a", "b")]), segments_for(1, [("a", "b")]))
    assert len(diff.added) == 1 and len(diff.removed) == 1


def test_sentence_delta_keeps_only_changed_sentences():
    from eragraph.domain.diff import sentence_delta

    old = "Alpha rose early. Beta slept late. Gamma cooked."
    new = "Alpha rose early. Beta slept  late. Delta sang."
    added, removed = sentence_delta([new, "Epsilon ran."], [old])
    assert added == ["Delta sang.", "Epsilon ran."]
    assert removed == ["Gamma cooked."]
    assert sentence_delta([old], [old]) == ([], [])
    assert sentence_delta([], [old]) == ([], ["Alpha rose early.\nBeta slept late.\nGamma cooked."])


def test_sentence_delta_keeps_a_title_line_apart_from_the_next_sentence():
    from eragraph.domain.diff import sentence_delta
    from eragraph.domain.text import split_sentences, titled_text

    added, _ = sentence_delta([titled_text("Ethan of Athos", "It is a novel by Lois Bujold.")], [])
    assert split_sentences(added[0]) == ["Ethan of Athos", "It is a novel by Lois Bujold."]


def test_a_new_segment_descends_from_the_old_one_that_held_most_of_its_members():
    from eragraph.domain.diff import predecessors
    from eragraph.domain.model import Segment

    old = [Segment("s-a", 0, ("1",), "x-a"), Segment("s-z", 0, ("2", "3", "4"), "x-z"),
           Segment("s-m", 0, ("5", "6"), "x-m"), Segment("s-b", 0, ("7", "8"), "x-b")]
    new = [Segment("n1", 0, ("1", "2", "3", "9"), "y1"),  # s-z holds 2 of them, s-a 1
           Segment("n2", 0, ("5", "6", "7", "8"), "y2"),  # s-m and s-b tie: the smaller id
           Segment("n3", 0, ("10", "11"), "y3")]  # only new nodes: no predecessor
    got = predecessors(new, old)
    assert {k: v.segment_id for k, v in got.items()} == {"n1": "s-z", "n2": "s-b"}
