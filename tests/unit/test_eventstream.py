"""The event stream encoder (eragraph.entrypoints.bedrock_kb.eventstream) read back by botocore's own decoder and by
boto3's EventStream over the RetrieveAndGenerateStream output shape: the events come out as the
client's dicts, in order, and a corrupted byte is caught by the checksums."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.eventstream import ChecksumMismatch, EventStream, EventStreamBuffer
from botocore.parsers import EventStreamJSONParser

from eragraph.entrypoints.bedrock_kb.eventstream import event, exception


class _Raw:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        for i in range(0, len(self.data), 7):  # odd-sized pieces: the decoder must reassemble frames
            yield self.data[i:i + 7]


def stream_of(data: bytes) -> EventStream:
    model = botocore.session.get_session().get_service_model("bedrock-agent-runtime")
    shape = model.operation_model("RetrieveAndGenerateStream").output_shape.members["stream"]
    return EventStream(_Raw(data), shape, EventStreamJSONParser(), "RetrieveAndGenerateStream")


def test_botocore_reads_the_modelled_events_in_order():
    part = {"textResponsePart": {"text": "Hi", "span": {"start": 0, "end": 1}}}
    citation = {"citation": {"generatedResponsePart": part,
                             "retrievedReferences": [{"content": {"type": "TEXT", "text": "evidence"}}]}}
    data = event("output", {"text": "Hel"}) + event("output", {"text": "lo"}) + event("citation", citation)
    events = list(stream_of(data))
    assert events == [{"output": {"text": "Hel"}}, {"output": {"text": "lo"}}, {"citation": citation}]


def test_a_modelled_exception_raises_the_client_error():
    from botocore.exceptions import EventStreamError

    with pytest.raises(EventStreamError) as info:
        list(stream_of(event("output", {"text": "a"}) + exception("validationException", "no generator")))
    assert info.value.response["Error"] == {"Code": "validationException", "Message": "no generator"}


def test_a_corrupted_byte_fails_the_checksum():
    data = bytearray(event("output", {"text": "abc"}))
    data[-6] ^= 0xFF
    buffer = EventStreamBuffer()
    buffer.add_data(bytes(data))
    with pytest.raises(ChecksumMismatch):
        list(buffer)
