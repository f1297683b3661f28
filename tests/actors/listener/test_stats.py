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


def test_the_last_calls_newest_first_in_a_bounded_ring() -> None:
    stats = CallStats(recent=3)
    for n in range(5):
        stats.record("a", float(n), f"tool{n}", "ok" if n % 2 else "error", client="claude-code")
    stats.record("b", 9.0, "echo")
    calls = stats.recent_calls()
    assert [(c["server"], c["tool"], c["outcome"]) for c in calls] == [
        ("b", "echo", "ok"),
        ("a", "tool4", "error"),
        ("a", "tool3", "ok"),
    ]
    assert calls[1]["client"] == "claude-code"
    assert calls[0]["client"] is None
    assert calls[1]["duration_ms"] == 4.0
    assert calls[0]["at"] >= calls[1]["at"] > 1_600_000_000  # wall-clock seconds
    assert set(calls[0]) == {"at", "client", "server", "tool", "duration_ms", "outcome"}  # no arguments
