"""Fusing the lexical ranking with the ranking by meaning, before the re-ranking.

Two rankings of a question's chunks meet here: the lexical candidates (BM25F, store.py)
and the chunks whose vectors are nearest the question's (vectors.py). Two ways to fuse
them, both pure functions of the two lists:

- `rrf`, reciprocal rank fusion (Cormack, Clarke & Büttcher 2009): a chunk scores the sum
  of weight / (`RRF_K` + its rank) over the rankings it is in. Only ranks count, so
  neither score's scale matters.
- `blend`: each score divided by its ranking's best (BM25F) or mapped from the
  similarity floor to the best similarity (cosine), then summed with the weights.

`fuse` applies one of them and gives back `Hit`s carrying the fused score, which the
re-ranking (rank.rerank) multiplies by its signals as it does BM25F's. Which method and
weight are the default was measured with ops/bench/context/ (docs/context.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from assern.context.store import Hit

Method = Literal["rrf", "blend"]
METHODS: tuple[Method, ...] = ("rrf", "blend")

#: Reciprocal rank fusion's constant (the original paper's value).
RRF_K = 60
#: How much the meaning counts beside the words (which count 1), and how: measured on
#: ops/bench/context/ (docs/context.md): the blend at 0.25 ranked best of rrf and blend
#: at 0.25 and 0.5; a heavier meaning lowered NDCG@10.
MEANING_WEIGHT = 0.25
DEFAULT_METHOD: Method = "blend"


@attrs.frozen(kw_only=True)
class Fusion:
    """How to fuse: the method and the meaning's weight (the words weigh 1)."""

    method: Method = DEFAULT_METHOD
    weight: float = MEANING_WEIGHT


def parse_fusion(text: str) -> Fusion:
    """`rrf`, `blend`, or either with `:WEIGHT` (`rrf:0.5`).

    Raises:
        ValueError: an unknown method or a weight that is no number of 0 or more.
    """
    method, _, weight = text.partition(":")
    if method not in METHODS:
        raise ValueError(f"{text!r}: expected {' or '.join(METHODS)}, optionally with ':WEIGHT'")
    if not weight:
        return Fusion(method=method)
    try:
        value = float(weight)
    except ValueError:
        raise ValueError(f"{text!r}: the weight {weight!r} is not a number") from None
    if not value >= 0:
        raise ValueError(f"{text!r}: the weight must be 0 or more")
    return Fusion(method=method, weight=value)


def rrf(rankings: Sequence[Sequence[int]], weights: Sequence[float], *, k: int = RRF_K) -> dict[int, float]:
    """Weighted reciprocal rank fusion of rankings of ids (best first)."""
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return scores


def blend(
    lexical: Mapping[int, float], similar: Mapping[int, float], weight: float, *, floor: float = 0.0
) -> dict[int, float]:
    """Each lexical score over the best one, plus `weight` times each similarity mapped
    from `floor` (0) to the best similarity (1); an id missing from a ranking gets 0 there."""
    scores: dict[int, float] = {}
    best = max(lexical.values(), default=0.0)
    if best > 0:
        for key, value in lexical.items():
            scores[key] = max(value, 0.0) / best
    top = max(similar.values(), default=floor)
    if top > floor:
        for key, value in similar.items():
            scores[key] = scores.get(key, 0.0) + weight * max(value - floor, 0.0) / (top - floor)
    return scores


def fuse(
    lexical: Sequence[Hit],
    similar: Sequence[tuple[int, float]],
    fetch: Callable[[list[int]], Sequence[Hit]],
    fusion: Fusion,
) -> list[Hit]:
    """The two rankings fused into one list of hits, best first, each carrying its fused
    score (the re-ranking multiplies it).

    Args:
        lexical: The lexical candidates, best first.
        similar: (chunk id, similarity) of the nearest chunks, most similar first.
        fetch: The hits of chunk ids that only the meaning found (those still indexed).
        fusion: The method and the meaning's weight.
    """
    if not similar:
        return list(lexical)
    by_id = {hit.chunk_id: hit for hit in lexical}
    if fusion.method == "rrf":
        scores = rrf([[hit.chunk_id for hit in lexical], [key for key, _ in similar]], (1.0, fusion.weight))
    else:
        scores = blend({hit.chunk_id: hit.score for hit in lexical}, dict(similar), fusion.weight)
    missing = [key for key, _ in similar if key not in by_id]
    if missing:
        by_id.update((hit.chunk_id, hit) for hit in fetch(missing))
    fused = [attrs.evolve(by_id[key], score=score) for key, score in scores.items() if key in by_id]
    fused.sort(key=lambda hit: (-hit.score, hit.chunk_id))
    return fused


def meaning_only(
    similar: Sequence[tuple[int, float]], fetch: Callable[[list[int]], Sequence[Hit]]
) -> list[Hit]:
    """The nearest chunks alone, their similarity as their score (what the benchmark's
    `meaning` row measures)."""
    found = {hit.chunk_id: hit for hit in fetch([key for key, _ in similar])}
    return [attrs.evolve(found[key], score=score) for key, score in similar if key in found]


class Nearest(Protocol):
    """What the fusion needs of the vectors (vectors.Vectorizer)."""

    def nearest(self, question: str, limit: int) -> list[tuple[int, float]]: ...

    def fetch(self, path_glob: str | None) -> Callable[[list[int]], list[Hit]]: ...

    @property
    def pending_files(self) -> int: ...


#: How many nearest chunks the meaning offers (more with a path filter, which drops some).
NEAREST = 100
NEAREST_FILTERED = 2000


class Meaning:
    """The fusion hook of the ranking (tools.Engine.ranked): the lexical candidates in,
    the candidates the re-ranking sees out.

    Args:
        vectors: The chunks' vectors.
        fusion: How to fuse them with the words; None ranks by meaning alone.
    """

    def __init__(self, vectors: Nearest, fusion: Fusion | None) -> None:
        self.vectors = vectors
        self.fusion = fusion

    def candidates(self, question: str, lexical: Sequence[Hit], path_glob: str | None) -> list[Hit]:
        similar = self.vectors.nearest(question, NEAREST if path_glob is None else NEAREST_FILTERED)
        fetch = self.vectors.fetch(path_glob)
        if self.fusion is None:
            return meaning_only(similar, fetch)
        return fuse(lexical, similar, fetch, self.fusion)

    def pending(self) -> int:
        """Files whose chunks are still ranked by their words alone (no vector yet)."""
        return self.vectors.pending_files
