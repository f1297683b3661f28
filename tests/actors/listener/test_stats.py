"""Call statistics: recent medians per backend, running totals per tool for /metrics."""

from __future__ import annotations

from assern.actors.listener.stats import BUCKETS, CallStats


def test_totals_per_tool_and_outcome() -> None:
    stats = CallStats(window=2)
    stats.keep_totals()
    stats.record("a", 0.5, "echo")
    stats.record("a", 30.0, "echo", "tool_error")
    stats.record("a", 2000.0, "slow", "error")
    stats.record("b", 100_000.0, "late")
    assert stats.median("a") == 1015.0  # the window keeps the last two calls of "a"
    series = stats.series()
    echo = series["a", "echo"]
    assert echo.outcomes == {"ok": 1, "tool_error": 1}
    assert abs(echo.total_seconds - 0.0305) < 1e-9
    cumulative = dict(echo.cumulative())
    assert cumulative[0.001] == 1
    assert cumulative[0.025] == 1
    assert cumulative[0.05] == 2
    assert cumulative[float("inf")] == 2
    assert series["a", "slow"].outcomes == {"error": 1}
    late = series["b", "late"].cumulative()
    assert late[-1] == (float("inf"), 1)
    assert late[-2] == (BUCKETS[-1], 0)


def test_totals_are_kept_only_once_asked_for_and_medians_always() -> None:
    stats = CallStats()
    stats.record("a", 5.0, "echo")
    assert stats.series() == {}  # nothing serves /metrics: no totals to keep
    assert stats.median("a") == 5.0
    stats.keep_totals()
    stats.record("a", 7.0, "echo")
    assert stats.series()["a", "echo"].outcomes == {"ok": 1}
    assert stats.median("a") == 6.0
