"""Ranking changes tried on the tuning part alone (the held-out part is never read here).

    .venv/bin/python ops/bench/search/tune.py

Prints Recall@5 and MRR of the tuning part's steps and whole tasks (lexical ranking,
limit 10) for: the field weights one at a time up and down, BM25's k1, and a
coordination factor (each of the best 20 tools' score times the share of the query it
covers to the power p, as Lucene's coord did). A change worth measuring on the held-out
part must first beat the first line here. See docs/search-evaluation.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from assern.actors.search import index as ix
from assern.actors.search.index import FieldWeights, SearchIndex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import run  # noqa: E402
from labels import Query  # noqa: E402


def figures(ranker: run.Ranker, steps: Sequence[Query], tasks: Sequence[Query]) -> str:
    a, b = run.recall(ranker, steps), run.recall(ranker, tasks)
    return (
        f"steps R@5 {a['recall@5']:.3f} MRR {a['mrr']:.3f}   tasks R@5 {b['recall@5']:.3f} MRR {b['mrr']:.3f}"
    )


def words(index: SearchIndex) -> run.Ranker:
    return lambda q: [hit.doc.name for hit in index.find(q, limit=10).hits]


def coordinated(index: SearchIndex, power: float) -> run.Ranker:
    def rank(query: str) -> list[str]:
        hits = index.find(query, limit=20).hits
        ordered = sorted(hits, key=lambda hit: -(hit.score * hit.coverage**power))
        return [hit.doc.name for hit in ordered[:10]]

    return rank


def main() -> int:
    _catalog, index, asked = run.fixture_catalog()
    _seed, heldout, tuning = labels.read_split()
    tuned = [q for q in asked if labels.part(q, heldout, tuning) == "tuning"]
    steps = [q for q in tuned if q.kind == "step"]
    tasks = [q for q in tuned if q.kind == "task"]
    print(f"{'as it is':<28} {figures(words(index), steps, tasks)}")
    base = FieldWeights()
    for field, values in {
        "name": (2.0, 4.0),
        "description": (1.5,),
        "parameters": (0.5, 1.2),
        "server": (1.0, 2.0),
        "instructions": (0.0, 0.5),
    }.items():
        for value in values:
            weighted = index.reweighted(attrs.evolve(base, **{field: value}))
            print(f"{field + ' ' + str(value):<28} {figures(words(weighted), steps, tasks)}")
    kept = ix._K1
    try:
        for k1 in (0.9, 1.5, 2.0):
            ix._K1 = k1  # read when a term's scores are first worked out: a fresh index each
            print(f"{'k1 ' + str(k1):<28} {figures(words(index.reweighted(base)), steps, tasks)}")
    finally:
        ix._K1 = kept
    for power in (0.25, 0.5, 1.0):
        print(f"{'coordination ' + str(power):<28} {figures(coordinated(index, power), steps, tasks)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
