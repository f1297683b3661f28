"""The spread of a recall figure (ops/bench/search/spread.py): a bootstrap interval of a
mean, and two rankings compared query by query with the exact sign test."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ops_scripts import OPS, load_script

spread: Any = load_script(OPS / "bench" / "search" / "spread.py", "search_spread")


def test_the_interval_holds_the_mean_is_repeatable_and_narrows_with_more_queries() -> None:
    assert spread.interval([1.0] * 30) == (1.0, 1.0)
    assert spread.interval([]) == (0.0, 0.0)
    few = [1.0, 0.0] * 10
    many = [1.0, 0.0] * 100
    low, high = spread.interval(few)
    assert low < 0.5 < high
    assert spread.interval(few) == (low, high)  # the recorded seed
    wide_low, wide_high = spread.interval(many)
    assert high - low > 2 * (wide_high - wide_low)  # about sqrt(10) narrower
    # About the normal approximation's 1.96 standard errors each side.
    assert abs((wide_high - wide_low) / 2 - 1.96 * math.sqrt(0.25 / 200)) < 0.01


def test_the_sign_test_is_the_exact_binomial_tail_on_both_sides() -> None:
    assert spread.sign_test(0, 0) == 1.0
    assert spread.sign_test(5, 0) == pytest.approx(2 / 32)
    assert spread.sign_test(8, 1) == pytest.approx(2 * (1 + 9) / 2**9)
    assert spread.sign_test(1, 8) == spread.sign_test(8, 1)
    assert spread.sign_test(3, 3) == 1.0  # capped: the two tails overlap


def test_paired_counts_the_queries_each_ranking_finds_more_of() -> None:
    first = [1.0, 0.0, 0.5, 1.0, 0.0]
    second = [1.0, 1.0, 1.0, 0.0, 0.0]
    versus = spread.paired(first, second)
    assert (versus.gained, versus.lost) == (2, 1)
    assert versus.p == round(spread.sign_test(2, 1), 3)
    with pytest.raises(ValueError, match="4 shares against 5: not the same queries"):
        spread.paired(first[:4], second)
