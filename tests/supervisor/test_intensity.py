"""Restart arithmetic: the sliding window, the backoff and the backoff-vs-window warning."""

from __future__ import annotations

import random

import pytest

from assern.supervisor.intensity import (
    RestartLedger,
    backoff_delay,
    backoff_exceeds_window,
    backoff_total,
    backoff_warning,
)
from assern.supervisor.spec import RestartPolicy


def test_ledger_admits_max_restarts_then_refuses() -> None:
    ledger = RestartLedger(3, 60.0)
    assert [ledger.admit(t) for t in (0.0, 1.0, 2.0, 3.0, 4.0)] == [True, True, True, False, False]
    assert ledger.stamps == (0.0, 1.0, 2.0)  # refusals are not recorded


def test_ledger_window_slides() -> None:
    ledger = RestartLedger(2, 10.0)
    assert ledger.admit(0.0)
    assert ledger.admit(5.0)
    assert not ledger.admit(10.0)  # 0.0 is exactly 10s old: still inside the window
    assert ledger.admit(10.5)  # 0.0 aged out
    assert ledger.stamps == (5.0, 10.5)
    assert len(ledger) == 2


def test_ledger_zero_restarts_refuses_at_once() -> None:
    assert not RestartLedger(0, 1.0).admit(0.0)


def test_ledger_reset_and_for_policy() -> None:
    ledger = RestartLedger.for_policy(RestartPolicy(max_restarts=1, restart_window=5.0))
    assert ledger.admit(0.0)
    assert not ledger.admit(1.0)
    ledger.reset()
    assert ledger.admit(2.0)


@pytest.mark.parametrize(("max_restarts", "window"), [(-1, 1.0), (1, 0.0)])
def test_ledger_rejects_nonsense(max_restarts: int, window: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        RestartLedger(max_restarts, window)


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(backoff_initial=1.0, backoff_max=8.0, jitter=0.0)
    assert [backoff_delay(n, policy) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_backoff_jitter_scales_by_injected_draw() -> None:
    policy = RestartPolicy(backoff_initial=2.0, backoff_max=30.0, jitter=0.5)
    assert backoff_delay(1, policy, 0.5) == 2.5
    assert backoff_delay(3, policy, 0.0) == 8.0
    u = random.Random(0).random()
    assert u == 0.8444218515250481
    assert backoff_delay(2, policy, u) == 4.0 * (1 + 0.5 * 0.8444218515250481)


def test_backoff_huge_n_stays_capped() -> None:
    policy = RestartPolicy(backoff_initial=0.5, backoff_max=30.0, jitter=0.0)
    assert backoff_delay(10_000, policy) == 30.0


@pytest.mark.parametrize(("n", "u"), [(0, 0.0), (1, 1.0), (1, -0.1)])
def test_backoff_rejects_bad_arguments(n: int, u: float) -> None:
    with pytest.raises(ValueError, match=r"^(n counts restarts from 1|u must be in \[0, 1\))$"):
        backoff_delay(n, RestartPolicy(), u)


def test_worked_example_as_arithmetic() -> None:
    """max_restarts=3, window=60, backoff 1..8: starts at 0, 1, 3, 7; failed at 7."""
    policy = RestartPolicy(
        max_restarts=3, restart_window=60.0, backoff_initial=1.0, backoff_max=8.0, jitter=0.0
    )
    ledger = RestartLedger.for_policy(policy)
    now, starts = 0.0, [0.0]
    while ledger.admit(now):  # the child crashes as soon as it starts
        now += backoff_delay(len(ledger), policy)
        starts.append(now)
    assert starts == [0.0, 1.0, 3.0, 7.0]
    assert now == 7.0  # the refused restart, i.e. the moment it is marked failed
    assert len(starts) == policy.max_restarts + 1


def test_backoff_total_sums_and_caps() -> None:
    assert backoff_total(RestartPolicy(max_restarts=3, backoff_initial=1.0, backoff_max=8.0)) == 7.0
    assert backoff_total(RestartPolicy(max_restarts=10, backoff_initial=1.0, backoff_max=2.0)) == 19.0
    assert backoff_total(RestartPolicy(max_restarts=0, backoff_initial=1.0)) == 0.0
    assert backoff_total(RestartPolicy(max_restarts=10**9, backoff_initial=0.0)) == 0.0


def test_backoff_exceeding_window_is_detected() -> None:
    # delays 1 + 2 + 4 + 8 + 16 = 31
    tight = RestartPolicy(max_restarts=5, restart_window=30.0, backoff_initial=1.0, backoff_max=30.0)
    exact = RestartPolicy(max_restarts=5, restart_window=31.0, backoff_initial=1.0, backoff_max=30.0)
    assert backoff_exceeds_window(tight)
    assert not backoff_exceeds_window(exact)
    assert backoff_warning(exact, "github") is None
    assert backoff_warning(tight, "github") == (
        "github: the backoff before 5 restarts adds up to 31s, longer than restart_window (30s), "
        "so max_restarts is never reached and a server that keeps crashing is restarted forever "
        "(about every 30s) instead of being marked failed; raise restart_window or lower "
        "backoff_max or max_restarts"
    )


def test_defaults_do_not_warn() -> None:
    assert not backoff_exceeds_window(RestartPolicy())
