"""How far a recall figure can be trusted: its spread over the queries, and a change
read query by query.

A recall is the mean of one share per query (a step's need found or not, the share of
a whole task's needs found). `interval` is a 95% bootstrap interval of that mean (the
queries resampled, a recorded seed, so the same figures give the same interval).
`paired` compares two rankings on the same queries: how many each finds more of, and
the two-sided sign test's p-value over the queries where they differ (exact binomial,
each query that differs a fair coin if the rankings were alike). With 79 held-out
steps, one query is 0.013 of Recall@5; a change of two or three queries says little.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import attrs

SEED = 5113
ROUNDS = 2_000


def interval(shares: Sequence[float], rounds: int = ROUNDS, seed: int = SEED) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean over `rounds` resamples."""
    if not shares:
        return (0.0, 0.0)
    draw = random.Random(seed)
    n = len(shares)
    means = sorted(sum(draw.choices(shares, k=n)) / n for _ in range(rounds))
    return (means[int(0.025 * rounds)], means[min(rounds - 1, int(0.975 * rounds))])


@attrs.frozen(slots=True)
class Paired:
    gained: int  # queries where the second ranking finds more than the first
    lost: int  # queries where it finds less
    p: float  # two-sided sign test over gained + lost


def sign_test(gained: int, lost: int) -> float:
    """Two-sided exact sign test: the chance of a split at least this uneven."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(first: Sequence[float], second: Sequence[float]) -> Paired:
    """`second` against `first`, share by share of the same queries in the same order."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} shares against {len(second)}: not the same queries")
    gained = sum(1 for a, b in zip(first, second, strict=True) if b > a)
    lost = sum(1 for a, b in zip(first, second, strict=True) if b < a)
    return Paired(gained, lost, round(sign_test(gained, lost), 3))
