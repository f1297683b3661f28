"""BM25F over a chunk's three fields (symbol, path, body): pure functions.

Each field's term frequency is weighted (`WEIGHTS`) and normalised by the field's length
against its average, the sum saturates with `K1`, and each term counts by its inverse
document frequency: Robertson and Zaragoza's BM25F. Lengths are counted in characters
of the space-joined terms, which keeps their ratio to the average while the database
keeps only running sums (store.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Weights of the symbol, path and body fields: a word in a symbol counts most.
WEIGHTS = (4.0, 2.0, 1.0)
#: Saturation of the term frequency, and how much a field's length counts.
K1 = 1.2
B = 0.75


@attrs.frozen(kw_only=True)
class Stats:
    """The collection: how many chunks, and each field's average length."""

    chunks: int
    average: tuple[float, float, float]


def idf(df: int, chunks: int) -> float:
    """How much a term found in `df` of `chunks` chunks tells (never negative)."""
    return math.log(1.0 + (chunks - df + 0.5) / (df + 0.5))


def score(fields: Sequence[str], weights: Mapping[str, float], stats: Stats) -> float:
    """The BM25F score of one chunk whose fields hold space-joined terms.

    Args:
        fields: The symbol, path and body terms, each joined by spaces.
        weights: Each query term's idf (terms absent from the collection left out).
        stats: The collection's size and average field lengths.
    """
    total = 0.0
    # a field is split into its terms only when a query term is found in its text (most
    # are not: this is the re-ranking's inner loop, 200 candidates a query)
    tokens: list[list[str] | None] = [None, None, None]
    for term, term_idf in weights.items():
        tf = 0.0
        for index, field in enumerate(fields):
            if term not in field:
                continue
            split = tokens[index]
            if split is None:
                split = tokens[index] = field.split()
            found = split.count(term)
            if found:
                average = stats.average[index] or 1.0
                norm = 1.0 - B + B * len(field) / average
                tf += WEIGHTS[index] * found / norm
        if tf:
            total += term_idf * tf / (K1 + tf)
    return total
