"""S3 sequencers: hex strings of possibly different lengths, compared right-padded with zeros."""

import pytest

from eragraph.domain.sequencer import compare, normalize, supersedes


def test_compare_pads_the_shorter_value_on_the_right():
    assert compare("0A1B2C3D4E5F678A", "0A1B2C3D4E5F67890A") == 1   # as integers it would be older
    assert compare("0A1B2C3D4E5F6789", "0A1B2C3D4E5F67890A") == -1
    assert compare("AB", "ab00") == 0 and compare("ab", "AB01") == -1
    assert compare("00FF", "0100") == -1


def test_supersedes_is_strict_and_versionless_always_wins():
    assert supersedes("0B", "0A") and not supersedes("0A", "0B") and not supersedes("0A", "0A")
    assert supersedes("", "0A") and supersedes("0A", "") and supersedes("", "")


def test_normalize_refuses_non_hex():
    assert normalize(" 0a1b ") == "0A1B" and normalize(None) == ""
    with pytest.raises(ValueError):
        normalize("0x12")
