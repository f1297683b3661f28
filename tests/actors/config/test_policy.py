"""The local intensity arithmetic behind the "restarted forever" warning."""

from __future__ import annotations

import pytest

from assern.actors.config.policy import intensity_unreachable, least_restart_span
from assern.supervisor.spec import Restart, RestartPolicy


@pytest.mark.parametrize(
    ("initial", "maximum", "restarts", "span"),
    [
        (0.5, 30.0, 5, 0.5 + 1 + 2 + 4 + 8),
        (1.0, 4.0, 5, 1 + 2 + 4 + 4 + 4),  # capped at backoff_max
        (10.0, 5.0, 3, 15.0),  # an initial above the cap waits the cap
        (0.0, 30.0, 4, 0.0),
        (1.0, 30.0, 0, 0.0),
        (1.0, 2.0, 1_000_000, 1 + 2 * 999_999),  # saturates without looping or overflowing
    ],
)
def test_least_restart_span(initial: float, maximum: float, restarts: int, span: float) -> None:
    """Sum of min(backoff_max, backoff_initial * 2**(k-1)) for k = 1..max_restarts."""
    policy = RestartPolicy(max_restarts=restarts, backoff_initial=initial, backoff_max=maximum)
    assert least_restart_span(policy) == pytest.approx(span)


def test_intensity_unreachable() -> None:
    reachable = RestartPolicy(max_restarts=5, restart_window=60, backoff_initial=0.5)
    assert not intensity_unreachable(reachable)
    unreachable = RestartPolicy(max_restarts=5, restart_window=15, backoff_initial=0.5)
    assert intensity_unreachable(unreachable)  # 15.5s of backoff > 15s window
    assert not intensity_unreachable(
        RestartPolicy(restart=Restart.TEMPORARY, max_restarts=5, restart_window=1)
    )
    assert not intensity_unreachable(RestartPolicy(max_restarts=0, restart_window=1))
