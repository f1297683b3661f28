"""The common end of the re-rankings of a search's best (learned.py, session.py): new
scores in, the answer re-ordered. Light on purpose: learned.py is loaded at start-up,
the index only at the first search."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from assern.actors.search.index import Doc, Found


def rescored(found: Found, scores: Sequence[float], limit: int, exact: Iterable[Doc] = ()) -> Found:
    """`found` with each hit given the score of `scores` at its place, best first, cut to
    `limit`. Tools named exactly by the query stay first; equal scores keep the order of
    `found`."""
    named = set(exact)
    scored = [
        (hit.doc in named, score, i, hit)
        for i, (hit, score) in enumerate(zip(found.hits, scores, strict=True))
    ]
    scored.sort(key=lambda item: (not item[0], -item[1], item[2]))
    hits = tuple(attrs.evolve(hit, score=score) for _, score, _, hit in scored[:limit])
    return attrs.evolve(found, hits=hits, reranked=True)
