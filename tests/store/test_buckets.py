"""The context-window bucket rule from BRIEF section 2."""

from __future__ import annotations

import pytest

from store.model.buckets import BUCKET_LABELS, bucket_for, context_window


def test_context_window_counts_both_cache_lanes() -> None:
    # 200k cached + 2k fresh is a 202k-token window, not a small one (the reference's bug #604).
    assert context_window(2_000, 200_000, 0) == 202_000
    assert bucket_for(context_window(2_000, 200_000, 0)) == "200k–500k"


@pytest.mark.parametrize(
    ("tokens", "label"),
    [
        (0, "<50k"),
        (49_999, "<50k"),
        (50_000, "50k–100k"),
        (99_999, "50k–100k"),
        (100_000, "100k–200k"),
        (200_000, "200k–500k"),
        (499_999, "200k–500k"),
        (500_000, "500k–1M"),
        (999_999, "500k–1M"),
        (1_000_000, "≥1M"),
        (7_000_000, "≥1M"),
    ],
)
def test_lower_edge_is_inclusive(tokens: int, label: str) -> None:
    assert bucket_for(tokens) == label


def test_labels_are_in_ascending_order() -> None:
    assert BUCKET_LABELS[0] == "<50k" and BUCKET_LABELS[-1] == "≥1M"
