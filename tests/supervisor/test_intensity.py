"""Restart arithmetic: the sliding window, the backoff and the backoff-vs-window warning."""

from __future__ import annotations

import random

import pytest

from assern.supervisor.intensity import (
    RestartLedger,
    backoff_delay,
    backoff_exceeds_window,
    backoff_total,
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


def test_the_first_restart_is_immediate_then_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(backoff_initial=1.0, backoff_max=8.0, jitter=0.0)
    assert [backoff_delay(n, policy) for n in range(1, 8)] == [0.0, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_the_first_restart_gets_no_jitter_either() -> None:
    policy = RestartPolicy(backoff_initial=2.0, backoff_max=30.0, jitter=1.0)
    assert backoff_delay(1, policy, 0.99) == 0.0


def test_backoff_jitter_scales_by_injected_draw() -> None:
    policy = RestartPolicy(backoff_initial=2.0, backoff_max=30.0, jitter=0.5)
    assert backoff_delay(2, policy, 0.5) == 2.5
    assert backoff_delay(4, policy, 0.0) == 8.0
    u = random.Random(0).random()
    assert u == 0.8444218515250481
    assert backoff_delay(3, policy, u) == 4.0 * (1 + 0.5 * 0.8444218515250481)


def test_backoff_huge_n_stays_capped() -> None:
    policy = RestartPolicy(backoff_initial=0.5, backoff_max=30.0, jitter=0.0)
    assert backoff_delay(10_000, policy) == 30.0


@pytest.mark.parametrize(("n", "u"), [(0, 0.0), (1, 1.0), (1, -0.1)])
def test_backoff_rejects_bad_arguments(n: int, u: float) -> None:
    with pytest.raises(ValueError, match=r"^(n counts restarts from 1|u must be in \[0, 1\))$"):
        backoff_delay(n, RestartPolicy(), u)


def test_worked_example_as_arithmetic() -> None:
    """max_restarts=3, window=60, backoff 1..8: starts at 0, 0, 1, 3; failed at 3."""
    policy = RestartPolicy(
        max_restarts=3, restart_window=60.0, backoff_initial=1.0, backoff_max=8.0, jitter=0.0
    )
    ledger = RestartLedger.for_policy(policy)
    now, starts = 0.0, [0.0]
    while ledger.admit(now):  # the child crashes as soon as it starts
        now += backoff_delay(len(ledger), policy)
        starts.append(now)
    assert starts == [0.0, 0.0, 1.0, 3.0]
    assert now == 3.0  # the refused restart, i.e. the moment it is marked failed
    assert len(starts) == policy.max_restarts + 1


@pytest.mark.parametrize(
    ("initial", "maximum", "restarts", "total"),
    [
        (1.0, 8.0, 3, 0 + 1 + 2),
        (0.5, 30.0, 5, 0 + 0.5 + 1 + 2 + 4),
        (1.0, 2.0, 10, 0 + 1 + 2 * 8),  # capped at backoff_max
        (10.0, 5.0, 3, 0 + 5 + 5),  # an initial above the cap waits the cap
        (1.0, 30.0, 1, 0.0),  # one restart: immediate
        (1.0, 30.0, 0, 0.0),
        (0.0, 30.0, 10**9, 0.0),
        (1.0, 2.0, 1_000_000, 1 + 2 * 999_998),  # saturates without looping or overflowing
    ],
)
def test_backoff_total_sums_and_caps(initial: float, maximum: float, restarts: int, total: float) -> None:
    """0 for the first restart, then min(backoff_max, backoff_initial * 2**(k-2)) for k = 2..max_restarts."""
    policy = RestartPolicy(max_restarts=restarts, backoff_initial=initial, backoff_max=maximum)
    assert backoff_total(policy) == pytest.approx(total)


def test_backoff_exceeding_window_is_detected() -> None:
    # delays 0 + 1 + 2 + 4 + 8 + 16 = 31
    tight = RestartPolicy(max_restarts=6, restart_window=30.0, backoff_initial=1.0, backoff_max=30.0)
    exact = RestartPolicy(max_restarts=6, restart_window=31.0, backoff_initial=1.0, backoff_max=30.0)
    assert backoff_exceeds_window(tight)
    assert not backoff_exceeds_window(exact)


def test_defaults_do_not_warn() -> None:
    assert not backoff_exceeds_window(RestartPolicy())
