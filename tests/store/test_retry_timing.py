"""One backoff for every retry loop: exponential, capped, jittered downwards only."""

from __future__ import annotations

from store.db.retry import backoff_s


def test_the_wait_doubles_up_to_its_cap() -> None:
    waits = [backoff_s(n, first_s=0.2, max_s=5.0, jitter=0) for n in range(7)]
    assert waits == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_jitter_only_shortens_the_wait_by_at_most_its_share() -> None:
    assert backoff_s(3, first_s=0.05, max_s=2.0, draw=lambda: 0.0) == 0.4
    assert backoff_s(3, first_s=0.05, max_s=2.0, draw=lambda: 0.999) > 0.2
    assert backoff_s(0, first_s=1.0, max_s=8.0, jitter=0.25, draw=lambda: 1.0) == 0.75
