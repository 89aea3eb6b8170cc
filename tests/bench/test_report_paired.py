"""The paired before/after comparison of retrieval runs: the bootstrap itself, and what the
report says about a drop."""

from __future__ import annotations

import pytest

from eragraph.bench.common import paired_bootstrap
from eragraph.bench.report import before_after_section


def test_bootstrap_of_constant_differences_is_that_constant():
    assert paired_bootstrap([[0.5] * 20]) == (0.5, 0.5, 0.5)
    assert paired_bootstrap([[0.0] * 7, [0.0] * 3]) == (0.0, 0.0, 0.0)


def test_bootstrap_interval_brackets_the_mean_and_is_repeatable():
    diffs = [0.5, -0.5, 0.0, 0.0, 1.0, 0.0, -0.5, 0.0, 0.0, 0.5] * 5
    mean_, low, high = paired_bootstrap([diffs])
    assert mean_ == pytest.approx(sum(diffs) / len(diffs))
    assert low < mean_ < high and low < 0 < high
    assert paired_bootstrap([diffs]) == (mean_, low, high)


def test_bootstrap_weights_groups_by_their_questions():
    """Pooled groups count per question, and each resample keeps each group's size."""
    mean_, low, high = paired_bootstrap([[1.0] * 30, [0.0] * 10])
    assert mean_ == pytest.approx(0.75)
    assert low == high == pytest.approx(0.75)  # within-group resampling cannot change a constant group
    with pytest.raises(ValueError):
        paired_bootstrap([[], []])


def run(values: dict[str, list[float]], ids: list[str]) -> dict:
    modes = {}
    for mode, vals in values.items():
        mean_ = sum(vals) / len(vals)
        modes[mode] = {"recall@5": mean_, "recall@5_with_summaries": mean_,
                       "per_question": {"recall@5": vals, "recall@5_with_summaries": vals}}
    return {"k": [5], "question_ids": ids, "modes": modes}


def section(pairs: dict[str, tuple[list[float], list[float]]], ids_after: list[str] | None = None) -> str:
    runs = []
    for name, (before, after) in pairs.items():
        ids = [f"q{i}" for i in range(len(before))]
        runs.append((f"{name}-before", run({"collapsed": before}, ids)))
        runs.append((f"{name}-after", run({"collapsed": after}, ids_after or ids)))
    return "\n".join(before_after_section(runs))


def test_a_drop_on_most_questions_is_reported_as_a_drop():
    before = [1.0] * 40
    after = [0.5] * 30 + [1.0] * 10
    text = section({"a": (before, after), "b": (before, after)})
    assert "| collapsed | recall@5_with_summaries | 40 | 0 | 30 |" in text
    assert "### Before / after, pooled" in text and "| 80 | 0 | 60 |" in text
    assert "Recall with summaries, pooled: `collapsed` dropped (the whole 95 % interval lies below zero)" in text
    assert "Recall@5 with summaries: `collapsed` dropped (the whole 95 % interval lies below zero) (-0.3750" in text


def test_no_change_and_noise_are_told_apart_from_a_drop():
    same = [0.5, 1.0, 0.0, 1.0] * 10
    assert "`collapsed` did not drop (+0.0000" in section({"a": (same, same), "b": (same, same)})
    noisy_after = same[:]
    noisy_after[0], noisy_after[1], noisy_after[2] = 0.0, 0.5, 0.5  # two worse, one better
    text = section({"a": (same, noisy_after), "b": (same, same)})
    assert "| collapsed | recall@5_with_summaries | 40 | 1 | 2 |" in text
    assert "moved down by less than its noise (the 95 % interval includes zero)" in text


def test_runs_on_different_questions_are_not_paired():
    text = section({"a": ([1.0, 0.0], [0.0, 1.0])}, ids_after=["x", "y"])
    assert "95 % interval" not in text
    assert "Recall@5 with summaries did not drop." in text
