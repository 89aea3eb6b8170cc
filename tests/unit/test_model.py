"""The records of domain.model that travel or reach users: the SegmentsAffected message (its wire
form, what a malformed one is refused with, how two coalesce) and the errors' words."""

from __future__ import annotations

import json

import pytest

from eragraph.domain.model import ANY_VERSION, LexicalIndexMissing, SegmentsAffected


def wire(msg: SegmentsAffected) -> SegmentsAffected:
    """Through JSON, the way a queue carries it."""
    return SegmentsAffected.from_dict(json.loads(json.dumps(msg.to_dict())))


@pytest.mark.parametrize("msg", [
    SegmentsAffected(layer=0),
    SegmentsAffected(layer=3, added=("a", "b"), removed=("c",), reason="ingest", codes=(0, 5, 9), group=0,
                     op="op-1"),
    SegmentsAffected(layer=1, codes=(7,), group=12),
    SegmentsAffected(layer=2, removed=("x",), op="retry-7"),
    SegmentsAffected(layer=1, codes=(7,), group=3, at=1764932400.125),
])
def test_every_field_survives_the_wire(msg):
    assert wire(msg) == msg


def test_the_wire_form_names_only_what_is_set():
    assert SegmentsAffected(layer=1).to_dict() == {
        "type": "SegmentsAffected", "layer": 1, "added": [], "removed": [], "reason": ""}
    full = SegmentsAffected(layer=1, added=("a",), codes=(4, 2), group=0, op="o").to_dict()
    assert (full["codes"], full["group"], full["op"]) == ([4, 2], 0, "o")


def test_a_minimal_message_reads_with_the_defaults():
    msg = SegmentsAffected.from_dict({"type": "SegmentsAffected", "layer": 0})
    assert msg == SegmentsAffected(layer=0)
    assert (msg.added, msg.removed, msg.reason, msg.codes, msg.group, msg.op) == ((), (), "", (), None, "")
    assert not msg.scoped


def test_ids_and_reason_read_as_text():
    msg = SegmentsAffected.from_dict({"type": "SegmentsAffected", "layer": 2, "added": [1], "removed": [2.5],
                                      "reason": 3, "op": 4})
    assert (msg.added, msg.removed, msg.reason, msg.op) == (("1",), ("2.5",), "3", "4")


BASE = {"type": "SegmentsAffected", "layer": 1}


@pytest.mark.parametrize("data, message", [
    ("nope", "not a SegmentsAffected message"),
    ({"type": "Other", "layer": 1}, "not a SegmentsAffected message"),
    ({"layer": 1}, "not a SegmentsAffected message"),
    ({**BASE, "layer": -1}, "bad layer in message: -1"),
    ({**BASE, "layer": True}, "bad layer in message: True"),
    ({**BASE, "layer": "1"}, "bad layer in message: '1'"),
    ({"type": "SegmentsAffected"}, "bad layer in message: None"),
    ({**BASE, "codes": [3, -1]}, "bad codes in message"),
    ({**BASE, "codes": [True]}, "bad codes in message"),
    ({**BASE, "codes": ["3"]}, "bad codes in message"),
    ({**BASE, "codes": 5}, "bad codes in message"),
    ({**BASE, "codes": {3: 1}}, "bad codes in message"),
    ({**BASE, "group": -1}, "bad group in message: -1"),
    ({**BASE, "group": True}, "bad group in message: True"),
    ({**BASE, "group": "2"}, "bad group in message: '2'"),
    ({**BASE, "at": -1}, "bad time in message: -1"),
    ({**BASE, "at": "5"}, "bad time in message: '5'"),
    ({**BASE, "at": True}, "bad time in message: True"),
    ({**BASE, "at": 1e12}, "bad time in message: 1000000000000.0"),
])
def test_a_malformed_message_is_refused_saying_what_is_wrong(data, message):
    with pytest.raises(ValueError) as err:
        SegmentsAffected.from_dict(data)
    assert str(err.value) == message


def test_the_lowest_layer_code_and_shard_are_valid():
    msg = SegmentsAffected.from_dict({**BASE, "layer": 0, "codes": [0], "group": 0})
    assert (msg.layer, msg.codes, msg.group) == (0, (0,), 0)
    assert msg.scoped


def test_messages_coalesce_per_layer_and_shard():
    keys = {SegmentsAffected(layer=1).dedup_key(), SegmentsAffected(layer=1, added=("a",)).dedup_key()}
    assert len(keys) == 1
    assert len({SegmentsAffected(layer=1).dedup_key(), SegmentsAffected(layer=1, group=0).dedup_key(),
                SegmentsAffected(layer=1, group=1).dedup_key(), SegmentsAffected(layer=2).dedup_key()}) == 4


def test_two_scoped_messages_merge_into_one_covering_both():
    a = SegmentsAffected(layer=2, added=("a", "b"), removed=("x",), reason="ingest", codes=(5, 1), group=3, op="first")
    b = SegmentsAffected(layer=2, added=("b", "c"), removed=("y", "x"), reason="ingest", codes=(1, 9), group=3,
                         op="second")
    m = a.merged(b)
    assert m == SegmentsAffected(layer=2, added=("a", "b", "c"), removed=("x", "y"), reason="ingest",
                                 codes=(1, 5, 9), group=3, op="first")
    assert m.scoped


def test_merged_messages_were_sent_when_the_later_was_or_at_an_unknown_time():
    # a whole-layer pass covers the merged message only if it began after both were sent
    a, b = SegmentsAffected(layer=1, codes=(1,), group=0, at=10.0), SegmentsAffected(layer=1, codes=(2,), group=0, at=12.5)
    assert a.merged(b).at == b.merged(a).at == 12.5
    assert a.merged(SegmentsAffected(layer=1, codes=(3,), group=0)).at == 0.0  # one of an older version
    assert SegmentsAffected(layer=1).to_dict().get("at") is None


def test_a_whole_layer_message_absorbs_a_scoped_one():
    scoped = SegmentsAffected(layer=1, added=("a",), reason="ingest", codes=(4,), group=2)
    whole = SegmentsAffected(layer=1, removed=("b",), reason="reindex")
    for m in (scoped.merged(whole), whole.merged(scoped)):
        assert m.codes == () and not m.scoped
        assert (m.layer, m.group) == (1, None)
        assert set(m.added) == {"a"} and set(m.removed) == {"b"}
    assert scoped.merged(whole).reason == "ingest+reindex"
    assert whole.merged(scoped).reason == "reindex+ingest"


def test_merging_messages_of_two_shards_keeps_no_shard():
    a = SegmentsAffected(layer=1, codes=(1,), group=0)
    b = SegmentsAffected(layer=1, codes=(2,), group=1)
    assert a.merged(b).group is None and a.merged(b).codes == (1, 2)


def test_lexical_index_missing_says_where_and_what_to_run():
    assert str(LexicalIndexMissing("OpenSearch index docs")) == (
        "OpenSearch index docs has no lexical (BM25) index yet (built before it existed): "
        "run `eragraph reindex` to build it")
    assert str(LexicalIndexMissing()).startswith("this store has no lexical (BM25) index yet")


def test_any_version_reads_as_its_name():
    assert repr(ANY_VERSION) == "ANY_VERSION"
